"""How close two texts are, for the part-2 features: semantic similarity through the runtime's (cached) embedder and
literal keyword overlap for when the model is down or as a second opinion.

Passages are framed exactly as the vector outbox frames records (``compose_embedding_text``), so embedding a stored
record here is a cache hit, not a model call. Nothing here reads or writes a store.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from ..errors import EmbeddingUnavailableError
from ..logic.segmentation import keyword_coverage, query_terms, tokenize

if TYPE_CHECKING:
    from ..runtime import BookuRuntime


@dataclass(frozen=True)
class Similarities:
    """Cosine similarities of one text against many (``None`` with the reason when the model was unavailable)."""

    values: np.ndarray | None
    degraded: str = ""


async def similarities(runtime: BookuRuntime, text: str, others: Sequence[str], *, query: bool) -> Similarities:
    """Cosine of ``text`` against each of ``others`` (passages). ``query=True`` embeds ``text`` as a search query.

    Falls back to ``Similarities(None, reason)`` instead of raising when the embedder is unavailable.
    """
    if not runtime.embedding_available():
        return Similarities(None, runtime.degraded_reason() or "嵌入模型不可用")
    try:
        # The text is embedded even when there is nothing to compare with, so the answer can tell the truth about
        # whether the semantic route works right now.
        if query:
            head = await runtime.embed_queries([text])
            matrix = await runtime.embed_documents(list(others)) if others else None
        else:
            stacked = await runtime.embed_documents([text, *others])
            head, matrix = stacked[:1], stacked[1:]
    except EmbeddingUnavailableError as exc:
        return Similarities(None, str(exc) or "嵌入模型不可用")
    if matrix is None or len(matrix) == 0:
        return Similarities(np.zeros(0, dtype=np.float32))
    return Similarities(np.asarray(matrix, dtype=np.float32) @ np.asarray(head[0], dtype=np.float32))


def keyword_share(needle: str, haystack: str) -> float:
    """Share of the distinct search terms of ``needle`` that occur literally among the tokens of ``haystack``."""
    return keyword_coverage(needle, tokenize(haystack))


def term_count(text: str) -> int:
    """How many distinct search terms ``text`` has (stop words dropped)."""
    return len(query_terms(text))

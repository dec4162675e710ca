"""Embeddings borrowed from the host framework's own embedding model.

The host adapter (``host_adapter/models.py``) builds ``request_fn`` from the host's ``llm_api`` and hands it in; this
module never imports the host, so the package still imports and tests run without it. The host API has no query/passage
distinction, so both modes send the same request. The host retries internally for a long time (≈20 s) before it gives
up; whatever it raises is reported as ``EmbeddingUnavailableError`` so the caller can degrade to keywords.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from ..errors import EmbeddingUnavailableError, ValidationError
from .base import batches, checked_batch_size, checked_matrix, empty_matrix, text_list

EmbeddingRequestFn = Callable[[list[str]], Awaitable[list[list[float]]]]
"""``async (texts) -> one vector per text``, in input order."""

_SOURCE = "宿主嵌入模型"


class HostEmbedder:
    """Embeds through ``request_fn`` in slices of ``batch_size`` texts.

    ``model_id`` names the host's model (it keys the cache and the index, so it must change when the host's model
    changes). ``dimension`` may be ``None``: it is then learnt from the first answer (0 until then) and every
    later answer must match it.
    """

    def __init__(
        self,
        request_fn: EmbeddingRequestFn,
        model_id: str,
        dimension: int | None = None,
        *,
        batch_size: int = 32,
    ) -> None:
        if not callable(request_fn):
            raise ValidationError("request_fn 必须是异步函数：async (list[str]) -> list[list[float]]。")
        if not model_id or not model_id.strip():
            raise ValidationError('model_id 不能为空，应为宿主嵌入模型的名字，例如 "host/BAAI/bge-m3"。')
        if dimension is not None and dimension < 1:
            raise ValidationError(f"dimension 必须是正整数或 None（自动探测），实际为 {dimension!r}。")
        self._request_fn = request_fn
        self.model_id = model_id.strip()
        self._dimension = dimension
        self.batch_size = checked_batch_size(batch_size)

    @property
    def dimension(self) -> int:
        """Vector length; 0 while it has not been configured or learnt from an answer yet."""
        return self._dimension or 0

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed stored passages. Returns ``(n, d)`` float32, unit rows."""
        return await self._embed(texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (same request as passages: the host API cannot tell them apart)."""
        return await self._embed(texts)

    async def aclose(self) -> None:
        """Nothing to release: the host owns its clients."""

    async def _embed(self, texts: Sequence[str]) -> np.ndarray:
        items = text_list(texts)
        if not items:
            return empty_matrix(self.dimension)
        parts: list[np.ndarray] = []
        for chunk in batches(items, self.batch_size):
            try:
                rows = await self._request_fn(chunk)
            except Exception as exc:  # the host raises its own LLMAPIError and friends; we must not import them
                raise EmbeddingUnavailableError(f"{_SOURCE}请求失败：{type(exc).__name__}: {exc}") from exc
            matrix = checked_matrix(rows, expected_rows=len(chunk), expected_dimension=self._dimension, source=_SOURCE)
            if self._dimension is None:
                self._dimension = int(matrix.shape[1])
            parts.append(matrix)
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)

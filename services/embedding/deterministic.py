"""Embedders FOR FAST UNIT TESTS ONLY. Never configure them for real use.

``DeterministicTestEmbedder`` gives tests of retrieval, novelty and dedup real vectors without loading a model:
texts that share words get similar vectors, identical texts get identical vectors, and the vectors are the same in
every process (features are hashed with blake2b, not with ``hash()``, which is salted per process), so a test
database built in one run can be queried in another. It knows nothing about meaning: "猫" and "cat" are unrelated
to it. ``UnavailableEmbedder`` always fails, for testing the keyword-only degraded mode.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence

import numpy as np

from ..errors import ConfigError, EmbeddingUnavailableError, ValidationError
from .base import empty_matrix, l2_normalise, text_list

_TOKEN_WEIGHT = 1.0
# Bigrams give Chinese text overlap even where jieba splits two similar sentences differently.
_BIGRAM_WEIGHT = 0.5
# A text with no features (empty or only punctuation) still needs a unit vector; all such texts share this one.
_EMPTY_FEATURE = "\x00empty"


class DeterministicTestEmbedder:
    """FOR TESTS ONLY: signed feature hashing of jieba tokens and character bigrams into ``dimension`` slots.

    Queries and passages get the same vector. Runs synchronously inside the coroutine: it takes microseconds.
    """

    def __init__(self, dimension: int = 384) -> None:
        if isinstance(dimension, bool) or not isinstance(dimension, int) or dimension < 8:
            raise ValidationError(f"dimension 必须是不小于 8 的整数，实际为 {dimension!r}。")
        self.dimension = dimension
        self.model_id = f"deterministic-test/hash-{dimension}"

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Returns ``(n, dimension)`` float32, unit rows."""
        return self.embed_sync(texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Returns ``(n, dimension)`` float32, unit rows (identical to ``embed_documents``)."""
        return self.embed_sync(texts)

    async def aclose(self) -> None:
        """Nothing to release."""

    def embed_sync(self, texts: Sequence[str]) -> np.ndarray:
        """The same vectors without an event loop, for building fixtures. Returns ``(n, dimension)`` float32."""
        items = text_list(texts)
        if not items:
            return empty_matrix(self.dimension)
        matrix = np.zeros((len(items), self.dimension), dtype=np.float32)
        for row, text in enumerate(items):
            for feature, weight in text_features(text):
                slot, sign = self._slot(feature)
                matrix[row, slot] += sign * weight
        return l2_normalise(matrix)

    def _slot(self, feature: str) -> tuple[int, float]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8, person=b"booku-test-emb").digest()
        value = int.from_bytes(digest, "little")
        # The low bit picks the sign so colliding features tend to cancel rather than pile up.
        return (value >> 1) % self.dimension, (1.0 if value & 1 else -1.0)


def text_features(text: str) -> list[tuple[str, float]]:
    """Weighted features of ``text``: lower-cased jieba tokens plus character bigrams, punctuation dropped."""
    import jieba  # imported here so importing the embedding package does not pay for jieba

    lowered = text.lower()
    features = [("t:" + token, _TOKEN_WEIGHT) for token in jieba.lcut(lowered) if _is_word(token)]
    chars = [char for char in lowered if char.isalnum()]
    features += [("b:" + a + b, _BIGRAM_WEIGHT) for a, b in zip(chars, chars[1:])]
    return features or [(_EMPTY_FEATURE, 1.0)]


def _is_word(token: str) -> bool:
    return any(char.isalnum() for char in token)


class UnavailableEmbedder:
    """FOR TESTS ONLY: an embedder that is always down, to exercise the degraded keyword-only path."""

    def __init__(
        self, reason: str = "测试用嵌入模型不可用", *, dimension: int = 384, model_id: str = "unavailable-test"
    ) -> None:
        self.reason = reason
        self.dimension = dimension
        self.model_id = model_id
        self.calls = 0

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Always raises ``EmbeddingUnavailableError`` with ``reason``."""
        self.calls += 1
        raise EmbeddingUnavailableError(self.reason)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Always raises ``EmbeddingUnavailableError`` with ``reason``."""
        self.calls += 1
        raise EmbeddingUnavailableError(self.reason)

    async def aclose(self) -> None:
        """Nothing to release."""


TEST_EMBEDDER_ENV = "BOOKU_TEST_EMBEDDER"


def testing_embedder_from_env() -> DeterministicTestEmbedder | None:
    """FOR TESTS ONLY: the deterministic hashing embedder when ``BOOKU_TEST_EMBEDDER=deterministic``, else None
    (the configured embedder is used).

    Read by the entry points that start a runtime in a subprocess (``mcp``, ``serve`` and the other CLI commands),
    so subprocess tests run the real programs without loading the local model. Never set it for real use: its
    vectors know nothing about meaning, and a store written with it opens with the real model only after a
    ``reindex``.
    """
    value = os.environ.get(TEST_EMBEDDER_ENV, "").strip()
    if not value:
        return None
    if value != "deterministic":
        raise ConfigError(f"环境变量 {TEST_EMBEDDER_ENV} 只能是 deterministic（仅供测试），当前为 {value!r}")
    return DeterministicTestEmbedder()

"""A caching layer in front of any embedder, so unchanged text is never embedded twice.

Vectors are keyed by (model_id, mode, sha256(text)): restore, revert and reindex of unchanged text then cost no
model call, and a model change can never serve stale vectors. Only the misses of a request go to the provider, in
one call (the provider batches it). Queries also go through a small in-process LRU, because the same query text
repeats within a conversation and a SQLite round-trip is not free.

The cache is an optimisation, never a source of failure: if the store cannot be read or written, the request is
answered from the provider and the problem is logged.
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from ..errors import EmbeddingUnavailableError
from .base import Embedder, EmbeddingMode, empty_matrix, l2_normalise, row_count_error, text_list

logger = logging.getLogger(__name__)


class EmbeddingCacheStore(Protocol):
    """Persistent vector cache (implemented on the ``booku_embedding_cache`` table)."""

    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Return the cached vectors among ``hashes``; unknown hashes are simply absent."""
        ...

    async def put_many(self, model: str, mode: str, items: list[tuple[str, np.ndarray]]) -> None:
        """Store (hash, vector) pairs, replacing existing ones."""
        ...


def text_hash(text: str) -> str:
    """The cache key of a text: hex sha256 of its UTF-8 bytes (exact text, no normalisation)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Wraps ``inner`` with the persistent ``cache_store`` and a query LRU of ``query_cache_size`` entries.

    Presents the same interface as any embedder: ``model_id`` and ``dimension`` are the inner provider's.
    """

    def __init__(self, inner: Embedder, cache_store: EmbeddingCacheStore, *, query_cache_size: int = 256) -> None:
        self.inner = inner
        self.cache_store = cache_store
        self.query_cache_size = max(0, int(query_cache_size))
        self._query_lru: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._seen_dimension = 0

    @property
    def model_id(self) -> str:
        """The inner provider's model id (part of every cache key)."""
        return self.inner.model_id

    @property
    def dimension(self) -> int:
        """The inner provider's dimension, or that of cached vectors if the provider has not answered yet."""
        return self.inner.dimension or self._seen_dimension

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages, from cache where possible. Returns ``(n, d)`` float32, unit rows."""
        return await self._embed(texts, "passage")

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed queries, from the LRU or cache where possible. Returns ``(n, d)`` float32, unit rows."""
        return await self._embed(texts, "query")

    async def aclose(self) -> None:
        """Close the inner provider if it holds resources. The store belongs to the caller."""
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()

    async def _embed(self, texts: Sequence[str], mode: EmbeddingMode) -> np.ndarray:
        items = text_list(texts)
        if not items:
            return empty_matrix(self.dimension)
        model = self.model_id
        hashes = [text_hash(text) for text in items]
        # dict keeps first-seen order; a text repeated within one request is embedded once.
        text_by_hash = dict(zip(hashes, items))
        found: dict[str, np.ndarray] = {}

        if mode == "query":
            found.update(self._lru_get(model, text_by_hash))
        wanted = [h for h in text_by_hash if h not in found]
        if wanted:
            found.update(await self._store_get(model, mode, wanted))
        misses = [h for h in text_by_hash if h not in found]
        if misses:
            fresh = await self._inner_embed([text_by_hash[h] for h in misses], mode)
            if fresh.ndim != 2 or fresh.shape[0] != len(misses):
                raise row_count_error(f"嵌入模型 {model} ", fresh.shape[0] if fresh.ndim else 0, len(misses))
            self._seen_dimension = int(fresh.shape[1])
            new_items = list(zip(misses, fresh))
            found.update(new_items)
            await self._store_put(model, mode, new_items)
        if len({vector.shape for vector in found.values()}) > 1:
            raise EmbeddingUnavailableError(
                f"嵌入缓存中模型 {model} 的向量维度与模型当前输出不一致；请执行 reindex 重建向量。"
            )
        if mode == "query":
            self._lru_put(model, ((h, found[h]) for h in text_by_hash))
        return np.stack([found[h] for h in hashes]).astype(np.float32, copy=False)

    async def _inner_embed(self, texts: list[str], mode: EmbeddingMode) -> np.ndarray:
        if mode == "query":
            return await self.inner.embed_queries(texts)
        return await self.inner.embed_documents(texts)

    async def _store_get(self, model: str, mode: EmbeddingMode, hashes: list[str]) -> dict[str, np.ndarray]:
        try:
            cached = await self.cache_store.get_many(model, mode, hashes)
        except Exception:  # a broken cache must cost a model call, not the whole request
            logger.warning("读取嵌入缓存失败，改为直接调用嵌入模型（model=%s, mode=%s）", model, mode, exc_info=True)
            return {}
        usable: dict[str, np.ndarray] = {}
        expected = self.inner.dimension or self._seen_dimension
        for key, vector in cached.items():
            array = np.asarray(vector, dtype=np.float32).reshape(-1)
            # A row of the wrong length or with NaN would break every similarity it takes part in: treat as a miss.
            if array.size == 0 or (expected and array.size != expected) or not np.all(np.isfinite(array)):
                continue
            usable[key] = l2_normalise(array)[0]
            self._seen_dimension = array.size
        return usable

    async def _store_put(self, model: str, mode: EmbeddingMode, items: list[tuple[str, np.ndarray]]) -> None:
        try:
            await self.cache_store.put_many(model, mode, items)
        except Exception:  # the vectors are already computed; losing them from the cache only costs time later
            logger.warning("写入嵌入缓存失败（model=%s, mode=%s, %d 条）", model, mode, len(items), exc_info=True)

    def _lru_get(self, model: str, text_by_hash: dict[str, str]) -> dict[str, np.ndarray]:
        hits: dict[str, np.ndarray] = {}
        for digest in text_by_hash:
            vector = self._query_lru.get((model, digest))
            if vector is not None:
                self._query_lru.move_to_end((model, digest))
                hits[digest] = vector
        return hits

    def _lru_put(self, model: str, pairs: Iterable[tuple[str, np.ndarray]]) -> None:
        if not self.query_cache_size:
            return
        for digest, vector in pairs:
            key = (model, digest)
            if vector.flags.writeable:  # entries already in the LRU are frozen copies; do not copy them again
                vector = np.array(vector, dtype=np.float32, copy=True)
                vector.flags.writeable = False
            self._query_lru[key] = vector
            self._query_lru.move_to_end(key)
        while len(self._query_lru) > self.query_cache_size:
            self._query_lru.popitem(last=False)

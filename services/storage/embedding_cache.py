"""SQLite-backed embedding cache keyed by (model, mode, sha256 of the text).

It makes re-indexing, restoring and re-ingesting unchanged text free of model calls, and it is what the outbox reads
the vector from when it (re)builds the index after a crash.

The table is an ordinary rowid table with a UNIQUE index on the key (migration 0008): its ~1.5 KB rows fit inline in
table pages, where a WITHOUT ROWID layout pushed each vector onto an overflow page of its own.

Writes from the embedder are deferred (``deferring()``): a freshly computed vector waits in memory and rides in the
next write transaction (``Database.add_rider``), which for ``upsert_memory`` is the very transaction that commits
the memory, so the row is committed no later than the memory it serves. Reads see deferred vectors at once. A timer
writes them in a transaction of their own when no write comes along, and closing the database writes the rest.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..embedding.base import l2_normalise
from .database import Database, RiderRows, placeholders

logger = logging.getLogger(__name__)

DEFERRED_FLUSH_SECONDS = 0.2
"""How long a deferred vector waits for a write transaction to ride in before it gets one of its own.

Why this long: a write that embedded its text reaches its transaction within milliseconds, under load within tens
of them (the group commit queues behind Chroma's flushes); a cache-only miss (a retrieval query) costs a
transaction at most five times a second."""

# Hashes per lookup query: one SELECT per chunk, far below SQLite's bound-parameter limit.
LOOKUP_CHUNK = 500

# An upsert rather than INSERT OR REPLACE: REPLACE deletes the old row and inserts a new one (new rowid, the index
# entry removed and re-added), while DO UPDATE rewrites the row where it is. The conflict target is the UNIQUE key.
_UPSERT = (
    "INSERT INTO booku_embedding_cache (model, mode, text_hash, dimension, vector, created_at) "
    "VALUES (?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (text_hash, mode, model) DO UPDATE SET "
    "dimension = excluded.dimension, vector = excluded.vector, created_at = excluded.created_at"
)


class SqliteEmbeddingCache:
    """The ``booku_embedding_cache`` table behind ``CachedEmbedder``; vectors are stored as raw float32 bytes."""

    def __init__(self, db: Database) -> None:
        self.db = db
        # (model, mode, text_hash) -> (vector, created_at) not yet written; the newest put of a key wins.
        self._deferred: dict[tuple[str, str, str], tuple[np.ndarray, float]] = {}
        self._flush_timer: asyncio.TimerHandle | None = None
        self._flush_task: asyncio.Task | None = None
        db.add_rider(self)

    def deferring(self) -> DeferredEmbeddingWrites:
        """A view whose ``put_many`` defers the rows to the next write transaction (see the module docstring)."""
        return DeferredEmbeddingWrites(self)

    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors among ``hashes`` as ``{text_hash: float32 array}``; unknown hashes are simply absent.

        Duplicates are looked up once, and the lookup costs one query per ``LOOKUP_CHUNK`` distinct hashes.
        """
        found: dict[str, np.ndarray] = {}
        unique = []
        for digest in dict.fromkeys(hashes):
            deferred = self._deferred.get((model, mode, digest))
            if deferred is not None:
                found[digest] = deferred[0].copy()
            else:
                unique.append(digest)
        for start in range(0, len(unique), LOOKUP_CHUNK):
            chunk = unique[start : start + LOOKUP_CHUNK]
            rows = await self.db.fetch_all(
                f"SELECT text_hash, dimension, vector FROM booku_embedding_cache "
                f"WHERE model = ? AND mode = ? AND text_hash IN ({placeholders(len(chunk))})",
                [model, mode, *chunk],
            )
            for row in rows:
                found[row["text_hash"]] = np.frombuffer(row["vector"], dtype=np.float32, count=row["dimension"]).copy()
        return found

    async def indexed_vectors(self, memory_ids: Sequence[str], model: str, dimension: int) -> dict[str, np.ndarray]:
        """``{memory_id: unit vector}`` of the records whose indexed text (``embedded_text_hash``, set when the
        vector drain stored its vector) has a ``model`` passage vector of ``dimension`` here: the vector the drain
        last stored in the vector index for them. Records never flushed, or whose row is gone, are absent; so is
        every record when the cache cannot be read.

        Why: ranking needs the stored vectors of the memories the keyword, time and context steps found, and a
        read by id from Chroma costs a fixed overhead plus a Python float per dimension; these rows sit beside the
        records in SQLite and are read by index in one query."""
        found: dict[str, np.ndarray] = {}
        ids = list(dict.fromkeys(memory_ids))
        for start in range(0, len(ids), LOOKUP_CHUNK):
            chunk = ids[start : start + LOOKUP_CHUNK]
            try:
                rows = await self.db.fetch_all(
                    "SELECT r.memory_id, c.vector FROM booku_memory_records r "
                    "JOIN booku_embedding_cache c ON c.text_hash = r.embedded_text_hash "
                    "AND c.mode = 'passage' AND c.model = ? AND c.dimension = ? "
                    f"WHERE r.memory_id IN ({placeholders(len(chunk))}) AND r.embedded_text_hash != ''",
                    [model, dimension, *chunk],
                )
            except sqlite3.DatabaseError:  # the cache never fails a read: the caller asks the vector index instead
                logger.warning("读取嵌入缓存中的向量失败，改为从向量索引读取", exc_info=True)
                return found
            if not rows:
                continue
            matrix = np.frombuffer(b"".join(row["vector"] for row in rows), dtype=np.float32).reshape(len(rows), -1)
            found.update(zip((row["memory_id"] for row in rows), l2_normalise(matrix)))
        return found

    async def put_many(self, model: str, mode: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Store ``(text_hash, vector)`` pairs in one transaction, replacing the vector of a key that exists."""
        if not items:
            return
        now = time.time()
        async with self.db.transaction() as conn:
            await conn.executemany(
                _UPSERT,
                [(model, mode, h, int(v.shape[-1]), np.asarray(v, dtype=np.float32).tobytes(), now) for h, v in items],
            )

    # ------------------------------------------------------------ deferred writes
    def defer_many(self, model: str, mode: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Keep ``(text_hash, vector)`` pairs for the next write transaction; ``get_many`` sees them at once."""
        if not items:
            return
        now = time.time()
        for digest, vector in items:
            self._deferred[(model, mode, digest)] = (np.array(vector, dtype=np.float32, copy=True).reshape(-1), now)
        self._schedule_flush()

    @property
    def pending(self) -> bool:
        """Whether deferred rows wait for a transaction (``TransactionRider``)."""
        return bool(self._deferred)

    def take(self) -> tuple[RiderRows, Any]:
        """The deferred rows as one upsert statement, and what was taken (``TransactionRider``)."""
        if not self._deferred:
            return [], None
        taken = dict(self._deferred)
        rows: list[Sequence[Any]] = [
            (model, mode, digest, int(vector.shape[-1]), vector.tobytes(), created)
            for (model, mode, digest), (vector, created) in taken.items()
        ]
        return [(_UPSERT, rows)], taken

    def settle(self, token: Any, committed: bool) -> None:
        """Forget the rows a transaction committed; rows put again meanwhile stay (the newer vector wins)."""
        if committed:
            for key, entry in token.items():
                if self._deferred.get(key) is entry:
                    del self._deferred[key]
        if self._deferred:
            self._schedule_flush()

    def _schedule_flush(self) -> None:
        if self._flush_timer is not None or self._flush_task is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no loop (a synchronous caller): the next transaction or close writes the rows
            return
        self._flush_timer = loop.call_later(DEFERRED_FLUSH_SECONDS, self._start_flush)

    def _start_flush(self) -> None:
        self._flush_timer = None
        if self._deferred and self._flush_task is None:
            # Not cancelled by anyone: cancelling it inside its transaction is safe, but there is no need.
            self._flush_task = asyncio.get_running_loop().create_task(self._flush(), name="booku-embedding-cache")

    async def _flush(self) -> None:
        """Give the deferred rows a transaction of their own (no write came along to carry them)."""
        try:
            if self._deferred:
                async with self.db.transaction():
                    pass  # the rows ride in right after BEGIN
        except RuntimeError:  # the database closed meanwhile; close() wrote the rows
            pass
        except Exception:  # the rows stay deferred; the next transaction tries again
            logger.warning("写入嵌入缓存失败，将随下一次写入重试", exc_info=True)
        finally:
            self._flush_task = None


class DeferredEmbeddingWrites:
    """``SqliteEmbeddingCache`` as ``CachedEmbedder`` sees it: reads as usual, writes deferred to a transaction.

    Why a view: direct callers of ``SqliteEmbeddingCache.put_many`` (import, tests) keep its contract that the rows
    are stored when it returns; the embedder, on the write path, must not pay a transaction per request.
    """

    def __init__(self, cache: SqliteEmbeddingCache) -> None:
        self.cache = cache

    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Same as ``SqliteEmbeddingCache.get_many`` (deferred rows included)."""
        return await self.cache.get_many(model, mode, hashes)

    async def put_many(self, model: str, mode: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        """Defer the rows to the next write transaction (``SqliteEmbeddingCache.defer_many``)."""
        self.cache.defer_many(model, mode, items)

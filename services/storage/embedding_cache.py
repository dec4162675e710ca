"""SQLite-backed embedding cache keyed by (model, mode, sha256 of the text).

It makes re-indexing, restoring and re-ingesting unchanged text free of model calls, and it is what the outbox reads
the vector from when it (re)builds the index after a crash.

The table is an ordinary rowid table with a UNIQUE index on the key (migration 0008): its ~1.5 KB rows fit inline in
table pages, where a WITHOUT ROWID layout pushed each vector onto an overflow page of its own.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from .database import Database, placeholders

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

    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        """Cached vectors among ``hashes`` as ``{text_hash: float32 array}``; unknown hashes are simply absent.

        Duplicates are looked up once, and the lookup costs one query per ``LOOKUP_CHUNK`` distinct hashes.
        """
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
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

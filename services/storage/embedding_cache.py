"""SQLite-backed embedding cache keyed by (model, mode, sha256 of the text).

It makes re-indexing, restoring and re-ingesting unchanged text free of model calls, and it is what the outbox reads
the vector from when it (re)builds the index after a crash.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from .database import Database, placeholders


class SqliteEmbeddingCache:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        found: dict[str, np.ndarray] = {}
        unique = list(dict.fromkeys(hashes))
        for start in range(0, len(unique), 500):
            chunk = unique[start : start + 500]
            rows = await self.db.fetch_all(
                f"SELECT text_hash, dimension, vector FROM booku_embedding_cache "
                f"WHERE model = ? AND mode = ? AND text_hash IN ({placeholders(len(chunk))})",
                [model, mode, *chunk],
            )
            for row in rows:
                found[row["text_hash"]] = np.frombuffer(row["vector"], dtype=np.float32, count=row["dimension"]).copy()
        return found

    async def put_many(self, model: str, mode: str, items: Sequence[tuple[str, np.ndarray]]) -> None:
        if not items:
            return
        now = time.time()
        async with self.db.transaction() as conn:
            await conn.executemany(
                "INSERT OR REPLACE INTO booku_embedding_cache (model, mode, text_hash, dimension, vector, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(model, mode, h, int(v.shape[-1]), np.asarray(v, dtype=np.float32).tobytes(), now) for h, v in items],
            )

"""SQL of the companion: the immutable source layer, decay scores, anchor counts, pulse statistics, engine state.

Record rows themselves are read and written through ``RecordRepository`` (which keeps history and audit rows);
this module only touches what is companion-specific. Mutating methods take the open transaction's connection.
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

import aiosqlite

from ..storage.database import Database, placeholders
from .kinds import KIND_SQL

DECAY_STATE_KEY = "companion.decay_state"


class CompanionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------ sources
    async def save_source(self, conn: aiosqlite.Connection, *, owner_uid: str, store_key: str, content: str) -> str:
        """The id of ``content`` in the store's source layer, inserting it once (identical text = one row)."""
        digest = hashlib.sha256(content.encode("utf-8")).hexdigest()
        async with conn.execute(
            "SELECT source_id FROM booku_memory_sources WHERE store_key = ? AND content_sha256 = ?", [store_key, digest]
        ) as cur:
            row = await cur.fetchone()
        if row is not None:
            return row[0]
        source_id = f"src-{uuid.uuid4().hex}"
        await conn.execute(
            "INSERT INTO booku_memory_sources (source_id, owner_uid, store_key, content, content_sha256, line_count, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [source_id, owner_uid, store_key, content, digest, len(content.splitlines()) or 1, time.time()],
        )
        return source_id

    async def link_source(
        self,
        conn: aiosqlite.Connection,
        *,
        memory_id: str,
        store_key: str,
        source_id: str | None,
        ranges: Sequence[Sequence[int]],
        source_bucket: str,
    ) -> None:
        await conn.execute(
            "INSERT INTO booku_memory_source_links (memory_id, store_key, source_id, ranges, source_bucket, "
            "created_at) VALUES (?, ?, ?, ?, ?, ?)",
            [memory_id, store_key, source_id, json.dumps([list(r) for r in ranges]), source_bucket, time.time()],
        )

    async def source_links(self, memory_id: str, *, store_keys: Sequence[str]) -> list[dict[str, Any]]:
        """Evidence of one memory, oldest first: ``[{source_id, ranges, source_bucket, content, created_at}]``."""
        rows = await self.db.fetch_all(
            f"SELECT l.source_id, l.ranges, l.source_bucket, l.created_at, s.content FROM booku_memory_source_links l "
            f"LEFT JOIN booku_memory_sources s ON s.source_id = l.source_id "
            f"WHERE l.memory_id = ? AND l.store_key IN ({placeholders(len(store_keys))}) ORDER BY l.link_id",
            [memory_id, *store_keys],
        )
        return [
            {
                "source_id": row["source_id"],
                "ranges": json.loads(row["ranges"]),
                "source_bucket": row["source_bucket"],
                "content": row["content"],
                "created_at": row["created_at"],
            }
            for row in rows
        ]

    # ------------------------------------------------------------ records
    async def find_identical(self, *, store_key: str, kind: str, content: str) -> str | None:
        """Id of a live memory of this kind in the store whose body is exactly ``content`` (hold is idempotent)."""
        return await self.db.fetch_value(
            f"SELECT r.memory_id FROM booku_memory_records r WHERE r.store_key = ? AND r.bucket = 'memory' "
            f"AND r.is_deleted = 0 AND r.content = ? AND {KIND_SQL} = ? ORDER BY r.rid LIMIT 1",
            [store_key, content, kind],
        )

    async def anchors(self, store_key: str, *, conn: aiosqlite.Connection | None = None) -> list[tuple[str, str]]:
        """(id, display name) of every live anchor of a store, oldest first."""
        sql = (
            "SELECT memory_id, CASE WHEN name != '' THEN name ELSE title END AS label FROM booku_memory_records "
            "WHERE store_key = ? AND anchor = 1 AND is_deleted = 0 AND bucket = 'memory' ORDER BY rid"
        )
        if conn is None:
            rows = await self.db.fetch_all(sql, [store_key])
        else:
            async with conn.execute(sql, [store_key]) as cur:
                rows = list(await cur.fetchall())
        return [(row[0], row[1]) for row in rows]

    # -------------------------------------------------------------- decay
    async def scoring_rows(self) -> list[dict[str, Any]]:
        """Every live memory with the fields the decay score needs (all stores: maintenance is runtime-wide)."""
        rows = await self.db.fetch_all(
            "SELECT memory_id, store_key, source, status, importance, arousal, resolved, pinned, protected, anchor, "
            "activation_count, created_at, last_activated_at, extra FROM booku_memory_records "
            "WHERE bucket = 'memory' AND is_deleted = 0 AND status = 'active'"
        )
        records = []
        for row in rows:
            record = dict(row)
            try:
                extra = json.loads(record["extra"] or "{}")
            except ValueError:
                extra = {}
            record["extra"] = extra if isinstance(extra, dict) else {}
            records.append(record)
        return records

    async def write_scores(
        self, conn: aiosqlite.Connection, scores: Sequence[tuple[str, float]], *, now: float
    ) -> None:
        """Store derived scores without a revision: they are recomputed on every maintenance pass."""
        await conn.executemany(
            "UPDATE booku_memory_records SET decay_score = ?, decay_computed_at = ? WHERE memory_id = ?",
            [(score, now, memory_id) for memory_id, score in scores],
        )

    async def decay_state(self) -> dict[str, Any] | None:
        raw = await self.db.fetch_value("SELECT value FROM booku_meta WHERE key = ?", [DECAY_STATE_KEY])
        return json.loads(raw) if raw else None

    async def save_decay_state(self, conn: aiosqlite.Connection, state: dict[str, Any]) -> None:
        await conn.execute(
            "INSERT INTO booku_meta (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            [DECAY_STATE_KEY, json.dumps(state, ensure_ascii=False)],
        )

    # -------------------------------------------------------------- pulse
    async def pulse_counts(self, store_keys: Sequence[str]) -> dict[str, Any]:
        """Counts by kind and state, and the characters stored, for the readable stores."""
        stores = placeholders(len(store_keys))
        rows = await self.db.fetch_all(
            f"SELECT {KIND_SQL} AS kind, r.status AS status, (r.pinned = 1 OR r.protected = 1) AS permanent, "
            f"r.anchor AS anchor, r.digested AS digested, r.resolved AS resolved, COUNT(*) AS n, "
            f"SUM(LENGTH(r.content)) AS chars FROM booku_memory_records r "
            f"WHERE r.store_key IN ({stores}) AND r.bucket = 'memory' AND r.is_deleted = 0 "
            f"GROUP BY kind, status, permanent, anchor, digested, resolved",
            list(store_keys),
        )
        sources = await self.db.fetch_one(
            f"SELECT COUNT(*) AS n, COALESCE(SUM(LENGTH(content)), 0) AS chars FROM booku_memory_sources "
            f"WHERE store_key IN ({stores})",
            list(store_keys),
        )
        assert sources is not None  # an aggregate always answers one row
        return {
            "rows": [dict(row) for row in rows],
            "source_count": int(sources["n"]),
            "source_chars": int(sources["chars"]),
        }

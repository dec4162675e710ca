"""Reads of the append-only audit log (rows are written by RecordRepository in the changing transaction).

The table rejects UPDATE and DELETE with triggers, so no code path, API or admin page can rewrite what happened.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Sequence
from typing import Any

from .database import Database, placeholders


def _row(row) -> dict[str, Any]:
    entry = dict(row)
    for key in ("before", "after"):
        entry[key] = json.loads(entry[key]) if entry[key] else None
    return entry


class AuditLog:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def list(
        self,
        *,
        store_keys: Sequence[str],
        memory_id: str | None = None,
        authority: str | None = None,
        action: str | None = None,
        batch_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        clauses = [f"store_key IN ({placeholders(len(store_keys))})"]
        params: list[Any] = list(store_keys)
        for column, value in (
            ("memory_id", memory_id),
            ("authority", authority),
            ("action", action),
            ("batch_id", batch_id),
        ):
            if value:
                clauses.append(f"{column} = ?")
                params.append(value)
        where = " AND ".join(clauses)
        rows = await self.db.fetch_all(
            f"SELECT * FROM booku_audit_log WHERE {where} ORDER BY audit_id DESC LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        total = await self.db.fetch_value(f"SELECT COUNT(*) FROM booku_audit_log WHERE {where}", params, 0)
        return [_row(r) for r in rows], int(total)

    async def get(self, audit_id: int, *, store_keys: Sequence[str]) -> dict[str, Any] | None:
        row = await self.db.fetch_one(
            f"SELECT * FROM booku_audit_log WHERE audit_id = ? AND store_key IN ({placeholders(len(store_keys))})",
            [audit_id, *store_keys],
        )
        return _row(row) if row else None

    async def batch(self, batch_id: str, *, store_keys: Sequence[str]) -> builtins.list[dict[str, Any]]:
        rows = await self.db.fetch_all(
            f"SELECT * FROM booku_audit_log WHERE batch_id = ? AND store_key IN ({placeholders(len(store_keys))}) "
            f"ORDER BY audit_id DESC",
            [batch_id, *store_keys],
        )
        return [_row(r) for r in rows]

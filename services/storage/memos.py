"""Temporary memos: short-lived notes bound to a chat stream, never part of long-term retrieval."""

from __future__ import annotations

import time
import uuid
from typing import Any

from .database import Database


class MemoRepository:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def purge_expired(self, now: float | None = None) -> int:
        async with self.db.transaction() as conn:
            cur = await conn.execute("DELETE FROM booku_temporary_memos WHERE expires_at <= ?", [now or time.time()])
            return cur.rowcount

    async def upsert(
        self,
        *,
        owner_uid: str,
        stream_id: str,
        content: str,
        expires_at: float,
        allow_shorten: bool,
        now: float | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """Create a memo, or refresh the live one with the same (stream, content). Returns (memo, created)."""
        now = now or time.time()
        async with self.db.transaction() as conn:
            await conn.execute("DELETE FROM booku_temporary_memos WHERE expires_at <= ?", [now])
            async with conn.execute(
                "SELECT * FROM booku_temporary_memos WHERE owner_uid = ? AND stream_id = ? AND content = ? "
                "ORDER BY updated_at DESC LIMIT 1",
                [owner_uid, stream_id, content],
            ) as cur:
                row = await cur.fetchone()
            if row is not None:
                new_expiry = expires_at if allow_shorten else max(expires_at, float(row["expires_at"]))
                await conn.execute(
                    "UPDATE booku_temporary_memos SET expires_at = ?, updated_at = ? WHERE memo_id = ?",
                    [new_expiry, now, row["memo_id"]],
                )
                memo = {**dict(row), "expires_at": new_expiry, "updated_at": now}
                return memo, False
            memo = {
                "memo_id": f"memo-{uuid.uuid4().hex}",
                "owner_uid": owner_uid,
                "stream_id": stream_id,
                "content": content,
                "expires_at": expires_at,
                "created_at": now,
                "updated_at": now,
            }
            await conn.execute(
                "INSERT INTO booku_temporary_memos (memo_id, owner_uid, stream_id, content, expires_at, created_at, "
                "updated_at) VALUES (:memo_id, :owner_uid, :stream_id, :content, :expires_at, :created_at, "
                ":updated_at)",
                memo,
            )
            return memo, True

    async def list_active(
        self, *, owner_uid: str, stream_id: str | None, now: float | None = None
    ) -> list[dict[str, Any]]:
        """Live memos of one stream (or of every stream when stream_id is None), newest first."""
        sql = "SELECT * FROM booku_temporary_memos WHERE owner_uid = ? AND expires_at > ?"
        params: list[Any] = [owner_uid, now or time.time()]
        if stream_id is not None:
            sql += " AND stream_id = ?"
            params.append(stream_id)
        rows = await self.db.fetch_all(sql + " ORDER BY updated_at DESC, created_at DESC", params)
        return [dict(row) for row in rows]

    async def cancel(self, *, owner_uid: str, stream_id: str | None, memo_id: str | None, content: str | None) -> int:
        sql = "DELETE FROM booku_temporary_memos WHERE owner_uid = ?"
        params: list[Any] = [owner_uid]
        if stream_id is not None:
            sql += " AND stream_id = ?"
            params.append(stream_id)
        if memo_id:
            sql += " AND memo_id = ?"
            params.append(memo_id)
        if content:
            sql += " AND content = ?"
            params.append(content)
        async with self.db.transaction() as conn:
            cur = await conn.execute(sql, params)
            return cur.rowcount

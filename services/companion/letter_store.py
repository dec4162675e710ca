"""SQL of letters (``booku_companion_letters``) and of self-knowledge witnesses (``booku_companion_self_witnesses``).

Letters are not memory records (see migration 0005 for why): this module is the only place their rows are read or
written. Writes take the open transaction's connection and add one event row to the shared append-only
``booku_audit_log`` in the same transaction, like the evidence package does: ``before`` is NULL (an event, not a record
state, so an audit "restore" of it finds no record and changes nothing) and ``after`` never holds the title or the
body, because the audit page is read by a side that may not be allowed to read the letter.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

from ..scope import WriteContext
from ..storage.database import Database, placeholders

LETTER_EVENTS: dict[str, str] = {
    "letter_written": "写下信件",
    "letter_lock_changed": "修改信件的锁",
}
"""Audit actions written here, with their Chinese labels (for the dashboard's audit filter)."""


@dataclass(frozen=True)
class LetterRow:
    """One stored letter, exactly as in the table."""

    letter_id: str
    owner_uid: str
    store_key: str
    side: str
    author: str
    author_side: str
    user_name: str
    ai_name: str
    title: str
    letter_date: str
    written_at: float
    content: str
    lock_type: str
    unlock_at: float | None
    unlock_date: str
    created_at: float
    lock_changed_at: float


_COLUMNS = (
    "letter_id",
    "owner_uid",
    "store_key",
    "side",
    "author",
    "author_side",
    "user_name",
    "ai_name",
    "title",
    "letter_date",
    "written_at",
    "content",
    "lock_type",
    "unlock_at",
    "unlock_date",
    "created_at",
    "lock_changed_at",
)


def _letter(row: aiosqlite.Row) -> LetterRow:
    return LetterRow(**{column: row[column] for column in _COLUMNS})


async def _audit_event(
    conn: aiosqlite.Connection,
    *,
    action: str,
    letter: LetterRow,
    ctx: WriteContext,
    details: dict[str, Any],
    now: float,
) -> None:
    after = {"event": action, "title": f"{LETTER_EVENTS[action]} {letter.letter_id}", "side": letter.side, **details}
    await conn.execute(
        "INSERT INTO booku_audit_log (at, authority, actor, cause, batch_id, action, memory_id, owner_uid, store_key, "
        "version, before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, ?)",
        [
            now,
            ctx.authority,
            ctx.actor,
            ctx.cause,
            ctx.batch_id,
            action,
            letter.letter_id,
            letter.owner_uid,
            letter.store_key,
            json.dumps(after, ensure_ascii=False, sort_keys=True),
        ],
    )


class LetterStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    async def insert(self, conn: aiosqlite.Connection, letter: LetterRow, *, ctx: WriteContext) -> None:
        """Store a new letter and its audit event (lock state only: never the title or the body)."""
        values = {column: getattr(letter, column) for column in _COLUMNS}
        values["content_sha256"] = hashlib.sha256(letter.content.encode("utf-8")).hexdigest()
        await conn.execute(
            f"INSERT INTO booku_companion_letters ({', '.join(values)}) VALUES ({placeholders(len(values))})",
            list(values.values()),
        )
        await _audit_event(
            conn,
            action="letter_written",
            letter=letter,
            ctx=ctx,
            now=letter.created_at,
            details={
                "author_side": letter.author_side,
                "lock_type": letter.lock_type,
                "unlock_date": letter.unlock_date,
                "chars": len(letter.content),
            },
        )

    async def exists(self, conn: aiosqlite.Connection, letter_id: str) -> bool:
        async with conn.execute("SELECT 1 FROM booku_companion_letters WHERE letter_id = ?", [letter_id]) as cur:
            return await cur.fetchone() is not None

    async def get(
        self, letter_id: str, *, store_keys: Sequence[str], conn: aiosqlite.Connection | None = None
    ) -> LetterRow | None:
        sql = (
            f"SELECT * FROM booku_companion_letters WHERE letter_id = ? "
            f"AND store_key IN ({placeholders(len(store_keys))})"
        )
        params = [letter_id, *store_keys]
        if conn is None:
            row = await self.db.fetch_one(sql, params)
        else:
            async with conn.execute(sql, params) as cur:
                row = await cur.fetchone()
        return _letter(row) if row is not None else None

    async def change_lock(
        self,
        conn: aiosqlite.Connection,
        letter: LetterRow,
        *,
        lock_type: str,
        unlock_at: float | None,
        unlock_date: str,
        ctx: WriteContext,
        now: float,
    ) -> None:
        """Set a new lock (the table's triggers refuse any other column and any change of a permanent lock)."""
        await conn.execute(
            "UPDATE booku_companion_letters SET lock_type = ?, unlock_at = ?, unlock_date = ?, lock_changed_at = ? "
            "WHERE letter_id = ?",
            [lock_type, unlock_at, unlock_date, now, letter.letter_id],
        )
        await _audit_event(
            conn,
            action="letter_lock_changed",
            letter=letter,
            ctx=ctx,
            now=now,
            details={
                "from": letter.lock_type,
                "from_unlock_date": letter.unlock_date,
                "lock_type": lock_type,
                "unlock_date": unlock_date,
            },
        )

    async def listing(self, *, store_keys: Sequence[str]) -> list[LetterRow]:
        """Every letter of the stores, newest written first (filters are applied by the caller, see letters.py)."""
        rows = await self.db.fetch_all(
            f"SELECT * FROM booku_companion_letters WHERE store_key IN ({placeholders(len(store_keys))}) "
            f"ORDER BY written_at DESC, created_at DESC, letter_id",
            list(store_keys),
        )
        return [_letter(row) for row in rows]

    async def count(self, *, store_keys: Sequence[str]) -> int:
        return int(
            await self.db.fetch_value(
                f"SELECT COUNT(*) FROM booku_companion_letters WHERE store_key IN ({placeholders(len(store_keys))})",
                list(store_keys),
                0,
            )
        )


class WitnessStore:
    """Which local dates a dream showed a self-knowledge candidate on (append-only)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    async def record(self, entries: Sequence[tuple[str, str]], *, witness_date: str, now: float | None = None) -> None:
        """Note that a dream on ``witness_date`` showed each ``(memory_id, store_key)``; a date counts once."""
        if not entries:
            return
        moment = time.time() if now is None else now
        async with self.db.transaction() as conn:
            await conn.executemany(
                "INSERT OR IGNORE INTO booku_companion_self_witnesses (memory_id, store_key, witness_date, "
                "witnessed_at) VALUES (?, ?, ?, ?)",
                [(memory_id, store_key, witness_date, moment) for memory_id, store_key in entries],
            )

    async def dates(self, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """Distinct witness dates per memory id, oldest first (ids never witnessed map to ``[]``)."""
        found: dict[str, list[str]] = {memory_id: [] for memory_id in memory_ids}
        if not memory_ids:
            return found
        rows = await self.db.fetch_all(
            f"SELECT memory_id, witness_date FROM booku_companion_self_witnesses "
            f"WHERE memory_id IN ({placeholders(len(memory_ids))}) ORDER BY witness_date",
            list(memory_ids),
        )
        for row in rows:
            found[row["memory_id"]].append(row["witness_date"])
        return found

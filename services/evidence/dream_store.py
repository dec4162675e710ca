"""SQL of dreaming stage B and of human review: proposals with their evidence, high-water marks, provenance, flags.

Proposals are decided once (a trigger enforces pending -> approved | rejected | withdrawn) and never deleted; text
can only be redacted. Every listing filters by ``store_key IN (...)``. Mutating methods take the open transaction's
connection.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from typing import Any

import aiosqlite

from ..storage.database import Database, fetch_rows, in_clause, placeholders

PROPOSAL_COLUMNS = (
    "seq",
    "proposal_id",
    "store_key",
    "owner_uid",
    "kind",
    "target_memory_id",
    "fields",
    "reason",
    "content_sha256",
    "status",
    "authority",
    "batch_id",
    "model_id",
    "created_at",
    "reviewed_at",
    "reviewer",
    "review_reason",
    "final_fields",
    "memory_id",
    "redacted_at",
)
PROPOSAL_STATUSES = ("pending", "approved", "rejected", "withdrawn")


def proposal_digest(kind: str, target: str | None, fields: dict[str, Any]) -> str:
    """What makes two proposals "the same idea": kind, target and the normalised title and content."""
    text = "\x1f".join(
        [
            kind,
            target or "",
            " ".join(str(fields.get("title", "")).split()),
            " ".join(str(fields.get("content", "")).split()),
        ]
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _row(row: aiosqlite.Row) -> dict[str, Any]:
    proposal = dict(row)
    proposal["fields"] = json.loads(proposal["fields"] or "{}")
    proposal["final_fields"] = json.loads(proposal["final_fields"]) if proposal["final_fields"] else None
    return proposal


class DreamStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------ marks
    async def marks(
        self, store_key: str, owner_uid: str, *, conn: aiosqlite.Connection | None = None
    ) -> tuple[int, int]:
        """Stage B's ``(episode_seq, message_seq)`` high-water marks of one owner (0, 0 before the first run)."""
        rows = await fetch_rows(
            self.db,
            conn,
            "SELECT episode_seq, message_seq FROM booku_dreaming_marks WHERE store_key = ? AND owner_uid = ?",
            [store_key, owner_uid],
        )
        return (int(rows[0]["episode_seq"]), int(rows[0]["message_seq"])) if rows else (0, 0)

    async def advance_marks(
        self,
        conn: aiosqlite.Connection,
        store_key: str,
        owner_uid: str,
        *,
        expected: tuple[int, int],
        episode_seq: int,
        message_seq: int,
    ) -> bool:
        """Move both marks, only if they still are ``expected`` (another run did not commit meanwhile)."""
        current = await self.marks(store_key, owner_uid, conn=conn)
        if current != expected:
            return False
        await conn.execute(
            "INSERT INTO booku_dreaming_marks (store_key, owner_uid, episode_seq, message_seq, runs, updated_at) "
            "VALUES (?, ?, ?, ?, 1, ?) ON CONFLICT (store_key, owner_uid) DO UPDATE SET "
            "episode_seq = excluded.episode_seq, message_seq = excluded.message_seq, runs = runs + 1, "
            "updated_at = excluded.updated_at",
            [store_key, owner_uid, episode_seq, max(message_seq, current[1]), time.time()],
        )
        return True

    # -------------------------------------------------------- proposals
    async def known_digests(self, store_key: str, digests: Sequence[str], *, conn: aiosqlite.Connection) -> set[str]:
        clause, params = in_clause("content_sha256", list(digests))
        rows = await fetch_rows(
            self.db,
            conn,
            f"SELECT content_sha256 FROM booku_dream_proposals WHERE store_key = ? AND {clause}",
            [store_key, *params],
        )
        return {row["content_sha256"] for row in rows}

    async def insert_proposal(
        self, conn: aiosqlite.Connection, proposal: dict[str, Any], evidence: Sequence[tuple[str, str, str]]
    ) -> None:
        """Insert a pending proposal and its evidence rows ``(kind, ref_id, via)``."""
        columns = (
            "proposal_id",
            "store_key",
            "owner_uid",
            "kind",
            "target_memory_id",
            "fields",
            "reason",
            "content_sha256",
            "batch_id",
            "model_id",
            "created_at",
        )
        values = {**proposal, "fields": json.dumps(proposal["fields"], ensure_ascii=False, sort_keys=True)}
        await conn.execute(
            f"INSERT INTO booku_dream_proposals ({', '.join(columns)}) VALUES ({placeholders(len(columns))})",
            [values[c] for c in columns],
        )
        await conn.executemany(
            "INSERT OR IGNORE INTO booku_proposal_evidence (proposal_id, kind, ref_id, via) VALUES (?, ?, ?, ?)",
            [(proposal["proposal_id"], kind, ref, via) for kind, ref, via in evidence],
        )

    async def proposals(
        self, proposal_ids: Sequence[str], *, store_keys: Sequence[str] | None, conn: aiosqlite.Connection | None = None
    ) -> dict[str, dict[str, Any]]:
        clause, params = in_clause("proposal_id", list(proposal_ids))
        if store_keys is not None:
            store_clause, store_params = in_clause("store_key", list(store_keys))
            clause, params = f"{clause} AND {store_clause}", params + store_params
        rows = await fetch_rows(
            self.db, conn, f"SELECT {', '.join(PROPOSAL_COLUMNS)} FROM booku_dream_proposals WHERE {clause}", params
        )
        return {row["proposal_id"]: _row(row) for row in rows}

    async def list_proposals(
        self,
        *,
        store_keys: Sequence[str],
        status: str | None,
        batch_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> tuple[list[dict[str, Any]], int]:
        """Proposals oldest first for the queue (newest first for decided ones), and how many match."""
        clause, params = in_clause("store_key", list(store_keys))
        if status:
            clause += " AND status = ?"
            params.append(status)
        if batch_id:
            clause += " AND batch_id = ?"
            params.append(batch_id)
        order = "seq" if status == "pending" else "seq DESC"
        rows = await self.db.fetch_all(
            f"SELECT {', '.join(PROPOSAL_COLUMNS)} FROM booku_dream_proposals WHERE {clause} ORDER BY {order} "
            f"LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        total = await self.db.fetch_value(f"SELECT COUNT(*) FROM booku_dream_proposals WHERE {clause}", params, 0)
        return [_row(row) for row in rows], int(total)

    async def status_counts(self, *, store_keys: Sequence[str] | None) -> dict[str, int]:
        clause, params = ("1", []) if store_keys is None else in_clause("store_key", list(store_keys))
        rows = await self.db.fetch_all(
            f"SELECT status, COUNT(*) AS n FROM booku_dream_proposals WHERE {clause} GROUP BY status", params
        )
        counts = {status: 0 for status in PROPOSAL_STATUSES}
        counts.update({row["status"]: int(row["n"]) for row in rows})
        return counts

    async def evidence(
        self, proposal_ids: Sequence[str], *, conn: aiosqlite.Connection | None = None
    ) -> dict[str, list[dict[str, str]]]:
        """Evidence rows ``{kind, ref_id, via}`` per proposal."""
        clause, params = in_clause("proposal_id", list(proposal_ids))
        rows = await fetch_rows(
            self.db,
            conn,
            f"SELECT proposal_id, kind, ref_id, via FROM booku_proposal_evidence "
            f"WHERE {clause} ORDER BY proposal_id, kind, ref_id",
            params,
        )
        found: dict[str, list[dict[str, str]]] = {pid: [] for pid in proposal_ids}
        for row in rows:
            found.setdefault(row["proposal_id"], []).append(
                {"kind": row["kind"], "ref_id": row["ref_id"], "via": row["via"]}
            )
        return found

    async def proposals_citing(self, conn: aiosqlite.Connection, ref_ids: Sequence[str]) -> list[str]:
        clause, params = in_clause("ref_id", list(ref_ids))
        rows = await fetch_rows(
            self.db, conn, f"SELECT DISTINCT proposal_id FROM booku_proposal_evidence WHERE {clause}", params
        )
        return [row["proposal_id"] for row in rows]

    async def decide(
        self,
        conn: aiosqlite.Connection,
        proposal_id: str,
        *,
        status: str,
        reviewer: str,
        review_reason: str = "",
        final_fields: dict[str, Any] | None = None,
        memory_id: str | None = None,
        now: float | None = None,
    ) -> bool:
        """pending -> ``status``; False when the proposal was not pending any more."""
        cur = await conn.execute(
            "UPDATE booku_dream_proposals SET status = ?, reviewed_at = ?, reviewer = ?, review_reason = ?, "
            "final_fields = ?, memory_id = ? WHERE proposal_id = ? AND status = 'pending'",
            [
                status,
                now or time.time(),
                reviewer,
                review_reason,
                json.dumps(final_fields, ensure_ascii=False, sort_keys=True) if final_fields is not None else None,
                memory_id,
                proposal_id,
            ],
        )
        return cur.rowcount == 1

    async def withdraw_and_redact(
        self, conn: aiosqlite.Connection, proposal_id: str, *, reason: str, now: float
    ) -> None:
        """A pending proposal whose every source was retracted: withdrawn, and its text removed."""
        await conn.execute(
            "UPDATE booku_dream_proposals SET status = 'withdrawn', reviewed_at = ?, reviewer = 'booku-retraction', "
            "review_reason = ?, fields = '{}', reason = '', final_fields = NULL, redacted_at = ? "
            "WHERE proposal_id = ? AND status = 'pending'",
            [now, reason, now, proposal_id],
        )

    async def redact(self, conn: aiosqlite.Connection, proposal_id: str, *, now: float) -> None:
        """Remove the text of a decided (rejected or withdrawn) proposal; its decision and digest stay."""
        await conn.execute(
            "UPDATE booku_dream_proposals SET fields = '{}', reason = '', redacted_at = ? "
            "WHERE proposal_id = ? AND redacted_at = 0 AND final_fields IS NULL AND status IN ('rejected', "
            "'withdrawn')",
            [now, proposal_id],
        )

    # ------------------------------------------------------- provenance
    async def add_provenance(
        self,
        conn: aiosqlite.Connection,
        *,
        memory_id: str,
        proposal_id: str,
        store_key: str,
        approved_by: str,
        now: float,
    ) -> None:
        await conn.execute(
            "INSERT OR IGNORE INTO booku_memory_provenance (memory_id, proposal_id, store_key, approved_at, "
            "approved_by) "
            "VALUES (?, ?, ?, ?, ?)",
            [memory_id, proposal_id, store_key, now, approved_by],
        )

    async def provenance_of(self, memory_ids: Sequence[str], *, store_keys: Sequence[str]) -> dict[str, list[str]]:
        clause, params = in_clause("memory_id", list(memory_ids))
        store_clause, store_params = in_clause("store_key", list(store_keys))
        rows = await self.db.fetch_all(
            f"SELECT memory_id, proposal_id FROM booku_memory_provenance WHERE {clause} "
            f"AND {store_clause} ORDER BY approved_at",
            [*params, *store_params],
        )
        found: dict[str, list[str]] = {}
        for row in rows:
            found.setdefault(row["memory_id"], []).append(row["proposal_id"])
        return found

    # ------------------------------------------------------------ flags
    async def add_flag(
        self,
        conn: aiosqlite.Connection,
        *,
        memory_id: str,
        store_key: str,
        proposal_id: str,
        entry_id: str,
        reason: str,
        now: float,
    ) -> int:
        cur = await conn.execute(
            "INSERT INTO booku_review_flags (memory_id, store_key, proposal_id, entry_id, reason, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [memory_id, store_key, proposal_id, entry_id, reason, now],
        )
        assert cur.lastrowid is not None  # set by every INSERT
        return int(cur.lastrowid)

    async def flags(
        self,
        *,
        store_keys: Sequence[str],
        open_only: bool = True,
        flag_ids: Sequence[int] | None = None,
        limit: int = 100,
        conn: aiosqlite.Connection | None = None,
    ) -> list[dict[str, Any]]:
        clause, params = in_clause("store_key", list(store_keys))
        if open_only:
            clause += " AND resolved_at = 0"
        if flag_ids is not None:
            id_clause, id_params = in_clause("flag_id", list(flag_ids))
            clause, params = f"{clause} AND {id_clause}", params + id_params
        rows = await fetch_rows(
            self.db, conn, f"SELECT * FROM booku_review_flags WHERE {clause} ORDER BY flag_id LIMIT ?", [*params, limit]
        )
        return [dict(row) for row in rows]

    async def resolve_flag(
        self, conn: aiosqlite.Connection, flag_id: int, *, resolution: str, resolved_by: str, note: str, now: float
    ) -> bool:
        cur = await conn.execute(
            "UPDATE booku_review_flags SET resolved_at = ?, resolution = ?, resolved_by = ?, note = ? "
            "WHERE flag_id = ? AND resolved_at = 0",
            [now, resolution, resolved_by, note, flag_id],
        )
        return cur.rowcount == 1

    async def open_flags_of(self, conn: aiosqlite.Connection, memory_id: str) -> int:
        rows = await fetch_rows(
            self.db,
            conn,
            "SELECT COUNT(*) AS n FROM booku_review_flags WHERE memory_id = ? AND resolved_at = 0",
            [memory_id],
        )
        return int(rows[0]["n"])

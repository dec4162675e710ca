"""Writes of records: insert, update, hard delete, import, activation counts, each with its revision, audit row,
keyword row and vector-outbox entry in the caller's transaction.

Every mutating method takes the open transaction's connection (or yields a plan for the caller's), so the record,
its tags, its keyword-index row, its revision snapshot, its audit row and its outbox entry are written atomically.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import aiosqlite

from ..scope import WriteContext
from .database import placeholders
from .keyword_rows import KEYWORD_DELETE_SQL, KeywordRow, keyword_row_plan
from .mirrors.keyword_mirror import JOURNAL_INSERT_SQL
from .record_reads import RecordReads
from .record_rows import (
    EMBEDDED_COLUMNS,
    KEYWORD_INDEX_COLUMNS,
    PARTITION_COLUMNS,
    TAG_GROUPS,
    WRITABLE_COLUMNS,
    encode_column,
    read_record_plan,
    replace_tags_plan,
    row_to_record,
    snapshot_of,
)
from .shared_titles import title_crossing_plan
from .write_plans import (
    PlanStatement,
    WritePlan,
    run_plan,
    run_plan_in_transaction,
    savepoint_plan,
)


def _bump_plan(ids: Sequence[str], now: float) -> WritePlan[int]:
    """``bump_activation`` as a plan: the number of live records of ``ids`` counted."""
    rows = yield PlanStatement(
        f"UPDATE booku_memory_records SET activation_count = activation_count + 1, last_activated_at = ? "
        f"WHERE memory_id IN ({placeholders(len(ids))}) AND is_deleted = 0 RETURNING memory_id",
        [now, *ids],
        fetch=True,
    )
    return len(rows)


def _outbox_statement(memory_id: str, store_key: str, op: str, now: float) -> PlanStatement:
    return PlanStatement(
        "INSERT INTO booku_vector_outbox (memory_id, store_key, op, created_at) VALUES (?, ?, ?, ?)",
        [memory_id, store_key, op, now],
    )


class RecordWrites(RecordReads):
    """Every change of ``booku_memory_records``, written as plans (``write_plans``)."""

    # ----------------------------------------------------------------- writes
    async def insert(
        self,
        conn: aiosqlite.Connection,
        record: dict[str, Any],
        *,
        action: str = "create",
        actor: str | WriteContext = "agent",
        note: str = "",
        savepoint: str | None = None,
    ) -> dict[str, Any]:
        """Insert a new record with its tags, keyword row, first revision, audit row and outbox entry.

        Returns the stored record (every column, JSON decoded, plus the four tag lists), as ``get`` would read it.
        With ``savepoint`` the insert runs inside a savepoint of that name and a failure leaves none of its rows
        (see ``savepoint_plan``).
        """
        return await run_plan(
            conn, self.insert_plan(record, action=action, actor=actor, note=note, savepoint=savepoint)
        )

    def insert_plan(
        self,
        record: dict[str, Any],
        *,
        action: str = "create",
        actor: str | WriteContext = "agent",
        note: str = "",
        savepoint: str | None = None,
        keyword_rows: list[KeywordRow] | None = None,
    ) -> WritePlan[dict[str, Any]]:
        """``insert`` as a plan, for a caller that runs several writes in one thread hop (``run_plan``).

        With ``keyword_rows`` the keyword-index row is appended there for the caller to write after its
        savepoints (``deferred_keyword_rows_plan``), not written here.
        """
        now = time.time()
        ctx = WriteContext.of(actor)
        values = {column: record[column] for column in WRITABLE_COLUMNS if column in record}
        if "version" in record:
            # A record revived from its history continues its version sequence (revisions are unique per version).
            values["version"] = int(record["version"])
        values["authority"] = ctx.authority
        values.setdefault("author", ctx.actor)
        values.setdefault("time_zone", self.write_zone)
        values.setdefault("created_at", now)
        values.setdefault("updated_at", now)
        # A fact is true from when it happened, else from when it was told.
        values.setdefault("valid_from", float(values.get("event_start_at") or 0) or values["created_at"])
        return savepoint_plan(self._create_plan(values, record, action, ctx, note, now, keyword_rows), savepoint)

    def _create_plan(
        self,
        values: dict[str, Any],
        record: dict[str, Any],
        action: str,
        ctx: WriteContext,
        note: str,
        now: float,
        keyword_rows: list[KeywordRow] | None,
    ) -> WritePlan[dict[str, Any]]:
        stored = yield from self._insert_row_plan(values, record, keyword_rows)
        yield from self._revision_plan(stored, action, ctx, note, now, before=None)
        yield _outbox_statement(stored["memory_id"], stored["store_key"], "upsert", now)
        yield from title_crossing_plan(stored["store_key"], stored["title"], now, added=True)
        return stored

    def _insert_row_plan(
        self, values: dict[str, Any], record: dict[str, Any], keyword_rows: list[KeywordRow] | None = None
    ) -> WritePlan[dict[str, Any]]:
        """Insert the row, its tags and its keyword-index row; returns the stored record.

        The stored record is built from the inserted row (``RETURNING *`` brings the defaults and the rid) and the
        tag rows just written, instead of reading both back.
        """
        columns = list(values)
        rows = yield PlanStatement(
            f"INSERT INTO booku_memory_records ({', '.join(columns)}) VALUES ({placeholders(len(columns))}) "
            f"RETURNING *",
            [encode_column(c, values[c]) for c in columns],
            fetch=True,
        )
        stored = row_to_record(rows[0])
        stored.update((yield from replace_tags_plan(stored["memory_id"], record)))
        yield from keyword_row_plan(stored, deferred=keyword_rows)
        return stored

    async def update(
        self,
        conn: aiosqlite.Connection,
        memory_id: str,
        changes: dict[str, Any],
        *,
        action: str,
        actor: str | WriteContext = "agent",
        note: str = "",
        touch: bool = True,
        savepoint: str | None = None,
    ) -> dict[str, Any] | None:
        """Apply changes (columns and/or tag groups) and record a new revision.

        Tag groups absent from ``changes`` are kept (reference bug B3). Returns the new record, or None when the id
        does not exist. The vector is queued for a refresh only when embedded text or its partition changed. With
        ``savepoint`` the update runs inside a savepoint of that name and a failure leaves none of its rows.
        """
        return await run_plan(
            conn,
            self.update_plan(
                memory_id, changes, action=action, actor=actor, note=note, touch=touch, savepoint=savepoint
            ),
        )

    def update_plan(
        self,
        memory_id: str,
        changes: dict[str, Any],
        *,
        action: str,
        actor: str | WriteContext = "agent",
        note: str = "",
        touch: bool = True,
        savepoint: str | None = None,
        keyword_rows: list[KeywordRow] | None = None,
    ) -> WritePlan[dict[str, Any] | None]:
        """``update`` as a plan, for a caller that runs several writes in one thread hop (``run_plan``).

        ``keyword_rows`` as in ``insert_plan``.
        """
        plan = self._update_plan(memory_id, changes, action, WriteContext.of(actor), note, touch, keyword_rows)
        return savepoint_plan(plan, savepoint)

    def _update_plan(
        self,
        memory_id: str,
        changes: dict[str, Any],
        action: str,
        ctx: WriteContext,
        note: str,
        touch: bool,
        keyword_rows: list[KeywordRow] | None = None,
    ) -> WritePlan[dict[str, Any] | None]:
        before = yield from read_record_plan(memory_id)
        if before is None:
            return None
        now = time.time()
        columns = {c: v for c, v in changes.items() if c in WRITABLE_COLUMNS and c != "memory_id"}
        tag_changes = {g: changes[g] for g in TAG_GROUPS.values() if g in changes}
        if touch:
            columns["updated_at"] = now
        assignments = "".join(f"{c} = ?, " for c in columns)
        rows = yield PlanStatement(
            f"UPDATE booku_memory_records SET {assignments}version = version + 1 WHERE memory_id = ? RETURNING *",
            [*(encode_column(c, v) for c, v in columns.items()), memory_id],
            fetch=True,
        )
        after = row_to_record(rows[0])
        if tag_changes:
            merged_tags = {g: tag_changes.get(g, before[g]) for g in TAG_GROUPS.values()}
            after.update((yield from replace_tags_plan(memory_id, merged_tags)))
        else:
            after.update({g: list(before[g]) for g in TAG_GROUPS.values()})
        if any(before.get(c) != after.get(c) for c in KEYWORD_INDEX_COLUMNS) or tag_changes:
            # A move to another store changes the row's store token, not only its text.
            yield from keyword_row_plan(after, deferred=keyword_rows)
        yield from self._revision_plan(after, action, ctx, note, now, before=before)
        if any(before.get(c) != after.get(c) for c in (*EMBEDDED_COLUMNS, *PARTITION_COLUMNS)):
            yield _outbox_statement(memory_id, before["store_key"], "upsert", now)
            if before["store_key"] != after["store_key"]:
                yield _outbox_statement(memory_id, after["store_key"], "upsert", now)
        if (before["store_key"], before["title"]) != (after["store_key"], after["title"]):
            yield from title_crossing_plan(before["store_key"], before["title"], now, added=False)
            yield from title_crossing_plan(after["store_key"], after["title"], now, added=True)
        return after

    async def hard_delete(
        self, conn: aiosqlite.Connection, memory_ids: Sequence[str], *, actor: str | WriteContext = "agent"
    ) -> int:
        """Remove rows for good; the last snapshot stays in the revision table, the vector goes through the outbox."""
        existing = await self.get_many(memory_ids, include_deleted=True, conn=conn)
        records = [dict(record) for record in existing.values()]
        await run_plan(conn, self._hard_delete_plan(records, WriteContext.of(actor), time.time()))
        return len(existing)

    def _hard_delete_plan(self, records: Sequence[dict[str, Any]], ctx: WriteContext, now: float) -> WritePlan[None]:
        for record in records:
            yield from self._revision_plan(
                {**record, "version": record["version"] + 1}, "hard_delete", ctx, "", now, before=record, deleted=True
            )
            yield PlanStatement(KEYWORD_DELETE_SQL, [record["rid"]])
            yield PlanStatement(JOURNAL_INSERT_SQL, [record["rid"]])
            yield PlanStatement("DELETE FROM booku_memory_tags WHERE memory_id = ?", [record["memory_id"]])
            yield PlanStatement("DELETE FROM booku_memory_records WHERE memory_id = ?", [record["memory_id"]])
            yield _outbox_statement(record["memory_id"], record["store_key"], "delete", now)
            yield from title_crossing_plan(record["store_key"], record["title"], now, added=False)

    async def bump_activation(self, memory_ids: Sequence[str], *, now: float | None = None) -> int:
        """Count one activation of each live record of ``memory_ids``: one UPDATE for all of them (the reference did
        one transaction per item), in one hop to the writer's thread (``run_plan_in_transaction``; every retrieval
        ends with it). Returns how many records were counted."""
        ids = list(dict.fromkeys(memory_ids))
        if not ids:
            return 0
        return await run_plan_in_transaction(self.db, _bump_plan(ids, now or time.time()))

    @staticmethod
    def set_embedded_hashes_plan(hashes: dict[str, str]) -> WritePlan[None]:
        """Record which text each record's stored vector embeds (``{memory_id: text_hash}``), in one statement.

        Why one statement: the vector drain settles a whole flush (a hundred records or more) at once, and a
        statement per record was a thread hop per record inside the writer's transaction.
        """
        if hashes:
            yield PlanStatement(
                "UPDATE booku_memory_records SET embedded_text_hash = ? WHERE memory_id = ?",
                [(digest, memory_id) for memory_id, digest in hashes.items()],
                many=True,
            )

    def _revision_plan(
        self,
        record: dict[str, Any],
        action: str,
        ctx: WriteContext,
        note: str,
        now: float,
        *,
        before: dict[str, Any] | None,
        deleted: bool = False,
    ) -> WritePlan[None]:
        """One history snapshot and one append-only audit row per changed record, in the caller's transaction."""
        after_json = json.dumps(snapshot_of(record), ensure_ascii=False, sort_keys=True)
        yield PlanStatement(
            "INSERT INTO booku_memory_revisions (memory_id, version, action, snapshot, actor, note, created_at, "
            "authority) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [record["memory_id"], record["version"], action, after_json, ctx.actor, note, now, ctx.authority],
        )
        yield PlanStatement(
            "INSERT INTO booku_audit_log (at, authority, actor, cause, batch_id, action, memory_id, owner_uid, "
            "store_key, version, before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                now,
                ctx.authority,
                ctx.actor,
                ctx.cause or note,
                ctx.batch_id,
                action,
                record["memory_id"],
                record["owner_uid"],
                record["store_key"],
                record["version"],
                None if before is None else json.dumps(snapshot_of(before), ensure_ascii=False, sort_keys=True),
                None if deleted else after_json,
            ],
        )

    async def import_record(
        self, conn: aiosqlite.Connection, record: dict[str, Any], revisions: Sequence[dict[str, Any]]
    ) -> bool:
        """Insert an exported record exactly as it was (version, timestamps, history). False if the id exists."""
        return await run_plan(conn, self._import_plan(record, revisions, time.time()))

    def _import_plan(self, record: dict[str, Any], revisions: Sequence[dict[str, Any]], now: float) -> WritePlan[bool]:
        found = yield PlanStatement(
            "SELECT 1 FROM booku_memory_records WHERE memory_id = ?", [record["memory_id"]], fetch=True
        )
        if found:
            return False
        values = {c: record[c] for c in WRITABLE_COLUMNS if c in record}
        values["version"] = int(record.get("version", 1))
        stored = yield from self._insert_row_plan(values, record)
        revision_rows = [
            (
                record["memory_id"],
                r["version"],
                r["action"],
                json.dumps(r["snapshot"], ensure_ascii=False, sort_keys=True),
                r.get("actor", "agent"),
                r.get("note", ""),
                r["created_at"],
            )
            for r in revisions
        ]
        if revision_rows:
            yield PlanStatement(
                "INSERT OR IGNORE INTO booku_memory_revisions (memory_id, version, action, snapshot, actor, note, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                revision_rows,
                many=True,
            )
        yield _outbox_statement(stored["memory_id"], stored["store_key"], "upsert", now)
        yield from title_crossing_plan(stored["store_key"], stored["title"], now, added=True)
        return True

    async def enqueue_all_vectors(self, conn: aiosqlite.Connection) -> int:
        """Queue every live record for a vector rebuild (reindex); returns how many.

        Rows already queued stay: a pending removal (a record deleted a moment ago) must still reach an index that
        a crash leaves undropped, and the drain handles several rows of one record as one."""
        cur = await conn.execute(
            "INSERT INTO booku_vector_outbox (memory_id, store_key, op, created_at) "
            "SELECT memory_id, store_key, 'upsert', ? FROM booku_memory_records WHERE is_deleted = 0 ORDER BY rid",
            [time.time()],
        )
        return cur.rowcount

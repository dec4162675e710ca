"""Reads of records: by id (whole rows, ranking columns, a few columns), listings, counts, time windows, history.

Reads use the database's reader connection, and several statements take one hop to its worker thread
(``write_plans.run_plan``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Any, cast

import aiosqlite

from .database import Database, placeholders
from .fts_plan import KeywordPlanner
from .fts_store_stats import ScopedKeywordStatistics
from .mirrors.keyword_mirror import MemoryKeywordIndex
from .record_columns import CANDIDATE_COLUMNS, CANDIDATE_KEYS, decode_candidate
from .record_filter import RecordFilter, escape_like
from .record_rows import columns_plan, read_record_plan, row_to_record, tags_plan
from .rows import CandidateRow, RecordRow
from .shared_titles import shared_titles_plan
from .write_plans import PlanStatement, WritePlan, run_plan, run_plan_here

# What a write's merge decision reads of each neighbour (``RecordRepository.merge_candidates_plan``): the eligibility
# checks (folder, type, person),
# the text overlap test; and the update check (``logic.supersession``), which skips a memory already superseded
# and, for a dated write, a dated memory.
MERGE_CHECK_COLUMNS = (
    "memory_id",
    "folder_id",
    "memory_type",
    "person_id",
    "content",
    "superseded_by",
    "event_start_at",
)
# What the vector drain reads of each record (``RecordRepository.vector_sources``): its partition and embedded text.
VECTOR_SOURCE_COLUMNS = ("memory_id", "store_key", "bucket", "status", "is_deleted", "title", "content")


def _find_person_query(
    person_id: str, store_keys: Sequence[str] | None, statuses: Sequence[str] | None
) -> tuple[str, list[Any]]:
    """The id of the most recently updated person record of ``person_id`` (``find_person_plan``)."""
    flt = RecordFilter(store_keys=store_keys, memory_types=("person",), person_id=person_id, statuses=statuses)
    where, params = flt.where()
    return f"SELECT r.memory_id FROM booku_memory_records r WHERE {where} ORDER BY r.updated_at DESC LIMIT 1", params


def superseded_of_sql(count: int) -> str:
    """The live records that name one of ``count`` ids as their successor (``RecordReads.superseded_of``). The
    condition of migration 0014's partial index is repeated: SQLite uses a partial index only when the query
    implies its condition, and an ``IN`` list does not, so without it every retrieval scanned the whole table."""
    return (
        f"SELECT memory_id, superseded_by FROM booku_memory_records WHERE superseded_by IN ({placeholders(count)}) "
        "AND superseded_by != '' AND is_deleted = 0 ORDER BY superseded_at, rid"
    )


def written_beside_sql(seeds: Sequence[tuple[str, str, int]], radius: int, flt: RecordFilter) -> tuple[str, list[Any]]:
    """The query of ``RecordReads.written_beside``: one rowid range per seed. ``NOT INDEXED`` keeps SQLite on the
    rowid ranges: given the filter's store and bucket it would walk the whole store through their index instead."""
    where, params = flt.where()
    near = " OR ".join("(r.store_key = ? AND r.bucket = ? AND r.rid BETWEEN ? AND ?)" for _ in seeds)
    bounds = [value for key, bucket, rid in seeds for value in (key, bucket, rid - radius, rid + radius)]
    return (
        f"SELECT r.memory_id FROM booku_memory_records r NOT INDEXED WHERE {where} AND ({near})",
        [*params, *bounds],
    )


def _with_keyword(where: str, params: list[Any], keyword: str) -> tuple[str, list[Any]]:
    """``where`` narrowed to records whose title, content or id contains ``keyword`` literally (listings, counts)."""
    pattern = f"%{escape_like(keyword)}%"
    like = "LIKE ? ESCAPE '\\'"
    return (
        f"{where} AND (r.title {like} OR r.content {like} OR r.memory_id {like})",
        [*params, pattern, pattern, pattern],
    )


class RecordReads:
    """Reads of ``booku_memory_records`` and its tags and revisions; the state is set by ``RecordRepository``."""

    db: Database
    write_zone: str
    keyword_planner: KeywordPlanner
    scoped_statistics: ScopedKeywordStatistics
    memory_keywords: MemoryKeywordIndex

    async def get_many(
        self, memory_ids: Iterable[str], *, include_deleted: bool = False, conn: aiosqlite.Connection | None = None
    ) -> dict[str, RecordRow]:
        """Records (with tags) by id; unknown ids are simply absent. Two queries whatever the count (per 500 ids),
        run in one hop to the connection's worker thread (``run_plan``): every retrieval reads its results here,
        and under load a hop costs about as much as one of these queries."""
        ids = list(dict.fromkeys(i for i in memory_ids if i))
        if not ids:
            return {}
        return await run_plan(conn or self.db.reader, self._get_many_plan(ids, include_deleted=include_deleted))

    @staticmethod
    def _get_many_plan(ids: Sequence[str], *, include_deleted: bool) -> WritePlan[dict[str, RecordRow]]:
        """``get_many`` as a plan: every column, then the tags."""
        records = yield from columns_plan(ids, ("*",), include_deleted=include_deleted, decode=row_to_record)
        yield from tags_plan(records)
        return cast("dict[str, RecordRow]", records)

    async def candidates(
        self,
        memory_ids: Iterable[str],
        *,
        with_tags: bool,
        tags_only_for: Iterable[str] | None = None,
        as_of_last_read: bool = False,
    ) -> dict[str, CandidateRow]:
        """The columns ranking needs of each live candidate (``CANDIDATE_COLUMNS``, tags only when asked, and then
        only for ``tags_only_for`` when given: tag bonuses apply to vector hits, not to keyword-only candidates).

        Why not ``get_many``: a retrieval weighs about a hundred candidates and returns ten. Decoding every column
        of every candidate was the largest cost left in a retrieval over a large store; the
        full rows are read for the results only. The rows and the tags are read in one hop to the reader's worker
        thread (``run_plan``): an EPA retrieval reads candidates twice on its critical path (before and after its
        second vector pass), and under load each hop saved (a hand-over of the GIL) is worth as much as a query.
        Once the keyword index is loaded, the rows come from its in-memory copy (``storage.mirrors.candidate_rows``)
        in that same hop, and only the ids it does not hold are read in SQL.

        ``as_of_last_read``: a second read within one retrieval may take the rows held as the last read left them,
        without a hop (``MemoryKeywordIndex.held_candidates``); only the ids not held are read as above.
        """
        ids = list(memory_ids)
        tags_for = None if not with_tags else set(ids) if tags_only_for is None else set(tags_only_for)
        if as_of_last_read:
            snapshot = self.memory_keywords.held_candidates(ids, tags_for)
            if snapshot is not None:
                found, missing = snapshot
                if missing:
                    found.update(await self.candidates(missing, with_tags=with_tags, tags_only_for=tags_for))
                return found
        held = await self.memory_keywords.candidates(
            ids, tags_for, lambda raw, missing: run_plan_here(raw, self._candidates_plan(missing, tags_for))
        )
        if held is not None:
            return held
        return await run_plan(self.db.reader, self._candidates_plan(ids, tags_for))

    @staticmethod
    def _candidates_plan(memory_ids: Sequence[str], tags_for: set[str] | None) -> WritePlan[dict[str, CandidateRow]]:
        """``candidates`` as a plan: the columns, then the tags of the rows found among ``tags_for`` (no tags read
        when it is None)."""
        found = yield from columns_plan(
            memory_ids,
            CANDIDATE_COLUMNS,
            decode=lambda row: dict(zip(CANDIDATE_KEYS, decode_candidate(row), strict=False)),
        )
        tagged = {key: row for key, row in found.items() if key in tags_for} if tags_for is not None else {}
        if tagged:
            yield from tags_plan(tagged)
        return cast("dict[str, CandidateRow]", found)

    async def written_beside(
        self, seeds: Sequence[tuple[str, str, int]], radius: int, flt: RecordFilter, *, exclude: Iterable[str] = ()
    ) -> list[str]:
        """The ids of the records that ``flt`` admits, written within ``radius`` positions (``rid``) of a seed in
        the seed's partition (``(store_key, bucket, rid)``), ``exclude`` left out (``written_beside_sql``).

        Why: retrieval lifts the memories written next to a strong hit (``logic.neighbours``), but only among the
        routes' candidates, and in a big store the turn that answers a question is seldom one of them."""
        if radius < 1 or not seeds:
            return []
        known = set(exclude)
        rows = await self.db.fetch_all(*written_beside_sql(seeds, radius, flt))
        return [row["memory_id"] for row in rows if row["memory_id"] not in known]

    async def rows_in_time_windows(
        self, windows: Sequence[tuple[float, float]], flt: RecordFilter, *, limit: int
    ) -> list[dict[str, Any]]:
        """The records whose time falls in one of ``windows`` (epoch ``[start, end)``), newest first, as
        ``{"memory_id", "created_at", "event_start_at", "event_end_at", "time_zone"}``: what deciding which day
        each one is needs (``time_anchor.memory_days``).

        A record's time is its event window when it has one (any overlap counts), else its creation time; the two
        kinds are read separately so each uses its (store_key, time) index (migration 0009).
        """
        if not windows or limit <= 0:
            return []
        where, params = flt.where()
        created = " OR ".join("(r.created_at >= ? AND r.created_at < ?)" for _ in windows)
        events = " OR ".join("(r.event_start_at < ? AND max(r.event_end_at, r.event_start_at) >= ?)" for _ in windows)
        columns = "r.memory_id, r.created_at, r.event_start_at, r.event_end_at, r.time_zone"
        rows = await self.db.fetch_all(
            f"SELECT {columns}, r.created_at AS t FROM booku_memory_records r WHERE {where} "
            f"AND r.event_start_at <= 0 AND ({created}) ORDER BY r.created_at DESC LIMIT ?",
            [*params, *(bound for window in windows for bound in window), limit],
        )
        rows += await self.db.fetch_all(
            f"SELECT {columns}, r.event_start_at AS t FROM booku_memory_records r WHERE {where} "
            f"AND r.event_start_at > 0 AND ({events}) ORDER BY r.event_start_at DESC LIMIT ?",
            [*params, *(bound for start, end in windows for bound in (end, start)), limit],
        )
        rows = sorted(rows, key=lambda row: -row["t"])[:limit]
        return [
            {key: row[key] for key in ("memory_id", "created_at", "event_start_at", "event_end_at", "time_zone")}
            for row in rows
        ]

    async def time_zones(self, memory_ids: Iterable[str]) -> dict[str, str]:
        """The zone each record's times were written in (``""`` when unknown), by id; one query."""
        ids = list(dict.fromkeys(i for i in memory_ids if i))
        if not ids:
            return {}
        rows = await self.db.fetch_all(
            f"SELECT memory_id, time_zone FROM booku_memory_records WHERE memory_id IN ({','.join('?' * len(ids))})",
            ids,
        )
        return {row["memory_id"]: row["time_zone"] for row in rows}

    @staticmethod
    def merge_candidates_plan(memory_ids: Iterable[str]) -> WritePlan[dict[str, dict[str, Any]]]:
        """What a write's merge decision needs of each live neighbour (``MERGE_CHECK_COLUMNS``), by id, read as a
        step of the group commit's plan (inside its transaction, in the same thread hop as its writes).

        Why not ``get_many``: a group commit checks up to eight neighbours per write, and decoding every column and
        the tags of each was a large share of a batch's Python time; the chosen target is re-read in full inside
        the write's transaction anyway.
        """
        return (yield from columns_plan(memory_ids, MERGE_CHECK_COLUMNS))

    async def superseded_of(self, memory_ids: Iterable[str], *, conn=None) -> dict[str, list[str]]:
        """The reverse of ``superseded_by``: id → the ids of the live memories it replaced, oldest first, for each
        of ``memory_ids`` that replaced any. Read through the partial index of migration 0014
        (``superseded_of_sql``)."""
        ids = list(dict.fromkeys(memory_ids))
        found: dict[str, list[str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            rows = await (conn or self.db.reader).execute_fetchall(superseded_of_sql(len(chunk)), chunk)
            for memory_id, successor in rows:
                found.setdefault(successor, []).append(memory_id)
        return found

    async def vector_sources(self, memory_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """``VECTOR_SOURCE_COLUMNS`` of each record by id, deleted ones included (``is_deleted`` as a bool), plus
        ``title_shared``: whether its title is shared by many records of its store (``shared_titles``).

        Why not ``get_many``: the vector drain settles every write's outbox row, and decoding every column and the
        tags of each record was a share of the write path's cost; ``tier_of`` and the embedded text need these.
        """
        found = await self._columns(memory_ids, VECTOR_SOURCE_COLUMNS, include_deleted=True)
        shared = await run_plan(
            self.db.reader, shared_titles_plan((r["store_key"], r["title"]) for r in found.values())
        )
        for record in found.values():
            record["is_deleted"] = bool(record["is_deleted"])
            record["title_shared"] = (record["store_key"], record["title"]) in shared
        return found

    async def _columns(
        self, memory_ids: Iterable[str], columns: Sequence[str], *, include_deleted: bool = False
    ) -> dict[str, dict[str, Any]]:
        """``columns`` of each record by id, undecoded, live ones only unless ``include_deleted``; one query per
        500 ids, all in one hop (``columns_plan``)."""
        return await run_plan(self.db.reader, columns_plan(memory_ids, columns, include_deleted=include_deleted))

    async def get(self, memory_id: str, *, include_deleted: bool = False, conn=None) -> RecordRow | None:
        return (await self.get_many([memory_id], include_deleted=include_deleted, conn=conn)).get(memory_id)

    async def _attach_tags(self, records: dict[str, dict[str, Any]], conn=None) -> None:
        """Set the four tag lists of each of ``records`` (``tags_plan``), read on ``conn`` or the reader."""
        await run_plan(conn or self.db.reader, tags_plan(records))

    async def list_records(
        self,
        flt: RecordFilter,
        *,
        keyword: str | None = None,
        limit: int = 50,
        offset: int = 0,
        order_by: str = "r.updated_at DESC, r.rid DESC",
    ) -> list[dict[str, Any]]:
        """Structured listing (dashboard, list_memory_entries, recent digests)."""
        where, params = flt.where()
        if keyword:
            where, params = _with_keyword(where, params, keyword)
        rows = await self.db.fetch_all(
            f"SELECT r.* FROM booku_memory_records r WHERE {where} ORDER BY {order_by} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return await self._with_tags(rows)

    async def count_records(self, flt: RecordFilter, *, keyword: str | None = None) -> int:
        where, params = flt.where()
        if keyword:
            where, params = _with_keyword(where, params, keyword)
        return int(await self.db.fetch_value(f"SELECT COUNT(*) FROM booku_memory_records r WHERE {where}", params, 0))

    async def _with_tags(self, rows: Sequence[aiosqlite.Row]) -> list[dict[str, Any]]:
        records = {row["memory_id"]: row_to_record(row) for row in rows}
        await self._attach_tags(records)
        return [records[row["memory_id"]] for row in rows]

    async def bucket_counts(
        self, *, store_keys: Sequence[str] | None = None, folder_id: str | None = None
    ) -> dict[str, int]:
        flt = RecordFilter(store_keys=store_keys, buckets=None, folder_id=folder_id)
        where, params = flt.where()
        rows = await self.db.fetch_all(
            f"SELECT r.bucket, COUNT(*) AS n FROM booku_memory_records r WHERE {where} GROUP BY r.bucket", params
        )
        counts = {"memory": 0, "knowledge": 0}
        counts.update({row["bucket"]: int(row["n"]) for row in rows})
        return counts

    async def grouped_counts(self, column: str, flt: RecordFilter) -> dict[str, int]:
        """Counts by a column or by month (``column='month'``) for statistics."""
        expr = "strftime('%Y-%m', r.created_at, 'unixepoch')" if column == "month" else f"r.{column}"
        where, params = flt.where()
        rows = await self.db.fetch_all(
            f"SELECT {expr} AS k, COUNT(*) AS n FROM booku_memory_records r WHERE {where} GROUP BY k ORDER BY k", params
        )
        return {str(row["k"]): int(row["n"]) for row in rows}

    async def distinct_folders(self, *, store_keys: Sequence[str] | None = None) -> list[str]:
        flt = RecordFilter(store_keys=store_keys)
        where, params = flt.where()
        rows = await self.db.fetch_all(
            f"SELECT DISTINCT r.folder_id FROM booku_memory_records r WHERE {where} AND r.folder_id != '' "
            f"ORDER BY r.folder_id",
            params,
        )
        return [row["folder_id"] for row in rows]

    async def frequent_tags(self, *, store_keys: Sequence[str] | None, limit: int) -> dict[str, list[str]]:
        """The most used tags of live memories per group (``core``/``diffusion``/``opposing``), most used first."""
        flt = RecordFilter(store_keys=store_keys)
        where, params = flt.where()
        rows = await self.db.fetch_all(
            f"SELECT t.tag_type, t.tag_value, COUNT(*) AS uses FROM booku_memory_tags t "
            f"JOIN booku_memory_records r ON r.memory_id = t.memory_id "
            f"WHERE {where} AND t.tag_type IN ('core', 'diffusion', 'opposing') "
            f"GROUP BY t.tag_type, t.tag_value ORDER BY uses DESC, t.tag_value",
            params,
        )
        groups: dict[str, list[str]] = {"core": [], "diffusion": [], "opposing": []}
        for row in rows:
            if len(groups[row["tag_type"]]) < limit:
                groups[row["tag_type"]].append(row["tag_value"])
        return groups

    def find_person_plan(
        self, person_id: str, *, store_keys: Sequence[str] | None, statuses: Sequence[str] | None = None
    ) -> WritePlan[dict[str, Any] | None]:
        """The most recently updated live person record of ``person_id`` (with tags), or None, read inside the
        running transaction (``run_plan``), so a person created earlier in the same batch counts."""
        sql, params = _find_person_query(person_id, store_keys, statuses)
        rows = yield PlanStatement(sql, params, fetch=True)
        return (yield from self.read_plan(rows[0]["memory_id"])) if rows else None

    @staticmethod
    def read_plan(memory_id: str, *, include_deleted: bool = False) -> WritePlan[dict[str, Any] | None]:
        """``get`` as a plan step, read inside the running transaction (``run_plan``)."""
        record = yield from read_record_plan(memory_id)
        if record is None or (record["is_deleted"] and not include_deleted):
            return None
        return record

    async def history(self, memory_id: str) -> list[dict[str, Any]]:
        rows = await self.db.fetch_all(
            "SELECT version, action, snapshot, actor, note, created_at FROM booku_memory_revisions "
            "WHERE memory_id = ? ORDER BY version",
            [memory_id],
        )
        return [
            {
                "version": row["version"],
                "action": row["action"],
                "actor": row["actor"],
                "note": row["note"],
                "created_at": row["created_at"],
                "snapshot": json.loads(row["snapshot"]),
            }
            for row in rows
        ]

    async def iter_ids(self, *, batch: int = 500) -> AsyncIterator[list[str]]:
        """Every record id (deleted included), in insertion order, in pages."""
        last = 0
        while True:
            rows = await self.db.fetch_all(
                "SELECT rid, memory_id FROM booku_memory_records WHERE rid > ? ORDER BY rid LIMIT ?", [last, batch]
            )
            if not rows:
                return
            last = rows[-1]["rid"]
            yield [row["memory_id"] for row in rows]

    async def history_many(self, memory_ids: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        found: dict[str, list[dict[str, Any]]] = {i: [] for i in memory_ids}
        rows = await self.db.fetch_all(
            f"SELECT memory_id, version, action, snapshot, actor, note, created_at FROM booku_memory_revisions "
            f"WHERE memory_id IN ({placeholders(len(memory_ids))}) ORDER BY memory_id, version",
            list(memory_ids),
        )
        for row in rows:
            found[row["memory_id"]].append(
                {
                    "version": row["version"],
                    "action": row["action"],
                    "snapshot": json.loads(row["snapshot"]),
                    "actor": row["actor"],
                    "note": row["note"],
                    "created_at": row["created_at"],
                }
            )
        return found

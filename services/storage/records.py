"""SQL for memory records: rows, tags, the FTS5 keyword index, revisions and the vector outbox.

Every mutating method takes the open transaction's connection, so the record, its tags, its keyword-index row, its
revision snapshot, its audit row and its outbox entry are written atomically. A change is written as a plan of
statements run in one hop to aiosqlite's worker thread (``run_plan``). Reads use the database's reader connection.
Records travel as plain dicts (column name -> value, JSON lists decoded, plus the four tag lists).
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiosqlite

from ..logic.safe_regex import Matcher
from ..logic.segmentation import expression_terms, segment_for_index
from ..logic.text import keyword_title
from ..scope import WriteContext
from .database import Database, aiosqlite_core, placeholders
from .keyword_index import BM25_SQL_WEIGHTS
from .keyword_memory import JOURNAL_INSERT_SQL, JOURNAL_RESET_RID, TRIM_JOURNAL_SQL, MemoryKeywordIndex
from .keyword_plan import KeywordPlanner
from .keyword_scoped import ScopedKeywordStatistics, bm25, row_frequencies
from .record_columns import (
    CANDIDATE_COLUMNS,
    CANDIDATE_KEYS,
    TAG_GROUPS,
    decode_candidate,
    decode_list,
    tags_sql,
)
from .record_states import RowStateTest
from .regex_grep import run_regex_grep

JSON_LIST_COLUMNS = ("relation_memory_ids", "relation_aliases", "related_people", "domains")
JSON_OBJECT_COLUMNS = ("extra",)
BOOL_COLUMNS = ("is_deleted", "pinned", "protected", "anchor", "digested", "resolved")

# Columns a caller may set; rid/version/timestamps/counters are managed here.
WRITABLE_COLUMNS = (
    "memory_id", "owner_uid", "store_key", "title", "name", "folder_id", "bucket", "content", "source",
    "memory_type", "status", "person_id", "relation_memory_ids", "relation_aliases", "event_start_at",
    "event_end_at", "related_people", "knowledge_type", "address_or_coord", "place_type", "asset_type",
    "disposition_status", "procedure_type", "novelty_energy", "importance", "valence", "arousal", "domains",
    "pinned", "protected", "anchor", "digested", "resolved", "why_remembered", "extra", "document_id",
    "chunk_index", "is_deleted", "deleted_at", "created_at", "updated_at", "last_activated_at", "activation_count",
    "authority", "author", "valid_from", "superseded_at", "superseded_by", "time_zone",
)
# Changing any of these changes the embedded text, so the vector must be recomputed.
EMBEDDED_COLUMNS = ("title", "content")
# Changing any of these moves the vector to another partition (tier) or drops it.
PARTITION_COLUMNS = ("status", "bucket", "is_deleted", "store_key")
# Changing any of these changes the record's keyword-index row (its text or its store token).
KEYWORD_INDEX_COLUMNS = (*EMBEDDED_COLUMNS, "store_key")
# Inner FTS page of a keyword search, in multiples of the requested limit: first try, then the one deeper retry.
KEYWORD_SHALLOW_DEPTH = 3
KEYWORD_DEEP_DEPTH = 10


def keyword_depths(limit: int) -> tuple[int, int]:
    """How many of a keyword search's best-scored rows are checked against the caller's filters: first, then once
    deeper when the filters left fewer than ``limit`` (both keyword routes)."""
    return limit * KEYWORD_SHALLOW_DEPTH, max(limit * KEYWORD_DEEP_DEPTH, 1000)


# What a write's merge decision reads of each neighbour (``RecordRepository.merge_candidates_plan``): the eligibility
# checks (folder, type, person),
# the text overlap test; and the update check (``logic.supersession``), which skips a memory already superseded
# and, for a dated write, a dated memory.
MERGE_CHECK_COLUMNS = ("memory_id", "folder_id", "memory_type", "person_id", "content", "superseded_by",
                       "event_start_at")
# What the vector drain reads of each record (``RecordRepository.vector_sources``): its partition and embedded text.
VECTOR_SOURCE_COLUMNS = ("memory_id", "store_key", "bucket", "status", "is_deleted", "title", "content")
# booku_meta key a migration sets when the keyword index must be refilled from the records at the next start
# (segmentation needs jieba, which SQL cannot run).
KEYWORD_REBUILD_META_KEY = "keyword_index_rebuild"
# Columns of booku_memory_fts the query terms search; the ``store`` column only scopes the match.
TEXT_FTS_COLUMNS = "{title content tags}"


@dataclass(frozen=True)
class Visible:
    """One kind of record a search may see: a bucket, and the statuses it may have there (None: any)."""

    bucket: str
    statuses: tuple[str, ...] | None = None

    def admits(self, bucket: str, status: str) -> bool:
        return bucket == self.bucket and (self.statuses is None or status in self.statuses)


@dataclass
class RecordFilter:
    """Structured filters shared by listings, keyword search and grep. All conditions are ANDed."""

    store_keys: Sequence[str] | None = None
    buckets: Sequence[str] | None = ("memory",)
    statuses: Sequence[str] | None = None
    visible: Sequence[Visible] | None = None
    """Any of these kinds (ORed), on top of ``buckets`` and ``statuses``; None: no such condition, () none."""
    memory_types: Sequence[str] | None = None
    exclude_memory_types: Sequence[str] = ()
    folder_id: str | None = None
    person_id: str | None = None
    relation_of: str | None = None
    tag: str | None = None
    include_deleted: bool = False
    only_deleted: bool = False
    created_before: float | None = None
    extra_sql: list[str] = field(default_factory=list)
    extra_params: list[Any] = field(default_factory=list)

    def where(self, alias: str = "r") -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []

        def add_in(column: str, values: Sequence[Any] | None) -> None:
            if values is not None:
                clauses.append(f"{alias}.{column} IN ({placeholders(len(values))})" if values else "0")
                params.extend(values)

        add_in("store_key", self.store_keys)
        add_in("bucket", self.buckets)
        add_in("status", self.statuses)
        if self.visible is not None:
            kinds = []
            for kind in self.visible:
                if kind.statuses is None:
                    kinds.append(f"{alias}.bucket = ?")
                    params.append(kind.bucket)
                else:
                    kinds.append(f"({alias}.bucket = ? AND {alias}.status IN ({placeholders(len(kind.statuses))}))")
                    params.extend([kind.bucket, *kind.statuses])
            clauses.append(f"({' OR '.join(kinds)})" if kinds else "0")
        add_in("memory_type", self.memory_types)
        if self.exclude_memory_types:
            clauses.append(f"{alias}.memory_type NOT IN ({placeholders(len(self.exclude_memory_types))})")
            params.extend(self.exclude_memory_types)
        if self.only_deleted:
            clauses.append(f"{alias}.is_deleted = 1")
        elif not self.include_deleted:
            clauses.append(f"{alias}.is_deleted = 0")
        if self.folder_id is not None:
            clauses.append(f"{alias}.folder_id = ?")
            params.append(self.folder_id)
        if self.person_id is not None:
            clauses.append(f"{alias}.person_id = ?")
            params.append(self.person_id)
        if self.relation_of is not None:
            clauses.append(f"EXISTS (SELECT 1 FROM json_each({alias}.relation_memory_ids) j WHERE j.value = ?)")
            params.append(self.relation_of)
        if self.tag is not None:
            clauses.append(
                f"EXISTS (SELECT 1 FROM booku_memory_tags t WHERE t.memory_id = {alias}.memory_id AND t.tag_value = ?)"
            )
            params.append(self.tag)
        if self.created_before is not None:
            clauses.append(f"{alias}.created_at < ?")
            params.append(self.created_before)
        clauses.extend(self.extra_sql)
        params.extend(self.extra_params)
        return (" AND ".join(clauses) if clauses else "1"), params

    def state_test(self) -> RowStateTest | None:
        """This filter as a test of a record's (bucket, status, is_deleted), when those (and ``store_keys``, which
        the keyword index scopes itself) are all it checks; None when it has any other condition.

        Why: the in-memory keyword index keeps each row's bucket, status and deletion flag
        (``storage.keyword_memory``), so a retrieval's usual filter is applied there, before the best rows are
        taken, instead of by looking a hundred or more scattered rows up in SQL."""
        if (self.memory_types is not None or self.exclude_memory_types or self.folder_id is not None
                or self.person_id is not None or self.relation_of is not None or self.tag is not None
                or self.created_before is not None or self.extra_sql or self.extra_params):
            return None
        buckets = None if self.buckets is None else frozenset(self.buckets)
        statuses = None if self.statuses is None else frozenset(self.statuses)
        visible = None if self.visible is None else tuple(self.visible)
        include_deleted, only_deleted = self.include_deleted, self.only_deleted

        def test(bucket: str, status: str, is_deleted: bool) -> bool:
            if only_deleted:
                if not is_deleted:
                    return False
            elif is_deleted and not include_deleted:
                return False
            return ((buckets is None or bucket in buckets) and (statuses is None or status in statuses)
                    and (visible is None or any(kind.admits(bucket, status) for kind in visible)))

        return test


def store_token(store_key: str) -> str:
    """The one opaque FTS token that stands for a store in the keyword index's ``store`` column.

    Why a hash: store keys contain ``:`` and user ids, which the unicode61 tokenizer would split into several
    tokens shared between stores; ``s`` + 16 hex digits is one token, unique per store for any practical count.
    """
    return "s" + hashlib.sha1(store_key.encode("utf-8")).hexdigest()[:16]


def scoped_fts_query(fts_query: str, store_keys: Sequence[str] | None) -> str:
    """The MATCH expression of a keyword search: the query terms, limited to the readable stores inside FTS5.

    ``fts_query`` is ``build_fts_query``'s output. Limiting the store inside the index (not only in the outer WHERE)
    keeps a scoped search's recall when other stores hold most of the matching rows. ``None`` = every store.
    """
    terms = f"{TEXT_FTS_COLUMNS} : ({fts_query})"
    if store_keys is None:
        return terms
    tokens = " OR ".join(f'"{store_token(key)}"' for key in dict.fromkeys(store_keys))
    return f"store : ({tokens}) AND {terms}"


def escape_like(text: str) -> str:
    """Escape LIKE wildcards so user keywords match literally (reference bug B18)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


def row_to_record(row: aiosqlite.Row) -> dict[str, Any]:
    record = dict(row)
    # Most rows hold empty lists and objects: those skip the JSON parser (a third of this function's time).
    for column in JSON_LIST_COLUMNS:
        raw = record.get(column)
        record[column] = [] if not raw or raw == "[]" else decode_list(raw)
    for column in JSON_OBJECT_COLUMNS:
        raw = record.get(column)
        try:
            value = {} if not raw or raw == "{}" else json.loads(raw)
        except (TypeError, ValueError):
            value = {}
        record[column] = value if isinstance(value, dict) else {}
    for column in BOOL_COLUMNS:
        record[column] = bool(record.get(column))
    for group in TAG_GROUPS.values():
        record.setdefault(group, [])
    return record


def _encode(column: str, value: Any) -> Any:
    if column in JSON_LIST_COLUMNS:
        return json.dumps([str(v).strip() for v in (value or []) if str(v).strip()], ensure_ascii=False)
    if column in JSON_OBJECT_COLUMNS:
        return json.dumps(value or {}, ensure_ascii=False, sort_keys=True)
    if column in BOOL_COLUMNS:
        return 1 if value else 0
    return value


def snapshot_of(record: dict[str, Any]) -> dict[str, Any]:
    """The part of a record that history keeps (everything a revert restores)."""
    skip = {"rid", "embedded_text_hash"}
    return {k: v for k, v in record.items() if k not in skip}


# ------------------------------------------------------------------ write plans
# A write is a plan: a generator that yields the statements of one change, receives each statement's rows (for a
# SELECT or a RETURNING clause; ``[]`` otherwise) and returns the stored result. ``run_plan`` runs a whole plan in ONE
# hop to aiosqlite's worker thread: every awaited ``conn.execute`` is a round trip through that thread and back to
# the event loop, and an insert needs more than a dozen statements.
T = TypeVar("T")


@dataclass(frozen=True)
class PlanStatement:
    """One SQL statement of a write plan (also written by other store modules, e.g. the vector outbox's settling)."""

    sql: str
    params: Any = ()
    many: bool = False  # executemany over a list of parameter rows
    fetch: bool = False  # the plan needs the statement's rows (SELECT, RETURNING)


WritePlan = Generator[PlanStatement, list[sqlite3.Row], T]

def _run_plan_here(raw: sqlite3.Connection, plan: WritePlan[T]) -> T:
    """Run every statement of ``plan`` on ``raw`` in the calling thread (aiosqlite's worker thread).

    A failing statement's error is thrown into the plan, so a plan may answer it with more statements
    (``savepoint_plan`` rolls back); a plan that does not catch it ends, and the error propagates.
    """
    try:
        statement = next(plan)
        while True:
            try:
                rows: list[sqlite3.Row] = []
                if statement.many:
                    raw.executemany(statement.sql, statement.params)
                else:
                    cursor = raw.execute(statement.sql, statement.params)
                    if statement.fetch:
                        rows = cursor.fetchall()
                    cursor.close()
            except Exception as exc:
                statement = plan.throw(exc)
                continue
            statement = plan.send(rows)
    except StopIteration as done:
        return done.value


def _one_hop_runner(conn: aiosqlite.Connection) -> Callable[..., Awaitable[Any]] | None:
    """A runner that sends a whole plan to ``conn``'s worker thread in one hop, or None (see ``aiosqlite_core``)."""
    core = aiosqlite_core(conn)
    if core is None:
        return None
    execute, raw = core
    return functools.partial(execute, _run_plan_here, raw)


async def run_plan(conn: aiosqlite.Connection, plan: WritePlan[T]) -> T:
    """Run a write plan on the transaction's connection; returns the plan's result.

    The statements run in order on ``conn`` exactly as separate ``execute`` calls would, inside the caller's
    transaction; an error raised by a statement propagates and the rest of the plan does not run.
    """
    runner = _one_hop_runner(conn)
    if runner is not None:
        return await runner(plan)
    try:
        statement = next(plan)
        while True:
            try:
                rows: list[sqlite3.Row] = []
                if statement.many:
                    await conn.executemany(statement.sql, statement.params)
                elif statement.fetch:
                    rows = list(await conn.execute_fetchall(statement.sql, statement.params))
                else:
                    await conn.execute(statement.sql, statement.params)
            except Exception as exc:
                statement = plan.throw(exc)
                continue
            statement = plan.send(rows)
    except StopIteration as done:
        return done.value


async def run_plan_in_transaction(db: Database, plan: WritePlan[T]) -> T:
    """Run a write plan as a transaction of its own; returns the plan's result.

    BEGIN, the plan's statements and COMMIT take one hop to the writer's thread (``Database.run_in_transaction``),
    not three; an error raised by a statement or by the plan rolls the whole transaction back and propagates.
    Falls back to ``Database.transaction`` and ``run_plan`` when aiosqlite's one-hop core is missing.
    """
    if db.one_hop_transactions():
        return await db.run_in_transaction(functools.partial(_run_plan_here, plan=plan))
    async with db.transaction() as conn:
        return await run_plan(conn, plan)


def savepoint_plan(plan: WritePlan[T], savepoint: str | None) -> WritePlan[T]:
    """``plan`` inside ``SAVEPOINT savepoint``: when any of its statements (or its own code) fails, everything it
    wrote is rolled back to the savepoint and the error propagates; the enclosing transaction stays usable.

    Why inside the plan: the savepoint, the write and the release (or rollback) then cost one thread hop, not three.
    ``savepoint=None`` runs ``plan`` as it is. The name must be a plain SQL identifier chosen by the caller.
    """
    if savepoint is None:
        return (yield from plan)
    yield PlanStatement(f"SAVEPOINT {savepoint}")
    try:
        result = yield from plan
    except Exception:
        yield PlanStatement(f"ROLLBACK TO {savepoint}")
        yield PlanStatement(f"RELEASE {savepoint}")
        raise
    yield PlanStatement(f"RELEASE {savepoint}")
    return result


def _read_plan(memory_id: str) -> WritePlan[dict[str, Any] | None]:
    """The record as ``RecordRepository.get(include_deleted=True)`` reads it, seen from inside the transaction."""
    rows = yield PlanStatement("SELECT * FROM booku_memory_records WHERE memory_id = ?", [memory_id], fetch=True)
    if not rows:
        return None
    record = row_to_record(rows[0])
    tag_rows = yield PlanStatement(
        "SELECT tag_type, tag_value FROM booku_memory_tags WHERE memory_id = ? ORDER BY tag_type, position",
        [memory_id], fetch=True,
    )
    for group in TAG_GROUPS.values():
        record[group] = []
    for row in tag_rows:
        record[TAG_GROUPS[row["tag_type"]]].append(row["tag_value"])
    return record


def _replace_tags_plan(memory_id: str, source: dict[str, Any]) -> WritePlan[dict[str, list[str]]]:
    """Replace the record's tags with ``source``'s four groups (values stripped, duplicates dropped).

    Returns the groups as written, i.e. what reading the tags back would give.
    """
    yield PlanStatement("DELETE FROM booku_memory_tags WHERE memory_id = ?", [memory_id])
    written: dict[str, list[str]] = {}
    rows = []
    for tag_type, group in TAG_GROUPS.items():
        values: list[str] = []
        for value in source.get(group) or []:
            value = str(value).strip()
            if value and value not in values:
                values.append(value)
                rows.append((memory_id, tag_type, value, len(values)))
        written[group] = values
    if rows:
        yield PlanStatement(
            "INSERT INTO booku_memory_tags (memory_id, tag_type, tag_value, position) VALUES (?, ?, ?, ?)",
            rows, many=True,
        )
    return written


_KEYWORD_DELETE_SQL = "DELETE FROM booku_memory_fts WHERE rowid = ?"
_KEYWORD_INSERT_SQL = "INSERT INTO booku_memory_fts (rowid, title, content, tags, store) VALUES (?, ?, ?, ?, ?)"

KeywordRow = tuple[int, bool, list[Any]]
"""A keyword-index row held back for ``deferred_keyword_rows_plan``: (rid, replace an existing row first, values)."""


def _keyword_row_plan(record: dict[str, Any], *, replace: bool = True,
                      deferred: list[KeywordRow] | None = None) -> WritePlan[None]:
    """The record's keyword row: segmented title (unless only guessed, ``keyword_title``), content and tags, plus
    its store's token.

    ``replace=False`` skips deleting an old row (the full rebuild has emptied the table already). With
    ``deferred`` the row is segmented now but appended there, not written (see ``deferred_keyword_rows_plan``).
    """
    tags = " ".join(record.get("tags", []) + record.get("core_tags", []) + record.get("diffusion_tags", []))
    values = [record["rid"], _segmented(keyword_title(record["title"], record["content"])),
              _segmented(record["content"]), _segmented(tags),
              store_token(record["store_key"])]
    if deferred is not None:
        deferred.append((record["rid"], replace, values))
        return
    if replace:
        yield PlanStatement(_KEYWORD_DELETE_SQL, [record["rid"]])
    yield PlanStatement(_KEYWORD_INSERT_SQL, values)
    yield PlanStatement(JOURNAL_INSERT_SQL, [record["rid"]])


def deferred_keyword_rows_plan(rows: Sequence[KeywordRow]) -> WritePlan[None]:
    """Write keyword rows held back by a group commit (``deferred`` above), after its writes' savepoints.

    Why held back: FTS5 flushes its pending rows into a new segment at every SAVEPOINT and RELEASE, so a batch that
    wrote each keyword row inside its write's savepoint flushed (and later merged) one segment per write, about
    twice the cost of the row itself. Written here, the batch's rows reach FTS5 together and are flushed once, at
    COMMIT. The result is what writing them in order would leave: a record whose row is written twice in the batch
    (created, then merged into) ends with its last row, and an existing row is deleted first when the first of its
    writes asked for that.
    """
    final: dict[int, tuple[bool, list[Any]]] = {}
    for rid, replace, values in rows:
        earlier = final.get(rid)
        final[rid] = (replace if earlier is None else earlier[0], values)
    deletes = [(rid,) for rid, (replace, _) in final.items() if replace]
    if deletes:
        yield PlanStatement(_KEYWORD_DELETE_SQL, deletes, many=True)
    if final:
        yield PlanStatement(_KEYWORD_INSERT_SQL, [values for _, values in final.values()], many=True)
        yield PlanStatement(JOURNAL_INSERT_SQL, [(rid,) for rid in final], many=True)


SEGMENT_MEMO_SIZE = 512
"""Texts whose keyword-index segmentation ``presegment`` keeps for the write about to use it.

Why: jieba runs in Python, and inside a write plan it runs on the writer's
thread while the group commit waits. The group commit segments its batch's texts beforehand instead, while its
Chroma neighbour query runs (that query releases the GIL), so the plan finds them here. A few hundred entries cover
a batch (two texts per write) with room to spare; any text not found is segmented as before."""

_segment_memo: OrderedDict[str, str] = OrderedDict()


def presegment(texts: Iterable[str]) -> None:
    """Segment ``texts`` for the keyword index now, so a write plan that indexes them finds the result.

    The result is exactly ``segment_for_index(text)``; a text that fails to segment is left for the plan, which
    then fails as it would have (inside its savepoint).
    """
    for text in texts:
        if not text or text in _segment_memo:
            continue
        try:
            segmented = segment_for_index(text)
        except Exception:
            continue
        _segment_memo[text] = segmented
        while len(_segment_memo) > SEGMENT_MEMO_SIZE:
            try:
                _segment_memo.popitem(last=False)
            except KeyError:  # a plan on the writer's thread took the last entries meanwhile
                break


def _segmented(text: str) -> str:
    """``segment_for_index(text)``, from the ``presegment`` memo when the text was segmented beforehand."""
    found = _segment_memo.pop(text, None)  # a memo entry serves one write: the memo never goes stale
    return segment_for_index(text) if found is None else found


def _keyword_rows_plan(records: Iterable[dict[str, Any]]) -> WritePlan[None]:
    """Keyword rows of many records into an emptied index (the rebuild)."""
    for record in records:
        yield from _keyword_row_plan(record, replace=False)


def _columns_query(columns: Sequence[str], memory_ids: Sequence[str], *,
                   include_deleted: bool = False) -> tuple[str, list[str]]:
    """``columns`` of the records among ``memory_ids`` (at most 500 ids), live ones only unless ``include_deleted``."""
    live = "" if include_deleted else " AND is_deleted = 0"
    return (f"SELECT {', '.join(columns)} FROM booku_memory_records "
            f"WHERE memory_id IN ({placeholders(len(memory_ids))}){live}", list(memory_ids))


def _columns_plan(memory_ids: Iterable[str], columns: Sequence[str], *, include_deleted: bool = False,
                  decode: Callable[[sqlite3.Row], dict[str, Any]] = dict) -> WritePlan[dict[str, dict[str, Any]]]:
    """``columns`` of each record among ``memory_ids`` by id (each row through ``decode``: undecoded by default),
    live ones only unless ``include_deleted``; one statement per 500 ids."""
    ids = list(dict.fromkeys(i for i in memory_ids if i))
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), 500):
        rows = yield PlanStatement(*_columns_query(columns, ids[start : start + 500], include_deleted=include_deleted),
                                fetch=True)
        found.update((row["memory_id"], decode(row)) for row in rows)
    return found


def _tags_plan(records: dict[str, dict[str, Any]]) -> WritePlan[None]:
    """Set the four tag lists (``TAG_GROUPS``) of each of ``records`` (by id) from ``booku_memory_tags``, in stored
    order; one statement per 500 records."""
    ids = list(records)
    for record in records.values():
        for group in TAG_GROUPS.values():
            record[group] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = yield PlanStatement(tags_sql(len(chunk)), chunk, fetch=True)
        for row in rows:
            records[row["memory_id"]][TAG_GROUPS[row["tag_type"]]].append(row["tag_value"])


def _bump_plan(ids: Sequence[str], now: float) -> WritePlan[int]:
    """``bump_activation`` as a plan: the number of live records of ``ids`` counted."""
    rows = yield PlanStatement(
        f"UPDATE booku_memory_records SET activation_count = activation_count + 1, last_activated_at = ? "
        f"WHERE memory_id IN ({placeholders(len(ids))}) AND is_deleted = 0 RETURNING memory_id",
        [now, *ids], fetch=True,
    )
    return len(rows)


def _find_person_query(person_id: str, store_keys: Sequence[str] | None,
                       statuses: Sequence[str] | None) -> tuple[str, list[Any]]:
    """The id of the most recently updated person record of ``person_id`` (``find_person_plan``)."""
    flt = RecordFilter(store_keys=store_keys, memory_types=("person",), person_id=person_id, statuses=statuses)
    where, params = flt.where()
    return f"SELECT r.memory_id FROM booku_memory_records r WHERE {where} ORDER BY r.updated_at DESC LIMIT 1", params


def _outbox_statement(memory_id: str, store_key: str, op: str, now: float) -> PlanStatement:
    return PlanStatement(
        "INSERT INTO booku_vector_outbox (memory_id, store_key, op, created_at) VALUES (?, ?, ?, ?)",
        [memory_id, store_key, op, now],
    )


class RecordRepository:
    """All SQL touching ``booku_memory_records`` and its satellites."""

    def __init__(self, db: Database, *, posting_budget: int, in_memory_keywords: bool = False,
                 in_memory_candidates: bool = True) -> None:
        """``posting_budget``: the keyword planner's (``retrieval.keyword_posting_budget``), for the FTS5 route;
        ``in_memory_keywords``: rank keyword hits from the in-memory index once loaded
        (``retrieval.in_memory_keyword_index``, ``storage.keyword_memory``); ``in_memory_candidates``: with it,
        read candidate rows from its copy of them (``retrieval.in_memory_candidates``, ``storage.candidate_rows``)."""
        self.db = db
        # The deployment's zone name (``services.time_zone``), kept with every new record; the runtime sets it.
        self.write_zone = ""
        self.keyword_planner = KeywordPlanner(db, posting_budget=posting_budget)
        self.scoped_statistics = ScopedKeywordStatistics(db)
        self.memory_keywords = MemoryKeywordIndex(db, enabled=in_memory_keywords,
                                                  keep_candidates=in_memory_candidates)

    # ------------------------------------------------------------------ reads
    async def get_many(
        self, memory_ids: Iterable[str], *, include_deleted: bool = False, conn: aiosqlite.Connection | None = None
    ) -> dict[str, dict[str, Any]]:
        """Records (with tags) by id; unknown ids are simply absent. Two queries whatever the count (per 500 ids),
        run in one hop to the connection's worker thread (``run_plan``): every retrieval reads its results here,
        and under load a hop costs about as much as one of these queries."""
        ids = list(dict.fromkeys(i for i in memory_ids if i))
        if not ids:
            return {}
        return await run_plan(conn or self.db.reader, self._get_many_plan(ids, include_deleted=include_deleted))

    @staticmethod
    def _get_many_plan(ids: Sequence[str], *, include_deleted: bool) -> WritePlan[dict[str, dict[str, Any]]]:
        """``get_many`` as a plan: every column, then the tags."""
        records = yield from _columns_plan(ids, ("*",), include_deleted=include_deleted, decode=row_to_record)
        yield from _tags_plan(records)
        return records

    async def candidates(self, memory_ids: Iterable[str], *, with_tags: bool,
                         tags_only_for: Iterable[str] | None = None,
                         as_of_last_read: bool = False) -> dict[str, dict[str, Any]]:
        """The columns ranking needs of each live candidate (``CANDIDATE_COLUMNS``, tags only when asked, and then
        only for ``tags_only_for`` when given: tag bonuses apply to vector hits, not to keyword-only candidates).

        Why not ``get_many``: a retrieval weighs about a hundred candidates and returns ten. Decoding every column
        of every candidate was the largest cost left in a retrieval over a large store; the
        full rows are read for the results only. The rows and the tags are read in one hop to the reader's worker
        thread (``run_plan``): an EPA retrieval reads candidates twice on its critical path (before and after its
        second vector pass), and under load each hop saved (a hand-over of the GIL) is worth as much as a query.
        Once the keyword index is loaded, the rows come from its in-memory copy (``storage.candidate_rows``) in that
        same hop, and only the ids it does not hold are read in SQL.

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
            ids, tags_for, lambda raw, missing: _run_plan_here(raw, self._candidates_plan(missing, tags_for)))
        if held is not None:
            return held
        return await run_plan(self.db.reader, self._candidates_plan(ids, tags_for))

    @staticmethod
    def _candidates_plan(memory_ids: Sequence[str],
                         tags_for: set[str] | None) -> WritePlan[dict[str, dict[str, Any]]]:
        """``candidates`` as a plan: the columns, then the tags of the rows found among ``tags_for`` (no tags read
        when it is None)."""
        found = yield from _columns_plan(memory_ids, CANDIDATE_COLUMNS,
                                         decode=lambda row: dict(zip(CANDIDATE_KEYS, decode_candidate(row))))
        tagged = {key: row for key, row in found.items() if key in tags_for} if tags_for is not None else {}
        if tagged:
            yield from _tags_plan(tagged)
        return found

    async def rows_in_time_windows(self, windows: Sequence[tuple[float, float]], flt: RecordFilter, *,
                                   limit: int) -> list[dict[str, Any]]:
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
        return [{key: row[key] for key in ("memory_id", "created_at", "event_start_at", "event_end_at", "time_zone")}
                for row in rows]

    async def time_zones(self, memory_ids: Iterable[str]) -> dict[str, str]:
        """The zone each record's times were written in (``""`` when unknown), by id; one query."""
        ids = list(dict.fromkeys(i for i in memory_ids if i))
        if not ids:
            return {}
        rows = await self.db.fetch_all(
            f"SELECT memory_id, time_zone FROM booku_memory_records WHERE memory_id IN ({','.join('?' * len(ids))})",
            ids)
        return {row["memory_id"]: row["time_zone"] for row in rows}

    @staticmethod
    def merge_candidates_plan(memory_ids: Iterable[str]) -> WritePlan[dict[str, dict[str, Any]]]:
        """What a write's merge decision needs of each live neighbour (``MERGE_CHECK_COLUMNS``), by id, read as a
        step of the group commit's plan (inside its transaction, in the same thread hop as its writes).

        Why not ``get_many``: a group commit checks up to eight neighbours per write, and decoding every column and
        the tags of each was a large share of a batch's Python time; the chosen target is re-read in full inside
        the write's transaction anyway.
        """
        return (yield from _columns_plan(memory_ids, MERGE_CHECK_COLUMNS))

    async def superseded_of(self, memory_ids: Iterable[str], *, conn=None) -> dict[str, list[str]]:
        """The reverse of ``superseded_by``: id → the ids of the live memories it replaced, oldest first, for each
        of ``memory_ids`` that replaced any. Read through the partial index of migration 0014."""
        ids = list(dict.fromkeys(memory_ids))
        found: dict[str, list[str]] = {}
        for start in range(0, len(ids), 500):
            chunk = ids[start:start + 500]
            rows = await (conn or self.db.reader).execute_fetchall(
                f"SELECT memory_id, superseded_by FROM booku_memory_records WHERE superseded_by IN "
                f"({placeholders(len(chunk))}) AND is_deleted = 0 ORDER BY superseded_at, rid", chunk)
            for memory_id, successor in rows:
                found.setdefault(successor, []).append(memory_id)
        return found

    async def vector_sources(self, memory_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
        """``VECTOR_SOURCE_COLUMNS`` of each record by id, deleted ones included (``is_deleted`` as a bool).

        Why not ``get_many``: the vector drain settles every write's outbox row, and decoding every column and the
        tags of each record was a share of the write path's cost; ``tier_of`` and the embedded text need these.
        """
        found = await self._columns(memory_ids, VECTOR_SOURCE_COLUMNS, include_deleted=True)
        for record in found.values():
            record["is_deleted"] = bool(record["is_deleted"])
        return found

    async def _columns(self, memory_ids: Iterable[str], columns: Sequence[str], *,
                       include_deleted: bool = False) -> dict[str, dict[str, Any]]:
        """``columns`` of each record by id, undecoded, live ones only unless ``include_deleted``; one query per
        500 ids, all in one hop (``_columns_plan``)."""
        return await run_plan(self.db.reader, _columns_plan(memory_ids, columns, include_deleted=include_deleted))

    async def get(self, memory_id: str, *, include_deleted: bool = False, conn=None) -> dict[str, Any] | None:
        return (await self.get_many([memory_id], include_deleted=include_deleted, conn=conn)).get(memory_id)

    async def _attach_tags(self, records: dict[str, dict[str, Any]], conn=None) -> None:
        """Set the four tag lists of each of ``records`` (``_tags_plan``), read on ``conn`` or the reader."""
        await run_plan(conn or self.db.reader, _tags_plan(records))

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
            pattern = f"%{escape_like(keyword)}%"
            where += " AND (r.title LIKE ? ESCAPE '\\' OR r.content LIKE ? ESCAPE '\\' OR r.memory_id LIKE ? ESCAPE '\\')"
            params += [pattern, pattern, pattern]
        rows = await self.db.fetch_all(
            f"SELECT r.* FROM booku_memory_records r WHERE {where} ORDER BY {order_by} LIMIT ? OFFSET ?",
            [*params, limit, offset],
        )
        return await self._with_tags(rows)

    async def count_records(self, flt: RecordFilter, *, keyword: str | None = None) -> int:
        where, params = flt.where()
        if keyword:
            pattern = f"%{escape_like(keyword)}%"
            where += " AND (r.title LIKE ? ESCAPE '\\' OR r.content LIKE ? ESCAPE '\\' OR r.memory_id LIKE ? ESCAPE '\\')"
            params += [pattern, pattern, pattern]
        return int(await self.db.fetch_value(f"SELECT COUNT(*) FROM booku_memory_records r WHERE {where}", params, 0))

    async def _with_tags(self, rows: Sequence[aiosqlite.Row]) -> list[dict[str, Any]]:
        records = {row["memory_id"]: row_to_record(row) for row in rows}
        await self._attach_tags(records)
        return [records[row["memory_id"]] for row in rows]

    async def search_terms(self, terms: Sequence[str], flt: RecordFilter, *, limit: int) -> list[tuple[str, float]]:
        """The keyword route of retrieval over ``terms`` (``segmentation.query_terms``), (memory_id, score) best
        first.

        With the in-memory index ready (``storage.keyword_memory``), every term is ranked there: same bm25 as FTS5,
        cheaper than FTS5's ranking within the budget, and the terms' document frequencies come with it (so the keyword
        challenge reads none); a filter that checks only stores, buckets, statuses and deletion
        (``RecordFilter.state_test``) is applied there too. Otherwise FTS5: ``KeywordPlanner`` keeps the rarest terms
        within a posting budget and drops the store clause where it filters nothing, then ``keyword_search``.
        """
        if flt.store_keys is not None and not flt.store_keys:
            return []
        tokens = [store_token(key) for key in flt.store_keys] if flt.store_keys is not None else []
        terms = list(dict.fromkeys(t for t in terms if t))
        if terms and self.memory_keywords.ready:
            where, params = flt.where()
            found = await self.memory_keywords.search(
                terms, store_tokens=tokens if flt.store_keys is not None else None, state_test=flt.state_test(),
                where=where, params=params, limit=limit, depths=keyword_depths(limit))
            if found is not None:
                self.keyword_planner.remember(found.frequencies, found.rows)
                if flt.store_keys is not None:
                    self.scoped_statistics.remember(tokens, found.top.documents, found.top.visible_rows,
                                                    found.top.visible_tokens)
                return found.hits
        plan = await self.keyword_planner.plan(terms, flt.store_keys, tokens)
        if plan is None:
            return []
        return await self.keyword_search(plan.expression, flt, limit=limit, scope_in_index=plan.scope_in_index)

    async def keyword_texts(self, memory_ids: Iterable[str]) -> dict[str, str]:
        """The segmented text each record holds in the keyword index (title, content and tags, space-joined), by id;
        live records only, one query. A record whose keyword row is not written yet is absent."""
        ids = list(dict.fromkeys(i for i in memory_ids if i))
        if not ids:
            return {}
        rows = await self.db.fetch_all(
            f"SELECT r.memory_id, f.title, f.content, f.tags FROM booku_memory_records r "
            f"JOIN booku_memory_fts f ON f.rowid = r.rid "
            f"WHERE r.memory_id IN ({placeholders(len(ids))}) AND r.is_deleted = 0", ids)
        return {row["memory_id"]: " ".join(part for part in (row["title"], row["content"], row["tags"]) if part)
                for row in rows}

    async def term_statistics(self, terms: Sequence[str], store_keys: Sequence[str] | None = None
                              ) -> tuple[dict[str, int], int]:
        """(term → document frequency, rows) of the keyword index, over ``store_keys`` (None = every store), as
        the keyword search counted them (so the query's terms, already counted to rank it, cost no read): another
        store's rows never weigh a reader's terms (``keyword_scoped``)."""
        if store_keys is not None:
            tokens = [store_token(key) for key in dict.fromkeys(store_keys)]
            rows, _ = await self.scoped_statistics.stores(tokens)
            if rows < await self.keyword_planner.indexed_rows():
                terms = list(dict.fromkeys(terms))
                return dict(zip(terms, await self.scoped_statistics.documents(tokens, terms))), rows
        return (await self.keyword_planner.document_frequencies(terms),
                await self.keyword_planner.indexed_rows())

    async def keyword_search(self, fts_query: str, flt: RecordFilter, *, limit: int,
                             scope_in_index: bool = True) -> list[tuple[str, float]]:
        """FTS5 route: (memory_id, score) best first; score = -bm25 so that higher is better.

        ``fts_query`` is an FTS5 expression over the text columns. ``scope_in_index=False`` leaves the store clause
        out of the MATCH (the planner does so when it would filter nothing); the outer WHERE filters by store
        either way.
        """
        if flt.store_keys is not None and not flt.store_keys:
            return []
        where, params = flt.where()
        # Rank inside FTS first and join only the best matches: an OR query over common words matches a large
        # share of the rows, and joining and filtering every match before sorting dominated the query in a
        # large store. The outer WHERE repeats the store filter as a second guard and applies the other filters; the
        # store column weighs 0, so scores are those of the text columns. The inner depth starts shallow (joining
        # rows is the cost) and deepens once when the filters left fewer than ``limit`` rows of a
        # full inner page (e.g. archived rows or knowledge chunks outranking the memories asked for).
        expression = scoped_fts_query(fts_query, flt.store_keys if scope_in_index else None)
        rescore = await self._store_rescoring(flt.store_keys, fts_query)
        # With per-store statistics (``keyword_scoped``) every row of the inner page that passes the filters is read
        # with its keyword text and scored again; otherwise FTS5's own score is the store's score.
        text_columns, outer_limit = (", title, content, tags, store", []) if rescore else ("", [limit])
        sql = (
            f"SELECT r.memory_id, hits.* FROM ("
            f"  SELECT rowid, bm25(booku_memory_fts, {BM25_SQL_WEIGHTS}) AS rank{text_columns} FROM booku_memory_fts "
            f"  WHERE booku_memory_fts MATCH ? ORDER BY rank LIMIT ?"
            f") AS hits JOIN booku_memory_records r ON r.rid = hits.rowid "
            f"WHERE {where} ORDER BY hits.rank{' LIMIT ?' if outer_limit else ''}"
        )
        rows: list[aiosqlite.Row] = []
        for depth in keyword_depths(limit):
            rows = await self.db.fetch_all(sql, [expression, depth, *params, *outer_limit])
            if len(rows) >= limit or not await self._inner_page_full(expression, depth):
                break
        if rescore is None:
            return [(row["memory_id"], -float(row["rank"])) for row in rows]
        terms, documents, visible_rows, average = rescore
        scored = []
        for row in rows:
            size, frequencies = row_frequencies(
                (row["rowid"], row["title"], row["content"], row["tags"], row["store"]), terms)
            scored.append((-bm25(frequencies, size, documents, visible_rows, average), row["rowid"], row["memory_id"]))
        scored.sort()
        return [(memory_id, -negative) for negative, _, memory_id in scored[:limit]]

    async def _store_rescoring(self, store_keys: Sequence[str] | None, fts_query: str
                                 ) -> tuple[list[str], list[int], int, float] | None:
        """(terms, their document counts, rows, average row size) of the readable stores when they hold only part
        of the keyword table (so FTS5's whole-table statistics would not be theirs); None when FTS5's own score
        is the stores' score (every store, or stores holding every row)."""
        if store_keys is None:
            return None
        tokens = [store_token(key) for key in dict.fromkeys(store_keys)]
        rows, size = await self.scoped_statistics.stores(tokens)
        if not rows or rows >= await self.keyword_planner.indexed_rows():
            return None
        terms = list(dict.fromkeys(expression_terms(fts_query)))
        return terms, await self.scoped_statistics.documents(tokens, terms), rows, size / rows

    async def _inner_page_full(self, expression: str, depth: int) -> bool:
        """Whether the MATCH alone has at least ``depth`` rows (so a deeper page could hold more results)."""
        row = await self.db.fetch_one(
            "SELECT COUNT(*) FROM (SELECT rowid FROM booku_memory_fts WHERE booku_memory_fts MATCH ? LIMIT ?)",
            [expression, depth])
        return bool(row and row[0] >= depth)

    async def grep_like(
        self, query: str, fields: Sequence[str], flt: RecordFilter, *, limit: int
    ) -> list[dict[str, Any]]:
        """Literal substring match in the chosen fields, newest first, evaluated by SQLite."""
        pattern = f"%{escape_like(query)}%"
        ors, params = self._grep_field_clauses(fields, "LIKE ? ESCAPE '\\'", pattern)
        where, fparams = flt.where()
        rows = await self.db.fetch_all(
            f"SELECT r.* FROM booku_memory_records r WHERE {where} AND ({ors}) "
            f"ORDER BY r.updated_at DESC, r.rid DESC LIMIT ?",
            [*fparams, *params, limit],
        )
        return await self._with_tags(rows)

    async def grep_regex(
        self, pattern: str, matcher: Matcher, fields: Sequence[str], flt: RecordFilter, *, limit: int,
        budget_seconds: float,
    ) -> list[dict[str, Any]]:
        """Regex match (``matcher``, compiled from ``pattern`` by ``logic.safe_regex``) on a connection and thread
        of its own within ``budget_seconds`` (``storage.regex_grep``), newest first; the shared reader only reads
        the hits' tags."""
        ors, params = self._grep_field_clauses(fields, "REGEXP ?", pattern)
        where, fparams = flt.where()
        rows = await run_regex_grep(
            self.db.path,
            f"SELECT r.* FROM booku_memory_records r WHERE {where} AND ({ors}) "
            f"ORDER BY r.updated_at DESC, r.rid DESC LIMIT ?",
            [*fparams, *params, limit], matcher, budget_seconds=budget_seconds,
        )
        return await self._with_tags(rows)

    @staticmethod
    def _grep_field_clauses(fields: Sequence[str], operator: str, value: str) -> tuple[str, list[str]]:
        clauses, params = [], []
        for name in fields:
            if name in ("title", "content", "name", "why_remembered"):
                clauses.append(f"r.{name} {operator}")
                params.append(value)
            elif name == "summary":
                clauses.append(f"r.content {operator}")
                params.append(value)
            elif name == "tags":
                clauses.append(
                    "EXISTS (SELECT 1 FROM booku_memory_tags t WHERE t.memory_id = r.memory_id AND "
                    f"t.tag_value {operator})"
                )
                params.append(value)
            elif name == "metadata":
                for column in ("memory_id", "source", "folder_id", "bucket", "memory_type", "person_id"):
                    clauses.append(f"COALESCE(r.{column}, '') {operator}")
                    params.append(value)
        return " OR ".join(clauses), params

    async def bucket_counts(self, *, store_keys: Sequence[str] | None = None, folder_id: str | None = None) -> dict[str, int]:
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

    def find_person_plan(self, person_id: str, *, store_keys: Sequence[str] | None,
                         statuses: Sequence[str] | None = None) -> WritePlan[dict[str, Any] | None]:
        """The most recently updated live person record of ``person_id`` (with tags), or None, read inside the
        running transaction (``run_plan``), so a person created earlier in the same batch counts."""
        sql, params = _find_person_query(person_id, store_keys, statuses)
        rows = yield PlanStatement(sql, params, fetch=True)
        return (yield from self.read_plan(rows[0]["memory_id"])) if rows else None

    @staticmethod
    def read_plan(memory_id: str, *, include_deleted: bool = False) -> WritePlan[dict[str, Any] | None]:
        """``get`` as a plan step, read inside the running transaction (``run_plan``)."""
        record = yield from _read_plan(memory_id)
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

    # ----------------------------------------------------------------- writes
    async def insert(
        self, conn: aiosqlite.Connection, record: dict[str, Any], *, action: str = "create",
        actor: str | WriteContext = "agent", note: str = "", savepoint: str | None = None,
    ) -> dict[str, Any]:
        """Insert a new record with its tags, keyword row, first revision, audit row and outbox entry.

        Returns the stored record (every column, JSON decoded, plus the four tag lists), as ``get`` would read it.
        With ``savepoint`` the insert runs inside a savepoint of that name and a failure leaves none of its rows
        (see ``savepoint_plan``).
        """
        return await run_plan(conn, self.insert_plan(record, action=action, actor=actor, note=note,
                                                     savepoint=savepoint))

    def insert_plan(
        self, record: dict[str, Any], *, action: str = "create", actor: str | WriteContext = "agent",
        note: str = "", savepoint: str | None = None, keyword_rows: list[KeywordRow] | None = None,
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

    def _create_plan(self, values: dict[str, Any], record: dict[str, Any], action: str, ctx: WriteContext,
                     note: str, now: float, keyword_rows: list[KeywordRow] | None) -> WritePlan[dict[str, Any]]:
        stored = yield from self._insert_row_plan(values, record, keyword_rows)
        yield from self._revision_plan(stored, action, ctx, note, now, before=None)
        yield _outbox_statement(stored["memory_id"], stored["store_key"], "upsert", now)
        return stored

    def _insert_row_plan(self, values: dict[str, Any], record: dict[str, Any],
                         keyword_rows: list[KeywordRow] | None = None) -> WritePlan[dict[str, Any]]:
        """Insert the row, its tags and its keyword-index row; returns the stored record.

        The stored record is built from the inserted row (``RETURNING *`` brings the defaults and the rid) and the
        tag rows just written, instead of reading both back.
        """
        columns = list(values)
        rows = yield PlanStatement(
            f"INSERT INTO booku_memory_records ({', '.join(columns)}) VALUES ({placeholders(len(columns))}) "
            f"RETURNING *",
            [_encode(c, values[c]) for c in columns], fetch=True,
        )
        stored = row_to_record(rows[0])
        stored.update((yield from _replace_tags_plan(stored["memory_id"], record)))
        yield from _keyword_row_plan(stored, deferred=keyword_rows)
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
        return await run_plan(conn, self.update_plan(memory_id, changes, action=action, actor=actor, note=note,
                                                     touch=touch, savepoint=savepoint))

    def update_plan(self, memory_id: str, changes: dict[str, Any], *, action: str,
                    actor: str | WriteContext = "agent", note: str = "", touch: bool = True,
                    savepoint: str | None = None,
                    keyword_rows: list[KeywordRow] | None = None) -> WritePlan[dict[str, Any] | None]:
        """``update`` as a plan, for a caller that runs several writes in one thread hop (``run_plan``).

        ``keyword_rows`` as in ``insert_plan``.
        """
        plan = self._update_plan(memory_id, changes, action, WriteContext.of(actor), note, touch, keyword_rows)
        return savepoint_plan(plan, savepoint)

    def _update_plan(self, memory_id: str, changes: dict[str, Any], action: str, ctx: WriteContext, note: str,
                     touch: bool, keyword_rows: list[KeywordRow] | None = None) -> WritePlan[dict[str, Any] | None]:
        before = yield from _read_plan(memory_id)
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
            [*(_encode(c, v) for c, v in columns.items()), memory_id], fetch=True,
        )
        after = row_to_record(rows[0])
        if tag_changes:
            merged_tags = {g: tag_changes.get(g, before[g]) for g in TAG_GROUPS.values()}
            after.update((yield from _replace_tags_plan(memory_id, merged_tags)))
        else:
            after.update({g: list(before[g]) for g in TAG_GROUPS.values()})
        if any(before.get(c) != after.get(c) for c in KEYWORD_INDEX_COLUMNS) or tag_changes:
            # A move to another store changes the row's store token, not only its text.
            yield from _keyword_row_plan(after, deferred=keyword_rows)
        yield from self._revision_plan(after, action, ctx, note, now, before=before)
        if any(before.get(c) != after.get(c) for c in (*EMBEDDED_COLUMNS, *PARTITION_COLUMNS)):
            yield _outbox_statement(memory_id, before["store_key"], "upsert", now)
            if before["store_key"] != after["store_key"]:
                yield _outbox_statement(memory_id, after["store_key"], "upsert", now)
        return after

    async def hard_delete(self, conn: aiosqlite.Connection, memory_ids: Sequence[str], *,
                          actor: str | WriteContext = "agent") -> int:
        """Remove rows for good; the last snapshot stays in the revision table, the vector goes through the outbox."""
        existing = await self.get_many(memory_ids, include_deleted=True, conn=conn)
        await run_plan(conn, self._hard_delete_plan(list(existing.values()), WriteContext.of(actor), time.time()))
        return len(existing)

    def _hard_delete_plan(self, records: Sequence[dict[str, Any]], ctx: WriteContext, now: float) -> WritePlan[None]:
        for record in records:
            yield from self._revision_plan({**record, "version": record["version"] + 1}, "hard_delete", ctx, "", now,
                                           before=record, deleted=True)
            yield PlanStatement(_KEYWORD_DELETE_SQL, [record["rid"]])
            yield PlanStatement(JOURNAL_INSERT_SQL, [record["rid"]])
            yield PlanStatement("DELETE FROM booku_memory_tags WHERE memory_id = ?", [record["memory_id"]])
            yield PlanStatement("DELETE FROM booku_memory_records WHERE memory_id = ?", [record["memory_id"]])
            yield _outbox_statement(record["memory_id"], record["store_key"], "delete", now)

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
            yield PlanStatement("UPDATE booku_memory_records SET embedded_text_hash = ? WHERE memory_id = ?",
                             [(digest, memory_id) for memory_id, digest in hashes.items()], many=True)

    def _revision_plan(
        self, record: dict[str, Any], action: str, ctx: WriteContext, note: str, now: float, *,
        before: dict[str, Any] | None, deleted: bool = False,
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
            [now, ctx.authority, ctx.actor, ctx.cause or note, ctx.batch_id, action, record["memory_id"],
             record["owner_uid"], record["store_key"], record["version"],
             None if before is None else json.dumps(snapshot_of(before), ensure_ascii=False, sort_keys=True),
             None if deleted else after_json],
        )

    async def rebuild_keyword_index(self, conn: aiosqlite.Connection) -> int:
        """Recreate every FTS row from the records (derived data; used by reindex and after migration 0007).

        Returns the number of rows written.
        """
        await conn.execute("DELETE FROM booku_memory_fts")
        await conn.execute(JOURNAL_INSERT_SQL, [JOURNAL_RESET_RID])
        count = 0
        async with conn.execute("SELECT memory_id FROM booku_memory_records ORDER BY rid") as cur:
            ids = [row[0] for row in await cur.fetchall()]
        for start in range(0, len(ids), 500):
            records = await self.get_many(ids[start : start + 500], include_deleted=True, conn=conn)
            await run_plan(conn, _keyword_rows_plan(records.values()))
            count += len(records)
        self.keyword_planner.forget()
        self.scoped_statistics.forget()
        return count

    async def trim_keyword_journal(self) -> int:
        """Forget keyword-journal entries older than the newest ``JOURNAL_KEEP``; returns how many were removed."""
        async with self.db.transaction() as conn:
            cursor = await conn.execute(TRIM_JOURNAL_SQL)
            return cursor.rowcount

    async def rebuild_keyword_index_if_requested(self) -> int | None:
        """Refill the keyword index when a migration asked for it (``booku_meta`` flag), then clear the flag.

        Returns the number of rows written, or None when no rebuild was requested. Rows and flag change in one
        transaction, so an interrupted start simply rebuilds again next time.
        """
        flag = await self.db.fetch_value("SELECT value FROM booku_meta WHERE key = ?", [KEYWORD_REBUILD_META_KEY])
        if flag is None:
            return None
        async with self.db.transaction() as conn:
            count = await self.rebuild_keyword_index(conn)
            await conn.execute("DELETE FROM booku_meta WHERE key = ?", [KEYWORD_REBUILD_META_KEY])
        return count

    # --------------------------------------------------------- portability
    async def iter_ids(self, *, batch: int = 500):
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
            found[row["memory_id"]].append({
                "version": row["version"], "action": row["action"], "snapshot": json.loads(row["snapshot"]),
                "actor": row["actor"], "note": row["note"], "created_at": row["created_at"],
            })
        return found

    async def import_record(self, conn: aiosqlite.Connection, record: dict[str, Any],
                            revisions: Sequence[dict[str, Any]]) -> bool:
        """Insert an exported record exactly as it was (version, timestamps, history). False if the id exists."""
        return await run_plan(conn, self._import_plan(record, revisions, time.time()))

    def _import_plan(self, record: dict[str, Any], revisions: Sequence[dict[str, Any]],
                     now: float) -> WritePlan[bool]:
        found = yield PlanStatement("SELECT 1 FROM booku_memory_records WHERE memory_id = ?", [record["memory_id"]],
                                 fetch=True)
        if found:
            return False
        values = {c: record[c] for c in WRITABLE_COLUMNS if c in record}
        values["version"] = int(record.get("version", 1))
        stored = yield from self._insert_row_plan(values, record)
        revision_rows = [
            (record["memory_id"], r["version"], r["action"], json.dumps(r["snapshot"], ensure_ascii=False, sort_keys=True),
             r.get("actor", "agent"), r.get("note", ""), r["created_at"]) for r in revisions
        ]
        if revision_rows:
            yield PlanStatement(
                "INSERT OR IGNORE INTO booku_memory_revisions (memory_id, version, action, snapshot, actor, note, "
                "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                revision_rows, many=True,
            )
        yield _outbox_statement(stored["memory_id"], stored["store_key"], "upsert", now)
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

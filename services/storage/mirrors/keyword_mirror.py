"""Keeps the in-memory keyword index (``mirrors.bm25_postings``) in step with ``booku_memory_fts`` and searches it.

* **Loading.** At start, a thread of its own reads every keyword row and the journal's last seq in one read
  transaction (a consistent snapshot) on a connection of its own, and builds the index (seconds for a large store;
  a store under ``LOAD_BEFORE_START_ROWS`` rows is loaded before start-up returns).
  Until it is ready, and whenever it is not, searches take the FTS5 route (``RecordRepository.keyword_search``):
  the in-memory index is an optimisation, never a condition for answering.
* **Filtering.** With each row, the index keeps its record's memory id, bucket, status and deletion flag
  (``storage.mirrors.record_states``): a search whose filter checks no more than those (``RecordFilter.state_test``: a
  retrieval's usual filter) is answered without SQL; any other filter is checked in SQL on the best rows.
* **Candidate rows.** With each live record it also keeps the columns ranking reads of it and its tags
  (``storage.mirrors.candidate_rows``, ``retrieval.in_memory_candidates``): ``RecordRepository.candidates`` is answered
  from them in one hop, after the journal is followed, and only the ids not held are read in SQL.
* **Stored vectors.** With the candidate rows it also keeps each live record's stored vector
  (``storage.mirrors.stored_vectors``, ``retrieval.in_memory_vectors``) of the vector index's model, read in the same
  snapshot; ``held_vectors`` answers without a hop, as of the last read (a retrieval reads its candidates first).
* **Following changes.** Every statement that writes or deletes a keyword row also appends its rid to
  ``booku_keyword_journal`` in the same transaction (``journal_plan``), and a trigger appends a record's rid when
  its bucket, status or deletion flag changes (migration 0012), or another column the candidate rows hold
  (migration 0013; a change of text, tags or store rewrites the keyword row), or the text its stored vector embeds
  (migration 0018). Before each search or candidate
  read, on the reader connection's thread, the entries after the last applied seq are read and each named row is
  re-read from the tables: the index then holds what the committed tables hold, whichever connection or process
  wrote them. Applying an entry twice is harmless (it re-reads the row's current text and state).
* **Falling back to a reload.** A rebuild of the whole table (entry rid -1), more pending entries than
  ``SYNC_LIMIT``, or a gap in the seqs (entries trimmed before this runtime read them) drops the index; searches
  use FTS5 until a reload in the background is done.

The index is only written on the reader connection's thread once loaded (searches and syncing are one hop there),
so it needs no lock; the held candidate rows and vectors are read from the event loop too, and each is replaced
whole, so such a read sees a record's old or new row.
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..database import Database, aiosqlite_core, placeholders
from ..record_columns import ALL_TAGS_SQL, candidate_columns, tags_sql
from ..rows import CandidateRow
from .bm25_postings import KeywordIndex, KeywordRowText, KeywordTop
from .candidate_rows import CandidateRows
from .record_states import RecordStates, RowStateTest
from .stored_vectors import StoredVectors

logger = logging.getLogger(__name__)

JOURNAL_TABLE = "booku_keyword_journal"
JOURNAL_INSERT_SQL = f"INSERT INTO {JOURNAL_TABLE} (rid) VALUES (?)"
JOURNAL_RESET_RID = -1
# More pending journal entries than this at a search: reload in the background rather than apply them one by one
# (a bulk import by another process: applying costs Python per row, a reload costs one bulk build).
SYNC_LIMIT = 2000
# A store with fewer keyword rows than this is loaded before start-up returns (under a second), so a small
# store ranks the same way from its first search; a bigger one loads in the background.
LOAD_BEFORE_START_ROWS = 5_000
# Journal entries kept when trimming (``trim_journal_sql``): a runtime more than this many changes behind reloads.
JOURNAL_KEEP = 20_000
# Each keyword row (``KeywordRowText``, the first five columns) with its record's state (``RecordState``, the next
# four; NULLs when the row has no record), then the record's candidate row (``record_columns.CANDIDATE_KEYS``), then
# its stored vector (``stored_vectors``; NULL when none, or when vectors are not kept).
_ROWS_COLUMNS = (
    "SELECT f.rowid, f.title, f.content, f.tags, f.store, r.memory_id, r.bucket, r.status, r.is_deleted, "
    f"{', '.join(candidate_columns('r.'))}"
)
_ROWS_FROM = "FROM booku_memory_fts f LEFT JOIN booku_memory_records r ON r.rid = f.rowid"
_VECTOR_JOIN = (
    "LEFT JOIN booku_embedding_cache c ON c.text_hash = r.embedded_text_hash AND c.mode = 'passage' "
    "AND c.model = ? AND c.dimension = ?"
)
_TEXT, _STATE = slice(0, 5), slice(5, 9)
_CANDIDATE = slice(9, -1)
_VECTOR = -1
_MEMORY_ID, _IS_DELETED = 5, 8
LAST_SEQ_SQL = f"SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name = '{JOURNAL_TABLE}'), 0)"
PENDING_SQL = (
    f"SELECT * FROM (SELECT seq, rid FROM {JOURNAL_TABLE} WHERE seq > ? ORDER BY seq LIMIT ?) "
    f"UNION ALL SELECT seq, NULL FROM sqlite_sequence WHERE name = '{JOURNAL_TABLE}'"
)
TRIM_JOURNAL_SQL = (
    f"DELETE FROM {JOURNAL_TABLE} WHERE seq <= (SELECT COALESCE(MAX(seq), 0) FROM {JOURNAL_TABLE}) - {JOURNAL_KEEP}"
)


@dataclass
class _Loaded:
    index: KeywordIndex
    states: RecordStates
    candidates: CandidateRows | None  # None when not kept (``MemoryKeywordIndex.keep_candidates``)
    vectors: StoredVectors | None  # None when not kept (``MemoryKeywordIndex.keep_vectors``)
    applied_seq: int  # the last journal entry the index reflects


def rows_sql(vectors: StoredVectors | None) -> tuple[str, list[Any]]:
    """The statement reading keyword rows with their records (and stored vectors when ``vectors`` are kept), and
    its parameters; a caller narrows it with a WHERE on ``f.rowid``."""
    if vectors is None:
        return f"{_ROWS_COLUMNS}, NULL {_ROWS_FROM}", []
    return f"{_ROWS_COLUMNS}, c.vector {_ROWS_FROM} {_VECTOR_JOIN}", [vectors.model, vectors.dimension]


@dataclass
class MemoryKeywordHits:
    """A search's hits ((memory_id, score) best first, as ``RecordRepository.keyword_search`` returns them) and
    the query terms' document frequencies (``KeywordTop.frequencies``)."""

    hits: list[tuple[str, float]]
    frequencies: dict[str, int]
    rows: int
    top: KeywordTop
    """The search's statistics over the stores it read (``KeywordTop.documents``, ``visible_rows``, …)."""


class _Stale(Exception):
    """The index cannot be brought up to date from the journal: reload it."""


def _hold_record(rid: int, row: tuple[Any, ...] | None, loaded: _Loaded) -> str | None:
    """Hold the record of keyword row ``rid`` (its ``rows_sql`` row, or None when the row is gone) in ``loaded``'s
    states, candidate rows and stored vectors; returns its memory id when the candidate rows now hold it (a live
    record)."""
    previous_id = loaded.states.memory_ids.get(rid)
    loaded.states.set(rid, None if row is None else row[_STATE])
    live = row if row is not None and row[_MEMORY_ID] is not None and not row[_IS_DELETED] else None
    if loaded.vectors is not None:
        memory_id, vector = (live[_MEMORY_ID], live[_VECTOR]) if live is not None else (None, None)
        loaded.vectors.set(previous_id, memory_id, vector)
    if loaded.candidates is None:
        return None
    return loaded.candidates.set(previous_id, live[_CANDIDATE] if live is not None else None)


def _rows(conn: sqlite3.Connection, cancelled: threading.Event, loaded: _Loaded) -> Iterator[KeywordRowText]:
    """The keyword rows' text, for ``KeywordIndex.build``; their records go to ``loaded`` on the way."""
    cursor = conn.execute(*rows_sql(loaded.vectors))
    while batch := cursor.fetchmany(1000):
        if cancelled.is_set():
            raise asyncio.CancelledError
        for row in batch:
            _hold_record(row[0], row, loaded)
            yield row[_TEXT]


def load_index(
    path: Path,
    cancelled: threading.Event,
    *,
    keep_candidates: bool = True,
    vector_model: tuple[str, int] | None = None,
) -> _Loaded:
    """Build the index (and, with ``keep_candidates``, the candidate rows; with ``vector_model``, the stored vectors
    of that model and dimension) from a snapshot of the tables, on a connection of its own (run in a worker
    thread)."""
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = 1")
        conn.execute("BEGIN")
        loaded = _Loaded(
            KeywordIndex(),
            RecordStates(),
            CandidateRows() if keep_candidates else None,
            StoredVectors(*vector_model) if vector_model is not None else None,
            int(conn.execute(LAST_SEQ_SQL).fetchone()[0]),
        )
        loaded.index = KeywordIndex.build(_rows(conn, cancelled, loaded))
        if loaded.candidates is not None:
            loaded.candidates.set_tags(loaded.candidates.memory_ids(), conn.execute(ALL_TAGS_SQL))
        conn.execute("COMMIT")
        return loaded
    finally:
        conn.close()


def _apply_journal(raw: sqlite3.Connection, loaded: _Loaded) -> None:
    """Bring ``loaded`` up to the committed table (see the module docstring); raises ``_Stale``.

    One statement reads the pending entries and the journal's last seq: a gap between them (entries trimmed, or
    the journal emptied, before this runtime saw them) is caught even when no entry is left after it."""
    rows = raw.execute(PENDING_SQL, (loaded.applied_seq, SYNC_LIMIT + 1)).fetchall()
    last = max((seq for seq, rid in rows if rid is None), default=0)
    entries = [(seq, rid) for seq, rid in rows if rid is not None]
    if last == loaded.applied_seq and not entries:
        return
    if (
        len(entries) > SYNC_LIMIT
        or not entries
        or entries[0][0] != loaded.applied_seq + 1
        or entries[-1][0] != last
        or any(rid == JOURNAL_RESET_RID for _, rid in entries)
    ):
        raise _Stale
    rids = list(dict.fromkeys(rid for _, rid in entries))
    current: dict[int, tuple] = {}
    sql, params = rows_sql(loaded.vectors)
    for start in range(0, len(rids), 500):
        chunk = rids[start : start + 500]
        for row in raw.execute(f"{sql} WHERE f.rowid IN ({placeholders(len(chunk))})", [*params, *chunk]):
            current[row[0]] = tuple(row)
    held: list[str] = []
    for rid in rids:
        row = current.get(rid)
        loaded.index.replace(rid, None if row is None else row[_TEXT])
        if (memory_id := _hold_record(rid, row, loaded)) is not None:
            held.append(memory_id)
    if loaded.candidates is not None:
        for start in range(0, len(held), 500):
            chunk = held[start : start + 500]
            loaded.candidates.set_tags(chunk, raw.execute(tags_sql(len(chunk)), chunk))
    loaded.applied_seq = entries[-1][0]


class MemoryKeywordIndex:
    """The runtime's in-memory keyword index: loading, following the journal, searching (module docstring)."""

    def __init__(self, db: Database, *, enabled: bool, keep_candidates: bool = True, keep_vectors: bool = True) -> None:
        """``keep_candidates``: hold the candidate rows too (``storage.mirrors.candidate_rows``,
        ``retrieval.in_memory_candidates``); may be switched off on a running runtime like ``enabled``, then back
        on (a benchmark comparing the routes): candidate reads then take SQL, and the rows are kept meanwhile.
        ``keep_vectors``: with the candidate rows, hold the stored vectors of ``vector_model()`` too
        (``storage.mirrors.stored_vectors``, ``retrieval.in_memory_vectors``)."""
        self.db = db
        self.enabled = enabled
        self.keep_candidates = keep_candidates
        self.keep_vectors = keep_vectors
        # The vector index's (model, dimension) once bound, else None; the runtime sets it.
        self.vector_model: Callable[[], tuple[str, int] | None] = lambda: None
        self._vector_load_asked: tuple[str, int] | None = None
        self._loaded: _Loaded | None = None
        self._loading: asyncio.Task | None = None
        self._cancelled = threading.Event()
        self.loads = 0  # completed loads (the first, and every reload)

    @property
    def ready(self) -> bool:
        """Loaded and enabled (``enabled`` may be switched off on a running runtime, e.g. by a benchmark comparing
        the routes: searches then take the FTS5 route, and the journal is followed again when it is back on)."""
        return self.enabled and self._loaded is not None

    async def start(self) -> None:
        """Load the index: before returning for a small store (``LOAD_BEFORE_START_ROWS``), else in the
        background."""
        if not self.enabled:
            return
        self.start_loading()
        rows = await self.db.fetch_value("SELECT COUNT(*) FROM booku_memory_fts_docsize", (), 0)
        if int(rows) < LOAD_BEFORE_START_ROWS:
            await self.wait_ready()

    def start_loading(self) -> None:
        """Load (or reload) in the background unless disabled or already loading."""
        if not self.enabled or (self._loading is not None and not self._loading.done()):
            return
        self._cancelled.clear()
        self._loading = asyncio.create_task(self._load(), name="booku-keyword-index-load")

    async def _load(self) -> None:
        keep_vectors = self.keep_candidates and self.keep_vectors
        try:
            loaded = await asyncio.to_thread(
                load_index,
                self.db.path,
                self._cancelled,
                keep_candidates=self.keep_candidates,
                vector_model=self.vector_model() if keep_vectors else None,
            )
        except asyncio.CancelledError:
            return
        except Exception as exc:  # the FTS5 route answers meanwhile; the next stale search retries
            logger.warning("内存关键词索引加载失败，继续使用 FTS5 检索：%s", exc)
            return
        if not self._cancelled.is_set():
            self._loaded = loaded
            self.loads += 1

    async def wait_ready(self) -> bool:
        """Wait for a load under way (tests, benchmarks); whether the index is ready."""
        if self._loading is not None:
            await asyncio.gather(self._loading, return_exceptions=True)
        return self.ready

    async def close(self) -> None:
        self._cancelled.set()
        if self._loading is not None:
            await asyncio.gather(self._loading, return_exceptions=True)
        self._loaded = None

    def forget(self) -> None:
        """Drop the index and reload it in the background (the journal cannot bring it up to date)."""
        self._loaded = None
        self.start_loading()

    async def search(
        self,
        terms: Sequence[str],
        *,
        store_tokens: Sequence[str] | None,
        state_test: RowStateTest | None,
        where: str,
        params: Sequence[Any],
        limit: int,
        depths: Sequence[int],
    ) -> MemoryKeywordHits | None:
        """The best ``limit`` live rows matching any of ``terms`` that pass the caller's filter; None when the
        index is not ready (the caller takes the FTS5 route).

        The filter is ``state_test`` when it can be (``RecordFilter.state_test``): applied in memory to every
        scored row. Otherwise ``where``, an SQL condition on ``booku_memory_records r`` with ``params``, checked on
        the ``depths`` best rows (``record_search.keyword_depths``), first then deeper; the query is scored once, at the
        deepest."""
        loaded = self._loaded
        core = aiosqlite_core(self.db.reader)
        if loaded is None or core is None or not self.enabled:
            return None
        execute, raw = core
        try:
            return await execute(
                _search_here,
                raw,
                loaded,
                list(terms),
                store_tokens,
                state_test,
                where,
                list(params),
                limit,
                list(depths),
            )
        except _Stale:
            if self._loaded is loaded:
                self.forget()
            return None

    async def candidates(
        self,
        memory_ids: Sequence[str],
        tags_for: set[str] | None,
        read_missing: Callable[[sqlite3.Connection, list[str]], dict[str, CandidateRow]],
    ) -> dict[str, CandidateRow] | None:
        """``RecordRepository.candidates`` from the rows held, or None when they are not kept or not loaded (the
        caller reads them in SQL).

        One hop to the reader's thread: the journal is followed first, so the rows are the committed table's, and
        the ids not held are read there by ``read_missing(connection, ids)`` (their SQL read)."""
        loaded = self._loaded_with_candidates()
        core = aiosqlite_core(self.db.reader)
        if loaded is None or core is None:
            return None
        execute, raw = core
        try:
            return await execute(
                _candidates_here, raw, loaded, loaded.candidates, list(memory_ids), tags_for, read_missing
            )
        except _Stale:
            if self._loaded is loaded:
                self.forget()
            return None

    def held_candidates(
        self, memory_ids: Sequence[str], tags_for: set[str] | None
    ) -> tuple[dict[str, CandidateRow], list[str]] | None:
        """The rows held of ``memory_ids`` and the ids not held, read here without following the journal first;
        None when no rows are held.

        For a retrieval's second read of candidates (EPA pass 2's new hits), a few milliseconds after its first
        read followed the journal: the rows are those of that moment, so one retrieval weighs every candidate as
        of one moment, and the hop to the reader's thread is saved on the critical path. The
        caller reads the ids not held with ``candidates``. Safe beside a journal being applied on the reader's
        thread: each row and each tag tuple is replaced whole, so a lookup sees a record's old or new row."""
        loaded = self._loaded_with_candidates()
        if loaded is None or loaded.candidates is None:
            return None
        return loaded.candidates.lookup(memory_ids, tags_for)

    def _loaded_with_candidates(self) -> _Loaded | None:
        """The loaded index when it holds candidate rows and they are to be used, else None."""
        loaded = self._loaded
        if loaded is None or loaded.candidates is None or not (self.enabled and self.keep_candidates):
            return None
        return loaded

    def holds_vectors(self) -> bool:
        """Whether ``held_vectors`` answers (for the vector index's model, ``vector_model()``)."""
        return self._held_vectors() is not None

    def held_vectors(self, memory_ids: Sequence[str]) -> tuple[dict[str, np.ndarray], list[str]] | None:
        """The stored vectors held of ``memory_ids`` (``storage.mirrors.stored_vectors``) and the ids not held, as
        of the last read (like ``held_candidates``: a retrieval reads its candidates, which follows the journal,
        before it reads any vector); None when no vectors of the vector index's model are held."""
        vectors = self._held_vectors()
        return None if vectors is None else vectors.lookup(memory_ids)

    def _held_vectors(self) -> StoredVectors | None:
        """The stored vectors held for the vector index's model (``vector_model()``), or None. When the index was
        loaded before the vector index bound its model (a remote model learns its dimension from a first call),
        that model's vectors are loaded once, in the background, with a reload of the whole index."""
        loaded = self._loaded_with_candidates()
        wanted = self.vector_model() if self.keep_vectors else None
        if loaded is None or wanted is None:
            return None
        if loaded.vectors is not None and loaded.vectors.holds(*wanted):
            return loaded.vectors
        idle = self._loading is None or self._loading.done()
        if idle and self._vector_load_asked != wanted:
            self._vector_load_asked = wanted  # once: a load that fails is not retried on every read
            self.start_loading()
        return None


def _candidates_here(
    raw: sqlite3.Connection,
    loaded: _Loaded,
    rows: CandidateRows,
    memory_ids: list[str],
    tags_for: set[str] | None,
    read_missing: Callable[[sqlite3.Connection, list[str]], dict[str, CandidateRow]],
) -> dict[str, CandidateRow]:
    """One hop on the reader's thread: follow the journal, look the rows up, read the ones not held."""
    _apply_journal(raw, loaded)
    found, missing = rows.lookup(memory_ids, tags_for)
    if missing:
        found.update(read_missing(raw, missing))
    return found


def _search_here(
    raw: sqlite3.Connection,
    loaded: _Loaded,
    terms: list[str],
    store_tokens: Sequence[str] | None,
    state_test: RowStateTest | None,
    where: str,
    params: list[Any],
    limit: int,
    depths: list[int],
) -> MemoryKeywordHits:
    """One hop on the reader's thread: follow the journal, score, then keep the best rows that pass the filter."""
    _apply_journal(raw, loaded)
    if state_test is not None:
        top = loaded.index.search(terms, depth=limit, stores=store_tokens, eligible=loaded.states.admitted(state_test))
        memory_ids = loaded.states.memory_ids
        hits: list[tuple[str, float]] = [
            (memory_ids[rid], score) for rid, score in zip(top.rids.tolist(), top.scores.tolist())
        ]
        return MemoryKeywordHits(hits, top.frequencies, loaded.index.rows, top)
    top = loaded.index.search(terms, depth=depths[-1], stores=store_tokens)  # scored once; checked in slices
    ranked = list(zip(top.rids.tolist(), top.scores.tolist()))
    hits = []
    for depth in depths:
        rids = [rid for rid, _ in ranked[:depth]]
        if not rids:
            break
        # NOT INDEXED: look the rows up by rid. Left to itself, SQLite preferred an index matching the filters
        # (store, bucket, status) and walked every row of the store.
        passing = dict(
            raw.execute(
                f"SELECT r.rid, r.memory_id FROM booku_memory_records r NOT INDEXED "
                f"WHERE r.rid IN ({placeholders(len(rids))}) AND {where}",
                [*rids, *params],
            ).fetchall()
        )
        hits = [(passing[rid], score) for rid, score in ranked[:depth] if rid in passing]
        if len(hits) >= limit or len(ranked) <= depth:
            break
    return MemoryKeywordHits(hits[:limit], top.frequencies, loaded.index.rows, top)

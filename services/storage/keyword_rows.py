"""The keyword index's rows (``booku_memory_fts``): how a record becomes one, the plans that write them and journal
each change for the in-memory mirrors, the store token that scopes a MATCH, and the whole-index rebuild.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import aiosqlite

from ..logic.segmentation import segment_for_index
from ..logic.text import keyword_title
from .mirrors.keyword_mirror import (
    JOURNAL_INSERT_SQL,
    JOURNAL_RESET_RID,
    TRIM_JOURNAL_SQL,
)
from .record_reads import RecordReads
from .write_plans import PlanStatement, WritePlan, run_plan

# booku_meta key a migration sets when the keyword index must be refilled from the records at the next start
# (segmentation needs jieba, which SQL cannot run).
KEYWORD_REBUILD_META_KEY = "keyword_index_rebuild"
# Columns of booku_memory_fts the query terms search; the ``store`` column only scopes the match.
TEXT_FTS_COLUMNS = "{title content tags}"


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


KEYWORD_DELETE_SQL = "DELETE FROM booku_memory_fts WHERE rowid = ?"
_KEYWORD_INSERT_SQL = "INSERT INTO booku_memory_fts (rowid, title, content, tags, store) VALUES (?, ?, ?, ?, ?)"

KeywordRow = tuple[int, bool, list[Any]]
"""A keyword-index row held back for ``deferred_keyword_rows_plan``: (rid, replace an existing row first, values)."""


def keyword_row_plan(
    record: Mapping[str, Any], *, replace: bool = True, deferred: list[KeywordRow] | None = None
) -> WritePlan[None]:
    """The record's keyword row: segmented title (unless it adds nothing, ``keyword_title``), content and tags, plus
    its store's token.

    ``replace=False`` skips deleting an old row (the full rebuild has emptied the table already). With
    ``deferred`` the row is segmented now but appended there, not written (see ``deferred_keyword_rows_plan``).
    """
    tags = " ".join(record.get("tags", []) + record.get("core_tags", []) + record.get("diffusion_tags", []))
    values = [
        record["rid"],
        _segmented(keyword_title(record["title"], record["content"])),
        _segmented(record["content"]),
        _segmented(tags),
        store_token(record["store_key"]),
    ]
    if deferred is not None:
        deferred.append((record["rid"], replace, values))
        return
    if replace:
        yield PlanStatement(KEYWORD_DELETE_SQL, [record["rid"]])
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
        yield PlanStatement(KEYWORD_DELETE_SQL, deletes, many=True)
    if final:
        yield PlanStatement(_KEYWORD_INSERT_SQL, [values for _, values in final.values()], many=True)
        yield PlanStatement(JOURNAL_INSERT_SQL, [(rid,) for rid in final], many=True)


SEGMENT_MEMO_SIZE = 512
"""Texts whose keyword-index segmentation ``presegment`` keeps for the write about to use it.

Why: jieba runs in Python (~0.3 ms for a 280-character memory), and inside a write plan it runs on the writer's
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


def keyword_rows_plan(records: Iterable[Mapping[str, Any]]) -> WritePlan[None]:
    """Keyword rows of many records into an emptied index (the rebuild)."""
    for record in records:
        yield from keyword_row_plan(record, replace=False)


class KeywordMaintenance(RecordReads):
    """The keyword index's upkeep: a rebuild from the records, the one a migration asks for, the journal's trim."""

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
            await run_plan(conn, keyword_rows_plan(records.values()))
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

"""Keyword search over records (the in-memory index or FTS5, scored per visible store) and grep (LIKE or regex)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

import aiosqlite

from ..logic.safe_regex import Matcher
from ..logic.segmentation import expression_terms
from .database import placeholders
from .fts_store_stats import bm25, row_frequencies
from .keyword_rows import scoped_fts_query, store_token
from .mirrors.bm25_postings import BM25_SQL_WEIGHTS
from .record_filter import RecordFilter, escape_like
from .record_reads import RecordReads
from .regex_grep import run_regex_grep

# Inner FTS page of a keyword search, in multiples of the requested limit: first try, then the one deeper retry.
KEYWORD_SHALLOW_DEPTH = 3
KEYWORD_DEEP_DEPTH = 10


def keyword_depths(limit: int) -> tuple[int, int]:
    """How many of a keyword search's best-scored rows are checked against the caller's filters: first, then once
    deeper when the filters left fewer than ``limit`` (both keyword routes)."""
    return limit * KEYWORD_SHALLOW_DEPTH, max(limit * KEYWORD_DEEP_DEPTH, 1000)


class RecordSearch(RecordReads):
    """The keyword route of retrieval and the grep of ``memory_command``."""

    async def search_terms(self, terms: Sequence[str], flt: RecordFilter, *, limit: int) -> list[tuple[str, float]]:
        """The keyword route of retrieval over ``terms`` (``segmentation.query_terms``), (memory_id, score) best
        first.

        With the in-memory index ready (``storage.mirrors.keyword_mirror``), every term is ranked there: same bm25 as
        FTS5, cheaper than FTS5's ranking within the budget, and the terms' document frequencies come with it (so the
        keyword challenge reads none); a filter that checks only stores, buckets, statuses and deletion
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
                terms,
                store_tokens=tokens if flt.store_keys is not None else None,
                state_test=flt.state_test(),
                where=where,
                params=params,
                limit=limit,
                depths=keyword_depths(limit),
            )
            if found is not None:
                self.keyword_planner.remember(found.frequencies, found.rows)
                if flt.store_keys is not None:
                    self.scoped_statistics.remember(
                        tokens, found.top.documents, found.top.visible_rows, found.top.visible_tokens
                    )
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
            f"WHERE r.memory_id IN ({placeholders(len(ids))}) AND r.is_deleted = 0",
            ids,
        )
        return {
            row["memory_id"]: " ".join(part for part in (row["title"], row["content"], row["tags"]) if part)
            for row in rows
        }

    async def term_statistics(
        self, terms: Sequence[str], store_keys: Sequence[str] | None = None
    ) -> tuple[dict[str, int], int]:
        """(term → document frequency, rows) of the keyword index, over ``store_keys`` (None = every store), as
        the keyword search counted them (so the query's terms, already counted to rank it, cost no read): another
        store's rows never weigh a reader's terms (``fts_store_stats``)."""
        if store_keys is not None:
            tokens = [store_token(key) for key in dict.fromkeys(store_keys)]
            rows, _ = await self.scoped_statistics.stores(tokens)
            if rows < await self.keyword_planner.indexed_rows():
                terms = list(dict.fromkeys(terms))
                return dict(zip(terms, await self.scoped_statistics.documents(tokens, terms), strict=False)), rows
        return (await self.keyword_planner.document_frequencies(terms), await self.keyword_planner.indexed_rows())

    async def keyword_search(
        self, fts_query: str, flt: RecordFilter, *, limit: int, scope_in_index: bool = True
    ) -> list[tuple[str, float]]:
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
        # With per-store statistics (``fts_store_stats``) every row of the inner page that passes the filters is read
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
                (row["rowid"], row["title"], row["content"], row["tags"], row["store"]), terms
            )
            scored.append((-bm25(frequencies, size, documents, visible_rows, average), row["rowid"], row["memory_id"]))
        scored.sort()
        return [(memory_id, -negative) for negative, _, memory_id in scored[:limit]]

    async def _store_rescoring(
        self, store_keys: Sequence[str] | None, fts_query: str
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
            [expression, depth],
        )
        return bool(row and row[0] >= depth)

    async def grep_like(
        self, query: str, fields: Sequence[str], flt: RecordFilter, *, limit: int
    ) -> list[dict[str, Any]]:
        """Literal substring match in the chosen fields, newest first, evaluated by SQLite."""
        pattern = f"%{escape_like(query)}%"
        return await self._grep(fields, "LIKE ? ESCAPE '\\'", pattern, flt, limit, self.db.fetch_all)

    async def grep_regex(
        self,
        pattern: str,
        matcher: Matcher,
        fields: Sequence[str],
        flt: RecordFilter,
        *,
        limit: int,
        budget_seconds: float,
    ) -> list[dict[str, Any]]:
        """Regex match (``matcher``, compiled from ``pattern`` by ``logic.safe_regex``) on a connection and thread
        of its own within ``budget_seconds`` (``storage.regex_grep``), newest first; the shared reader only reads
        the hits' tags."""

        async def fetch(sql: str, params: Sequence[Any]) -> Sequence[Any]:
            return await run_regex_grep(self.db.path, sql, params, matcher, budget_seconds=budget_seconds)

        return await self._grep(fields, "REGEXP ?", pattern, flt, limit, fetch)

    async def _grep(
        self,
        fields: Sequence[str],
        operator: str,
        value: str,
        flt: RecordFilter,
        limit: int,
        fetch: Callable[[str, Sequence[Any]], Awaitable[Sequence[Any]]],
    ) -> list[dict[str, Any]]:
        """The one body of both greps: ``operator`` (with ``value``) on each chosen field, the filter, newest first;
        ``fetch`` runs the query (the shared reader, or the regex grep's own connection)."""
        ors, params = self._grep_field_clauses(fields, operator, value)
        where, fparams = flt.where()
        rows = await fetch(
            f"SELECT r.* FROM booku_memory_records r WHERE {where} AND ({ors}) "
            f"ORDER BY r.updated_at DESC, r.rid DESC LIMIT ?",
            [*fparams, *params, limit],
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
                    f"EXISTS (SELECT 1 FROM booku_memory_tags t "
                    f"WHERE t.memory_id = r.memory_id AND t.tag_value {operator})"
                )
                params.append(value)
            elif name == "metadata":
                for column in ("memory_id", "source", "folder_id", "bucket", "memory_type", "person_id"):
                    clauses.append(f"COALESCE(r.{column}, '') {operator}")
                    params.append(value)
        return " OR ".join(clauses), params

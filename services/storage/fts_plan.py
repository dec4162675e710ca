"""Plans a keyword (FTS5) search so its cost stays bounded as the store grows.

An FTS5 ``OR`` query computes bm25 for every row that matches any term, so its cost is the sum of the terms'
document frequencies. In a large store one common word (a speaker name in a third of the rows, 最近, help …)
makes the keyword route many times slower; those words add almost nothing to bm25 (their IDF is near zero), yet
they dominate the work. The planner therefore:

* keeps the query's terms rarest first while their summed document frequency stays within the posting budget
  (``retrieval.keyword_posting_budget``, see below; the rarest term is always kept, so a query never loses its
  keyword route). A store smaller than the budget keeps every term, i.e. small stores rank exactly as plain bm25
  over all terms;
* counts a prefix term (``stem*``, ``logic.inflection``) as the summed document frequency of every word it covers,
  which is what FTS5 walks to answer it;
* drops the store clause from the MATCH when the readable stores hold nearly every indexed row
  (``SCOPE_SKIP_SHARE``): intersecting with a store token that matches every row costs a walk over a doclist as
  long as the store, and filters nothing. The outer SQL of the search still filters by store, so skipping the
  clause can never widen what a caller sees.

Document frequencies come from an ``fts5vocab`` table, which walks a term's doclist to count it, so they are cached
per term. They only steer which terms are worth their cost, so a value that is a few minutes old is good enough.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from ..logic.inflection import PREFIX_MARK, is_prefix_term, prefix_upper_bound
from ..logic.segmentation import fts_expression
from .database import Database, placeholders

# The posting budget (``retrieval.keyword_posting_budget``) is the postings an OR query may walk (the sum of the
# kept terms' document frequencies): it trades a little recall in a large store for a bounded cost per search
# (the trade-off per budget is in ``docs/BENCHMARKS.md``, keyword route). A deployment with CPU to spare and a big
# store may raise it.
# Readable stores holding at least this share of the indexed rows search without the store clause.
SCOPE_SKIP_SHARE = 0.9
# How long a cached document frequency (and the indexed row count) is trusted, in seconds.
STATISTICS_TTL_SECONDS = 300.0
# Cached terms kept at most (least recently used are forgotten first).
MAX_CACHED_TERMS = 50_000
VOCABULARY_TABLE = "temp.booku_fts_term_counts"


@dataclass(frozen=True)
class KeywordPlan:
    """The chosen terms of a keyword search and whether the MATCH must name the readable stores."""

    terms: tuple[str, ...]
    dropped: tuple[str, ...]
    scope_in_index: bool

    @property
    def expression(self) -> str:
        """``"t1" OR "t2" …`` over the kept terms (each a quoted FTS5 string, so user input stays plain text); a
        prefix term ``stem*`` (``logic.inflection``) becomes ``"stem"*``, which matches every word starting with it."""
        return fts_expression(self.terms)


def choose_terms(terms: Sequence[str], frequencies: dict[str, int], budget: int) -> tuple[list[str], list[str]]:
    """Terms kept (in the query's order) and dropped under ``budget`` summed document frequency.

    Terms no document contains cost nothing and are kept (they cannot match, but keep the expression honest).
    The rarest term that occurs is always kept.
    """
    by_rarity = sorted((t for t in terms if frequencies.get(t, 0) > 0), key=lambda t: frequencies[t])
    chosen: set[str] = set()
    spent = 0
    for term in by_rarity:
        cost = frequencies[term]
        if chosen and spent + cost > budget:
            break
        chosen.add(term)
        spent += cost
    kept = [t for t in terms if t in chosen or frequencies.get(t, 0) == 0]
    dropped = [t for t in terms if t not in kept]
    return kept, dropped


class KeywordPlanner:
    """Per-runtime cache of document frequencies and the planning rule above."""

    def __init__(self, db: Database, *, posting_budget: int) -> None:
        self.db = db
        self.posting_budget = posting_budget
        self._frequencies: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._row_count: tuple[int, float] | None = None
        self._vocabulary_connection: object | None = None  # the reader the temp vocabulary table lives on

    async def plan(
        self, terms: Sequence[str], store_keys: Sequence[str] | None, store_tokens: Sequence[str]
    ) -> KeywordPlan | None:
        """``None`` when there is no term. ``store_tokens`` are the FTS tokens of ``store_keys``."""
        terms = list(dict.fromkeys(t for t in terms if t))
        if not terms:
            return None
        frequencies = await self.document_frequencies([*terms, *store_tokens])
        kept, dropped = choose_terms(terms, frequencies, self.posting_budget)
        scope_in_index = store_keys is not None
        if scope_in_index:
            rows = await self.indexed_rows()
            owned = sum(frequencies.get(token, 0) for token in dict.fromkeys(store_tokens))
            scope_in_index = not (rows > 0 and owned >= SCOPE_SKIP_SHARE * rows)
        return KeywordPlan(tuple(kept), tuple(dropped), scope_in_index)

    async def document_frequencies(self, terms: Sequence[str]) -> dict[str, int]:
        now = time.monotonic()
        found: dict[str, int] = {}
        missing: list[str] = []
        for term in dict.fromkeys(terms):
            cached = self._frequencies.get(term)
            if cached is not None and now - cached[1] < STATISTICS_TTL_SECONDS:
                found[term] = cached[0]
                self._frequencies.move_to_end(term)
            else:
                missing.append(term)
        if missing:
            await self._ensure_vocabulary()
            exact = [term for term in missing if not is_prefix_term(term)]
            counted: dict[str, int] = {}
            if exact:
                rows = await self.db.fetch_all(
                    f"SELECT term, doc FROM {VOCABULARY_TABLE} WHERE term IN ({placeholders(len(exact))})", exact
                )
                counted = {row["term"]: int(row["doc"]) for row in rows}
            prefixes = [term for term in missing if is_prefix_term(term)]
            if prefixes:
                # A prefix walks the doclist of every word it covers: its cost is their summed frequency. One read
                # for all of the query's prefixes (a range sum each), not one per prefix.
                stems = [term[: -len(PREFIX_MARK)] for term in prefixes]
                range_sum = f"(SELECT COALESCE(SUM(doc), 0) FROM {VOCABULARY_TABLE} WHERE term >= ? AND term < ?)"
                row = await self.db.fetch_one(
                    "SELECT " + ", ".join([range_sum] * len(stems)),
                    [bound for stem in stems for bound in (stem, prefix_upper_bound(stem))],
                )
                assert row is not None  # an aggregate always answers one row
                counted.update((term, int(row[index])) for index, term in enumerate(prefixes))
            for term in missing:
                found[term] = counted.get(term, 0)
                self._frequencies[term] = (found[term], now)
            while len(self._frequencies) > MAX_CACHED_TERMS:
                self._frequencies.popitem(last=False)
        return found

    async def indexed_rows(self) -> int:
        now = time.monotonic()
        if self._row_count is None or now - self._row_count[1] >= STATISTICS_TTL_SECONDS:
            count = int(await self.db.fetch_value("SELECT COUNT(*) FROM booku_memory_fts_docsize", (), 0))
            self._row_count = (count, now)
        return self._row_count[0]

    def remember(self, frequencies: dict[str, int], rows: int) -> None:
        """Cache document frequencies and the row count counted elsewhere (the in-memory keyword index counts a
        query's terms as it ranks them, so the keyword challenge that follows reads no ``fts5vocab`` row)."""
        now = time.monotonic()
        for term, count in frequencies.items():
            self._frequencies[term] = (count, now)
            self._frequencies.move_to_end(term)
        while len(self._frequencies) > MAX_CACHED_TERMS:
            self._frequencies.popitem(last=False)
        self._row_count = (rows, now)

    def forget(self) -> None:
        """Drop every cached statistic (after a rebuild of the keyword index)."""
        self._frequencies.clear()
        self._row_count = None

    async def _ensure_vocabulary(self) -> None:
        """Create the temp ``fts5vocab`` table on the current reader (again after the database was reopened)."""
        reader = self.db.reader
        if self._vocabulary_connection is not reader:
            await reader.execute(
                f"CREATE VIRTUAL TABLE IF NOT EXISTS {VOCABULARY_TABLE} "
                "USING fts5vocab(main, 'booku_memory_fts', 'row')"
            )
            self._vocabulary_connection = reader

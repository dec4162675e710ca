"""bm25 statistics of the stores a reader may see, for the FTS5 keyword route.

Why: FTS5's ``bm25()`` counts N (rows), n (rows holding a term) and avgdl over the whole table, so one store's
writes moved the keyword scores that every other store's reader saw (40 private memories with one word in store A
lowered a score in store B). The in-memory index (``mirrors.bm25_postings``) scores with the visible stores' counts; the
FTS5 route, used while that index loads or when it is off, lets FTS5 pick and order its candidate page as before
and then scores those rows again with the same formula over the same counts, so both routes give one store's
reader the same scores whatever the other stores hold.

Counts come from the keyword table itself (rows of the stores' tokens; a row's size is its space-separated tokens plus
its store token, as ``mirrors.bm25_postings`` counts it) and are cached for ``STATISTICS_TTL_SECONDS`` per store set and
per (store set, term), like the planner's global counts: a few minutes old is fine, and a cached count of one store set
never includes another's rows.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Sequence

from ..logic.inflection import PREFIX_MARK, is_prefix_term
from ..logic.segmentation import quote_fts_term
from .database import Database
from .fts_plan import MAX_CACHED_TERMS, STATISTICS_TTL_SECONDS
from .mirrors.bm25_postings import (
    BM25_B,
    BM25_K1,
    COLUMN_WEIGHTS,
    IDF_FLOOR,
    KeywordRowText,
    fold_token,
)

_TOKENS_SQL = (
    "(length(COALESCE({0}, '')) - length(replace(COALESCE({0}, ''), ' ', '')) + (length(COALESCE({0}, '')) > 0))"
)
STORE_STATISTICS_SQL = (
    "SELECT COUNT(*), COALESCE(SUM("
    + " + ".join(_TOKENS_SQL.format(column) for column in ("title", "content", "tags", "store"))
    + "), 0) FROM booku_memory_fts WHERE booku_memory_fts MATCH ?"
)
TEXT_COLUMNS = "{title content tags}"


def store_clause(store_tokens: Sequence[str]) -> str:
    return "store : (" + " OR ".join(quote_fts_term(token) for token in store_tokens) + ")"


def term_clause(term: str) -> str:
    if is_prefix_term(term):
        return f"{TEXT_COLUMNS} : ({quote_fts_term(term[: -len(PREFIX_MARK)])}{PREFIX_MARK})"
    return f"{TEXT_COLUMNS} : ({quote_fts_term(term)})"


def row_frequencies(row: KeywordRowText, terms: Sequence[str]) -> tuple[int, list[float]]:
    """(size in tokens, store token included; weighted frequency of each of ``terms``) of one keyword row, as
    ``KeywordIndex`` counts them (``COLUMN_WEIGHTS``; a prefix term counts every word starting with its stem)."""
    exact = {fold_token(term): index for index, term in enumerate(terms) if not is_prefix_term(term)}
    stems = [(fold_token(term[: -len(PREFIX_MARK)]), index) for index, term in enumerate(terms) if is_prefix_term(term)]
    frequencies = [0.0] * len(terms)
    _, title, content, tags, store = row
    size = len((store or "").split())
    for text, weight in zip((title, content, tags), COLUMN_WEIGHTS):
        for token in (text or "").split():
            size += 1
            term = fold_token(token)
            index = exact.get(term)
            if index is not None:
                frequencies[index] += weight
            for stem, index in stems:
                if term.startswith(stem):
                    frequencies[index] += weight
    return size, frequencies


def bm25(frequencies: Sequence[float], size: int, documents: Sequence[int], rows: int, average: float) -> float:
    """The bm25 score (higher is better) of a row from its term frequencies, with each term's document count."""
    score = 0.0
    norm = BM25_K1 * (1.0 - BM25_B + BM25_B * size / average)
    for frequency, count in zip(frequencies, documents):
        if frequency and count:
            idf = math.log((rows - count + 0.5) / (count + 0.5))
            score += (idf if idf > 0 else IDF_FLOOR) * frequency * (BM25_K1 + 1.0) / (frequency + norm)
    return score


class ScopedKeywordStatistics:
    """Cached (rows, tokens) per store set and document counts per (store set, term), from ``booku_memory_fts``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._stores: dict[tuple[str, ...], tuple[int, int, float]] = {}
        self._documents: OrderedDict[tuple[tuple[str, ...], str], tuple[int, float]] = OrderedDict()

    async def stores(self, store_tokens: Sequence[str]) -> tuple[int, int]:
        """(rows, tokens) of the stores with these tokens."""
        key = tuple(sorted(set(store_tokens)))
        now = time.monotonic()
        cached = self._stores.get(key)
        if cached is None or now - cached[2] >= STATISTICS_TTL_SECONDS:
            row = await self.db.fetch_one(STORE_STATISTICS_SQL, [store_clause(key)])
            assert row is not None  # an aggregate always answers one row
            cached = self._stores[key] = (int(row[0]), int(row[1]), now)
        return cached[0], cached[1]

    async def documents(self, store_tokens: Sequence[str], terms: Sequence[str]) -> list[int]:
        """How many rows of these stores hold each term (a prefix term: any word starting with its stem)."""
        key = tuple(sorted(set(store_tokens)))
        now = time.monotonic()
        counts = []
        for term in terms:
            cached = self._documents.get((key, term))
            if cached is None or now - cached[1] >= STATISTICS_TTL_SECONDS:
                count = await self.db.fetch_value(
                    "SELECT COUNT(*) FROM booku_memory_fts WHERE booku_memory_fts MATCH ?",
                    [f"{store_clause(key)} AND {term_clause(term)}"],
                    0,
                )
                cached = self._documents[(key, term)] = (int(count), now)
            self._documents.move_to_end((key, term))
            counts.append(cached[0])
        while len(self._documents) > MAX_CACHED_TERMS:
            self._documents.popitem(last=False)
        return counts

    def remember(self, store_tokens: Sequence[str], documents: dict[str, int], rows: int, tokens: int) -> None:
        """Cache counts the in-memory index made while it ranked (so the keyword challenge reads none)."""
        key = tuple(sorted(set(store_tokens)))
        now = time.monotonic()
        self._stores[key] = (rows, tokens, now)
        for term, count in documents.items():
            self._documents[(key, term)] = (count, now)
            self._documents.move_to_end((key, term))
        while len(self._documents) > MAX_CACHED_TERMS:
            self._documents.popitem(last=False)

    def forget(self) -> None:
        """Drop every cached count (after a rebuild of the keyword index)."""
        self._stores.clear()
        self._documents.clear()

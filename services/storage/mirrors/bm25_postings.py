"""An in-memory copy of the keyword index that ranks exactly as FTS5's ``bm25()`` does, at a fraction of its cost.

Why: in a large store most of FTS5's time per keyword search goes to computing ``bm25()`` for the rows a query
matches, not to walking the doclists: per matched row it decodes position lists and looks up the row's size in
``%_docsize``. Here the postings are numpy arrays (row id, column-weighted term frequency) and a query is a few
vectorised operations, cheaper with every term than the FTS5 route with only the rarest terms it keeps within
``retrieval.keyword_posting_budget``. So no term is dropped here (figures: ``docs/BENCHMARKS.md``, keyword route).

The score is FTS5's bm25 formula (``fts5_aux.c``):

* a phrase's frequency in a row is the weighted sum of its hits per column (``COLUMN_WEIGHTS``: title 3, content 1,
  tags 2);
* D is the row's size in tokens over all its columns (the store token included), avgdl = all tokens / all rows;
* idf = ln((N − n + 0.5) / (n + 0.5)), at least 1e-6, where n counts the rows the phrase occurs in;
* N, n and avgdl count the rows of the stores the search may read only (``stores``): otherwise one store's writes
  would move the scores another store's reader sees (FTS5 counts every row of the table, so a scoped search
  scores differently here than FTS5's ``bm25()`` would; ``RecordRepository.keyword_search`` rescales FTS5's
  rows the same way). Per-store row and token counts are kept as rows change, so this costs no recount;
* a prefix term ``stem*`` (``logic.inflection``) is one phrase: its frequency sums every word it covers.

Soft-deleted records keep their keyword row (as in FTS5) and are filtered by the caller (``eligible``); so N, avgdl and
the idf are those FTS5 would compute, and a search returns the same scores (``tests/services/test_keyword_mirror.py``
compares them on every query).

This module is the data structure only. It is filled from and kept in step with the ``booku_memory_fts`` table by
``storage.mirrors.keyword_mirror``, and touched by one thread at a time (the reader connection's, after loading).

Layout: a *base* (per term, one slice of two big arrays) built in bulk, and a *delta* of rows written since, kept
in dicts; a row rewritten or deleted after the base was built is masked out of the base (``_base_live``). When the
delta outgrows ``COMPACT_SHARE`` of the base, both are merged into a new base.
"""

from __future__ import annotations

import bisect
import math
import unicodedata
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ...logic.inflection import PREFIX_MARK, is_prefix_term, prefix_upper_bound

# bm25() weights of the keyword index's columns: title, content, tags (the store column only scopes and weighs 0).
COLUMN_WEIGHTS = (3, 1, 2)
BM25_SQL_WEIGHTS = ", ".join(str(float(weight)) for weight in (*COLUMN_WEIGHTS, 0))
BM25_K1 = 1.2
BM25_B = 0.75
IDF_FLOOR = 1e-6
# The delta is merged into the base when it holds more postings than this share of the base (or than
# COMPACT_MIN_POSTINGS, whichever is larger): a query converts a changed term's delta to arrays, and the merge
# rewrites the whole base, so it runs only once per many rows written.
COMPACT_SHARE = 0.1
COMPACT_MIN_POSTINGS = 50_000
# Postings summed by row with a dense count over every row id once they outnumber the rows divided by this: below
# it sorting them costs less.
DENSE_SUM_RATIO = 64

KeywordRowText = tuple[int, str | None, str | None, str | None, str | None]
"""A row of ``booku_memory_fts``: (rid, title, content, tags, store), each text space-joined tokens."""


def fold_token(token: str) -> str:
    """A stored or query token as FTS5's ``unicode61 remove_diacritics 2`` compares it: Latin letters lose their
    diacritics (``café`` → ``cafe``); tokens are lower-cased already (``logic.segmentation.tokenize``)."""
    if token.isascii():
        return token
    folded = []
    for char in token:
        if "\u00c0" <= char <= "\u024f" or "\u1e00" <= char <= "\u1eff":
            base = unicodedata.normalize("NFD", char)[0]
            folded.append(base if base.isascii() else char)
        else:
            folded.append(char)
    return "".join(folded)


class _TermIds(dict):
    """Raw token → term id, assigning the next id to a folded form never seen (used with ``map`` in bulk)."""

    def __init__(self, folded: dict[str, int]) -> None:
        super().__init__()
        self.folded = folded

    def __missing__(self, token: str) -> int:
        term = fold_token(token)
        term_id = self.folded.setdefault(term, len(self.folded))
        self[token] = term_id
        return term_id


@dataclass
class KeywordTop:
    """The best rows of one search: ids and scores (higher is better), best first, and how many rows matched (of
    the stores and rows the search admitted)."""

    rids: np.ndarray
    scores: np.ndarray
    matched: int
    frequencies: dict[str, int]
    """What ``KeywordPlanner.document_frequencies`` counts, per query term: the rows holding it; for a prefix term,
    the summed frequencies of the words it covers."""
    documents: dict[str, int] = field(default_factory=dict)
    """Per query term, the rows of the searched stores holding it (the n of its idf)."""
    visible_rows: int = 0
    visible_tokens: int = 0


class KeywordIndex:
    """Postings of ``booku_memory_fts`` in memory, with FTS5's bm25 (see the module docstring)."""

    def __init__(self) -> None:
        self._term_of: dict[str, int] = {}  # folded term → id
        self._vocabulary: list[str] = []  # folded terms, sorted (prefix ranges)
        self._base_start = np.zeros(1, np.int64)  # term id → slice of the base arrays (start, start of next)
        self._base_rids = np.zeros(0, np.int32)
        self._base_weights = np.zeros(0, np.uint16)
        self._base_live = np.zeros(0, bool)  # rid → its base postings are current
        self._masked = 0  # rows masked out of the base since it was built
        self._delta_rows: dict[int, dict[int, int]] = {}  # rid → {term id: weighted frequency}
        self._delta_terms: dict[int, dict[int, int]] = {}  # term id → {rid: weighted frequency}
        self._delta_postings = 0
        self._delta_arrays: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._length = np.zeros(0, np.float64)  # rid → tokens in the row (0: no row)
        self._store = np.zeros(0, np.int32)  # rid → store code (-1: no row)
        self._store_code: dict[str, int] = {}
        self._store_rows: list[int] = []  # store code → rows
        self._store_tokens: list[int] = []  # store code → tokens in its rows
        self.rows = 0
        self.tokens = 0

    # ------------------------------------------------------------------ building
    @classmethod
    def build(cls, rows: Iterable[KeywordRowText]) -> KeywordIndex:
        """An index of ``rows`` (every row of the table, in any order), built in bulk: the per-token work is
        ``map`` and ``array.extend`` in C, the grouping one numpy sort (it runs in a thread while FTS5 answers)."""
        index = cls()
        ids = _TermIds(index._term_of)
        terms = array("i")
        segment_rids, segment_weights, segment_sizes = array("i"), array("H"), array("i")
        lengths: dict[int, int] = {}
        stores: dict[int, int] = {}
        for rid, title, content, tags, store in rows:
            size = 0
            for text, weight in zip((title, content, tags), COLUMN_WEIGHTS):
                if text:
                    before = len(terms)
                    terms.extend(map(ids.__getitem__, text.split()))
                    segment_rids.append(rid)
                    segment_weights.append(weight)
                    segment_sizes.append(len(terms) - before)
                    size += len(terms) - before
            store_tokens = store.split() if store else []
            lengths[rid] = size + len(store_tokens)
            stores[rid] = index._code_of(store_tokens[0] if store_tokens else "")
        index._ensure_rid(max(lengths, default=0))
        present = np.fromiter(lengths, np.int64, len(lengths))
        index._length[present] = np.fromiter(lengths.values(), np.float64, len(lengths))
        index._store[present] = np.fromiter(stores.values(), np.int32, len(stores))
        index._base_live[present] = True
        codes = np.fromiter(stores.values(), np.int64, len(stores))
        index._store_rows = np.bincount(codes, minlength=len(index._store_code)).tolist()
        index._store_tokens = (
            np.bincount(
                codes, np.fromiter(lengths.values(), np.float64, len(lengths)), minlength=len(index._store_code)
            )
            .astype(np.int64)
            .tolist()
        )
        index.rows = len(lengths)
        index.tokens = int(sum(lengths.values()))
        sizes = np.frombuffer(segment_sizes, np.int32)
        index._set_base(
            np.frombuffer(terms, np.int32),
            np.repeat(np.frombuffer(segment_rids, np.int32), sizes),
            np.repeat(np.frombuffer(segment_weights, np.uint16), sizes),
        )
        index._vocabulary = sorted(index._term_of)
        return index

    def _set_base(self, terms: np.ndarray, rids: np.ndarray, weights: np.ndarray) -> None:
        """Group (term, rid, weight) triples into per-term slices, one posting per (term, rid) with summed weight.

        One sort of int64 keys (term, rid and a 16-bit weight packed) rather than a two-key lexsort and gathers.
        """
        span = int(rids.max()) + 1 if len(rids) else 1
        # In place: each temporary array of 8 bytes per token would cost a pass over every posting.
        keys = terms.astype(np.int64)
        keys *= span
        keys += rids
        keys <<= 16
        keys |= weights
        keys.sort()
        if len(keys):
            pairs = keys >> 16
            changed = np.empty(len(pairs), bool)
            changed[0] = True
            np.not_equal(pairs[1:], pairs[:-1], out=changed[1:])
            first = np.flatnonzero(changed)
            keys &= 0xFFFF
            summed = np.add.reduceat(keys, first)
            pairs = pairs[first]
        else:
            pairs, summed = keys, np.zeros(0, np.int64)
        terms = pairs // span
        self._base_rids = (pairs - terms * span).astype(np.int32)
        self._base_weights = np.minimum(summed, np.iinfo(np.uint16).max).astype(np.uint16)
        self._base_start = np.searchsorted(terms, np.arange(len(self._term_of) + 1)).astype(np.int64)

    def _code_of(self, store_token: str) -> int:
        code = self._store_code.setdefault(store_token, len(self._store_code))
        if code == len(self._store_rows):
            self._store_rows.append(0)
            self._store_tokens.append(0)
        return code

    def _ensure_rid(self, rid: int) -> None:
        if rid < len(self._length):
            return
        size = max(rid + 1, 2 * len(self._length), 1024)
        self._length = np.concatenate([self._length, np.zeros(size - len(self._length))])
        self._store = np.concatenate([self._store, np.full(size - len(self._store), -1, np.int32)])
        self._base_live = np.concatenate([self._base_live, np.zeros(size - len(self._base_live), bool)])

    # ------------------------------------------------------------------ changes
    def replace(self, rid: int, row: KeywordRowText | None) -> None:
        """Row ``rid`` is now ``row`` (its current text in the table), or gone when ``row`` is None."""
        self._remove(rid)
        if row is None:
            return
        _, title, content, tags, store = row
        frequencies: dict[int, int] = {}
        size = 0
        for text, weight in zip((title, content, tags), COLUMN_WEIGHTS):
            for token in (text or "").split():
                term_id = self._term_id(fold_token(token))
                frequencies[term_id] = frequencies.get(term_id, 0) + weight
                size += 1
        store_tokens = (store or "").split()
        size += len(store_tokens)
        self._ensure_rid(rid)
        self._length[rid] = size
        code = self._store[rid] = self._code_of(store_tokens[0] if store_tokens else "")
        self._store_rows[code] += 1
        self._store_tokens[code] += size
        self.rows += 1
        self.tokens += size
        self._delta_rows[rid] = frequencies
        for term_id, weight in frequencies.items():
            self._delta_terms.setdefault(term_id, {})[rid] = weight
            self._delta_arrays.pop(term_id, None)
        self._delta_postings += len(frequencies)
        if self._delta_postings > max(COMPACT_MIN_POSTINGS, COMPACT_SHARE * len(self._base_rids)):
            self.compact()

    def _remove(self, rid: int) -> None:
        if rid >= len(self._length) or self._length[rid] == 0:
            return
        self.rows -= 1
        self.tokens -= int(self._length[rid])
        code = int(self._store[rid])
        self._store_rows[code] -= 1
        self._store_tokens[code] -= int(self._length[rid])
        self._length[rid] = 0
        self._store[rid] = -1
        if self._base_live[rid]:
            self._base_live[rid] = False
            self._masked += 1
        for term_id in self._delta_rows.pop(rid, {}):
            del self._delta_terms[term_id][rid]
            self._delta_arrays.pop(term_id, None)
            self._delta_postings -= 1

    def _term_id(self, term: str) -> int:
        term_id = self._term_of.get(term)
        if term_id is None:
            term_id = self._term_of[term] = len(self._term_of)
            bisect.insort(self._vocabulary, term)
            self._base_start = np.append(self._base_start, self._base_start[-1])
        return term_id

    def compact(self) -> None:
        """Merge the delta into a new base and drop masked postings (see ``COMPACT_SHARE``)."""
        terms = np.repeat(np.arange(len(self._term_of), dtype=np.int32), np.diff(self._base_start))
        live = self._base_live[self._base_rids] if self._masked else slice(None)
        delta = [
            (term_id, rid, weight)
            for term_id, postings in self._delta_terms.items()
            for rid, weight in postings.items()
        ]
        delta_array = np.array(delta, np.int64).reshape(-1, 3)
        self._set_base(
            np.concatenate([terms[live], delta_array[:, 0].astype(np.int32)]),
            np.concatenate([self._base_rids[live], delta_array[:, 1].astype(np.int32)]),
            np.concatenate([self._base_weights[live], delta_array[:, 2].astype(np.uint16)]),
        )
        self._base_live[:] = self._length > 0
        self._masked = 0
        self._delta_rows.clear()
        self._delta_terms.clear()
        self._delta_arrays.clear()
        self._delta_postings = 0

    # ------------------------------------------------------------------ queries
    def _postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(rids, weighted frequencies) of one term's current postings."""
        start, end = self._base_start[term_id], self._base_start[term_id + 1]
        rids, weights = self._base_rids[start:end], self._base_weights[start:end]
        if self._masked and len(rids):
            live = self._base_live[rids]
            rids, weights = rids[live], weights[live]
        postings = self._delta_terms.get(term_id)
        if postings:
            cached = self._delta_arrays.get(term_id)
            if cached is None:
                cached = self._delta_arrays[term_id] = (
                    np.fromiter(postings.keys(), np.int32, len(postings)),
                    np.fromiter(postings.values(), np.uint16, len(postings)),
                )
            rids, weights = np.concatenate([rids, cached[0]]), np.concatenate([weights, cached[1]])
        return rids, weights

    def _term_ids(self, term: str) -> list[int]:
        """Ids of the words ``term`` covers: itself, or every word starting with a prefix term's stem."""
        if is_prefix_term(term):
            stem = fold_token(term[: -len(PREFIX_MARK)])
            low = bisect.bisect_left(self._vocabulary, stem)
            high = bisect.bisect_left(self._vocabulary, prefix_upper_bound(stem))
            return [self._term_of[word] for word in self._vocabulary[low:high]]
        term_id = self._term_of.get(fold_token(term))
        return [] if term_id is None else [term_id]

    def phrase_postings(self, term: str) -> tuple[np.ndarray, np.ndarray, int]:
        """(rids, weighted frequencies, postings walked) of one query term; a prefix term sums its words per row,
        and walks the postings of every word it covers."""
        parts = [self._postings(term_id) for term_id in self._term_ids(term)]
        walked = sum(len(part[0]) for part in parts)
        if not parts:
            return np.zeros(0, np.int32), np.zeros(0, np.float64), 0
        if len(parts) == 1:
            return parts[0][0], parts[0][1].astype(np.float64), walked
        rids, weights = self._sum_by_row(
            np.concatenate([part[0] for part in parts]), np.concatenate([part[1] for part in parts]).astype(np.float64)
        )
        return rids, weights, walked

    def _sum_by_row(self, rids: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(distinct rids, summed positive values): a dense count over every rid unless the postings are few (a
        sort costs less than a pass over every rid only then). The rows found are read from a boolean mask: numpy
        scans one several times faster than the float sums themselves."""
        if len(rids) * DENSE_SUM_RATIO > len(self._length):
            sums = np.bincount(rids, values, minlength=len(self._length))
            distinct = np.flatnonzero(sums != 0)
            return distinct.astype(np.int32), sums[distinct]
        distinct, inverse = np.unique(rids, return_inverse=True)
        return distinct, np.bincount(inverse, values)

    def store_statistics(self, stores: Sequence[str] | None) -> tuple[int, int, np.ndarray | None]:
        """(rows, tokens, visibility by store code) of ``stores`` (store tokens; None = every store). The
        visibility array is indexed by ``_store`` values (its last entry answers -1, no row); None when every
        row is visible, so a search over the whole index filters nothing."""
        if stores is None:
            return self.rows, self.tokens, None
        codes = sorted({self._store_code[token] for token in stores if token in self._store_code})
        rows = sum(self._store_rows[code] for code in codes)
        tokens = sum(self._store_tokens[code] for code in codes)
        if rows == self.rows:
            return rows, tokens, None
        visible = np.zeros(len(self._store_code) + 1, bool)
        visible[codes] = True
        return rows, tokens, visible

    def search(
        self,
        terms: Sequence[str],
        *,
        depth: int,
        stores: Sequence[str] | None = None,
        eligible: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> KeywordTop:
        """The ``depth`` best rows for an OR of ``terms`` by bm25, among rows of ``stores`` (store tokens, None =
        every store) that ``eligible`` (a mask over rids, if given) admits; ties go to the older row (lower
        rid)."""
        frequencies: dict[str, int] = {}
        rows, tokens, visible = self.store_statistics(stores)
        if not rows:
            return KeywordTop(np.zeros(0, np.int64), np.zeros(0), 0, frequencies)
        documents: dict[str, int] = {}
        average = tokens / rows
        found_rids: list[np.ndarray] = []
        found_scores: list[np.ndarray] = []
        for term in dict.fromkeys(terms):
            rids, frequency, frequencies[term] = self.phrase_postings(term)
            if visible is not None and len(rids):
                keep = visible[self._store[rids]]
                rids, frequency = rids[keep], frequency[keep]
            documents[term] = len(rids)
            if not len(rids):
                continue
            idf = math.log((rows - len(rids) + 0.5) / (len(rids) + 0.5))
            idf = idf if idf > 0 else IDF_FLOOR
            norm = BM25_K1 * (1.0 - BM25_B + BM25_B * self._length[rids] / average)
            found_rids.append(rids)
            found_scores.append(idf * frequency * (BM25_K1 + 1.0) / (frequency + norm))
        if not found_rids:
            return KeywordTop(np.zeros(0, np.int64), np.zeros(0), 0, frequencies, documents, rows, tokens)
        rids = np.concatenate(found_rids)
        scores = np.concatenate(found_scores)
        if len(found_rids) > 1:
            rids, scores = self._sum_by_row(rids, scores)
        if eligible is not None:
            keep = eligible(rids)
            rids, scores = rids[keep], scores[keep]
        matched = len(rids)
        if matched > depth:
            # Every row tied with the last one kept, so that the tie goes to the older row, not to whichever of
            # them the partition happened to put first.
            cut = scores[np.argpartition(-scores, depth - 1)[depth - 1]]
            best = scores >= cut
            rids, scores = rids[best], scores[best]
        order = np.lexsort((rids, -scores))[:depth]
        return KeywordTop(rids[order].astype(np.int64), scores[order], matched, frequencies, documents, rows, tokens)

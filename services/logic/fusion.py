"""Fusion of the dense (vector) route and the keyword (FTS5 bm25) route into one ranking.

Why not plain reciprocal-rank fusion: RRF trusts both routes equally for every query, and on Chinese text bm25 over
jieba-segmented words ranks turns that merely repeat the question's generic words (电影, 推荐, 喜欢 …) above the turn
that answers it, so RRF falls behind dense retrieval alone there. Each step below is weighed by what the query is.
What each step gains is in ``docs/BENCHMARKS.md`` (ranking steps).

Method (per query):

1. Standardise each route over its own candidates: ``ẑ(i) = (s(i) − mean) / std`` (a route with one candidate or
   no spread gives its candidates 1 and the floor 0). A candidate missing from a route gets that route's floor
   (its lowest standardised score), i.e. "not better than the weakest hit it returned". Standardising makes the
   compressed cosine range of an embedding model (0.80–0.90) and the open-ended bm25 range comparable, and does
   not depend on how many memories the store holds or how deep each route was fetched.
2. Weigh the keyword route by how reliable its evidence is for this query::

       λ = keyword_weight_max · keyword_reliability            (0 ≤ λ ≤ keyword_weight_max)

   ``keyword_reliability`` (``segmentation.keyword_reliability``) is the share of the query's search terms that
   are exact lexical units — Latin-script words, numbers of ≥ 3 digits, Chinese words of ≥ 4 characters — as
   opposed to short segmented Chinese words, which are generic and carry the confuser matches above. An English
   question gets nearly the full weight; a Chinese paraphrase question gets almost none, unless it names
   something specific (a title, a foreign name, a long compound).
3. ``fused(i) = (1 − λ)(ẑ_d(i) − floor_d) + λ(ẑ_k(i) − floor_k)``; the two terms are returned as the ``vector``
   and ``keyword`` parts (both ≥ 0), so a UI can show why an item ranks where it does.
4. When the query names a date (``time_anchor``), every candidate whose time matches it gains ``time_weight``
   standard deviations: the ``time`` part. A date is the one thing that tells "the museum visit on May 2nd" from
   the other museum visits, and it is in the memory's time, not in its words.
5. When the caller passes write-order ``neighbours`` (``neighbours.write_neighbours``), every candidate is lifted
   toward its best-scoring neighbour (``neighbours.neighbour_lift``, weight ``neighbour_weight``): the answer turn
   written right after the turn that repeats the question's words moves up, the best candidate keeps its place.
   With ``answers`` (``neighbours.answers_to_questions``), the memory written right after one that ends with a
   question then rises to ``answer_margin`` below that question (``neighbours.answer_lift``): the question carries
   the query's words, the answer carries what the query asks for, so the two end up next to each other.
   Both lifts are the ``neighbour`` part. Memories written next to the best candidates that no route returned may
   take part too (``context``): at both routes' floors, only these lifts can raise them.
6. With ``shapes`` (``shape.TextShape`` per candidate), each candidate gains
   ``length_weight · ln(min(length, length_cap)) − question_penalty · λ_r² · question_share`` (``shape.length_prior``
   and ``shape.question_prior``, λ_r = the query's keyword reliability): statements that say more rise, memories
   that only ask sink, for queries in a language where a trailing question means the memory only asks. This is the
   ``shape`` part; it comes after the lifts, so a question still lifts its answer before it sinks below it. The answer
   lift of step 5 already counts both memories' length part, so a lifted answer ends ``answer_margin`` below its
   question in the
   final score; only the question penalty (the question only asks) can put it above.
7. The keyword route's best hit challenges rank 1 (``keyword_challenge``): when it leads its keyword runner-up by
   at least ``keyword_lead_min / λ_r²`` standard deviations of the keyword route (its ``keyword_z`` part, the
   standing before λ; the lead asked for grows fast as the query's keyword reliability λ_r drops, so a Chinese
   query of generic segments never challenges) and the fused best leads it by at most ``fused_lead_max``, the
   caller compares how well each covers the query's terms, weighed by their idf (``segmentation.term_coverage``
   over the keyword index's text), and moves the challenger to rank 1 when it covers them better (``lead_with``:
   the ``lead`` part, the rest keep their order). Applies only when both routes answered.

8. The memories of the person the query names (text ``"<name>: …"``) rise behind rank 1, but not past a rival
   that covers the query's other terms clearly better (``speaker.speaker_lift``; the caller reads the coverage).

When only one route answered (no embedding provider: keyword only; no keyword terms: dense only) the result is that
route's ranking with the other part 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .neighbours import answer_lift, neighbour_lift
from .segmentation import CoverageWeigher, clamped_reliability
from .shape import TextShape, length_prior, question_prior

_EPS = 1e-12


@dataclass(frozen=True)
class FusionParams:
    """Weights of the fused ranking.

    ``keyword_weight_max`` is λ for a query whose terms are all reliable (lower together with the shape prior than
    without it); ``neighbour_weight`` is how far a candidate is lifted toward its best write-order neighbour and
    ``neighbour_radius`` how many write positions apart neighbours may be (the defaults were chosen on LoCoMo
    conversations 3–9 and checked on the others and the Chinese sets, ``docs/BENCHMARKS.md``);
    ``time_weight`` is the lift of a memory whose time matches the query's date (the service takes it from
    ``retrieval.time_anchor_weight``) and ``answer_margin`` how far below its question an answer ends (steps 4 and
    5 of the module docstring); ``question_penalty``, ``length_weight`` and ``length_cap`` weigh the text shape
    (step 6); ``keyword_lead_min`` is how many standard deviations the keyword route's best hit must lead its
    runner-up by (at keyword reliability 1; the lead required grows as ``1 / reliability²``) and ``fused_lead_max``
    how far at most the fused best may lead it in fused score for it to challenge rank 1 (step 7,
    ``keyword_challenge``); ``speaker_weight`` is how far a memory said by the person the query names rises (step 8,
    ``speaker.speaker_lift``); ``rrf_k`` is only used by ``reciprocal_rank_fusion``.
    """

    keyword_weight_max: float = 0.5
    time_weight: float = 2.0
    neighbour_weight: float = 0.5
    neighbour_radius: int = 2
    answer_margin: float = 0.1
    question_penalty: float = 2.0
    length_weight: float = 0.4
    length_cap: int = 250
    keyword_lead_min: float = 0.5
    fused_lead_max: float = 0.4
    speaker_weight: float = 0.7
    rrf_k: int = 60


@dataclass(frozen=True)
class FusedHit:
    """One fused result: ``score`` is the sum of the ``parts`` vector, keyword, time, neighbour and shape (and
    ``lead`` once ``lead_with`` moved it to rank 1, ``speaker`` once ``speaker.speaker_lift`` lifted it).

    ``parts`` also carries the raw route scores (``cosine``, ``bm25``; ``None`` when the route did not return the
    item), ``keyword_z`` (the keyword route's own standing: its standardised score above the route's floor, before
    λ; ``None`` when the route did not return the item) and ``keyword_weight`` (λ of this query).
    """

    id: str
    score: float
    parts: dict[str, Any] = field(default_factory=dict)

    def as_tuple(self) -> tuple[str, float, dict[str, Any]]:
        """``(id, fused_score, parts)``, the shape callers serialise."""
        return self.id, self.score, self.parts


def _standardise(scores: Mapping[str, float]) -> tuple[dict[str, float], float]:
    """z-scores of a route's finite scores and that route's floor (lowest z); degenerate routes → 1 / floor 0."""
    finite = {key: float(value) for key, value in scores.items() if value is not None and math.isfinite(value)}
    if not finite:
        return {}, 0.0
    values = list(finite.values())
    mean = sum(values) / len(values)
    std = math.sqrt(sum((value - mean) ** 2 for value in values) / len(values))
    if len(values) < 2 or std <= _EPS:
        return {key: 1.0 for key in finite}, 0.0
    standardised = {key: (value - mean) / std for key, value in finite.items()}
    return standardised, min(standardised.values())


def keyword_weight(keyword_reliability: float, params: FusionParams) -> float:
    """λ of a query: ``keyword_weight_max × keyword_reliability`` clamped to ``[0, keyword_weight_max]``."""
    ceiling = min(max(params.keyword_weight_max, 0.0), 1.0)
    return clamped_reliability(keyword_reliability) * ceiling


@dataclass(frozen=True)
class _RouteStanding:
    """Steps 1–4 of the module docstring for every candidate: its vector, keyword and time parts (``parts``, in
    first-appearance ``order``), the routes' z-scores and the keyword weight λ."""

    order: dict[str, int]
    parts: dict[str, tuple[float, float, float]]
    dense_z: dict[str, float]
    keyword_z: dict[str, float]
    keyword_floor: float
    weight: float


def _route_standing(
    dense: Mapping[str, float],
    keyword: Mapping[str, float],
    keyword_reliability: float,
    params: FusionParams,
    time_matches: Mapping[str, float] | None,
    context: Sequence[str],
) -> _RouteStanding:
    dense_z, dense_floor = _standardise(dense)
    keyword_z, keyword_floor = _standardise(keyword)
    if not dense_z:
        weight = 1.0
    elif not keyword_z:
        weight = 0.0
    else:
        weight = keyword_weight(keyword_reliability, params)
    order: dict[str, int] = {}
    for key in [*dense_z, *keyword_z, *(time_matches or {}), *context]:
        order.setdefault(key, len(order))
    time_of = time_matches or {}
    parts: dict[str, tuple[float, float, float]] = {}
    for key in order:
        vector_part = (1.0 - weight) * (dense_z.get(key, dense_floor) - dense_floor) if dense_z else 0.0
        keyword_part = weight * (keyword_z.get(key, keyword_floor) - keyword_floor) if keyword_z else 0.0
        parts[key] = (vector_part, keyword_part, params.time_weight * time_of.get(key, 0.0))
    return _RouteStanding(order, parts, dense_z, keyword_z, keyword_floor, weight)


def best_by_routes(
    dense: Mapping[str, float],
    keyword: Mapping[str, float],
    *,
    keyword_reliability: float = 1.0,
    params: FusionParams = FusionParams(),
    time_matches: Mapping[str, float] | None = None,
    limit: int,
) -> list[str]:
    """The ids of ``fuse_routes(dense, keyword, …, time_matches=…, limit=limit)`` (no lifts, no shapes), in that
    order, without building its hits: retrieval picks the strong hits whose write neighbours it reads this way."""
    standing = _route_standing(dense, keyword, keyword_reliability, params, time_matches, ())
    cosine = {key: dense[key] for key in standing.dense_z}
    ranked = sorted(
        standing.order,
        key=lambda key: (-sum(standing.parts[key]), -cosine.get(key, -math.inf), standing.order[key]),
    )
    return ranked[: max(0, limit)]


def fuse_routes(
    dense: Mapping[str, float],
    keyword: Mapping[str, float],
    *,
    keyword_reliability: float = 1.0,
    params: FusionParams = FusionParams(),
    limit: int | None = None,
    neighbours: Mapping[str, Sequence[str]] | None = None,
    time_matches: Mapping[str, float] | None = None,
    answers: Mapping[str, str] | None = None,
    shapes: Mapping[str, TextShape] | None = None,
    context: Sequence[str] = (),
) -> list[FusedHit]:
    """Fuse the two routes' hits into one list, best first (method in the module docstring).

    ``dense``: id → cosine similarity. ``keyword``: id → keyword score, higher is better (pass ``-bm25()`` from
    FTS5). ``keyword_reliability``: ``segmentation.keyword_reliability(query_text)``. ``neighbours``: id → its
    write-order neighbours among the candidates (``neighbours.write_neighbours``); ``None`` skips step 4.
    ``time_matches``: id → how well the memory's time matches the query's time anchor, 0–1
    (``time_anchor.time_matches``); ``None`` or empty skips that part. ``answers``: answer id → the id of the
    question it follows (``neighbours.answers_to_questions``); ``None`` skips step 5. ``shapes``: id → the
    candidate's ``shape.TextShape``; ``None`` skips step 6 (a candidate missing from it gets no prior).
    ``context``: ids no route returned that take part all the same, at both routes' floors (memories written next
    to a strong hit, which only the lifts of step 5 can raise).
    Non-finite scores are ignored. Ties are broken by cosine, then by first appearance (dense first). Returns at
    most ``limit`` hits.
    """
    standing = _route_standing(dense, keyword, keyword_reliability, params, time_matches, context)
    order, route_parts, weight = standing.order, standing.parts, standing.weight
    dense_z, keyword_z, keyword_floor = standing.dense_z, standing.keyword_z, standing.keyword_floor
    shape_of = shapes or {}
    lifts: dict[str, float] = {}
    if neighbours:
        lifts = neighbour_lift(
            {key: sum(parts) for key, parts in route_parts.items()}, neighbours, params.neighbour_weight
        )
    lengths = {
        key: length_prior(shape, length_weight=params.length_weight, length_cap=params.length_cap)
        for key, shape in shape_of.items()
    }
    if answers:
        # The answer is placed against its question with both lengths counted, so it ends ``answer_margin`` below
        # the question in the final score unless the question penalty (a memory that only asks) drops the question.
        lifted = {key: sum(parts) + lifts.get(key, 0.0) + lengths.get(key, 0.0) for key, parts in route_parts.items()}
        for key, extra in answer_lift(lifted, answers, params.answer_margin).items():
            lifts[key] = lifts.get(key, 0.0) + extra
    hits: list[FusedHit] = []
    for key in order:
        vector_part, keyword_part, time_part = route_parts[key]
        neighbour_part = lifts.get(key, 0.0)
        shape = shape_of.get(key)
        shape_part = (
            0.0
            if shape is None
            else lengths[key] + question_prior(shape, keyword_reliability, question_penalty=params.question_penalty)
        )
        cosine = dense.get(key) if key in dense_z else None
        hits.append(
            FusedHit(
                id=key,
                score=vector_part + keyword_part + time_part + neighbour_part + shape_part,
                parts={
                    "vector": vector_part,
                    "keyword": keyword_part,
                    "time": time_part,
                    "neighbour": neighbour_part,
                    "shape": shape_part,
                    "lead": 0.0,
                    "speaker": 0.0,
                    "cosine": cosine,
                    "bm25": keyword.get(key) if key in keyword_z else None,
                    "keyword_z": keyword_z[key] - keyword_floor if key in keyword_z else None,
                    "keyword_weight": weight,
                },
            )
        )
    hits.sort(
        key=lambda hit: (
            -hit.score,
            -(hit.parts["cosine"] if hit.parts["cosine"] is not None else -math.inf),
            order[hit.id],
        )
    )
    return hits if limit is None else hits[: max(0, limit)]


@dataclass(frozen=True)
class KeywordChallenge:
    """The keyword route's best hit (``challenger``) against the fused rank 1 (``incumbent``).

    ``keyword_lead``: how many standard deviations of the keyword route the challenger leads its keyword runner-up
    by; ``fused_gap``: how far the incumbent leads the challenger in fused score.
    """

    challenger: str
    incumbent: str
    keyword_lead: float
    fused_gap: float


def keyword_challenge(
    hits: Sequence[FusedHit], keyword_reliability: float, params: FusionParams = FusionParams()
) -> KeywordChallenge | None:
    """The keyword route's challenge to rank 1 of ``hits`` (``fuse_routes`` output, best first), or ``None``.

    There is a challenge when both routes answered, the keyword route's best hit is not already first, it leads its
    keyword runner-up by at least ``keyword_lead_min / keyword_reliability²`` standard deviations (no runner-up:
    the lead over the route's floor), and the fused best leads it by at most ``fused_lead_max`` in fused score.
    The caller settles it (``lead_with``) only when the challenger also covers the query's terms better
    (``segmentation.term_coverage``, idf-weighted): a strong bm25 on one rare word alone does not make it the answer.
    """
    if len(hits) < 2 or not any(hit.parts.get("cosine") is not None for hit in hits):
        return None
    reliability = clamped_reliability(keyword_reliability)
    if reliability <= 0.0:
        return None
    standings = sorted(
        (hit for hit in hits if hit.parts.get("keyword_z") is not None), key=lambda hit: -hit.parts["keyword_z"]
    )  # stable: ties keep the fused order
    if not standings or standings[0].id == hits[0].id:
        return None
    best = standings[0]
    keyword_lead = best.parts["keyword_z"] - (standings[1].parts["keyword_z"] if len(standings) > 1 else 0.0)
    fused_gap = hits[0].score - best.score
    if keyword_lead < params.keyword_lead_min / reliability**2 or fused_gap > params.fused_lead_max:
        return None
    return KeywordChallenge(best.id, hits[0].id, keyword_lead, fused_gap)


def settle_keyword_challenge(
    hits: Sequence[FusedHit],
    challenge: KeywordChallenge,
    terms: Sequence[str],
    texts: Mapping[str, str | None],
    weights: Mapping[str, float],
) -> list[FusedHit]:
    """``hits`` with the challenger first (``lead_with``) when its text covers the query's ``terms``, weighed by
    ``weights`` (``segmentation.document_idf``), strictly better than the incumbent's; otherwise unchanged (a tie
    keeps the fused order). ``texts``: id → the segmented text the keyword index holds for it."""
    coverage = CoverageWeigher(terms, weights)  # the terms' weights worked out once for both texts
    if coverage(texts.get(challenge.challenger)) <= coverage(texts.get(challenge.incumbent)):
        return list(hits)
    return lead_with(hits, challenge.challenger)


LEAD_MARGIN = 0.01
"""How far above the fused best ``lead_with`` places the hit it moves to rank 1: just enough to order them, so the
calibrated top score hardly moves and every other hit keeps its fused score and order."""


def lead_with(hits: Sequence[FusedHit], key: str) -> list[FusedHit]:
    """``hits`` with ``key`` moved to rank 1 by a ``lead`` part (its score ends ``LEAD_MARGIN`` above the former
    best, so the parts still sum to the score); the others keep their order. Unchanged when ``key`` is already
    first or absent."""
    index = next((position for position, hit in enumerate(hits) if hit.id == key), None)
    if index is None or index == 0:
        return list(hits)
    hit = hits[index]
    lead = hits[0].score - hit.score + LEAD_MARGIN
    moved = FusedHit(hit.id, hit.score + lead, {**hit.parts, "lead": hit.parts.get("lead", 0.0) + lead})
    return [moved, *hits[:index], *hits[index + 1 :]]


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], k: int = 60) -> list[tuple[str, float]]:
    """Classic RRF: ``Σ 1/(k + rank)`` over the rankings (rank from 1). Returns ``(id, score)`` best first.

    Kept as the measured baseline of ``bench/retrieval_quality.py``; the service uses ``fuse_routes``.
    """
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


CURRENT_LEAD_WINDOW = 5
"""For a question that says "now", a pair (a superseded memory and its successor) found this high is what the
question is about, and its successor takes rank 1 (``order_by_currency``)."""


def order_by_currency(
    hits: Sequence[FusedHit], successor_of: Mapping[str, str], *, past: bool, now: bool = False
) -> list[FusedHit]:
    """Step 9: a superseded memory (``successor_of``: its id → the id of the memory that replaced it) and its
    successor, when both were found, trade places if needed so that the successor leads for questions about now
    and questions with no time word, and the superseded memory leads for a question about the past (``past``).
    The one that should lead takes the better of the two places and score; the other follows it, ``LEAD_MARGIN``
    below. Why the better place: the pair ranked there for what it is about, and which of the two is the answer is
    a matter of time, not of words. A ``currency`` part carries each change, so the parts still sum to the score;
    every other hit keeps its place. Chains (A replaced by B, B by C) settle one link at a time. When the question
    says "now" (``now``), a pair both of whose memories stand in the top ``CURRENT_LEAD_WINDOW`` is what it asks
    about: the current one of them (the successor not itself superseded) then takes rank 1 (``lead_with``)."""
    order = list(hits)
    for old_id, new_id in successor_of.items():
        ids = [hit.id for hit in order]
        if old_id not in ids or new_id not in ids:
            continue
        leader_id, follower_id = (old_id, new_id) if past else (new_id, old_id)
        lead_at, follow_at = ids.index(leader_id), ids.index(follower_id)
        if lead_at < follow_at:
            continue  # already in the right order
        top = order[follow_at].score
        leader, follower = order[lead_at], order[follow_at]
        del order[lead_at]
        del order[follow_at]
        order.insert(follow_at, _rescored(follower, top - LEAD_MARGIN))
        order.insert(follow_at, _rescored(leader, top))
    if now and not past:
        top_ids = [hit.id for hit in order[:CURRENT_LEAD_WINDOW]]
        current = next(
            (
                new_id
                for old_id, new_id in successor_of.items()
                if old_id in top_ids and new_id in top_ids and new_id not in successor_of
            ),
            None,
        )
        if current is not None and current != order[0].id:
            at = top_ids.index(current)
            order = [_rescored(order[at], order[0].score + LEAD_MARGIN), *order[:at], *order[at + 1 :]]
    return order


def _rescored(hit: FusedHit, score: float) -> FusedHit:
    return FusedHit(hit.id, score, {**hit.parts, "currency": hit.parts.get("currency", 0.0) + score - hit.score})

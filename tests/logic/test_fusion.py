import math
import random

import pytest

from booku_memory.services.logic.fusion import (
    LEAD_MARGIN,
    FusionParams,
    best_by_routes,
    fuse_routes,
    keyword_challenge,
    keyword_weight,
    lead_with,
    reciprocal_rank_fusion,
    settle_keyword_challenge,
)


def _ids(hits):
    return [hit.id for hit in hits]


DENSE = {"a": 0.90, "b": 0.88, "c": 0.85, "d": 0.80}
KEYWORD = {"c": 12.0, "e": 4.0, "b": 3.0}


def test_without_keyword_reliability_dense_order_is_kept():
    hits = fuse_routes(DENSE, KEYWORD, keyword_reliability=0.0)
    assert _ids(hits)[:4] == ["a", "b", "c", "d"]
    assert all(hit.parts["keyword"] == 0.0 for hit in hits)
    assert "e" in _ids(hits)  # keyword-only hits still appear, after the dense ones


def test_reliable_keyword_evidence_promotes_a_strong_keyword_hit():
    hits = fuse_routes(DENSE, KEYWORD, keyword_reliability=1.0)
    assert _ids(hits)[0] == "c"
    top = hits[0]
    assert top.parts["keyword"] > 0 and top.parts["vector"] > 0
    assert top.score == pytest.approx(top.parts["vector"] + top.parts["keyword"])
    assert top.parts["keyword_weight"] == pytest.approx(FusionParams().keyword_weight_max)
    assert top.parts["cosine"] == 0.85 and top.parts["bm25"] == 12.0


def test_scores_are_descending_and_parts_non_negative():
    hits = fuse_routes(DENSE, KEYWORD, keyword_reliability=0.5)
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(hit.parts["vector"] >= 0 and hit.parts["keyword"] >= 0 for hit in hits)
    assert len(hits) == len(set(DENSE) | set(KEYWORD))


def test_keyword_only_degraded_mode_follows_keyword_ranking():
    hits = fuse_routes({}, KEYWORD, keyword_reliability=0.0)
    assert _ids(hits) == ["c", "e", "b"]
    assert all(hit.parts["vector"] == 0.0 and hit.parts["cosine"] is None for hit in hits)


def test_dense_only_mode_and_empty_input():
    assert _ids(fuse_routes(DENSE, {}, keyword_reliability=1.0)) == ["a", "b", "c", "d"]
    assert fuse_routes({}, {}) == []


def test_single_keyword_hit_still_counts():
    hits = fuse_routes({}, {"x": 2.5})
    assert _ids(hits) == ["x"] and hits[0].score > 0


def test_non_finite_scores_are_ignored_and_limit_applies():
    hits = fuse_routes({"a": 0.9, "b": math.nan}, {"c": math.inf, "d": 1.0}, limit=2)
    assert len(hits) == 2
    assert "b" not in _ids(fuse_routes({"a": 0.9, "b": math.nan}, {}))


def test_keyword_weight_is_clamped():
    params = FusionParams(keyword_weight_max=0.6)
    assert keyword_weight(2.0, params) == pytest.approx(0.6)
    assert keyword_weight(-1.0, params) == 0.0
    assert keyword_weight(math.nan, params) == 0.0


def test_reciprocal_rank_fusion_rewards_agreement():
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "a"]], k=60)
    assert fused[0][0] == "b"
    assert fused[0][1] == pytest.approx(1 / 62 + 1 / 61)


def test_a_time_match_lifts_a_candidate_by_the_time_weight():
    plain = {hit.id: hit for hit in fuse_routes(DENSE, {}, keyword_reliability=0.0)}
    dated = fuse_routes(
        DENSE, {}, keyword_reliability=0.0, params=FusionParams(time_weight=2.0), time_matches={"c": 1.0}
    )
    assert _ids(dated)[0] == "c"
    assert dated[0].parts["time"] == pytest.approx(2.0)
    assert dated[0].score == pytest.approx(plain["c"].score + 2.0)
    assert all(hit.parts["time"] == 0.0 for hit in dated[1:])


def test_a_time_only_candidate_joins_the_ranking_at_the_route_floors():
    hits = fuse_routes(
        DENSE, {}, keyword_reliability=0.0, params=FusionParams(time_weight=1.0), time_matches={"z": 1.0}
    )
    z = next(hit for hit in hits if hit.id == "z")
    assert z.parts["vector"] == 0.0 and z.parts["cosine"] is None
    assert z.score == pytest.approx(1.0)


def test_time_weight_zero_changes_nothing():
    plain = fuse_routes(DENSE, KEYWORD, keyword_reliability=0.5)
    off = fuse_routes(
        DENSE, KEYWORD, keyword_reliability=0.5, params=FusionParams(time_weight=0.0), time_matches={"d": 1.0}
    )
    assert _ids(off) == _ids(plain)


def test_best_by_routes_is_the_order_of_fuse_routes_without_lifts():
    """Retrieval picks the hits whose write neighbours it reads with ``best_by_routes``: the same ids, in the same
    order, as the fused ranking of the routes and the date, ties (equal scores, equal cosines) included."""
    rng = random.Random(7)
    for case in range(200):
        dense = {f"d{i}": round(rng.uniform(0.6, 0.9), 2) for i in range(rng.randrange(0, 30))}
        keyword = {
            rng.choice([*dense, f"k{i}"]) if dense else f"k{i}": float(rng.randrange(1, 6))
            for i in range(rng.randrange(0, 20))
        }
        pool = sorted({*dense, *keyword, "t"})
        times = {key: rng.choice([0.5, 1.0]) for key in rng.sample(pool, k=rng.randrange(0, min(4, len(pool) + 1)))}
        reliability = rng.choice([0.0, 0.3, 1.0])
        limit = rng.randrange(1, 15)
        fused = fuse_routes(dense, keyword, keyword_reliability=reliability, time_matches=times, limit=limit)
        assert best_by_routes(dense, keyword, keyword_reliability=reliability, time_matches=times, limit=limit) == _ids(
            fused
        ), case


# Dense prefers "a"; the keyword route is sure about "k" (1.7 standard deviations ahead of its runner-up "a").
CHALLENGE_DENSE = {"a": 0.90, "b": 0.86, "k": 0.84, "c": 0.83, "d": 0.80}
CHALLENGE_KEYWORD = {"k": 15.0, "a": 9.0, "b": 7.0, "c": 6.0}


def _parts_sum(hit):
    return sum(hit.parts[name] for name in ("vector", "keyword", "time", "neighbour", "shape", "lead"))


def test_keyword_z_is_the_keyword_standing_before_the_weight():
    hits = {hit.id: hit for hit in fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=0.6)}
    values = list(CHALLENGE_KEYWORD.values())
    mean = sum(values) / len(values)
    std = math.sqrt(sum((value - mean) ** 2 for value in values) / len(values))
    assert hits["k"].parts["keyword_z"] == pytest.approx((15.0 - 6.0) / std)
    assert hits["c"].parts["keyword_z"] == 0.0  # the route's floor
    assert hits["d"].parts["keyword_z"] is None  # not returned by the keyword route
    assert hits["k"].parts["keyword"] == pytest.approx(hits["k"].parts["keyword_weight"] * hits["k"].parts["keyword_z"])
    assert all(hit.parts["lead"] == 0.0 and hit.score == pytest.approx(_parts_sum(hit)) for hit in hits.values())


def test_a_sure_keyword_best_close_behind_the_fused_best_challenges_it():
    hits = fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=1.0)
    assert _ids(hits)[:2] == ["a", "k"]
    challenge = keyword_challenge(hits, 1.0)
    assert challenge is not None
    assert (challenge.challenger, challenge.incumbent) == ("k", "a")
    assert challenge.keyword_lead == pytest.approx(hits[1].parts["keyword_z"] - hits[0].parts["keyword_z"])
    assert challenge.fused_gap == pytest.approx(hits[0].score - hits[1].score)
    assert 0 < challenge.fused_gap <= FusionParams().fused_lead_max


def test_the_keyword_lead_required_grows_as_reliability_drops():
    wide = FusionParams(fused_lead_max=10.0)  # only the keyword lead decides here
    lead = 1.7186757  # k over a, in standard deviations of the keyword route
    for reliability, expected in ((1.0, True), (0.95, True), (0.5, False), (0.2, False), (0.0, False)):
        hits = fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=reliability, params=wide)
        assert (keyword_challenge(hits, reliability, wide) is not None) is expected, reliability
        assert expected is (reliability > 0 and lead >= wide.keyword_lead_min / reliability**2)
    strict = FusionParams(keyword_lead_min=1.8)
    hits = fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=1.0, params=strict)
    assert keyword_challenge(hits, 1.0, strict) is None


def test_no_challenge_when_the_fused_best_leads_too_far_or_already_agrees():
    tight = FusionParams(fused_lead_max=0.03)  # the fused gap is 0.044
    hits = fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=1.0, params=tight)
    assert keyword_challenge(hits, 1.0, tight) is None
    agreeing = fuse_routes(DENSE, KEYWORD, keyword_reliability=1.0)
    assert _ids(agreeing)[0] == "c" and keyword_challenge(agreeing, 1.0) is None


def test_no_challenge_when_only_one_route_answered():
    keyword_only = fuse_routes({}, CHALLENGE_KEYWORD, keyword_reliability=1.0)
    dense_only = fuse_routes(CHALLENGE_DENSE, {}, keyword_reliability=1.0)
    assert keyword_challenge(keyword_only, 1.0) is None
    assert keyword_challenge(dense_only, 1.0) is None
    assert keyword_challenge([], 1.0) is None


def test_lead_with_moves_the_challenger_first_and_keeps_the_rest():
    hits = fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=1.0)
    led = lead_with(hits, "k")
    assert _ids(led) == ["k", "a", "b", "c", "d"]
    assert led[0].score == pytest.approx(hits[0].score + LEAD_MARGIN)
    assert led[0].parts["lead"] == pytest.approx(hits[0].score - hits[1].score + LEAD_MARGIN)
    assert led[0].score == pytest.approx(_parts_sum(led[0]))
    assert [hit.score for hit in led[1:]] == [hit.score for hit in hits if hit.id != "k"]
    assert hits[1].parts["lead"] == 0.0  # the input is not modified
    assert _ids(lead_with(hits, "a")) == _ids(hits) and _ids(lead_with(hits, "zz")) == _ids(hits)


def test_the_challenger_leads_only_when_it_covers_the_weighted_terms_strictly_better():
    hits = fuse_routes(CHALLENGE_DENSE, CHALLENGE_KEYWORD, keyword_reliability=1.0)
    challenge = keyword_challenge(hits, 1.0)
    terms, weights = ["kayak", "lake"], {"kayak": 3.0, "lake": 1.0}
    better = settle_keyword_challenge(hits, challenge, terms, {"k": "kayak trip", "a": "the lake"}, weights)
    assert _ids(better)[0] == "k"
    tie = settle_keyword_challenge(hits, challenge, terms, {"k": "kayak", "a": "kayak"}, weights)
    assert _ids(tie) == _ids(hits)  # equal coverage keeps the fused order
    worse = settle_keyword_challenge(hits, challenge, terms, {"k": "lake", "a": None}, weights)
    assert _ids(worse)[0] == "k"  # an incumbent without keyword text covers nothing
    assert _ids(settle_keyword_challenge(hits, challenge, terms, {"k": "lake", "a": "kayak"}, weights)) == _ids(hits)

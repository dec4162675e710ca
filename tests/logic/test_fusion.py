import math

import pytest

from booku_memory.services.logic.fusion import FusionParams, fuse_routes, keyword_weight, reciprocal_rank_fusion


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
    dated = fuse_routes(DENSE, {}, keyword_reliability=0.0, params=FusionParams(time_weight=2.0),
                        time_matches={"c": 1.0})
    assert _ids(dated)[0] == "c"
    assert dated[0].parts["time"] == pytest.approx(2.0)
    assert dated[0].score == pytest.approx(plain["c"].score + 2.0)
    assert all(hit.parts["time"] == 0.0 for hit in dated[1:])


def test_a_time_only_candidate_joins_the_ranking_at_the_route_floors():
    hits = fuse_routes(DENSE, {}, keyword_reliability=0.0, params=FusionParams(time_weight=1.0),
                       time_matches={"z": 1.0})
    z = next(hit for hit in hits if hit.id == "z")
    assert z.parts["vector"] == 0.0 and z.parts["cosine"] is None
    assert z.score == pytest.approx(1.0)


def test_time_weight_zero_changes_nothing():
    plain = fuse_routes(DENSE, KEYWORD, keyword_reliability=0.5)
    off = fuse_routes(DENSE, KEYWORD, keyword_reliability=0.5, params=FusionParams(time_weight=0.0),
                      time_matches={"d": 1.0})
    assert _ids(off) == _ids(plain)

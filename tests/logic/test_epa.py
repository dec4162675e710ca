import numpy as np
import pytest

from booku_memory.services.logic.epa import (
    EpaParams,
    compute_beta,
    has_resonance,
    logic_depth,
    match_tags,
    reshape_query,
    reshape_query_detailed,
    tag_bonus,
)
from booku_memory.services.logic.tags import CandidateTags, TagTriplet

PARAMS = EpaParams()


def _unit(vector):
    vector = np.asarray(vector, dtype=np.float64)
    return vector / np.linalg.norm(vector)


def _cos(a, b):
    return float(np.dot(_unit(a), _unit(b)))


def test_logic_depth_is_one_when_query_lies_on_one_principal_direction():
    evidence = np.vstack([np.eye(4)[0] * 2.0, np.eye(4)[1]])
    assert logic_depth(np.eye(4)[0], evidence) == pytest.approx(1.0)


def test_logic_depth_is_zero_when_query_spreads_evenly():
    evidence = np.vstack([np.eye(4)[0], np.eye(4)[1]])
    assert logic_depth(_unit([1.0, 1.0, 0.0, 0.0]), evidence) == pytest.approx(0.0, abs=1e-9)


def test_logic_depth_ignores_an_empty_first_evidence_row():
    """Reference bug B18: an empty first vector forced depth 0."""
    evidence = [[], np.eye(4)[0] * 2.0, np.eye(4)[1]]
    assert logic_depth(np.eye(4)[0], evidence) == pytest.approx(1.0)


def test_logic_depth_without_evidence_is_zero():
    assert logic_depth(np.eye(3)[0], []) == 0.0


def test_resonance_from_groups_or_marker_words():
    assert has_resonance("plain", TagTriplet(["a"], ["b"], []))
    assert not has_resonance("plain", TagTriplet(["a"], [], []))
    assert has_resonance("工作并且生活", TagTriplet())
    assert has_resonance("compare ACROSS teams", TagTriplet())
    assert not has_resonance("crossword puzzle", TagTriplet())


def test_compute_beta_adds_depth_and_resonance_and_clamps():
    assert compute_beta(PARAMS, 0.0, False) == pytest.approx(0.3)
    assert compute_beta(PARAMS, 1.0, True) == pytest.approx(0.9)
    assert compute_beta(EpaParams(base_beta=0.8), 1.0, True) == 1.0


def test_query_opposing_tag_hitting_memory_core_counts_as_opposed():
    """Reference bug B10: opposing must mean 'the query is not about what this memory is about'."""
    memory = CandidateTags.from_lists(core=["work"], diffusion=["office"], opposing=["holiday"])
    query = TagTriplet(core=["travel"], diffusion=[], opposing=["work"])
    assert match_tags(memory, query).opposing == 1
    # Both declaring the same "not about X" is agreement, not opposition.
    same_exclusion = TagTriplet(core=["travel"], diffusion=[], opposing=["holiday"])
    assert match_tags(memory, same_exclusion).opposing == 0


def test_memory_opposing_tag_hitting_query_core_counts_as_opposed():
    memory = CandidateTags.from_lists(core=["cats"], opposing=["dogs"])
    query = TagTriplet(core=["dogs"], diffusion=[], opposing=[])
    assert match_tags(memory, query).opposing == 1
    assert tag_bonus(memory, query, PARAMS, 0.5) == pytest.approx(-0.5 * PARAMS.opposing_penalty)


def test_generic_tags_can_be_opposed():
    memory = CandidateTags.from_lists(core=["x"], generic=["Finance"])
    assert match_tags(memory, TagTriplet([], [], ["finance"])).opposing == 1


def test_no_whitespace_token_fallback_for_empty_axes():
    """Reference bug B11: an empty query axis must not be replaced by the query's words."""
    memory = CandidateTags.from_lists(core=["dinner"], diffusion=["dinner"], opposing=["dinner"])
    assert match_tags(memory, TagTriplet()) == match_tags(memory, TagTriplet([], [], []))
    assert not match_tags(memory, TagTriplet()).any
    assert tag_bonus(memory, TagTriplet(), PARAMS, 0.9) == 0.0


def test_tag_bonus_rewards_core_and_diffusion():
    memory = CandidateTags.from_lists(core=["a", "b"], diffusion=["c"])
    query = TagTriplet(["a", "b"], ["c"], [])
    expected = 0.5 * (PARAMS.core_boost * 2 + PARAMS.diffusion_boost * 1)
    assert tag_bonus(memory, query, PARAMS, 0.5) == pytest.approx(expected)


def test_reshape_pulls_towards_core_matches():
    q = _unit([1.0, 0.0, 0.0])
    target = _unit([0.6, 0.8, 0.0])
    other = _unit([0.6, 0.0, 0.8])
    embeddings = np.vstack([target, other])
    tags = [CandidateTags.from_lists(core=["topic"]), CandidateTags.from_lists(core=["unrelated"])]
    sims = embeddings @ q
    r = reshape_query(q, embeddings, tags, TagTriplet(["topic"], [], []), sims, PARAMS, 0.5)
    assert np.linalg.norm(r) == pytest.approx(1.0, abs=1e-6)
    assert _cos(r, target) > _cos(q, target)
    assert _cos(r, other) - _cos(q, other) < _cos(r, target) - _cos(q, target)


def test_reshape_pushes_away_from_memories_the_query_opposes():
    q = _unit([1.0, 0.2, 0.0])
    opposed = _unit([0.5, 0.0, 0.8])
    kept = _unit([0.9, 0.4, 0.0])
    embeddings = np.vstack([opposed, kept])
    tags = [CandidateTags.from_lists(core=["work"]), CandidateTags.from_lists(core=["travel"])]
    query = TagTriplet(["travel"], [], ["work"])
    sims = embeddings @ q
    r = reshape_query(q, embeddings, tags, query, sims, PARAMS, 0.5)
    assert _cos(r, opposed) < _cos(q, opposed)
    # The opposed memory falls further behind the kept one than it was with the raw query.
    assert _cos(r, kept) - _cos(r, opposed) > _cos(q, kept) - _cos(q, opposed)
    bonus_opposed = tag_bonus(tags[0], query, PARAMS, 0.5)
    bonus_kept = tag_bonus(tags[1], query, PARAMS, 0.5)
    assert bonus_opposed < 0 < bonus_kept


def test_reshape_without_any_tag_match_returns_q_and_flags_it():
    q = _unit([1.0, 0.0])
    embeddings = np.vstack([_unit([0.5, 0.5])])
    tags = [CandidateTags.from_lists(core=["a"])]
    result = reshape_query_detailed(q, embeddings, tags, TagTriplet(["zzz"], [], []), [0.7], PARAMS, 0.5)
    assert result.reshaped is False
    assert result.vector is q
    assert reshape_query_detailed(q, embeddings, tags, TagTriplet(), [0.7], PARAMS, 0.5).reshaped is False


def test_reshape_skips_candidates_without_usable_embeddings():
    q = _unit([1.0, 0.0, 0.0])
    tags = [CandidateTags.from_lists(core=["t"]), CandidateTags.from_lists(core=["t"])]
    result = reshape_query_detailed(q, [[], [0.0, 0.0]], tags, TagTriplet(["t"], [], []), [0.9, 0.9], PARAMS, 0.5)
    assert result.reshaped is False


def test_reshape_reads_a_matrix_of_evidence_as_it_reads_a_list_of_rows():
    """Retrieval passes pass 1's vectors as one matrix, checked in one step; unusable rows (zero, NaN) are skipped
    exactly as in a list of rows, and a candidate beyond the matrix is ignored."""
    rng = np.random.default_rng(3)
    q = _unit(rng.standard_normal(8)).astype(np.float32)
    matrix = rng.standard_normal((5, 8)).astype(np.float32)
    matrix[1] = 0.0
    matrix[3, 2] = np.nan
    tags = [CandidateTags.from_lists(core=["t"], diffusion=["d"], opposing=["o"] if i == 4 else None) for i in range(6)]
    triplet = TagTriplet(["t"], ["d"], ["x"])
    sims = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    from_matrix = reshape_query_detailed(q, matrix, tags, triplet, sims, PARAMS, 0.5)
    from_rows = reshape_query_detailed(q, [list(row) for row in matrix], tags, triplet, sims, PARAMS, 0.5)
    assert from_matrix.reshaped and from_rows.reshaped
    np.testing.assert_allclose(from_matrix.vector, from_rows.vector, rtol=1e-6)
    usable_only = reshape_query_detailed(
        q, matrix[[0, 2, 4]], [tags[i] for i in (0, 2, 4)], triplet, [sims[i] for i in (0, 2, 4)], PARAMS, 0.5
    )
    np.testing.assert_allclose(from_matrix.vector, usable_only.vector, rtol=1e-6)


def test_diffusion_adds_only_new_directions():
    q = _unit([1.0, 0.0, 0.0])
    d1 = _unit([0.7, 0.7, 0.0])
    duplicate = d1.copy()
    embeddings = np.vstack([d1, duplicate])
    tags = [CandidateTags.from_lists(diffusion=["d"]), CandidateTags.from_lists(diffusion=["d"])]
    query = TagTriplet([], ["d"], [])
    sims = embeddings @ q
    both = reshape_query(q, embeddings, tags, query, sims, PARAMS, 0.5)
    single = reshape_query(q, embeddings[:1], tags[:1], query, sims[:1], PARAMS, 0.5)
    assert np.allclose(both, single, atol=1e-6)


def test_query_tags_built_once_match_as_the_triplet_does():
    from booku_memory.services.logic.epa import QueryTags

    triplet = TagTriplet(core=["travel", "lake"], diffusion=["food"], opposing=["work"])
    sets = QueryTags.of(triplet)
    assert QueryTags.of(sets) is sets and not sets.is_empty and QueryTags.of(TagTriplet()).is_empty
    params = EpaParams()
    for memory in (
        CandidateTags.from_lists(["travel"], ["food"], ["holiday"], ["work"]),
        CandidateTags.from_lists(["lake", "travel"], [], ["travel"], []),
        CandidateTags(),
    ):
        assert match_tags(memory, sets) == match_tags(memory, triplet)
        assert tag_bonus(memory, sets, params, 0.4) == tag_bonus(memory, triplet, params, 0.4)

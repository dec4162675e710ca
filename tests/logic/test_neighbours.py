import math

import pytest

from booku_memory.services.logic.fusion import FusionParams, fuse_routes
from booku_memory.services.logic.neighbours import (
    answer_lift,
    answers_to_questions,
    neighbour_lift,
    write_neighbours,
)


def _ids(hits):
    return [hit.id for hit in hits]


# ------------------------------------------------------------------------------------------ write_neighbours


def test_neighbours_are_close_writes_of_the_same_partition_nearest_first():
    positions = {
        "q": ("conv", 10),
        "a": ("conv", 11),
        "b": ("conv", 12),
        "far": ("conv", 20),
        "other": ("other-store", 11),
    }
    neighbours = write_neighbours(positions, radius=2)
    assert neighbours["q"] == ["a", "b"]
    assert neighbours["a"] == ["q", "b"] or neighbours["a"] == ["b", "q"]
    assert neighbours["b"] == ["a", "q"]
    assert "far" not in neighbours  # 8 writes away: not the same exchange
    assert "other" not in neighbours  # same position in another store is unrelated


def test_radius_limits_the_distance_and_zero_disables():
    positions = {"x": ("s", 1), "y": ("s", 3)}
    assert write_neighbours(positions, radius=1) == {}
    assert write_neighbours(positions, radius=2) == {"x": ["y"], "y": ["x"]}
    assert write_neighbours(positions, radius=0) == {}


# ------------------------------------------------------------------------------------------ neighbour_lift


def test_lift_moves_a_candidate_toward_its_better_neighbour_but_never_above_it():
    scores = {"question": 3.0, "answer": 1.0, "lonely": 2.0}
    lifts = neighbour_lift(scores, {"question": ["answer"], "answer": ["question"]}, weight=0.5)
    assert lifts["answer"] == pytest.approx(1.0)  # halfway to 3.0
    assert lifts["question"] == 0.0  # its neighbour is worse: nothing to gain
    assert lifts["lonely"] == 0.0
    full = neighbour_lift(scores, {"answer": ["question"]}, weight=5.0)  # clamped to 1
    assert scores["answer"] + full["answer"] == pytest.approx(scores["question"])


def test_neighbour_outside_the_candidates_counts_as_the_floor():
    assert neighbour_lift({"a": 1.0}, {"a": ["not-a-candidate"]}, weight=0.5) == {"a": 0.0}


# ------------------------------------------------------------------------------------------ fuse_routes step 4

# "ask" repeats the question's words (best on both routes); "answer", written right after it, ranks below
# "decoy", which shares a few words but sits elsewhere in the conversation.
DENSE = {"ask": 0.90, "decoy": 0.86, "answer": 0.85, "x1": 0.80, "x2": 0.79, "x3": 0.78}
KEYWORD = {"ask": 9.0, "decoy": 6.0, "answer": 4.0, "x1": 1.0}
POSITIONS = {
    "ask": ("s", 40),
    "answer": ("s", 41),
    "decoy": ("s", 7),
    "x1": ("s", 90),
    "x2": ("s", 120),
    "x3": ("s", 150),
}


def test_answer_written_after_the_best_hit_moves_up_and_the_best_hit_stays_first():
    plain = fuse_routes(DENSE, KEYWORD, keyword_reliability=1.0)
    assert _ids(plain)[:3] == ["ask", "decoy", "answer"]
    lifted = fuse_routes(
        DENSE, KEYWORD, keyword_reliability=1.0, neighbours=write_neighbours(POSITIONS, FusionParams().neighbour_radius)
    )
    assert _ids(lifted)[:3] == ["ask", "answer", "decoy"]
    answer = lifted[1]
    assert answer.parts["neighbour"] > 0
    assert answer.score == pytest.approx(answer.parts["vector"] + answer.parts["keyword"] + answer.parts["neighbour"])
    assert lifted[0].parts["neighbour"] == 0.0


def test_without_neighbours_or_with_zero_weight_the_ranking_is_unchanged():
    plain = fuse_routes(DENSE, KEYWORD, keyword_reliability=0.5)
    neighbours = write_neighbours(POSITIONS, 2)
    zero = fuse_routes(
        DENSE, KEYWORD, keyword_reliability=0.5, neighbours=neighbours, params=FusionParams(neighbour_weight=0.0)
    )
    assert _ids(zero) == _ids(plain)
    assert [hit.score for hit in zero] == pytest.approx([hit.score for hit in plain])
    assert all(hit.parts["neighbour"] == 0.0 for hit in plain)


def test_lifted_scores_stay_sorted_finite_and_non_negative():
    hits = fuse_routes(
        DENSE, {**KEYWORD, "bad": math.nan}, keyword_reliability=0.7, neighbours=write_neighbours(POSITIONS, 2)
    )
    scores = [hit.score for hit in hits]
    assert scores == sorted(scores, reverse=True)
    assert all(math.isfinite(s) and s >= 0 for s in scores)
    assert "bad" not in _ids(hits)


# -------------------------------------------------------------------------------- answers follow questions


def test_the_answer_is_the_next_candidate_written_after_a_question_in_the_same_partition():
    positions = {
        "q": ("conv", 10),
        "a": ("conv", 11),
        "later": ("conv", 12),
        "q2": ("conv", 20),
        "elsewhere": ("other", 11),
        "far": ("conv", 25),
    }
    answers = answers_to_questions(positions, ["q", "q2", "elsewhere"], radius=2)
    assert answers == {"a": "q"}  # q2's next write is 5 positions away; "elsewhere" has no successor
    assert answers_to_questions(positions, ["q"], radius=0) == {}
    assert answers_to_questions(positions, [], radius=2) == {}


def test_an_answer_rises_to_just_behind_its_question_never_above_it():
    lifts = answer_lift({"q": 3.0, "a": 1.0, "high": 3.5}, {"a": "q", "high": "q"}, margin=0.1)
    assert lifts["a"] == pytest.approx(1.9)
    assert lifts["high"] == 0.0  # already above its question: left alone


def test_fusion_places_the_answer_right_behind_the_question_that_repeats_the_query():
    dense = {"question": 0.90, "other1": 0.85, "other2": 0.84, "other3": 0.83, "answer": 0.70}
    positions = {key: ("conv", index) for index, key in enumerate(["x", "question", "answer", "y"]) if key in dense}
    positions.update({"other1": ("conv", 50), "other2": ("conv", 60), "other3": ("conv", 70)})
    answers = answers_to_questions(positions, ["question"], radius=2)
    hits = fuse_routes(dense, {}, keyword_reliability=0.0, answers=answers)
    assert _ids(hits)[:2] == ["question", "answer"]
    assert hits[1].parts["neighbour"] > 0
    assert _ids(fuse_routes(dense, {}, keyword_reliability=0.0))[-1] == "answer"

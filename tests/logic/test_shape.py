"""A memory's text shape: does it only ask, and how much does it say (``logic.shape``)."""

import math

import pytest

from booku_memory.services.logic.fusion import FusionParams, fuse_routes
from booku_memory.services.logic.neighbours import answers_to_questions
from booku_memory.services.logic.shape import (
    TextShape,
    ends_with_question,
    length_prior,
    question_prior,
    question_share,
    text_shape,
)


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("Caroline: What did you paint last week?", True),
        ("用户：你喜欢哪种菜系呢？", True),
        ("AI：真的吗？）\n", True),
        ('He said "really?" ', True),
        ("Melanie: I painted a lake.", False),
        ("？不是结尾的问号。", False),
        ("", False),
    ],
)
def test_a_memory_asks_when_its_text_ends_with_a_question(text, asks):
    assert ends_with_question(text) is asks


def test_question_share_counts_the_asking_sentences_of_a_text_that_ends_with_one():
    assert question_share("Caroline: What did you paint?") == 1.0
    mixed = "I went to the lake. What did you do?"
    asked, told = len("What did you do?"), len("I went to the lake.")
    assert question_share(mixed) == pytest.approx(asked / (told + asked))
    assert question_share("Did you go? I did.") == 0.0  # ends with a statement: it tells
    pair = "用户：我喜欢川菜。\nAI：你喜欢哪种菜系呢？"
    assert question_share(pair) == pytest.approx(len("AI：你喜欢哪种菜系呢？") / len(pair.replace("\n", "")))
    assert text_shape("Why?") == TextShape(1.0, 4)


def shape_prior(
    shape: TextShape, reliability: float, *, question_penalty: float, length_weight: float, length_cap: int
) -> float:
    """The shape part fusion adds (module docstring of ``fusion``, step 6)."""
    return length_prior(shape, length_weight=length_weight, length_cap=length_cap) + question_prior(
        shape, reliability, question_penalty=question_penalty
    )


def test_the_prior_favours_longer_texts_up_to_the_cap_and_demotes_questions_by_reliability():
    params = dict(question_penalty=2.0, length_weight=0.4, length_cap=250)
    short, long, huge = TextShape(0.0, 20), TextShape(0.0, 200), TextShape(0.0, 5000)
    assert shape_prior(long, 1.0, **params) - shape_prior(short, 1.0, **params) == pytest.approx(0.4 * math.log(10))
    assert shape_prior(huge, 1.0, **params) == pytest.approx(0.4 * math.log(250))
    asking = TextShape(1.0, 20)
    assert shape_prior(asking, 1.0, **params) == pytest.approx(shape_prior(short, 1.0, **params) - 2.0)
    assert shape_prior(asking, 0.0, **params) == pytest.approx(shape_prior(short, 0.0, **params))  # gate closed
    assert shape_prior(TextShape(0.0, 0), float("nan"), **params) == 0.0


def test_fusion_adds_the_shape_part_after_the_lifts():
    dense = {"q": 0.90, "a": 0.80, "x": 0.70}
    shapes = {"q": TextShape(1.0, 30), "a": TextShape(0.0, 120), "x": TextShape(0.0, 30)}
    plain = {hit.id: hit for hit in fuse_routes(dense, {}, keyword_reliability=1.0)}
    shaped = fuse_routes(dense, {}, keyword_reliability=1.0, shapes=shapes)
    for hit in shaped:
        expected = shape_prior(
            shapes[hit.id],
            1.0,
            question_penalty=FusionParams().question_penalty,
            length_weight=FusionParams().length_weight,
            length_cap=FusionParams().length_cap,
        )
        assert hit.parts["shape"] == pytest.approx(expected)
        assert hit.score == pytest.approx(plain[hit.id].score + expected)
    assert [hit.id for hit in shaped][0] == "a"


def test_the_question_penalty_grows_with_the_square_of_the_reliability():
    asking = TextShape(0.5, 40)
    assert question_prior(asking, 1.0, question_penalty=2.0) == pytest.approx(-1.0)
    assert question_prior(asking, 0.5, question_penalty=2.0) == pytest.approx(-0.25)
    # A Chinese question with one four-character word (reliability 0.2) keeps only a trace of the penalty.
    assert question_prior(asking, 0.2, question_penalty=2.0) == pytest.approx(-0.04)
    assert question_prior(TextShape(0.0, 40), 1.0, question_penalty=2.0) == 0.0
    assert question_prior(asking, float("nan"), question_penalty=2.0) == 0.0


def _question_then_longer_answer(reliability):
    """A memory that ends with a (follow-up) question, then a much longer memory written right after it."""
    dense = {"question": 0.90, "answer": 0.70, "other": 0.80, "far": 0.60}
    positions = {"question": ("conv", 1), "answer": ("conv", 2), "other": ("conv", 40), "far": ("conv", 80)}
    shapes = {
        "question": TextShape(0.5, 60),
        "answer": TextShape(0.0, 240),
        "other": TextShape(0.0, 60),
        "far": TextShape(0.0, 60),
    }
    answers = answers_to_questions(positions, ["question"], radius=2)
    return fuse_routes(dense, {}, keyword_reliability=reliability, answers=answers, shapes=shapes)


def test_a_longer_answer_stays_the_margin_behind_its_question_when_the_penalty_is_off():
    hits = _question_then_longer_answer(0.0)
    assert [hit.id for hit in hits][:2] == ["question", "answer"]
    assert hits[0].score - hits[1].score == pytest.approx(FusionParams().answer_margin)
    assert hits[1].parts["shape"] > hits[0].parts["shape"]  # its length alone would have put it first


def test_the_answer_passes_a_question_only_through_the_question_penalty():
    hits = {hit.id: hit for hit in _question_then_longer_answer(1.0)}
    assert _question_then_longer_answer(1.0)[0].id == "answer"
    penalty = question_prior(TextShape(0.5, 60), 1.0, question_penalty=FusionParams().question_penalty)
    assert hits["answer"].score - hits["question"].score == pytest.approx(-penalty - FusionParams().answer_margin)

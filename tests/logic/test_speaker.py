"""Speaker match: a memory written as ``"<name>: …"`` rises when the query names that person, never past rank 1
nor past a memory that covers the question's content clearly better (``logic.speaker``)."""

import pytest

from booku_memory.services.logic.fusion import LEAD_MARGIN, FusedHit
from booku_memory.services.logic.speaker import (
    CLEAR_LEAD,
    RIVAL_RANKS,
    content_coverage,
    content_terms,
    contested,
    names_label,
    plan_speaker_lift,
    speaker_label,
    speaker_lift,
    speaking,
)


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Melanie: I went kayaking.", "melanie"),
        ("  Mary Jane : we moved.", "mary jane"),
        ("小明：我周末去爬山了。", "小明"),
        ("ＡＢＣ：全角", "abc"),
        ("The plan for the whole day: rest.", None),  # five words: a sentence, not a name
        ("Step 1: preheat the oven.", None),  # a digit: not a name
        ("I went kayaking.", None),
        ("", None),
    ],
)
def test_the_label_is_the_short_name_before_the_leading_colon(text, label):
    assert speaker_label(text) == label


def test_a_query_names_a_label_as_a_whole_word_or_a_han_substring():
    assert names_label("What books has Melanie read?", "melanie")
    assert names_label("What do Melanie's kids like?", "melanie")
    assert not names_label("What do the Melanies like?", "melanie")
    assert not names_label("What did Jonathan say?", "jon")
    assert names_label("小明上周去哪里爬山了？", "小明")


def test_speaking_picks_the_candidates_whose_label_the_query_names():
    heads = {"a": "Melanie: I read a book", "b": "Caroline: I read too", "c": "no label here", "d": None}
    assert speaking("What books has Melanie read?", heads) == {"a"}
    assert speaking("What did Melanie and Caroline read?", heads) == {"a", "b"}
    assert speaking("用户喜欢什么？", {"x": "用户：我喜欢川菜"}) == {"x"}


def hits(*scores: float) -> list[FusedHit]:
    return [FusedHit(f"h{index}", score, {"lead": 0.0}) for index, score in enumerate(scores)]


def test_speaking_hits_rise_by_the_weight_but_never_past_rank_one():
    ranked = hits(3.0, 2.3, 2.0, 1.0)
    lifted = speaker_lift(ranked, {"h0", "h2", "h3"}, 0.6)
    assert [hit.id for hit in lifted] == ["h0", "h2", "h1", "h3"]
    by_id = {hit.id: hit for hit in lifted}
    assert by_id["h0"] is ranked[0]  # rank 1 keeps its place and score
    assert by_id["h2"].score == pytest.approx(2.6) and by_id["h2"].parts["speaker"] == pytest.approx(0.6)
    assert by_id["h1"].score == 2.3 and "speaker" not in by_id["h1"].parts


def test_the_lift_is_capped_just_below_rank_one():
    lifted = speaker_lift(hits(3.0, 1.0, 2.8), {"h2"}, 0.6)
    assert [hit.id for hit in lifted] == ["h0", "h2", "h1"]
    assert lifted[1].score == pytest.approx(3.0 - LEAD_MARGIN)
    assert lifted[1].parts["speaker"] == pytest.approx(0.2 - LEAD_MARGIN)


@pytest.mark.parametrize("speakers", [set(), {"h0", "h1", "h2"}])
def test_nothing_moves_when_no_hit_or_every_hit_speaks(speakers):
    ranked = hits(3.0, 2.0, 1.0)
    assert speaker_lift(ranked, speakers, 0.6) == ranked


def test_a_zero_weight_switches_the_step_off():
    ranked = hits(3.0, 2.0, 1.0)
    assert speaker_lift(ranked, {"h2"}, 0.0) == ranked


def test_content_terms_leave_out_the_named_speaker():
    assert content_terms(["carolin*", "realiz*", "charit*", "race"], {"caroline"}) == ["realiz*", "charit*", "race"]
    assert content_terms(["mary", "jane", "moved"], {"mary jane"}) == ["moved"]
    assert content_terms(["小明", "昨天", "去"], {"小明"}) == ["昨天", "去"]
    assert content_terms(["jon", "paint*"], set()) == ["jon", "paint*"]


def test_content_coverage_weighs_each_text_by_idf():
    coverage = content_coverage(
        ["charit*", "race"],
        {"a": "melanie ran a charity race", "b": "caroline painted", "c": None},
        {"charit*": 3.0, "race": 1.0},
    )
    assert coverage == {"a": 1.0, "b": 0.0, "c": 0.0}


def test_only_a_lift_that_could_pass_a_rival_is_contested():
    ranked = hits(3.0, 2.3, 2.0, 1.0)
    assert contested(ranked, {"h2", "h3"}, 0.6) == {"h1", "h2"}  # h3 cannot reach h1
    assert contested(ranked, {"h2", "h3"}, 0.2) == set()
    assert contested(ranked, set(), 0.6) == set()


def test_a_lifted_hit_stays_below_a_rival_that_covers_the_content_clearly_better():
    ranked = hits(3.0, 2.3, 2.2, 2.0)
    lifted = speaker_lift(ranked, {"h3"}, 0.6, {"h1": 0.9, "h2": 0.5, "h3": 0.9 / CLEAR_LEAD})
    assert [hit.id for hit in lifted] == ["h0", "h1", "h3", "h2"]  # passes h2, not h1
    assert lifted[2].score == pytest.approx(2.3 - LEAD_MARGIN)


def test_a_rival_only_somewhat_better_or_beyond_the_guarded_ranks_does_not_hold_the_lift_back():
    ranked = hits(3.0, 2.3, 2.0)
    assert [hit.id for hit in speaker_lift(ranked, {"h2"}, 0.6, {"h1": 0.6, "h2": 0.5})] == ["h0", "h2", "h1"]
    deep = hits(3.0, *[2.0 - 0.001 * rank for rank in range(RIVAL_RANKS)], 1.5, 1.45)
    coverage = {f"h{index}": 0.0 for index in range(1, RIVAL_RANKS + 1)} | {f"h{RIVAL_RANKS + 1}": 1.0}
    lifted = speaker_lift(deep, {f"h{RIVAL_RANKS + 2}"}, 0.6, coverage)
    assert lifted[1].id == f"h{RIVAL_RANKS + 2}"


def test_the_plan_names_speakers_contested_hits_and_the_terms_without_the_name():
    ranked = hits(3.0, 2.3, 2.0, 1.0)
    heads = {"h0": "Caroline: hi", "h1": "Caroline: a race", "h2": "Melanie: the race", "h3": "Melanie: kayak"}
    plan = plan_speaker_lift("What race did Melanie run?", ["melanie", "race", "run"], ranked, heads, 0.6)
    assert plan.speakers == {"h2", "h3"}
    assert plan.contested == {"h1", "h2"}  # h2 can reach the rival h1; h3 cannot
    assert plan.content_terms == ["race", "run"] and plan.needs_coverage
    nobody = plan_speaker_lift("What race?", ["race"], ranked, heads, 0.6)
    assert nobody.speakers == set() and not nobody.needs_coverage

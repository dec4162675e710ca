"""Pure companion rules (docs/COMPANION.md): quote limits, date bounds, speaker lines, the grow splitter, decay."""

from __future__ import annotations

from datetime import datetime

import pytest

from booku_memory.services.companion.fields import (
    checked_date_range,
    checked_importance,
    checked_quotes,
    checked_source_ranges,
)
from booku_memory.services.companion.speech import render_with_speakers, speaker_lines
from booku_memory.services.companion.splitting import split_for_grow
from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.decay import (
    DecayParams,
    archive_due,
    days_since_activity,
    decay_score,
)


# ------------------------------------------------------------------ quotes
def test_three_quotes_of_one_hundred_characters_are_accepted_verbatim() -> None:
    quotes = checked_quotes(["字" * 100, {"text": "别走", "speaker": "小王", "at": "昨晚"}, "好"])
    assert quotes == [{"text": "字" * 100}, {"text": "别走", "speaker": "小王", "at": "昨晚"}, {"text": "好"}]


def test_a_fourth_quote_is_rejected_not_dropped() -> None:
    with pytest.raises(ValidationError, match="最多 3 句"):
        checked_quotes(["一", "二", "三", "四"])


def test_a_quote_over_one_hundred_characters_is_rejected_not_truncated() -> None:
    with pytest.raises(ValidationError, match="101 个字.*不截断"):
        checked_quotes(["字" * 101])


@pytest.mark.parametrize("bad", [[""], [{"speaker": "小王"}], [{"text": "hi", "when": "x"}], "一句话", [3]])
def test_malformed_quotes_are_rejected(bad) -> None:
    with pytest.raises(ValidationError, match="quotes"):
        checked_quotes(bad)


# ------------------------------------------------------------- date bounds
def local(*parts: int) -> float:
    return datetime(*parts).timestamp()


def test_a_same_day_bound_covers_the_whole_day() -> None:
    day = checked_date_range("2024-05-01", "2024-05-01")
    assert day.contains(local(2024, 5, 1, 0, 0, 0))
    assert day.contains(local(2024, 5, 1, 23, 59, 59))
    assert not day.contains(local(2024, 5, 2, 0, 0, 0))
    assert not day.contains(local(2024, 4, 30, 23, 59, 59))


def test_iso_8601_bounds_are_exact_instants() -> None:
    window = checked_date_range("2024-05-01T08:00:00", "2024-05-01T12:00:00")
    assert window.contains(local(2024, 5, 1, 8, 0, 0)) and window.contains(local(2024, 5, 1, 12, 0, 0))
    assert not window.contains(local(2024, 5, 1, 7, 59, 59))
    assert not window.contains(local(2024, 5, 1, 12, 0, 1))


def test_iso_8601_with_offset_is_honoured() -> None:
    window = checked_date_range("2024-05-01T00:00:00+00:00", None)
    assert window.start == datetime.fromisoformat("2024-05-01T00:00:00+00:00").timestamp()
    assert window.end is None


@pytest.mark.parametrize("value", ["2024/05/01", "yesterday", "2024-13-01", "5月1日"])
def test_other_date_formats_are_rejected_with_the_allowed_ones(value: str) -> None:
    with pytest.raises(ValidationError, match="YYYY-MM-DD.*ISO 8601"):
        checked_date_range(value, None)


def test_from_after_to_is_rejected() -> None:
    with pytest.raises(ValidationError, match="不能晚于"):
        checked_date_range("2024-05-02", "2024-05-01")


# ----------------------------------------------------------- other fields
@pytest.mark.parametrize("value", [0, 11, 5.5, True, "七"])
def test_importance_must_be_an_integer_from_one_to_ten(value) -> None:
    with pytest.raises(ValidationError, match="importance"):
        checked_importance(value)


def test_source_ranges_are_one_based_inclusive_and_inside_the_source() -> None:
    assert checked_source_ranges([[1, 2], [3, 3]], 3) == [[1, 2], [3, 3]]
    for bad in ([[0, 1]], [[2, 1]], [[1, 4]], [[1]], [["1", "2"]]):
        with pytest.raises(ValidationError, match="source_ranges"):
            checked_source_ranges(bad, 3)


# ----------------------------------------------------------- speaker lines
def test_speaker_lines_are_parsed_from_their_own_lines_only() -> None:
    content = "今天去看展。\n@小王：这幅画我看了三遍\n＠Anna Lee: it's lovely\n小王说他还想再来。\n邮件写给 @team 了"
    lines = speaker_lines(content)
    assert [(l.line, l.speaker, l.text) for l in lines] == [
        (2, "小王", "这幅画我看了三遍"),
        (3, "Anna Lee", "it's lovely"),
    ]


def test_rendering_turns_speaker_lines_into_json_and_keeps_narration_verbatim() -> None:
    rendered = render_with_speakers("我们聊到很晚。\n@妈妈：早点睡\n我说好。")
    assert rendered.splitlines() == ["我们聊到很晚。", '{"speaker": "妈妈", "text": "早点睡"}', "我说好。"]


# --------------------------------------------------------------- splitter
PARAGRAPHS = "\n\n".join(f"第{i}段：今天发生了第{i}件事情，记下来以免以后忘记。" for i in range(1, 10))


def test_grow_splitter_makes_two_to_six_verbatim_pieces_on_paragraph_boundaries() -> None:
    pieces = split_for_grow(PARAGRAPHS)
    assert 2 <= len(pieces) <= 6
    assert len(pieces) == 6  # nine long paragraphs: as many pieces as allowed
    assert "\n\n".join(p.content for p in pieces) == PARAGRAPHS
    for piece in pieces:
        lines = PARAGRAPHS.splitlines()[piece.first_line - 1 : piece.last_line]
        assert "\n".join(lines) == piece.content


def test_grow_splitter_cuts_a_single_paragraph_on_sentences() -> None:
    text = "早上去了公园，看到很多人在跑步。中午和小王吃了饭，他说最近很忙。下午写代码修好了那个 bug。晚上看了电影。"
    pieces = split_for_grow(text)
    assert 2 <= len(pieces) <= 6
    assert "".join(p.content for p in pieces) == text
    assert all(p.content.endswith("。") for p in pieces)


def test_grow_splitter_never_cuts_a_single_sentence() -> None:
    text = "这是一句没有任何句末标点而且足足超过了三十个字的很长很长很长的句子"
    assert [p.content for p in split_for_grow(text)] == [text]


# ------------------------------------------------------------------ decay
def test_decay_halves_every_half_life_without_activity() -> None:
    params = DecayParams(half_life_days=10)
    fresh = decay_score(
        importance=5,
        days_since_activity=0,
        activation_count=0,
        arousal=0.0,
        resolved=False,
        exempt=False,
        params=params,
    )
    later = decay_score(
        importance=5,
        days_since_activity=10,
        activation_count=0,
        arousal=0.0,
        resolved=False,
        exempt=False,
        params=params,
    )
    assert fresh == 5.0 and later == pytest.approx(2.5)


def test_importance_activation_and_arousal_raise_the_score_and_resolved_sinks_it() -> None:
    base = dict(importance=5, days_since_activity=3, activation_count=0, arousal=0.2, resolved=False, exempt=False)
    score = decay_score(**base)
    assert decay_score(**{**base, "importance": 8}) > score
    assert decay_score(**{**base, "activation_count": 4}) > score
    assert decay_score(**{**base, "arousal": 0.9}) > score
    assert decay_score(**{**base, "resolved": True}) == pytest.approx(score * DecayParams().resolved_factor, rel=1e-4)


def test_exempt_memories_never_decay_and_are_never_archived() -> None:
    old = dict(importance=3, days_since_activity=3650, activation_count=0, arousal=0.3, resolved=True)
    assert decay_score(**old, exempt=True) == decay_score(
        **{**old, "days_since_activity": 0, "resolved": False}, exempt=True
    )
    assert archive_due(decay_score(**old, exempt=False), exempt=False)
    assert not archive_due(decay_score(**old, exempt=True), exempt=True)


def test_activity_counts_from_the_later_of_creation_and_activation() -> None:
    assert days_since_activity(0.0, 86400 * 8, 86400 * 10) == pytest.approx(2.0)
    assert days_since_activity(86400 * 9, 0.0, 86400 * 10) == pytest.approx(1.0)

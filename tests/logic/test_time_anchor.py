"""Reading the dates a query names, and which memories' times they match (``logic.time_anchor``)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from booku_memory.services.logic.time_anchor import (
    CalendarAnchor,
    SpanAnchor,
    anchor_matches,
    memory_days,
    parse_time_anchors,
    time_matches,
    time_windows,
    without_time_expressions,
)

NOW = datetime(2026, 12, 2, 10, 0)  # a Wednesday
SHANGHAI = ZoneInfo("Asia/Shanghai")


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("我曾经在5月2日提到过我去了博物馆，看了什么展览？", [CalendarAnchor(None, 5, 2)]),
        ("在4月27号这天，我在公园里跑了多久？", [CalendarAnchor(None, 4, 27)]),
        ("2023年5月2日我们聊了什么", [CalendarAnchor(2023, 5, 2)]),
        ("二〇二三年五月二十日那天", [CalendarAnchor(2023, 5, 20)]),
        ("我5月份去了哪里", [CalendarAnchor(None, 5, None)]),
        ("2023年的计划", [CalendarAnchor(2023, None, None)]),
        ("2023-05-07 的会议", [CalendarAnchor(2023, 5, 7)]),
        ("What painting did Melanie show on October 13, 2023?", [CalendarAnchor(2023, 10, 13)]),
        ("What did Gina find for her store on 1 February, 2023?", [CalendarAnchor(2023, 2, 1)]),
        ("When did Melanie go camping in June?", [CalendarAnchor(None, 6, None)]),
        ("What did Mel paint in July 2023?", [CalendarAnchor(2023, 7, None)]),
        ("How many times has she gone to the beach in 2023?", [CalendarAnchor(2023, None, None)]),
    ],
)
def test_absolute_dates_are_read_as_calendar_patterns(query: str, expected: list[CalendarAnchor]) -> None:
    assert parse_time_anchors(query, NOW) == expected


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("我昨天说了什么", date(2026, 12, 1), date(2026, 12, 1)),
        ("前天的事", date(2026, 11, 30), date(2026, 11, 30)),
        ("大前天", date(2026, 11, 29), date(2026, 11, 29)),
        ("三天前提到的电影", date(2026, 11, 29), date(2026, 11, 29)),
        ("what did I say yesterday", date(2026, 12, 1), date(2026, 12, 1)),
        ("2 days ago", date(2026, 11, 30), date(2026, 11, 30)),
        ("上周我们聊了什么", date(2026, 11, 23), date(2026, 11, 29)),
        ("这周", date(2026, 11, 30), date(2026, 12, 2)),
        ("上个月", date(2026, 11, 1), date(2026, 11, 30)),
        ("去年", date(2025, 1, 1), date(2025, 12, 31)),
        ("last month", date(2026, 11, 1), date(2026, 11, 30)),
        ("两周前我说过", date(2026, 11, 16), date(2026, 11, 22)),
        ("三个月前开始学钢琴", date(2026, 9, 1), date(2026, 9, 30)),
        ("两年前的旅行", date(2024, 1, 1), date(2024, 12, 31)),
        ("3 months ago", date(2026, 9, 1), date(2026, 9, 30)),
        ("1 year ago", date(2025, 1, 1), date(2025, 12, 31)),
    ],
)
def test_relative_words_resolve_against_now(query: str, first: date, last: date) -> None:
    assert parse_time_anchors(query, NOW) == [SpanAnchor(first, last)]


@pytest.mark.parametrize(
    "query",
    [
        "What may I bring to the party?",  # the verb, not the month
        "I march every morning",  # lowercase month words are ordinary words
        "学了三个月的钢琴",  # a duration, not March
        "13月5日",
        "2月30日",  # no such days
        "用户喜欢喝咖啡",
        "今天好累啊",
        "what should I cook today?",  # the present conversation, which the bot already sees
    ],
)
def test_text_without_a_real_date_names_no_anchor(query: str) -> None:
    assert parse_time_anchors(query, NOW) == []


def test_a_full_date_is_not_also_read_as_its_year() -> None:
    assert parse_time_anchors("2023年5月2日", NOW) == [CalendarAnchor(2023, 5, 2)]


def test_a_memory_time_is_its_event_window_else_its_creation() -> None:
    created = datetime(2023, 5, 2, 12, tzinfo=UTC).timestamp()
    start = datetime(2023, 6, 1, 9, tzinfo=UTC).timestamp()
    end = datetime(2023, 6, 3, 9, tzinfo=UTC).timestamp()
    assert memory_days({"created_at": created}, UTC) == (date(2023, 5, 2), date(2023, 5, 2))
    assert memory_days({"created_at": created, "event_start_at": start, "event_end_at": end}, UTC) == (
        date(2023, 6, 1),
        date(2023, 6, 3),
    )
    assert memory_days({"created_at": 0.0}, UTC) is None


def test_any_day_of_an_event_window_matches() -> None:
    window = (date(2023, 6, 1), date(2023, 6, 3))
    assert anchor_matches([CalendarAnchor(None, 6, 2)], window)
    assert not anchor_matches([CalendarAnchor(None, 6, 4)], window)
    assert not anchor_matches([], window)
    assert not anchor_matches([CalendarAnchor(None, 6, 2)], None)


def test_days_are_read_in_the_given_zone() -> None:
    # 2023-05-02 20:00 UTC is already May 3rd in Shanghai.
    late = {"m": {"created_at": datetime(2023, 5, 2, 20, tzinfo=UTC).timestamp()}}
    assert time_matches([CalendarAnchor(None, 5, 2)], late, UTC) == {"m": 1.0}
    assert time_matches([CalendarAnchor(None, 5, 2)], late, SHANGHAI) == {}
    assert time_matches([CalendarAnchor(None, 5, 3)], late, SHANGHAI) == {"m": 1.0}


def test_only_definite_days_become_range_windows() -> None:
    anchors = parse_time_anchors("2023年5月2日和6月1日还有昨天", datetime(2026, 12, 2, 10, tzinfo=SHANGHAI))
    windows = time_windows(anchors, SHANGHAI)
    may_second = datetime(2023, 5, 2, tzinfo=SHANGHAI).timestamp()
    yesterday = datetime(2026, 12, 1, tzinfo=SHANGHAI).timestamp()
    # "6月1日" has no year, so it lifts candidates but is not read as a range.
    assert windows == [(may_second, may_second + 86400), (yesterday, yesterday + 86400)]


def test_a_month_window_covers_the_whole_month() -> None:
    ((start, end),) = time_windows([CalendarAnchor(2023, 12, None)], UTC)
    assert start == datetime(2023, 12, 1, tzinfo=UTC).timestamp()
    assert end == datetime(2024, 1, 1, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "left"),
    [
        ("2023-05-02 对话", "对话"),
        ("2023年5月2日的日记", "的日记"),
        ("May 2, 2023 notes", "notes"),
        ("昨天 聊天", "聊天"),
        ("三天前的会议", "的会议"),
        ("李四生日", "李四生日"),
    ],
)
def test_without_time_expressions_leaves_what_is_not_a_date(text: str, left: str) -> None:
    assert without_time_expressions(text).strip() == left

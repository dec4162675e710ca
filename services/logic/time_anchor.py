"""Time anchors in a query ("我5月2日说过什么", "昨天", "on May 7, 2023", "in June") and which memories they match.

Why: a question anchored on a day ("我曾经在5月2日提到过我去了博物馆，我看了什么展览？") shares only its topic with
the memory that answers it; the part that tells the right museum visit from the others is the date, and the date
lives in the memory's time, not in its text. On MemoryBank-zh half of the rank-1 misses before this were such
questions (``bench/retrieval_quality.py``).

A memory's time is its event window when it has one (``event_start_at`` … ``event_end_at``), else the moment it was
written (``created_at``). Timestamps are read as local calendar days in the zone given (default: the process's
local zone), because people name days in their own calendar.

Anchors are calendar patterns: a field left ``None`` matches any value, so "5月2日" matches May 2nd of any year and
"in June" any June (chat memories rarely span years, and guessing the year wrongly would hide the answer). Relative
words ("昨天", "上周", "last month", "三个月前", "2 weeks ago") resolve against ``now`` to a span of days. "今天" /
"today" is deliberately not an anchor: in a chat it is said about the conversation at hand ("今天好累"), which the
bot already sees, and lifting today's memories would crowd older ones out of its recall. Only a capitalised English
month name counts, and a bare one only after a preposition ("in June"), so the verb "may" is never read as a month.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone, tzinfo
from functools import lru_cache
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# Longest event window walked day by day when matching; a longer window is treated as matching every pattern it
# could contain, which is what a year-long event means anyway.
MAX_WINDOW_DAYS = 400
# Widest gap between two zones' calendars (UTC−12 to UTC+14): a day named in one zone lies within this many seconds
# of the same day in any other, so a window read in the query's zone and widened by it holds every memory of that
# day in whatever zone the memory was written.
ZONE_SLACK_SECONDS = 26 * 3600


@dataclass(frozen=True)
class CalendarAnchor:
    """A calendar pattern; ``None`` fields match anything ("5月2日" → year None, month 5, day 2)."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def matches(self, day: date) -> bool:
        return (
            (self.year is None or day.year == self.year)
            and (self.month is None or day.month == self.month)
            and (self.day is None or day.day == self.day)
        )


@dataclass(frozen=True)
class SpanAnchor:
    """An inclusive span of local days, from a relative word resolved against ``now``."""

    first: date
    last: date

    def matches(self, day: date) -> bool:
        return self.first <= day <= self.last


Anchor = CalendarAnchor | SpanAnchor

_ZH_DIGITS = {
    "〇": 0,
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_NUMBER = r"\d{1,2}|[一二两三四五六七八九十]{1,3}"
_ZH_YEAR = r"\d{4}|[〇零一二三四五六七八九]{4}"
_ZH_DATE = re.compile(
    rf"(?:(?P<year>{_ZH_YEAR})\s*年\s*)?(?P<month>{_ZH_NUMBER})\s*月(?:份)?(?:\s*(?P<day>{_ZH_NUMBER})\s*[日号])?"
)
_ZH_YEAR_ONLY = re.compile(rf"(?P<year>{_ZH_YEAR})\s*年")
_ISO_DATE = re.compile(r"(?<!\d)(?P<year>\d{4})[-/.](?P<month>\d{1,2})[-/.](?P<day>\d{1,2})(?!\d)")

_MONTHS = {
    "January": 1,
    "February": 2,
    "March": 3,
    "April": 4,
    "May": 5,
    "June": 6,
    "July": 7,
    "August": 8,
    "September": 9,
    "October": 10,
    "November": 11,
    "December": 12,
    "Jan": 1,
    "Feb": 2,
    "Mar": 3,
    "Apr": 4,
    "Jun": 6,
    "Jul": 7,
    "Aug": 8,
    "Sep": 9,
    "Sept": 9,
    "Oct": 10,
    "Nov": 11,
    "Dec": 12,
}
_MONTH = "(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_ORDINAL = r"(?:st|nd|rd|th)?"
_EN_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(?P<day>\d{{1,2}}){_ORDINAL}\b(?:,?\s*(?P<year>\d{{4}})\b)?")
_EN_DAY_MONTH = re.compile(rf"\b(?P<day>\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?{_MONTH}\b(?:,?\s*(?P<year>\d{{4}})\b)?")
_EN_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(?P<year>\d{{4}})\b")
_EN_BARE_MONTH = re.compile(
    rf"\b(?:in|during|since|from|before|after|until|by|of|early|late|mid-?)\s+(?:early\s+|late\s+|mid-?\s*)?{_MONTH}\b"
)
_EN_YEAR = re.compile(r"\b(?:in|during|since|from|before|after|until|by)\s+(?P<year>(?:19|20)\d{2})\b")

# "N units ago", Chinese and English, per unit (day, week, month, year).
_AGO = {
    unit: (
        re.compile(rf"(?P<n>{_ZH_NUMBER})\s*{zh}(?:之)?前"),
        re.compile(rf"\b(?P<n>\d{{1,3}})\s+{en}s?\s+ago\b", re.IGNORECASE),
    )
    for unit, zh, en in (
        ("day", "天", "day"),
        ("week", "(?:个)?(?:周|星期|礼拜)", "week"),
        ("month", "个月", "month"),
        ("year", "年", "year"),
    )
}
_RELATIVE_DAYS = (
    (re.compile("大前天"), -3),
    (re.compile("(?<!大)前天"), -2),
    (re.compile("昨天|昨日|昨晚"), -1),
    (re.compile(r"\bday before yesterday\b", re.IGNORECASE), -2),
    (re.compile(r"\byesterday\b", re.IGNORECASE), -1),
)
_RELATIVE_WEEKS = (
    (re.compile(r"上(?:个)?(?:周|星期|礼拜)|\blast week\b", re.IGNORECASE), -1),
    (re.compile(r"(?:这|本)(?:个)?(?:周|星期|礼拜)|\bthis week\b", re.IGNORECASE), 0),
)
_RELATIVE_MONTHS = (
    (re.compile(r"上(?:个)?月|\blast month\b", re.IGNORECASE), -1),
    (re.compile(r"(?:这|本)(?:个)?月|\bthis month\b", re.IGNORECASE), 0),
)
_RELATIVE_YEARS = (
    (re.compile("前年"), -2),
    (re.compile(r"去年|\blast year\b", re.IGNORECASE), -1),
    (re.compile(r"今年|\bthis year\b", re.IGNORECASE), 0),
)


def _zh_number(text: str) -> int:
    """``"12"``, ``"十二"``, ``"二十三"``, ``"三十"``, or a digit-by-digit year such as ``"二〇二三"``."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        return (_ZH_DIGITS.get(tens, 1) if tens else 1) * 10 + (_ZH_DIGITS.get(ones, 0) if ones else 0)
    value = 0
    for char in text:
        value = value * 10 + _ZH_DIGITS[char]
    return value


def _calendar(year: int | None, month: int | None, day: int | None) -> CalendarAnchor | None:
    """A pattern, or ``None`` when it names no real calendar day (month 13, February 30 …)."""
    if month is not None and not 1 <= month <= 12:
        return None
    if day is not None:
        try:
            date(year or 2000, month or 1, day)  # 2000 is a leap year, so "2月29日" stays valid without a year
        except ValueError:
            return None
    if year is not None and not 1900 <= year <= 2200:
        return None
    return CalendarAnchor(year, month, day)


def _week(today: date, offset: int) -> SpanAnchor:
    first = today - timedelta(days=today.weekday()) + timedelta(weeks=offset)
    return SpanAnchor(first, min(first + timedelta(days=6), today))


def _month(today: date, offset: int) -> SpanAnchor:
    index = today.year * 12 + today.month - 1 + offset
    after = date((index + 1) // 12, (index + 1) % 12 + 1, 1)
    return SpanAnchor(date(index // 12, index % 12 + 1, 1), min(after - timedelta(days=1), today))


def _year(today: date, offset: int) -> SpanAnchor:
    year = today.year + offset
    return SpanAnchor(date(year, 1, 1), min(date(year, 12, 31), today))


def _day(today: date, offset: int) -> SpanAnchor:
    day = today + timedelta(days=offset)
    return SpanAnchor(day, day)


_SPANS = {
    "day": (_day, _RELATIVE_DAYS),
    "week": (_week, _RELATIVE_WEEKS),
    "month": (_month, _RELATIVE_MONTHS),
    "year": (_year, _RELATIVE_YEARS),
}


def _relative_spans(text: str, today: date) -> list[SpanAnchor]:
    """Spans of the relative words ("昨天", "上个月") and of "N units ago" ("三天前", "2 weeks ago")."""
    spans: list[SpanAnchor] = []
    for unit, (span, words) in _SPANS.items():
        spans.extend(span(today, offset) for pattern, offset in words if pattern.search(text))
        for pattern in _AGO[unit]:
            spans.extend(span(today, -_zh_number(match.group("n"))) for match in pattern.finditer(text))
    return spans


_CALENDAR_PATTERNS = (
    _ISO_DATE,
    _ZH_DATE,
    _EN_MONTH_DAY,
    _EN_DAY_MONTH,
    _EN_MONTH_YEAR,
    _EN_BARE_MONTH,
    _ZH_YEAR_ONLY,
    _EN_YEAR,
)
_RELATIVE_PATTERNS = tuple(pattern for _span, words in _SPANS.values() for pattern, _offset in words) + tuple(
    pattern for patterns in _AGO.values() for pattern in patterns
)


def without_time_expressions(text: str) -> str:
    """``text`` with every date and relative time word this module reads replaced by a space ("2023-05-02 对话" →
    ``" 对话"``).

    Why: a title's date says when, which a memory keeps in its time fields and the time route reads from there, in
    the memory's own zone; as words it tells nothing about what the memory is about (``text.title_adds_information``).
    """
    stripped = str(text or "")
    for pattern in (*_CALENDAR_PATTERNS, *_RELATIVE_PATTERNS):
        stripped = pattern.sub(" ", stripped)
    return stripped


def parse_time_anchors(text: str, now: datetime) -> list[Anchor]:
    """Every time anchor ``text`` names, most specific patterns first; ``[]`` when it names none.

    ``now`` (timezone-aware or naive local) resolves the relative words. A span of text used by one pattern is not
    read again by a looser one ("2023年5月2日" is one anchor, not also "2023年").
    """
    source = str(text or "")
    anchors: list[Anchor] = []
    taken: list[tuple[int, int]] = []

    def free(match: re.Match[str]) -> bool:
        return all(match.end() <= start or match.start() >= end for start, end in taken)

    def add(match: re.Match[str], anchor: CalendarAnchor | None) -> None:
        taken.append(match.span())
        if anchor is not None and anchor not in anchors:
            anchors.append(anchor)

    def group(match: re.Match[str], name: str) -> str | None:
        return match.groupdict().get(name)

    for pattern in (_ISO_DATE, _ZH_DATE):
        for match in pattern.finditer(source):
            if free(match):
                year, day = group(match, "year"), group(match, "day")
                add(
                    match,
                    _calendar(
                        _zh_number(year) if year else None,
                        _zh_number(match.group("month")),
                        _zh_number(day) if day else None,
                    ),
                )
    for pattern in (_EN_MONTH_DAY, _EN_DAY_MONTH, _EN_MONTH_YEAR, _EN_BARE_MONTH):
        for match in pattern.finditer(source):
            if free(match):
                year, day = group(match, "year"), group(match, "day")
                add(
                    match,
                    _calendar(int(year) if year else None, _MONTHS[match.group("month")], int(day) if day else None),
                )
    for pattern in (_ZH_YEAR_ONLY, _EN_YEAR):
        for match in pattern.finditer(source):
            if free(match):
                add(match, _calendar(_zh_number(match.group("year")), None, None))
    for span in _relative_spans(source, now.date()):
        if span not in anchors:
            anchors.append(span)
    return anchors


def memory_days(record: Mapping[str, Any], zone: tzinfo | None) -> tuple[date, date] | None:
    """The first and last local day of a memory's time (event window, else creation), or ``None`` without one.

    The days are read in the zone the memory was written in (its ``time_zone``, ``zone_named``), else in ``zone``
    (the deployment's; ``None`` = this process's): the writer meant its own calendar's day."""
    zone = zone_named(str(record.get("time_zone") or "")) or zone
    start = float(record.get("event_start_at") or 0.0)
    end = float(record.get("event_end_at") or 0.0)
    if start <= 0:
        start = end = float(record.get("created_at") or 0.0)
        if start <= 0:
            return None
    first = datetime.fromtimestamp(start, zone).date()
    last = datetime.fromtimestamp(max(end, start), zone).date()
    return first, last


def anchor_matches(anchors: list[Anchor], days: tuple[date, date] | None) -> bool:
    """True when any day of the memory's time matches any anchor."""
    if not anchors or days is None:
        return False
    first, last = days
    if (last - first).days > MAX_WINDOW_DAYS:
        return True
    day = first
    while day <= last:
        if any(anchor.matches(day) for anchor in anchors):
            return True
        day += timedelta(days=1)
    return False


def time_matches(
    anchors: list[Anchor], records: Mapping[str, Mapping[str, Any]], zone: tzinfo | None = None
) -> dict[str, float]:
    """id → 1.0 for each record whose time matches one of ``anchors`` (others absent); ``{}`` without anchors."""
    if not anchors:
        return {}
    return {key: 1.0 for key, record in records.items() if anchor_matches(anchors, memory_days(record, zone))}


def anchor_days(anchor: Anchor) -> tuple[date, date] | None:
    """The span of days an anchor stands for, or ``None`` when it has no year ("5月2日" recurs every year)."""
    if isinstance(anchor, SpanAnchor):
        return anchor.first, anchor.last
    if anchor.year is None:
        return None
    if anchor.month is None:
        return date(anchor.year, 1, 1), date(anchor.year, 12, 31)
    if anchor.day is None:
        after = date(anchor.year + anchor.month // 12, anchor.month % 12 + 1, 1)
        return date(anchor.year, anchor.month, 1), after - timedelta(days=1)
    day = date(anchor.year, anchor.month, anchor.day)
    return day, day


def time_windows(anchors: list[Anchor], zone: tzinfo | None = None, slack: float = 0.0) -> list[tuple[float, float]]:
    """Epoch-second windows ``[start, end)`` of the anchors that name definite days, for an indexed range read;
    each widened by ``slack`` seconds on both sides (``ZONE_SLACK_SECONDS`` when memories may have been written in
    other zones: the caller then keeps those whose own day matches, ``time_matches``)."""
    windows: list[tuple[float, float]] = []
    for anchor in anchors:
        days = anchor_days(anchor)
        if days is None:
            continue
        start = datetime.combine(days[0], datetime.min.time(), zone).timestamp()
        end = datetime.combine(days[1] + timedelta(days=1), datetime.min.time(), zone).timestamp()
        windows.append((start - slack, end + slack))
    return windows


def offset_name(offset: timedelta) -> str:
    """``UTC+08:00`` for a fixed offset (``UTC`` for zero), the name a zone without an IANA name is kept under."""
    minutes = int(offset.total_seconds() // 60)
    if minutes == 0:
        return "UTC"
    sign = "+" if minutes > 0 else "-"
    return f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


@lru_cache(maxsize=64)
def zone_named(name: str) -> tzinfo | None:
    """The zone a stored name stands for (IANA, or ``UTC±HH:MM`` as ``offset_name`` writes it); ``None`` for an
    empty or unknown name, so a memory without one is read in the deployment's zone."""
    text = (name or "").strip()
    if not text:
        return None
    if text == "UTC":
        return UTC
    if text.startswith("UTC") and len(text) == 9 and text[3] in "+-" and text[6] == ":":
        try:
            delta = timedelta(hours=int(text[4:6]), minutes=int(text[7:9]))
        except ValueError:
            return None
        return timezone(delta if text[3] == "+" else -delta)
    try:
        return ZoneInfo(text)
    except (ZoneInfoNotFoundError, ValueError):
        return None

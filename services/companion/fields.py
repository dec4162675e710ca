"""Validation of every companion parameter. Errors name the field and what is allowed; nothing is ever cut short.

Text a user wants remembered is kept exactly as given (no stripping, no truncation): input over a limit is rejected
with a ``ValidationError`` instead, because a shortened quote or memory is no longer what was said.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from ..errors import ValidationError
from ..memory_fields import MAX_CONTENT_CHARS, MAX_TITLE_CHARS, check_tags, checked_limit
from .settings import BREATH_RESULTS_CEILING, DREAM_WINDOW_RANGE, MAX_TOKENS_RANGE

MAX_QUOTES = 3
MAX_QUOTE_CHARS = 100
MAX_QUOTE_META_CHARS = 40
QUOTE_KEYS = ("text", "speaker", "at")
MAX_DOMAINS = 10
MAX_DOMAIN_CHARS = 32
MAX_NAME_CHARS = 200
MAX_WHY_CHARS = 1000
MAX_QUERY_CHARS = 1000
MAX_SOURCE_CHARS = 200000
MAX_SOURCE_RANGES = 50
_LIST_SEPARATORS = re.compile(r"[,，、]")
DATE_FORMATS_HINT = "支持 YYYY-MM-DD（按当天全日）或 ISO 8601 时刻（如 2024-05-01T09:30:00+08:00）"


def checked_body(value: Any, field: str = "content", *, max_chars: int = MAX_CONTENT_CHARS) -> str:
    """A memory body kept verbatim: must be a non-blank string within ``max_chars`` characters."""
    if not isinstance(value, str):
        raise ValidationError(f"{field} 必须是字符串")
    if not value.strip():
        raise ValidationError(f"{field} 不能为空")
    if len(value) > max_chars:
        raise ValidationError(f"{field} 最多 {max_chars} 个字符，当前 {len(value)} 个；不会截断，请拆开保存")
    return value


def checked_line(value: Any, field: str, *, max_chars: int, allow_empty: bool = True) -> str:
    """A one-line text field (title, name, why_remembered): stripped, within ``max_chars``."""
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValidationError(f"{field} 必须是字符串")
    text = value.strip()
    if not text and not allow_empty:
        raise ValidationError(f"{field} 不能为空")
    if len(text) > max_chars:
        raise ValidationError(f"{field} 最多 {max_chars} 个字符，当前 {len(text)} 个")
    return text


def checked_title(value: Any) -> str:
    return checked_line(value, "title", max_chars=MAX_TITLE_CHARS)


def checked_name(value: Any) -> str:
    return checked_line(value, "name", max_chars=MAX_NAME_CHARS)


def checked_why(value: Any) -> str:
    return checked_line(value, "why_remembered", max_chars=MAX_WHY_CHARS)


def parse_list(value: Any, field: str) -> list[str]:
    """A comma-separated string (``,``/``，``/``、``) or a list of strings, de-duplicated in order."""
    if value is None:
        return []
    if isinstance(value, str):
        parts = _LIST_SEPARATORS.split(value)
    elif isinstance(value, (list, tuple)):
        parts = []
        for item in value:
            if not isinstance(item, str):
                raise ValidationError(f"{field} 必须是逗号分隔的字符串或字符串列表")
            parts.extend(_LIST_SEPARATORS.split(item))
    else:
        raise ValidationError(f"{field} 必须是逗号分隔的字符串或字符串列表")
    return list(dict.fromkeys(p.strip() for p in parts if p.strip()))


def checked_domains(value: Any, field: str = "domain") -> list[str]:
    """Topic domains, lower-cased so ``Work`` and ``work`` are one domain; at most 10 of 32 characters each."""
    domains = list(dict.fromkeys(d.lower() for d in parse_list(value, field)))
    if len(domains) > MAX_DOMAINS:
        raise ValidationError(f"{field} 最多 {MAX_DOMAINS} 个主题域，当前 {len(domains)} 个")
    for domain in domains:
        if len(domain) > MAX_DOMAIN_CHARS:
            raise ValidationError(f"{field} 中的主题域 {domain[:20]!r} 超过 {MAX_DOMAIN_CHARS} 个字符")
    return domains


def checked_tag_list(value: Any, field: str = "tags") -> list[str]:
    return check_tags(field, parse_list(value, field))


def checked_importance(value: Any, field: str = "importance") -> int | None:
    """An integer 1..10, or None when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValidationError(f"{field} 必须是 1 到 10 的整数")
    try:
        number = float(value)
    except ValueError as exc:
        raise ValidationError(f"{field} 必须是 1 到 10 的整数") from exc
    if not number.is_integer() or not 1 <= number <= 10:
        raise ValidationError(f"{field}={value!r} 无效，必须是 1 到 10 的整数")
    return int(number)


def checked_unit(value: Any, field: str) -> float | None:
    """A number in [0, 1] (valence, arousal), or None when not given."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValidationError(f"{field} 必须是 0 到 1 之间的数字")
    number = float(value)
    if not math.isfinite(number) or not 0.0 <= number <= 1.0:
        raise ValidationError(f"{field}={value!r} 超出范围，必须在 0 到 1 之间")
    return number


def checked_flag(value: Any, field: str) -> bool | None:
    """0/1 (or false/true), or None when not given."""
    if value is None:
        return None
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in ("0", "1", "true", "false"):
        return value.strip().lower() in ("1", "true")
    raise ValidationError(f"{field}={value!r} 无效，只能是 0 或 1")


def checked_quotes(value: Any, field: str = "quotes") -> list[dict[str, str]]:
    """At most 3 quotes of at most 100 characters each; over the limit is rejected, never truncated.

    Accepts strings or objects ``{"text", "speaker"?, "at"?}``; returns ``[{"text", "speaker"?, "at"?}]``.
    """
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValidationError(f'{field} 必须是列表：字符串，或 {{"text","speaker","at"}} 对象')
    if len(value) > MAX_QUOTES:
        raise ValidationError(
            f"{field} 最多 {MAX_QUOTES} 句，当前 {len(value)} 句；超限拒绝而不是截断，请只留真正不想忘的那几句"
        )
    quotes: list[dict[str, str]] = []
    for index, raw in enumerate(value, start=1):
        entry = {"text": raw} if isinstance(raw, str) else raw
        if not isinstance(entry, dict):
            raise ValidationError(f'{field} 第 {index} 项必须是字符串或 {{"text","speaker","at"}} 对象')
        unknown = set(entry) - set(QUOTE_KEYS)
        if unknown:
            raise ValidationError(f"{field} 第 {index} 项含未知字段 {sorted(unknown)}，只允许 text、speaker、at")
        text = entry.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ValidationError(f"{field} 第 {index} 项的 text 不能为空")
        text = text.strip()
        if len(text) > MAX_QUOTE_CHARS:
            raise ValidationError(
                f"{field} 第 {index} 句有 {len(text)} 个字，每句最多 {MAX_QUOTE_CHARS} 个字；超限拒绝不截断，"
                "截断过的话已经不是原话"
            )
        quote = {"text": text}
        for key in ("speaker", "at"):
            meta = entry.get(key)
            if meta is None or (isinstance(meta, str) and not meta.strip()):
                continue
            if not isinstance(meta, str) or len(meta.strip()) > MAX_QUOTE_META_CHARS:
                raise ValidationError(
                    f"{field} 第 {index} 项的 {key} 必须是不超过 {MAX_QUOTE_META_CHARS} 个字符的字符串"
                )
            quote[key] = meta.strip()
        quotes.append(quote)
    return quotes


def checked_query(value: Any, field: str = "query") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field} 不能为空")
    text = value.strip()
    if len(text) > MAX_QUERY_CHARS:
        raise ValidationError(f"{field} 最多 {MAX_QUERY_CHARS} 个字符，当前 {len(text)} 个")
    return text


def checked_bucket_id(value: Any, field: str = "bucket_id") -> str:
    if not isinstance(value, str) or not value.strip():
        raise ValidationError(f"{field} 不能为空，请传入记忆桶 ID（如 mem-…）")
    return value.strip()


def checked_max_results(value: Any, default: int) -> int:
    return checked_limit("max_results", value, default=default, maximum=BREATH_RESULTS_CEILING)


def checked_max_tokens(value: Any, default: int) -> int:
    low, high = MAX_TOKENS_RANGE
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError(f"max_tokens={value!r} 无效，必须是 {low} 到 {high} 的整数")
    return value


def checked_window_hours(value: Any) -> float:
    low, high = DREAM_WINDOW_RANGE
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ValidationError(f"window_hours 必须是 {low} 到 {high} 之间的小时数")
    if not low <= float(value) <= high:
        raise ValidationError(f"window_hours={value!r} 超出范围，允许 {low} 到 {high} 小时")
    return float(value)


def checked_source_ranges(value: Any, line_count: int, field: str = "source_ranges") -> list[list[int]]:
    """1-based inclusive line ranges ``[[start, end], ...]`` within a source of ``line_count`` lines."""
    if value is None:
        return []
    if not isinstance(value, (list, tuple)):
        raise ValidationError(f"{field} 必须是 [[起始行, 结束行], ...] 列表（1 起算的闭区间）")
    if len(value) > MAX_SOURCE_RANGES:
        raise ValidationError(f"{field} 最多 {MAX_SOURCE_RANGES} 段，当前 {len(value)} 段")
    ranges: list[list[int]] = []
    for pair in value:
        if (
            not isinstance(pair, (list, tuple))
            or len(pair) != 2
            or any(isinstance(n, bool) or not isinstance(n, int) for n in pair)
        ):
            raise ValidationError(f"{field} 的每一段必须是两个整数 [起始行, 结束行]，收到 {pair!r}")
        start, end = pair
        if not 1 <= start <= end <= line_count:
            raise ValidationError(
                f"{field} 段 {list(pair)} 无效：必须满足 1 ≤ 起始行 ≤ 结束行 ≤ {line_count}（原文共 {line_count} 行）"
            )
        ranges.append([start, end])
    return ranges


@dataclass(frozen=True)
class DateRange:
    """Creation-time bounds: ``start`` inclusive; ``end`` exclusive for a date, inclusive for an exact instant."""

    start: float | None = None
    end: float | None = None
    end_exclusive: bool = True

    @property
    def is_open(self) -> bool:
        return self.start is None and self.end is None

    def contains(self, timestamp: float) -> bool:
        if self.start is not None and timestamp < self.start:
            return False
        if self.end is not None and (timestamp >= self.end if self.end_exclusive else timestamp > self.end):
            return False
        return True

    def sql(self, column: str = "r.created_at") -> tuple[list[str], list[float]]:
        clauses, params = [], []
        if self.start is not None:
            clauses.append(f"{column} >= ?")
            params.append(self.start)
        if self.end is not None:
            clauses.append(f"{column} {'<' if self.end_exclusive else '<='} ?")
            params.append(self.end)
        return clauses, params


def _local_midnight(day: date) -> float:
    return datetime(day.year, day.month, day.day).timestamp()


def _parse_bound(value: Any, field: str) -> tuple[float, bool] | None:
    """(timestamp, is_whole_day) of a bound, or None when absent. Naive times are local time."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ValidationError(f"{field} 必须是字符串，{DATE_FORMATS_HINT}")
    text = value.strip()
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        try:
            return _local_midnight(date.fromisoformat(text)), True
        except ValueError as exc:
            raise ValidationError(f"{field}={text!r} 不是有效日期，{DATE_FORMATS_HINT}") from exc
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ValidationError(f"{field}={text!r} 格式无效，{DATE_FORMATS_HINT}") from exc
    if "T" not in text.upper() and " " not in text:
        # Other date-only ISO spellings (e.g. 20240501) are whole days too.
        return _local_midnight(moment.date()), True
    return moment.timestamp(), False


def checked_date_range(date_from: Any, date_to: Any) -> DateRange:
    """Bounds on creation time. A date-only bound covers its whole day, so from=to=2024-05-01 is that day."""
    lower = _parse_bound(date_from, "date_from")
    upper = _parse_bound(date_to, "date_to")
    start = lower[0] if lower else None
    end, exclusive = None, True
    if upper is not None:
        moment, whole_day = upper
        if whole_day:
            end = _local_midnight(datetime.fromtimestamp(moment).date() + timedelta(days=1))
        else:
            end, exclusive = moment, False
    if start is not None and end is not None and (start >= end if exclusive else start > end):
        raise ValidationError(f"date_from（{date_from}）不能晚于 date_to（{date_to}）")
    return DateRange(start, end, exclusive)

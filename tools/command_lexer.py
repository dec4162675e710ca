"""Lexing and flag parsing for ``memory_command``.

The grammar is the reference's CLI style (``search -q 张三 -n 5 && read -id mem-1``), with its parser bugs fixed:

1. **Chaining**: the command is split on ``&&`` only *outside* quotes, so ``-q 'a&&b'`` is one value.
2. **Tokens**: each step is tokenised like a POSIX shell (``shlex``): single quotes, double quotes and backslash
   escapes work; an unclosed quote is a clear error, not a broken half-command.
3. **Values** (the one rule to remember): a non-boolean flag always takes the next token as its value, *unless that
   token is itself a flag of the same sub-command*. So ``-content "- 第一条"`` and ``-event_start_at -5`` keep their
   values. A value that happens to be spelled like a flag of the sub-command is written ``-content=-title``.
   A boolean flag takes the next token only when it is ``true/false/yes/no/on/off/1/0``; bare it means true.
4. **Strictness**: an unknown flag or a stray word is an error that lists the valid flags of that sub-command
   (the reference silently dropped them, so ``-tittle`` surfaced later as "missing -title").
5. Flags are case-insensitive, may use one or two dashes, ``-`` and ``_`` inside a name are interchangeable, and
   ``-flag=value`` is accepted.

Nothing here talks to the service: parse errors are raised before any step of a chain runs.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import shlex
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..services.errors import ValidationError
from .command_spec import CommandSpec, FlagKind, FlagSpec, command_by_name, command_names

MAX_COMMAND_CHARS = 60_000
MAX_CHAIN_STEPS = 10

_TRUE = frozenset({"1", "true", "yes", "y", "on", "是"})
_FALSE = frozenset({"0", "false", "no", "n", "off", "否"})
_FLAG_SHAPE = re.compile(r"^--?([A-Za-z_][A-Za-z0-9_-]*)(?:=(.*))?$", re.DOTALL)
_INTEGER = re.compile(r"^[+-]?\d+$")
_NUMBER = re.compile(r"^[+-]?(?:\d+(?:\.\d*)?|\.\d+)$")
_LIST_SPLIT = re.compile(r"[,，、]")
_ID_SPLIT = re.compile(r"[,，、\s]+")
_LOCAL_DATE = re.compile(
    r"^(\d{4})[-/.年](\d{1,2})[-/.月](\d{1,2})日?"
    r"(?:[ T]+(\d{1,2})[:：时点](\d{1,2})分?(?:[:：](\d{1,2})秒?)?)?$"
)
# Spaces a model may emit between tokens besides ASCII ones (ideographic space, no-break space).
_EXTRA_WHITESPACE = "\u3000\u00a0"


class CommandError(ValidationError):
    """A command rejected by the tool layer before the service is called. The message is the whole answer."""


@dataclass
class ParsedCommand:
    """One step of a chain after parsing.

    ``values`` maps a flag's canonical key to its coerced value; ``spellings`` maps it to the spelling the caller
    used (so messages echo what the model wrote); ``positional`` is ``help``'s topic.
    """

    spec: CommandSpec
    text: str
    values: dict[str, Any] = field(default_factory=dict)
    spellings: dict[str, str] = field(default_factory=dict)
    positional: str | None = None

    def has(self, key: str) -> bool:
        """True when the flag was given at all, even with an empty value (the tag rule depends on presence)."""
        return key in self.values

    def get(self, key: str, default: Any = None) -> Any:
        """The coerced value of ``key`` or ``default`` when the flag was not given."""
        return self.values.get(key, default)

    def flag(self, key: str) -> str:
        """How to name the flag ``key`` in a message: the spelling used, else the manual's first spelling."""
        if key in self.spellings:
            return f"-{self.spellings[key]}"
        for spec in self.spec.flags:
            if spec.key == key:
                return f"-{spec.names[0]}"
        return f"-{key}"


def split_chain(command: str | None) -> list[str]:
    """Split a raw command on ``&&`` outside quotes into trimmed, non-empty steps.

    Quote tracking follows POSIX shell rules (no escapes inside single quotes; backslash escapes outside quotes and
    inside double quotes), the same rules ``shlex`` then uses on each step. Raises ``CommandError`` for an empty
    command, an unclosed quote, a command made only of ``&&``, too many steps or an oversize command.
    """
    text = (command or "").strip()
    if not text:
        raise CommandError("command 不能为空：请写一个子命令，如 search -q 关键词；不确定时先执行 help。")
    if len(text) > MAX_COMMAND_CHARS:
        raise CommandError(f"命令太长（{len(text)} 个字符），最多 {MAX_COMMAND_CHARS} 个字符，请拆成几次执行。")
    segments: list[str] = []
    current: list[str] = []
    quote: str | None = None
    quote_start = 0
    i = 0
    while i < len(text):
        char = text[i]
        if quote == "'":
            current.append(char)
            if char == "'":
                quote = None
        elif char == "\\" and i + 1 < len(text):
            # Outside quotes and inside double quotes a backslash protects the next character (incl. & and ").
            current.append(text[i : i + 2])
            i += 2
            continue
        elif quote == '"':
            current.append(char)
            if char == '"':
                quote = None
        elif char in "'\"":
            quote, quote_start = char, i
            current.append(char)
        elif text.startswith("&&", i):
            segments.append("".join(current))
            current = []
            i += 2
            continue
        else:
            current.append(char)
        i += 1
    if quote is not None:
        raise CommandError(
            f"引号 {quote} 没有闭合（从第 {quote_start + 1} 个字符开始）：请让引号成对出现，"
            "值里本身有这种引号时改用另一种引号包住。"
        )
    segments.append("".join(current))
    steps = [segment.strip() for segment in segments if segment.strip()]
    if not steps:
        raise CommandError("未解析到可执行命令：&& 两边都要有子命令，如 search -q 张三 && read -id mem-1。")
    if len(steps) > MAX_CHAIN_STEPS:
        raise CommandError(f"一次最多用 && 串联 {MAX_CHAIN_STEPS} 步，当前 {len(steps)} 步，请分几次执行。")
    return steps


def tokenize(segment: str) -> list[str]:
    """Shell-style tokens of one step (``#`` is an ordinary character, so Markdown headings survive)."""
    lexer = shlex.shlex(segment, posix=True)
    lexer.whitespace_split = True
    lexer.whitespace += _EXTRA_WHITESPACE
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError as exc:  # unclosed quote or a trailing lone backslash
        raise CommandError(f"无法解析「{_clip(segment)}」：引号未闭合或结尾多了反斜杠，请检查后重试。") from exc


def parse_segment(segment: str) -> ParsedCommand:
    """Parse one step into a ``ParsedCommand`` (see the module docstring for the rules).

    Raises ``CommandError`` naming what is wrong and what is allowed: unknown sub-command (with a suggestion),
    unknown flag or stray word (listing the valid flags), a flag without its value, a value of the wrong type, or a
    scalar flag given twice with different values.
    """
    tokens = tokenize(segment)
    if not tokens:
        raise CommandError("空命令段：&& 两边都要有子命令。")
    head = tokens[0]
    if head.startswith("-"):
        raise CommandError(f"每一步都要以子命令开头，而不是参数 {head}；可用子命令：{'、'.join(command_names())}。")
    spec = command_by_name(head)
    if spec is None:
        hint = _suggest(head.lower(), command_names())
        raise CommandError(f"不支持的命令: {_clip(head, 30)}，{hint}可先执行 help 查看支持的命令与参数说明。")

    parsed = ParsedCommand(spec=spec, text=segment)
    raw_values: dict[str, list[tuple[str, str]]] = {}
    args = tokens[1:]
    i = 0
    while i < len(args):
        token = args[i]
        match = match_flag(spec, token)
        if match is None:
            if _FLAG_SHAPE.match(token):
                raise CommandError(_unknown_flag_message(spec, token))
            if spec.positional and parsed.positional is None:
                parsed.positional = token
                i += 1
                continue
            raise CommandError(_stray_word_message(spec, token))
        flag, spelling, inline = match
        if inline is not None:
            raw = inline
        elif flag.kind is FlagKind.BOOL:
            following = args[i + 1] if i + 1 < len(args) else None
            if following is not None and following.strip().lower() in _TRUE | _FALSE:
                raw = following
                i += 1
            else:
                raw = "true"
        else:
            following = args[i + 1] if i + 1 < len(args) else None
            if following is None or match_flag(spec, following) is not None:
                raise CommandError(
                    f"-{spelling} 缺少值：在它后面写上值，如 -{spelling} 值；值本身恰好是参数名时写成 -{spelling}=值。"
                )
            raw = following
            i += 1
        raw_values.setdefault(flag.key, []).append((spelling, raw))
        parsed.spellings.setdefault(flag.key, spelling)
        i += 1

    for flag in spec.flags:
        occurrences = raw_values.get(flag.key)
        if occurrences:
            parsed.values[flag.key] = _combine(flag, occurrences)
    return parsed


def match_flag(spec: CommandSpec, token: str) -> tuple[FlagSpec, str, str | None] | None:
    """``(flag, spelling, inline value)`` when ``token`` is a flag of ``spec`` (``-x`` or ``-x=value``), else None."""
    found = _FLAG_SHAPE.match(token)
    if not found:
        return None
    spelling = found.group(1).lower().replace("-", "_")
    flag = spec.flag_by_name(spelling)
    if flag is None:
        return None
    return flag, spelling, found.group(2)


def coerce_value(flag: FlagSpec, raw: str, spelling: str | None = None) -> Any:
    """Turn one raw value into the flag's Python type, or raise ``CommandError`` saying what is allowed."""
    name = f"-{spelling or flag.names[0]}"
    kind = flag.kind
    if kind is FlagKind.TEXT:
        return raw
    if kind is FlagKind.LINE:
        return raw.strip()
    if kind is FlagKind.WORD:
        value = raw.strip().lower()
        if flag.choices and value and value not in flag.choices:
            raise CommandError(f"{name} 的值 {_clip(raw, 30)!r} 无效，可选：{'、'.join(flag.choices)}。")
        return value
    if kind is FlagKind.ID:
        ids = split_ids(raw)
        if len(ids) != 1:
            raise CommandError(f"{name} 需要恰好一个记忆 id，当前是 {_clip(raw, 40)!r}；多条请用 && 分开执行。")
        return ids[0]
    if kind is FlagKind.IDS:
        return split_ids(raw)
    if kind is FlagKind.LIST:
        items = [item.strip() for item in _LIST_SPLIT.split(raw) if item.strip()]
        if flag.choices:
            unknown = [item for item in items if item.lower() not in flag.choices]
            if unknown:
                raise CommandError(f"{name} 里的 {_clip(unknown[0], 20)!r} 无效，可选：{'、'.join(flag.choices)}。")
            items = [item.lower() for item in items]
        return items
    if kind is FlagKind.INT:
        return _coerce_int(flag, name, raw)
    if kind is FlagKind.BOOL:
        value = raw.strip().lower()
        if value in _TRUE:
            return True
        if value in _FALSE:
            return False
        raise CommandError(f"{name} 只能是 true 或 false，当前是 {_clip(raw, 20)!r}。")
    if kind is FlagKind.TIME:
        return parse_time(raw, name)
    if kind is FlagKind.NUMBER:
        return _coerce_number(flag, name, raw)
    if kind is FlagKind.JSON:
        return _coerce_json(flag, name, raw)
    raise CommandError(f"{name} 的类型 {kind} 未知。")


def split_ids(raw: str) -> list[str]:
    """Ids from a comma/space separated value, de-duplicated, first occurrence kept."""
    return list(dict.fromkeys(part for part in _ID_SPLIT.split(raw.strip()) if part))


def parse_time(raw: str, name: str = "时间") -> float:
    """Unix seconds from ``raw``: a number, or a local date/time such as ``2024-05-01``, ``2024/5/1 14:30``,
    ``2024年5月1日``, or ISO 8601 with an offset. Dates without an offset are the machine's local time.
    Raises ``CommandError`` for anything else and for instants before 1970."""
    text = raw.strip()
    value: float | None = None
    if _NUMBER.match(text):
        value = float(text)
    else:
        local = _LOCAL_DATE.match(text)
        try:
            if local:
                year, month, day, hour, minute, second = (int(part) if part else 0 for part in local.groups())
                value = datetime(year, month, day, hour, minute, second).astimezone().timestamp()
            else:
                moment = datetime.fromisoformat(text)
                value = (moment if moment.tzinfo else moment.astimezone()).timestamp()
        except (ValueError, OverflowError, OSError):
            value = None
    if value is None or not math.isfinite(value):
        raise CommandError(
            f"{name} 需要时间：Unix 秒数，或日期如 2024-05-01、2024-05-01 14:30；当前是 {_clip(raw, 30)!r}。"
        )
    if value < 0:
        raise CommandError(f"{name} 不能早于 1970-01-01。")
    return value


def _combine(flag: FlagSpec, occurrences: list[tuple[str, str]]) -> Any:
    """List flags merge every occurrence; a scalar flag may repeat only with the same value."""
    if flag.kind in (FlagKind.IDS, FlagKind.LIST):
        merged: list[str] = []
        for spelling, raw in occurrences:
            merged.extend(coerce_value(flag, raw, spelling))
        return list(dict.fromkeys(merged)) if flag.kind is FlagKind.IDS else merged
    values = [coerce_value(flag, raw, spelling) for spelling, raw in occurrences]
    if any(value != values[0] for value in values[1:]):
        raise CommandError(f"-{occurrences[0][0]} 给了多次且值不同，请只保留一个。")
    return values[0]


def _coerce_int(flag: FlagSpec, name: str, raw: str) -> int:
    text = raw.strip()
    bounds = _bounds_text(flag)
    if not _INTEGER.match(text):
        raise CommandError(f"{name} 必须是整数{bounds}，当前是 {_clip(raw, 20)!r}。")
    value = int(text)
    if (flag.minimum is not None and value < flag.minimum) or (flag.maximum is not None and value > flag.maximum):
        raise CommandError(f"{name}={value} 超出范围{bounds}。")
    return value


def _coerce_number(flag: FlagSpec, name: str, raw: str) -> float:
    text = raw.strip()
    bounds = _bounds_text(flag)
    if not _NUMBER.match(text):
        raise CommandError(f"{name} 必须是数字{bounds}，当前是 {_clip(raw, 20)!r}。")
    value = float(text)
    if (
        not math.isfinite(value)
        or (flag.minimum is not None and value < flag.minimum)
        or (flag.maximum is not None and value > flag.maximum)
    ):
        raise CommandError(f"{name}={_number_text(value)} 超出范围{bounds}。")
    return value


_JSON_TYPE_WORDS = {
    "array": "JSON 列表",
    "object": "JSON 对象",
    "number": "数字",
    "string": "带引号的 JSON 字符串",
    "integer": "整数",
    "boolean": "true/false",
}
_JSON_SAMPLES = {"array": "'[\"…\"]'", "object": "'{\"键\": 值}'"}


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    names: dict[type, str] = {dict: "object", list: "array", str: "string"}
    return names.get(type(value), "null")


def _coerce_json(flag: FlagSpec, name: str, raw: str) -> Any:
    """A JSON value of one of the flag's ``json_types`` (an integer also counts as a number)."""
    allowed = flag.json_types or ("array", "object")
    wanted = "或".join(_JSON_TYPE_WORDS.get(kind, kind) for kind in allowed)
    sample = next((_JSON_SAMPLES[kind] for kind in allowed if kind in _JSON_SAMPLES), "")
    hint = f"，如 {name} {sample}（用单引号包住整段 JSON）" if sample else ""
    try:
        value = json.loads(raw)
    except ValueError:
        raise CommandError(f"{name} 需要{wanted}{hint}；当前不是合法的 JSON：{_clip(raw, 30)!r}。") from None
    kind = _json_type(value)
    if kind in allowed or (kind == "integer" and "number" in allowed):
        if kind in ("integer", "number") and not math.isfinite(value):
            raise CommandError(f"{name} 必须是有限数字。")
        return value
    raise CommandError(f"{name} 需要{wanted}{hint}；当前是{_JSON_TYPE_WORDS.get(kind, kind)}。")


def _number_text(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _bounds_text(flag: FlagSpec) -> str:
    low = None if flag.minimum is None else _number_text(flag.minimum)
    high = None if flag.maximum is None else _number_text(flag.maximum)
    if low is not None and high is not None:
        return f"（{low} 到 {high}）"
    if low is not None:
        return f"（不小于 {low}）"
    if high is not None:
        return f"（不大于 {high}）"
    return ""


def valid_flags_text(spec: CommandSpec) -> str:
    """The flags of ``spec`` as an error message lists them (first spelling of each)."""
    if not spec.flags:
        return f"{spec.name} 不接受任何参数"
    return f"{spec.name} 可用参数：" + "、".join(f"-{flag.names[0]}" for flag in spec.flags)


def _unknown_flag_message(spec: CommandSpec, token: str) -> str:
    found = _FLAG_SHAPE.match(token)
    name = found.group(1).lower().replace("-", "_") if found else token
    hint = _suggest(name, spec.all_spellings(), prefix="-")
    return f"{spec.name} 不支持参数 -{_clip(name, 30)}，{hint}{valid_flags_text(spec)}。"


def _stray_word_message(spec: CommandSpec, token: str) -> str:
    if not spec.flags:
        return f"{spec.name} 后面不需要任何内容，多出了「{_clip(token, 30)}」。"
    return (
        f"{spec.name} 里多出了「{_clip(token, 30)}」：值要紧跟在参数名后面（如 -{spec.flags[0].names[0]} 值），"
        f"含空格的值请加引号；{valid_flags_text(spec)}。"
    )


def _suggest(word: str, options: list[str], prefix: str = "") -> str:
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    return f"你可能想用 {prefix}{close[0]}；" if close else ""


def _clip(text: str, limit: int = 60) -> str:
    """Echo user text in a message without letting a huge value flood the answer."""
    single = " ".join(str(text).split())
    return single if len(single) <= limit else single[: limit - 1] + "…"


__all__ = [
    "CommandError",
    "MAX_CHAIN_STEPS",
    "MAX_COMMAND_CHARS",
    "ParsedCommand",
    "coerce_value",
    "match_flag",
    "parse_segment",
    "parse_time",
    "split_chain",
    "split_ids",
    "tokenize",
    "valid_flags_text",
]

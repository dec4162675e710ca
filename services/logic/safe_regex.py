"""Regexes from the LLM, a chat user or the dashboard, compiled so that matching can never take exponential time.

Python's ``re`` backtracks: ``(a+)+$`` over 28 ``a`` and a ``!`` took half a minute, and any LLM can be talked into
sending such a pattern. RE2 (``google-re2``) matches in time linear in the text, and refuses what it cannot do in
linear time (backreferences, lookaround). Linear is not yet cheap: counted repetition such as ``.{0,999}.{0,999}``
builds a program of thousands of instructions whose automaton RE2 cannot cache, and each character then costs
that many steps. So the compiled program is also capped (``MAX_PROGRAM_SIZE``), which keeps one 20,000-character
memory under a fraction of a second; ``regex_grep`` adds a time budget per call on top.

Matching needs only a yes or no, so groups are compiled as non-capturing (RE2 then stays in its fast automaton).
"""

from __future__ import annotations

from collections.abc import Callable

import re2

from ..errors import ValidationError

# Instructions of the compiled program. Typical patterns (alternations of words, \d{4}-\d{2}, \p{Han}{2,10}) use a
# few dozen to a few hundred; broad Unicode classes with counts (\p{L}{1,8}) run into the thousands.
MAX_PROGRAM_SIZE = 5_000
# RE2's memory budget per pattern: the program and the automaton's cache. A larger cache lets the automaton keep
# the states of counted repetitions instead of falling back to a much slower simulation.
MAX_MEMORY_BYTES = 64 << 20

SUPPORTED = (
    "支持 RE2 语法：字符类 [...]、分组 (...) 与 (?:...)、|、* + ? {m,n}（n ≤ 1000）、^ $ \\b、"
    "\\d \\s \\w（只匹配 ASCII）、\\p{Han}（汉字）、(?i) 忽略大小写；"
    "不支持反向引用 \\1 和环视 (?=…) (?!…) (?<=…) (?<!…)"
)

Matcher = Callable[[str], bool]


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a refused pattern is the caller's error, answered in Chinese; not log noise
    options.never_capture = True
    options.max_mem = MAX_MEMORY_BYTES
    return options


def compile_safe_regex(pattern: str) -> Matcher:
    """A function telling whether a text contains a match of ``pattern`` (like ``re.search``), in linear time.

    Raises ``ValidationError`` (Chinese, saying what is supported) for syntax RE2 refuses and for patterns whose
    program exceeds ``MAX_PROGRAM_SIZE``.
    """
    try:
        compiled = re2.compile(pattern, _options())
    except re2.error as exc:
        detail = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValidationError(f"无效的正则表达式或不支持的写法（{detail}）。{SUPPORTED}") from None
    if compiled.programsize > MAX_PROGRAM_SIZE:
        raise ValidationError(
            f"正则表达式太复杂（编译后 {compiled.programsize} 条指令，最多 {MAX_PROGRAM_SIZE}）：请减少 {{m,n}} 的"
            "次数或换用更窄的字符类，比如用 \\p{Han} 代替 \\p{L}、用关键词代替 .{0,n}"
        )
    search = compiled.search
    return lambda text: search(text) is not None

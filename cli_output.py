"""What the command line prints and which exit code it ends with.

People read the default output, scripts read ``--json``: a result dict is shown as indented ``key: value`` lines
(multi-line text as an indented block, so ``command 'help'`` reads like a manual), while ``--json`` prints the same
dict unchanged. A result that says it failed (``"ok": false``, as ``memory_command`` answers) ends the process with
``EXIT_FAILED`` so a shell ``&&`` chain stops. Output cut short by a closed pipe (``… | head``) ends quietly.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_INVALID = 2
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what a shell tool killed by the pipe's reader would report
INDENT = "  "


def result_failed(data: Any) -> bool:
    """True when a result dict reports failure itself (``ok`` false, or files that ``failed``) rather than by
    raising."""
    if not isinstance(data, Mapping):
        return False
    failed = data.get("failed")
    return data.get("ok") is False or (isinstance(failed, int) and not isinstance(failed, bool) and failed > 0)


def render_text(data: Any) -> str:
    """A result as readable text: nested ``key: value`` lines, lists as ``-`` items, long text as a block.

    A ``memory_command`` answer shows each step's result (its error when it failed), not the envelope.
    """
    if isinstance(data, str):
        return data
    if isinstance(data, Mapping) and data.get("action") == "memory_command":
        return _command_text(data)
    if isinstance(data, Mapping) and data.get("action") in FOLDER_INGEST_ACTIONS:
        return _ingest_text(data)
    return "\n".join(_lines(data, 0))


FOLDER_INGEST_ACTIONS = frozenset({"booku_knowledge_ingest_path", "booku_knowledge_startup_ingest"})


def _ingest_text(data: Mapping[str, Any]) -> str:
    lines = [
        f"入库完成：共 {data.get('total_files', 0)} 个文件，新建 {data.get('ingested', 0)}，更新 "
        f"{data.get('updated', 0)}，"
        f"未变化跳过 {data.get('skipped', 0)}，失败 {data.get('failed', 0)}，"
        f"忽略不支持的文件 {data.get('ignored', 0)}，用时 {data.get('elapsed_seconds', 0)} 秒"
    ]
    lines += [f"  失败：{item['path']}：{item['reason']}" for item in data.get("failures") or []]
    lines += [f"  跳过：{item['path']}：{item['reason']}" for item in data.get("skipped_reasons") or []]
    return "\n".join(lines)


def _command_text(data: Mapping[str, Any]) -> str:
    steps = list(data.get("results") or [])
    blocks = []
    for step in steps:
        body = _step_body(step.get("result")) if step.get("success") else f"失败：{step.get('error', '')}"
        text = render_text(body)
        blocks.append(text if len(steps) == 1 else f"» {step.get('command', '')}\n{_indented(text, 1)}")
    error = str(data.get("error") or "")
    if error and not any(error == step.get("error") for step in steps):
        blocks.append(f"失败：{error}")
    return "\n\n".join(blocks)


def _step_body(result: Any) -> Any:
    """A step result that is only a text (``help`` answers ``{action, content}``) shows as that text alone."""
    if isinstance(result, Mapping) and set(result) <= {"action", "content"} and isinstance(result.get("content"), str):
        return result["content"]
    return result


def _scalar(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "是" if value else "否"
    return str(value)


def _indented(text: str, depth: int) -> str:
    return "\n".join(INDENT * depth + line if line else line for line in text.splitlines())


def _lines(value: Any, depth: int) -> list[str]:
    pad = INDENT * depth
    if isinstance(value, Mapping):
        lines: list[str] = []
        for key, item in value.items():
            if isinstance(item, (Mapping, list, tuple)) and item:
                lines.append(f"{pad}{key}:")
                lines.extend(_lines(item, depth + 1))
            elif isinstance(item, str) and "\n" in item:
                lines.append(f"{pad}{key}:")
                lines.append(_indented(item, depth + 1))
            else:
                lines.append(f"{pad}{key}: {_scalar(item) if not isinstance(item, (Mapping, list, tuple)) else '—'}")
        return lines
    if isinstance(value, (list, tuple)):
        lines = []
        for item in value:
            if isinstance(item, (Mapping, list, tuple)) and item:
                nested = _lines(item, depth + 1)
                lines.append(f"{pad}- {nested[0].lstrip()}")
                lines.extend(nested[1:])
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return lines
    return [pad + _indented(_scalar(value), 0)]


def emit(data: Any, *, as_json: bool) -> int:
    """Print ``data`` (text or JSON) to stdout and return the exit code it calls for."""
    if as_json:
        print(json.dumps(data, ensure_ascii=False, indent=2, default=str))
    else:
        print(render_text(data))
    return EXIT_FAILED if result_failed(data) else EXIT_OK


def silence_broken_pipe() -> int:
    """After ``BrokenPipeError``: point stdout at /dev/null so the interpreter's final flush cannot raise again.

    Returns the exit code to end with.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return EXIT_BROKEN_PIPE

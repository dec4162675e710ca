"""Line diffs between two states of a memory, for the history and audit views.

A revision snapshot is a full record dict. It is flattened to readable lines (title, content, tags, typed fields)
so a curator sees what changed in words, not a JSON dump. The diff lines are plain strings: the template escapes
them like any other memory text.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .rendering import MEMORY_TYPE_LABELS, STATUS_LABELS

# Vocabulary fields are shown in words, like everywhere else on the page.
_VALUE_LABELS: dict[str, Mapping[str, str]] = {"memory_type": MEMORY_TYPE_LABELS, "status": STATUS_LABELS}

# (label, snapshot key) in display order. Bookkeeping columns (timestamps, counters, version) are left out: they
# change on every write and would bury the real edit.
_SNAPSHOT_FIELDS: tuple[tuple[str, str], ...] = (
    ("类型", "memory_type"),
    ("状态", "status"),
    ("文件夹", "folder_id"),
    ("人物 ID", "person_id"),
    ("核心标签", "core_tags"),
    ("扩散标签", "diffusion_tags"),
    ("对立标签", "opposing_tags"),
    ("普通标签", "tags"),
    ("关联记忆", "relation_memory_ids"),
    ("关联别名", "relation_aliases"),
    ("相关人物", "related_people"),
    ("事件开始", "event_start_at"),
    ("事件结束", "event_end_at"),
    ("知识类型", "knowledge_type"),
    ("地址/坐标", "address_or_coord"),
    ("地点类型", "place_type"),
    ("资产类型", "asset_type"),
    ("处置状态", "disposition_status"),
    ("流程类型", "procedure_type"),
    ("已删除", "is_deleted"),
)


@dataclass(frozen=True)
class DiffLine:
    """One line of a diff: ``add``/``remove``/``same`` text, or a ``hunk`` separator between distant changes."""

    kind: Literal["add", "remove", "same", "hunk"]
    text: str


def _format_value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return "、".join(str(item) for item in value)
    if isinstance(value, bool):
        return "是" if value else "否"
    if value is None:
        return ""
    return str(value)


def snapshot_lines(snapshot: Mapping[str, Any]) -> list[str]:
    """A revision as readable lines: ``标题: …``, the content lines, then one line per non-empty field."""
    lines = [f"标题: {_format_value(snapshot.get('title'))}", "正文:"]
    lines.extend(str(snapshot.get("content") or "").splitlines() or [""])
    for label, key in _SNAPSHOT_FIELDS:
        value = _format_value(snapshot.get(key))
        value = _VALUE_LABELS.get(key, {}).get(value, value)
        if value and value not in ("0", "0.0", "否"):
            lines.append(f"{label}: {value}")
    return lines


def diff_snapshots(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None, *, context: int = 2) -> list[DiffLine]:
    """What changed from ``old`` to ``new``.

    ``old=None`` is a creation (everything is an addition); ``new=None`` is a permanent deletion, as recorded in the
    audit log's ``after`` (everything is a removal).
    """
    old_lines = snapshot_lines(old) if old is not None else []
    new_lines = snapshot_lines(new) if new is not None else []
    result: list[DiffLine] = []
    # The first two lines are the ---/+++ file headers; a content line may itself start with "--".
    for line in list(difflib.unified_diff(old_lines, new_lines, lineterm="", n=context))[2:]:
        if line.startswith("@@"):
            if result:
                result.append(DiffLine("hunk", "…"))
            continue
        marker, text = line[:1], line[1:]
        result.append(DiffLine("add" if marker == "+" else "remove" if marker == "-" else "same", text))
    return result

"""The Chinese sentences that tell a bot what a memory write did and that a memory is outdated.

One source for every surface: ``memory_command create`` (``tools/formatting``), the companion tools hold and grow
(``companion/writes``), the recall block and the companion reads. A bot reading any of them learns the same facts
in the same words: a restatement was merged, an older memory was marked outdated (and how to undo it), or a possible
update waits for a model or a reviewer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

UNSURE_LABELS = {"maybe_update": "可能是它的更新", "maybe_duplicate": "可能与它重复"}


def _one_line(text: Any, limit: int) -> str:
    single = " ".join(str(text or "").split())
    return single if len(single) <= limit else single[: max(0, limit - 1)] + "…"


def named(memory_id: str, title: Any, limit: int = 60) -> str:
    """``mem-…《title》``: how a sentence names a memory."""
    return f"{memory_id}《{_one_line(title, limit)}》"


def outdated_mark(successor_id: str) -> str:
    """The mark on a superseded memory wherever one is shown to a bot."""
    return f"已过时：已被 {successor_id} 取代，只说明以前的情况"


def write_outcome_sentence(
    memory_id: str,
    title: Any,
    *,
    merged: bool,
    superseded: Sequence[Mapping[str, Any]] = (),
    unsure: Sequence[Mapping[str, Any]] = (),
    created: str = "已创建记忆",
) -> str:
    """What one write did, in one sentence.

    ``merged``: the text restated ``memory_id`` and was folded into it; ``superseded``: ``[{"id", "title"}]`` of the
    older memories the new one marked outdated; ``unsure``: ``[{"id", "kind"}]`` pairs left for a model or a human;
    ``created``: the opening for a plain new memory (a companion write says 已保存记忆).
    """
    if merged:
        message = (
            f"与已有记忆 {named(memory_id, title)}说的是同一件事，已合并进这条记忆（与已有记忆合并，没有新建，"
            f"两段原文都保留）；合并前的版本可用 history -id {memory_id} 查看"
        )
    elif superseded:
        names = "、".join(named(entry["id"], entry.get("title"), 40) for entry in superseded)
        message = (
            f"已记录 {named(memory_id, title)}，并把旧记录 {names}标记为过时（已被新记录取代，原文保留，"
            f"仍可回答“以前”的问题；判断错了可用 history 查看并 revert 回退）"
        )
    else:
        message = f"{created} {named(memory_id, title)}"
    if unsure:
        message += "；" + "、".join(
            f"{UNSURE_LABELS.get(entry.get('kind') or '', '可能与它有关')}：{entry['id']}" for entry in unsure
        )
        message += "（两条暂都保留，稍后由模型或人工确认，不需要你处理）"
    return message

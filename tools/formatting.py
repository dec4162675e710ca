"""What the LLM reads back from ``memory_command``: compact, structured, Chinese, and within a character budget.

The service returns full record items (about 45 metadata keys each); an LLM needs only id, title, type, score and a
short snippet to decide what to ``read`` next. Every formatter here turns one service result into such a compact
dict, and ``fit_to_budget`` then shrinks the whole answer (shorter text first, then fewer items, always saying what
was left out and how to get it) until it fits ``tools.output_char_budget``, measured exactly as the host serialises
it: ``json.dumps(..., ensure_ascii=False)``.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

from ..services.errors import NotFoundError
from ..services.logic.write_report import outdated_mark, write_outcome_sentence

ELLIPSIS = "…"
COMMAND_ECHO_CHARS = 80
MIN_CONTENT_CHARS = 40
HISTORY_SNIPPET_CHARS = 60
STATUS_RECENT = 5


def render_for_llm(payload: Any) -> str:
    """The exact text the host shows the model for a tool result (what the budget is measured on)."""
    return json.dumps(payload, ensure_ascii=False)


def rendered_len(payload: Any) -> int:
    """Characters ``payload`` takes once rendered for the model."""
    return len(render_for_llm(payload))


def one_line(text: Any, limit: int | None = None) -> str:
    """Collapse whitespace (newlines included) to single spaces and cut to ``limit`` characters with ``…``."""
    single = " ".join(str(text or "").split())
    if limit is not None and len(single) > limit:
        return single[: max(0, limit - 1)] + ELLIPSIS
    return single


def format_time(epoch: Any) -> str | None:
    """Local ``YYYY-MM-DD HH:MM`` for a Unix time, ``None`` for 0/absent (the store's "not set")."""
    try:
        value = float(epoch or 0)
    except (TypeError, ValueError):
        return None
    if value <= 0:
        return None
    try:
        return datetime.fromtimestamp(value).strftime("%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):
        return None


def describe_remaining(expires_at: float, now: float | None = None) -> str:
    """How long until a memo expires, as the reference phrased it: ``约 N 分钟后过期`` under an hour (at least 1),
    else ``约 H 小时后过期`` for whole hours or ``约 H.H 小时后过期``."""
    seconds = max(0.0, float(expires_at) - (time.time() if now is None else now))
    minutes = seconds / 60
    if minutes < 60:
        return f"约 {max(1, int(round(minutes)))} 分钟后过期"
    hours = round(seconds / 3600, 1)
    shown = f"{int(hours)}" if hours == int(hours) else f"{hours:.1f}"
    return f"约 {shown} 小时后过期"


def tag_shorthand(metadata: dict[str, Any]) -> str:
    """The three tag groups as the ``-triple_tags`` value ``c1,c2|d1|o1``, ready to paste into ``update``."""
    groups = [metadata.get(key) or [] for key in ("core_tags", "diffusion_tags", "opposing_tags")]
    return "|".join(",".join(str(tag) for tag in group) for group in groups)


def compact_item(item: dict[str, Any], *, snippet_chars: int) -> dict[str, Any]:
    """One search/grep/list hit: id, title, type (+ status when not active, score when ranked), snippet."""
    metadata = item.get("metadata") or {}
    compact: dict[str, Any] = {"id": item.get("id"), "title": one_line(item.get("title"), 80)}
    if metadata.get("bucket") == "knowledge":
        compact["type"] = "知识库片段"
    else:
        compact["type"] = metadata.get("memory_type") or "knowledge"
    status = metadata.get("status")
    if status and status != "active":
        compact["status"] = status
    if metadata.get("is_deleted"):
        compact["deleted"] = True
    if isinstance(item.get("score"), (int, float)):
        compact["score"] = round(float(item["score"]), 4)
    if item.get("related"):
        compact["related"] = True
    if metadata.get("superseded_by"):
        compact["superseded_by"] = metadata["superseded_by"]  # outdated: answers only questions about the past
    snippet = one_line(item.get("content_snippet") or item.get("content") or "", snippet_chars)
    if snippet:
        compact["snippet"] = snippet
    return compact


# Type-specific fields worth showing on read, in this order; empty values are left out.
_DETAIL_FIELDS = (
    "person_id",
    "related_people",
    "relation_memory_ids",
    "relation_aliases",
    "knowledge_type",
    "address_or_coord",
    "place_type",
    "asset_type",
    "disposition_status",
    "procedure_type",
)


def full_item(item: dict[str, Any], *, offset: int = 0) -> dict[str, Any]:
    """One ``read`` item: everything needed to understand and ``update`` a memory, with the body from ``offset``."""
    metadata = item.get("metadata") or {}
    detail: dict[str, Any] = {
        "id": item.get("id"),
        "title": one_line(item.get("title"), 200),
        "type": "知识库片段" if metadata.get("bucket") == "knowledge" else metadata.get("memory_type"),
        "status": metadata.get("status"),
    }
    tags = tag_shorthand(metadata)
    if tags != "||":
        detail["tags"] = tags
    if metadata.get("folder_id") and metadata.get("folder_id") != "default":
        detail["folder"] = metadata["folder_id"]
    for key in _DETAIL_FIELDS:
        value = metadata.get(key)
        if value not in (None, "", [], 0, 0.0):
            detail[key] = value
    for key in ("event_start_at", "event_end_at", "valid_from"):
        shown = format_time(metadata.get(key))
        if shown:
            detail[key] = shown
    updated = format_time(metadata.get("updated_at"))
    if updated:
        detail["updated"] = updated
    if metadata.get("superseded_by"):
        detail["superseded_by"] = metadata["superseded_by"]
        replaced_at = format_time(metadata.get("superseded_at"))
        detail["outdated"] = f"这条记录{outdated_mark(metadata['superseded_by'])}" + (
            f"（{replaced_at} 被取代）" if replaced_at else ""
        )
    if metadata.get("supersedes"):
        detail["supersedes"] = list(metadata["supersedes"])
    content = str(item.get("content") or "")
    if offset:
        detail["offset"] = offset
        if offset >= len(content):
            detail["content"] = ""
            detail["note"] = f"offset 超过正文长度（共 {len(content)} 字）"
            return detail
    detail["content"] = content[offset:]
    return detail


def _missing_note(missing: list[str]) -> str:
    return f"找不到这些记忆（id 写错或已删除）：{'、'.join(missing[:10])}" + ("等" if len(missing) > 10 else "")


def require_some_found(requested: int, missing: list[str], what: str) -> None:
    """A command whose every target id is unknown did nothing: report it as a failure, not as success."""
    if missing and len(missing) >= requested:
        raise NotFoundError(f"{_missing_note(missing)}，{what}没有执行；可先用 search 找到正确的 id。")


def with_missing(result: dict[str, Any], missing: list[str] | None) -> dict[str, Any]:
    """Attach the list of unknown ids (and a sentence about them) when there are any."""
    if missing:
        result["missing"] = list(missing)
    return result


# ----- one formatter per sub-command ----------------------------------------------------------------------------


def format_search(raw: dict[str, Any], *, snippet_chars: int, action: str = "search") -> dict[str, Any]:
    """``search``/``grep`` hits as compact items; says so when nothing matched or the vector route was down."""
    items = [compact_item(item, snippet_chars=snippet_chars) for item in raw.get("items") or []]
    result: dict[str, Any] = {"action": action, "total": len(items), "items": items}
    if raw.get("degraded"):
        result["degraded"] = one_line(raw["degraded"], 120)
    if not items:
        result["hint"] = (
            "没有找到匹配的记忆：换个说法或关键词、去掉部分过滤条件，或加 -include_archived true 再试"
            if action == "search"
            else "没有字面匹配：检查关键词，或改用 search 做语义检索"
        )
    return result


def format_read(raw: dict[str, Any], *, offset: int = 0) -> dict[str, Any]:
    """``read``: full items (body from ``offset``) plus the ids that were not found."""
    missing = list(raw.get("missing") or [])
    require_some_found(int(raw.get("requested") or len(missing)), missing, "读取")
    items = [full_item(item, offset=offset) for item in raw.get("items") or []]
    return with_missing({"action": "read", "total": len(items), "items": items}, missing)


def format_create(raw: dict[str, Any]) -> dict[str, Any]:
    """``create``: whether a new memory was made or the text was merged into an existing one, and which id."""
    item = (raw.get("items") or [{}])[0]
    memory_id = raw.get("id") or item.get("id")
    merged = raw.get("mode") == "merged"
    superseded = [entry for entry in raw.get("superseded") or [] if entry.get("id")]
    unsure = [entry for entry in raw.get("unsure") or [] if entry.get("id")]
    message = write_outcome_sentence(memory_id, item.get("title"), merged=merged, superseded=superseded, unsure=unsure)
    result = {"action": "create", "result": "merged" if merged else "created", "id": memory_id, "message": message}
    if superseded:
        result["superseded"] = [entry["id"] for entry in superseded]
    if unsure:
        result["unsure"] = [entry["id"] for entry in unsure]
    if raw.get("degraded"):
        result["degraded"] = one_line(raw["degraded"], 120)
    return result


def format_update(raw: dict[str, Any], *, memory_id: str) -> dict[str, Any]:
    """``update``: which fields actually changed (an unknown id is a failure, never a silent ``updated: 0``)."""
    require_some_found(1, list(raw.get("missing") or []), "更新")
    changed = list(raw.get("changed_fields") or [])
    if not raw.get("updated") or not changed:
        message = f"{memory_id} 的内容与给出的值相同，没有变化"
    else:
        message = f"已更新 {memory_id} 的 {'、'.join(changed)}"
    return {"action": "update", "id": memory_id, "updated_fields": changed, "message": message}


def format_delete(raw: dict[str, Any], *, requested: int) -> dict[str, Any]:
    """``delete``: how many were deleted, soft (restorable) or hard."""
    missing = list(raw.get("missing") or [])
    require_some_found(requested, missing, "删除")
    deleted = int(raw.get("deleted") or 0)
    hard = raw.get("mode") == "hard"
    if hard:
        message = f"已永久删除 {deleted} 条记忆"
    elif deleted:
        ids = ",".join(raw.get("ids") or [])
        message = f"已删除 {deleted} 条记忆（软删除，可用 restore -ids {ids} 恢复）"
    else:
        message = "这些记忆本来就已删除，没有变化"
    return with_missing(
        {"action": "delete", "mode": "hard" if hard else "soft", "deleted": deleted, "message": message}, missing
    )


def format_archive(raw: dict[str, Any], *, requested: int) -> dict[str, Any]:
    """``archive``: how many moved to the archive and how many were already there (or not archivable)."""
    missing = list(raw.get("missing") or [])
    require_some_found(requested, missing, "归档")
    archived = int(raw.get("archived") or 0)
    skipped = max(0, int(raw.get("skipped") or 0) - len(missing))
    message = f"已归档 {archived} 条记忆（搜索时加 -include_archived true 仍可找到）"
    if skipped:
        message += f"；{skipped} 条已是归档状态或属于知识库，未改动"
    return with_missing({"action": "archive", "archived": archived, "message": message}, missing)


def format_restore(raw: dict[str, Any], *, requested: int) -> dict[str, Any]:
    """``restore``: how many soft-deleted memories came back."""
    missing = list(raw.get("missing") or [])
    require_some_found(requested, missing, "恢复")
    restored = int(raw.get("restored") or 0)
    message = f"已恢复 {restored} 条记忆" if restored else "这些记忆没有被删除，无需恢复"
    return with_missing({"action": "restore", "restored": restored, "message": message}, missing)


def format_move(raw: dict[str, Any], *, requested: int) -> dict[str, Any]:
    """``move``: how many moved and where to."""
    missing = list(raw.get("missing") or [])
    require_some_found(requested, missing, "移动")
    moved = int(raw.get("moved") or 0)
    target = "、".join(
        part
        for part in (
            f"文件夹 {raw['to_folder_id']}" if raw.get("to_folder_id") else "",
            f"存储桶 {raw['to_bucket']}" if raw.get("to_bucket") else "",
        )
        if part
    )
    result = {"action": "move", "moved": moved, "message": f"已把 {moved} 条记忆移到{target}"}
    return with_missing(result, missing)


def format_status(raw: dict[str, Any], *, memo_count: int | None) -> dict[str, Any]:
    """``status``: counts, a few recent titles, memo count of this chat, and whether vectors work."""
    counts = (raw.get("counts") or {}).get("metadata") or {}
    result: dict[str, Any] = {
        "action": "status",
        "folder": raw.get("folder_id"),
        "memories": int(counts.get("memory") or 0),
        "knowledge_chunks": int(counts.get("knowledge") or 0),
        "recent": [
            {"id": item.get("id"), "title": one_line(item.get("title"), 40)}
            for item in (raw.get("recent") or [])[:STATUS_RECENT]
        ],
    }
    if memo_count is not None:
        result["memos_here"] = memo_count
    embedding = raw.get("embedding") or {}
    if embedding and not embedding.get("available", True):
        result["degraded"] = one_line(f"向量检索不可用，只能关键词检索：{embedding.get('degraded_reason', '')}", 120)
    return result


def format_folders(raw: dict[str, Any]) -> dict[str, Any]:
    """``folders``: folder ids, default first."""
    items = [str(folder) for folder in raw.get("items") or []]
    return {"action": "folders", "total": len(items), "items": items}


def format_history(raw: dict[str, Any], *, limit: int) -> dict[str, Any]:
    """``history``: newest versions first, each with its time, action and a short look at title and text."""
    versions = list(raw.get("versions") or [])
    newest = sorted(versions, key=lambda v: int(v.get("version") or 0), reverse=True)
    items = []
    for version in newest[:limit]:
        snapshot = version.get("snapshot") or {}
        entry = {
            "version": version.get("version"),
            "action": version.get("action"),
            "time": format_time(version.get("created_at")),
            "title": one_line(snapshot.get("title"), 40),
            "snippet": one_line(snapshot.get("content"), HISTORY_SNIPPET_CHARS),
        }
        if snapshot.get("is_deleted"):
            entry["deleted"] = True
        items.append(entry)
    result: dict[str, Any] = {
        "action": "history",
        "id": raw.get("memory_id"),
        "total": len(versions),
        "items": items,
        "hint": "用 revert -id <id> -version <版本号> 恢复到某一版",
    }
    if len(versions) > limit:
        result["omitted"] = len(versions) - limit
    return result


def format_revert(raw: dict[str, Any]) -> dict[str, Any]:
    """``revert``: which version was restored and that the replaced text is still in the history."""
    memory_id = raw.get("memory_id")
    target = raw.get("reverted_to")
    new_version = raw.get("version")
    return {
        "action": "revert",
        "id": memory_id,
        "reverted_to": target,
        "message": f"已把 {memory_id} 恢复为第 {target} 版的内容（保存为新的第 {new_version} 版，"
        "之前的内容仍在历史中）",
    }


# ----- budget ------------------------------------------------------------------------------------------------------


def fit_to_budget(envelope: dict[str, Any], budget: int) -> dict[str, Any]:
    """Shrink ``envelope`` in place until it renders within ``budget`` characters, and return it.

    Order: cut the longest ``read`` body (keeping at least a little, with the offset to continue from), then drop
    the last item of the longest result list (counting what was left out), and as a last resort replace the details
    with a one-line summary per step. Two texts do not count: the manual returned by ``help`` (fixed and bounded),
    and a companion result's ``text`` (verbatim memories the companion service already fitted to its own token
    limit by leaving whole memories out; cutting or summarising it here would break its never-truncate rule).
    """
    limit = budget + exempt_chars(envelope)
    while rendered_len(envelope) > limit:
        overflow = rendered_len(envelope) - limit
        if _cut_longest_content(envelope, overflow):
            continue
        if _drop_items(envelope, overflow):
            continue
        return _summary_envelope(envelope, limit)
    return envelope


def _results(envelope: dict[str, Any]) -> list[dict[str, Any]]:
    """The shrinkable results: each successful step of a chain, or the answer itself for single-call tools."""
    if "results" not in envelope:
        return [envelope]
    return [
        entry["result"]
        for entry in envelope.get("results", [])
        if entry.get("success") and isinstance(entry.get("result"), dict)
    ]


# How to see what the budget left out, per kind of answer.
_MORE_HINTS = {
    "search": "可减小 -n 或加过滤条件",
    "grep": "可减小 -n 或换更具体的关键词",
    "read": "可分几次 read",
    "history": "可用 -n 只看最近几版",
    "temporary_memo": "可取消不再需要的便签",
    "recall": "可用 -quotas 减少每类条数，或用 read 读具体记忆",
}
VERBATIM_TEXT_KEY = "text"
"""Key of a companion result's verbatim text (see ``fit_to_budget``); no other result has it at the top level."""


def exempt_chars(envelope: dict[str, Any]) -> int:
    """Characters of an answer the budget does not count: ``help`` manuals and companion results' verbatim text."""
    total = 0
    for result in _results(envelope):
        if result.get("action") == "help":
            total += rendered_len(result["content"])
        elif isinstance(result.get(VERBATIM_TEXT_KEY), str):
            total += rendered_len(result[VERBATIM_TEXT_KEY])
    return total


def _cut_longest_content(envelope: dict[str, Any], overflow: int) -> bool:
    longest: dict[str, Any] | None = None
    for result in _results(envelope):
        for item in result.get("items") or []:
            content = item.get("content")
            if isinstance(content, str) and len(content) > MIN_CONTENT_CHARS:
                if longest is None or len(content) > len(longest["content"]):
                    longest = item
    if longest is None:
        return False
    content = longest["content"]
    # JSON escaping can make a character cost 2+ (newlines, quotes); over-cut a little so the loop converges fast.
    keep = max(MIN_CONTENT_CHARS, len(content) - overflow - 120)
    if keep >= len(content):
        return False
    rest = len(content) - keep
    next_offset = int(longest.get("offset", 0)) + keep
    longest["content"] = content[:keep] + ELLIPSIS
    longest["more"] = f"正文还有 {rest} 字未显示，用 read -id {longest.get('id')} -offset {next_offset} 继续读"
    return True


def _drop_items(envelope: dict[str, Any], overflow: int) -> bool:
    """Drop trailing items of the largest list and count them.

    Enough to cover ``overflow`` (at least one), but never below the size of the next largest list, so a chain of
    searches keeps a share of every answer instead of emptying one.
    """
    sized = sorted(
        ((rendered_len(result["items"]), result) for result in _results(envelope) if result.get("items")),
        key=lambda pair: pair[0],
        reverse=True,
    )
    if not sized:
        return False
    size, result = sized[0]
    floor = sized[1][0] if len(sized) > 1 else 0
    items = result["items"]
    freed = dropped = 0
    while items and (dropped == 0 or (freed < overflow and size - freed > floor)):
        freed += rendered_len(items.pop()) + 2  # the item and its ", " separator
        dropped += 1
    result["omitted"] = int(result.get("omitted", 0)) + dropped
    more = _MORE_HINTS.get(str(result.get("action")), "")
    result["hint"] = f"另有 {result['omitted']} 条因输出长度上限未显示" + (f"，{more}" if more else "")
    return True


def _summary_envelope(envelope: dict[str, Any], limit: int) -> dict[str, Any]:
    lines = []
    for index, entry in enumerate(envelope.get("results", []), start=1):
        if entry.get("success"):
            result = entry.get("result") or {}
            lines.append(f"第{index}步成功：{result.get('message') or result.get('action', '')}")
        else:
            lines.append(f"第{index}步失败：{entry.get('error', '')}")
    summary = {
        "action": envelope.get("action", "memory_command"),
        "ok": envelope.get("ok", False),
        "executed": envelope.get("executed", 0),
        "message": "",
    }
    text = "输出超过长度上限，只保留摘要。" + "；".join(lines)
    # Each pass removes at least the measured excess (escaping can only make text longer, never shorter).
    while text and rendered_len({**summary, "message": text}) > limit:
        keep = len(text) - (rendered_len({**summary, "message": text}) - limit) - 1
        text = text[:keep] + ELLIPSIS if keep > 0 else ""
    summary["message"] = text
    envelope.clear()
    envelope.update(summary)
    return envelope


__all__ = [
    "VERBATIM_TEXT_KEY",
    "compact_item",
    "exempt_chars",
    "format_archive",
    "format_create",
    "format_delete",
    "format_folders",
    "format_history",
    "format_move",
    "format_read",
    "format_restore",
    "format_revert",
    "format_search",
    "format_status",
    "format_update",
    "describe_remaining",
    "fit_to_budget",
    "format_time",
    "full_item",
    "one_line",
    "render_for_llm",
    "rendered_len",
    "require_some_found",
    "tag_shorthand",
    "with_missing",
]

"""Audit rows for evidence and dreaming events, written into the shared append-only ``booku_audit_log``.

Why the shared table and not one of our own: the dashboard's audit page, its filters (authority, action, batch) and
the store scoping already work on it, so a person sees the whole story (a message captured, an episode made, a
proposal approved, the memory it became) in one place. Rules for these rows:

* ``memory_id`` holds the subject id (``chat-…``, ``epi-…``, ``prop-…``, ``flag-<n>``), never a memory's id, and
  ``version`` is 0. Changes of a memory itself (created on approval, provenance attached, flagged, flag resolved) are
  ordinary record revisions written by ``RecordRepository`` with their own audit rows
  (``create``/``merge``/``update``, ``attach_provenance``, ``flag_for_review``, ``resolve_review_flag``).
* ``before`` is always NULL: these rows describe events, not record states, and no record has the subject's id, so
  the audit "restore" of such a row (alone or in a batch) changes nothing (undoing an approval is
  ``restore_batch("review:<proposal>")``, which soft-deletes the memory the approval wrote).
* ``after`` never contains message text or text derived from it (only ids, counts, hashes, states and fixed
  labels), so retracting a message really removes its bytes: the audit log cannot be rewritten.
"""

from __future__ import annotations

import json
import time
from typing import Any

import aiosqlite

from ..scope import WriteContext

EVENT_ACTIONS: dict[str, str] = {
    "chat_captured": "收录聊天消息",
    "chat_retracted": "撤回聊天消息",
    "chat_expired": "聊天消息过期删除",
    "episode_created": "生成剧集",
    "episode_removed": "删除剧集",
    "proposal_created": "提出记忆提案",
    "proposal_approved": "批准提案",
    "proposal_rejected": "驳回提案",
    "proposal_withdrawn": "撤下提案（来源已撤回）",
    "proposal_redacted": "清除提案文本（来源已撤回）",
    "review_flag_raised": "标记待复核（来源已撤回）",
    "review_flag_resolved": "处理复核标记",
    "unsure_pair_queued": "待复核：可能是更新/可能重复",
    "unsure_pair_accepted": "确认更新/重复（已取代或合并）",
    "unsure_pair_dismissed": "判定为不同的事实",
}
"""Action names written by this package, with their Chinese labels (for the dashboard's audit filter)."""

REVISION_ACTIONS: dict[str, str] = {
    "attach_provenance": "记录提案来源",
    "flag_for_review": "标记待复核",
    "resolve_review_flag": "处理复核标记",
}
"""Actions of the memory revisions this package writes through ``RecordRepository``, with their labels."""


def flag_subject(flag_id: int) -> str:
    """The audit subject of a review flag (not the memory's id, so an audit restore never touches the memory)."""
    return f"flag-{flag_id}"


async def write_event(
    conn: aiosqlite.Connection,
    *,
    action: str,
    subject_id: str,
    owner_uid: str,
    store_key: str,
    ctx: WriteContext,
    details: dict[str, Any],
    now: float | None = None,
) -> None:
    """One append-only audit row for an event, in the caller's transaction (see the module rules)."""
    if action not in EVENT_ACTIONS:
        raise ValueError(f"未知的审计动作 {action!r}")
    after = {"event": action, "title": f"{EVENT_ACTIONS[action]} {subject_id}", **details}
    await conn.execute(
        "INSERT INTO booku_audit_log (at, authority, actor, cause, batch_id, action, memory_id, owner_uid, store_key, "
        "version, before, after) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, NULL, ?)",
        [
            now or time.time(),
            ctx.authority,
            ctx.actor,
            ctx.cause,
            ctx.batch_id,
            action,
            subject_id,
            owner_uid,
            store_key,
            json.dumps(after, ensure_ascii=False, sort_keys=True),
        ],
    )

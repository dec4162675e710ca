"""The ``temporary_memo`` tool: short-lived notes for the current chat stream (create/refresh, list, cancel).

Memos are sticky notes, not memories: they never enter long-term search, they expire, and they belong to the chat
stream they were written in. Every call is scoped to the caller's stream (the reference broadcast every stream's
memos everywhere); a refresh of the same text never shortens a later expiry unless ``allow_shorten`` is set; the
upper bound on ``expire_hours`` is ``memo.max_expire_hours`` (enforced by the service, shown in the schema).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ..config import BookuConfig
from ..services.errors import BookuError
from .formatting import describe_remaining, fit_to_budget, one_line
from .service_config import config_of

logger = logging.getLogger("booku_memory.tools")

MEMO_ACTIONS = ("create", "list", "cancel")
DEFAULT_EXPIRE_HOURS = 2.0

TOOL_NAME = "temporary_memo"
TOOL_DESCRIPTION = (
    "临时便签：记下短时间内要记住、需要跨聊天流带过去的事（某人刚说的喜好或请求、正在进行的事、别人的昵称），"
    "到期自动消失，只在当前聊天里提醒你。长期有用的事实请用 memory_command create，不要用便签代替长期记忆。"
    "action=list 查看当前聊天的便签，action=cancel 取消一条。"
)


def parameter_descriptions(config: BookuConfig | None = None) -> dict[str, str]:
    """Chinese descriptions of each ``temporary_memo`` parameter, for ``Annotated[...]`` in the host adapter."""
    max_hours = (config or BookuConfig()).memo.max_expire_hours
    return {
        "content": "便签内容（action=create 时必填）；action=cancel 时可填要取消的那条便签原文",
        "expire_hours": f"多少小时后自动过期，默认 {DEFAULT_EXPIRE_HOURS:g}，必须大于 0 且不超过 {max_hours:g}",
        "action": "create（默认，新建；同样内容已存在时刷新过期时间）、list（列出当前聊天的便签）、cancel（取消一条）",
        "memo_id": "action=cancel 时可用 list 返回的 memo_id 指定要取消的便签",
        "allow_shorten": "刷新已有便签时是否允许把过期时间改短，默认 false：只延长、不缩短",
    }


def tool_schema(config: BookuConfig | None = None) -> dict[str, Any]:
    """The host-facing schema of ``temporary_memo``: name, description, and per-parameter type/description/default.

    Shape: ``{"name", "description", "parameters": {name: {"type", "description", "default"?, "enum"?}},
    "required": [...]}``. The adapter mirrors it in ``execute``'s ``Annotated`` parameters.
    """
    descriptions = parameter_descriptions(config)
    return {
        "name": TOOL_NAME,
        "description": TOOL_DESCRIPTION,
        "parameters": {
            "content": {"type": "string", "description": descriptions["content"], "default": ""},
            "expire_hours": {
                "type": "number",
                "description": descriptions["expire_hours"],
                "default": DEFAULT_EXPIRE_HOURS,
            },
            "action": {
                "type": "string",
                "description": descriptions["action"],
                "default": "create",
                "enum": list(MEMO_ACTIONS),
            },
            "memo_id": {"type": "string", "description": descriptions["memo_id"], "default": ""},
            "allow_shorten": {"type": "boolean", "description": descriptions["allow_shorten"], "default": False},
        },
        "required": [],
    }


async def run_temporary_memo(
    service: Any,
    *,
    content: str | None = "",
    expire_hours: float | str | None = DEFAULT_EXPIRE_HOURS,
    action: str | None = "create",
    memo_id: str | None = None,
    allow_shorten: bool = False,
    stream_id: str | None = None,
    config: BookuConfig | None = None,
) -> dict[str, Any]:
    """Run one ``temporary_memo`` call for the stream ``stream_id`` (``None``: memos not bound to a stream).

    Returns ``{"action": "temporary_memo", "ok": True, "mode": "created"|"refreshed"|"list"|"cancelled",
    "message", ...}`` on success and ``{"action": "temporary_memo", "ok": False, "error": <one Chinese sentence>}``
    otherwise. Never raises.
    """
    stream = str(stream_id or "").strip()
    try:
        cfg = config_of(service, config)
        kind = str(action or "create").strip().lower()
        if kind not in MEMO_ACTIONS:
            raise _MemoError(f"action 只能是 {'、'.join(MEMO_ACTIONS)}，当前是 {one_line(action, 20)!r}。")
        if kind == "create":
            result = await _create(service, content, expire_hours, allow_shorten, stream)
        elif kind == "list":
            result = await _list(service, stream)
        else:
            result = await _cancel(service, content, memo_id, stream)
        return fit_to_budget({"action": TOOL_NAME, "ok": True, **result}, cfg.tools.output_char_budget)
    except BookuError as exc:
        return {"action": TOOL_NAME, "ok": False, "error": one_line(str(exc), 300)}
    except Exception as exc:  # never hand the model a traceback or internal paths
        logger.exception("temporary_memo failed")
        return {
            "action": TOOL_NAME,
            "ok": False,
            "error": f"便签服务出错（{type(exc).__name__}），这次没有完成，请稍后重试。",
        }


class _MemoError(BookuError):
    """A memo call rejected before the service is asked."""


async def _create(
    service: Any, content: str | None, expire_hours: Any, allow_shorten: bool, stream: str
) -> dict[str, Any]:
    text = str(content or "").strip()
    if not text:
        raise _MemoError("content 不能为空：写下要记住的便签内容。")
    hours = DEFAULT_EXPIRE_HOURS if expire_hours is None or expire_hours == "" else expire_hours
    if isinstance(hours, bool):
        raise _MemoError("expire_hours 必须是大于 0 的小时数。")
    requested_at = time.time()
    raw = await service.create_temporary_memo(
        content=text, expire_hours=hours, stream_id=stream, allow_shorten=bool(allow_shorten)
    )
    expires_at = float(raw.get("expires_at") or 0)
    remaining = describe_remaining(expires_at)
    if raw.get("mode") == "refreshed":
        requested_expiry = requested_at + float(hours) * 3600
        if expires_at > requested_expiry + 60:
            message = f"当前聊天已有同样的便签，保留了它更晚的过期时间（{remaining}）；要改短请设 allow_shorten=true"
        else:
            message = f"当前聊天已有同样的便签，已刷新过期时间（{remaining}）"
    else:
        message = f"已记下便签（{remaining}），它只在当前聊天里提醒你"
    return {
        "mode": raw.get("mode", "created"),
        "memo_id": raw.get("memo_id"),
        "expires": remaining,
        "active_memos_here": raw.get("active_memo_count"),
        "message": message,
    }


async def _list(service: Any, stream: str) -> dict[str, Any]:
    raw = await service.list_temporary_memos(stream_id=stream)
    now = time.time()
    items = [
        {
            "memo_id": memo.get("memo_id"),
            "text": one_line(memo.get("content"), 200),
            "expires": describe_remaining(float(memo.get("expires_at") or 0), now),
        }
        for memo in raw.get("items") or []
    ]
    message = f"当前聊天有 {len(items)} 条便签" if items else "当前聊天没有便签"
    return {"mode": "list", "total": len(items), "items": items, "message": message}


async def _cancel(service: Any, content: str | None, memo_id: str | None, stream: str) -> dict[str, Any]:
    text = str(content or "").strip()
    memo = str(memo_id or "").strip()
    if not (text or memo):
        raise _MemoError("取消便签需要 memo_id（先用 action=list 查看）或便签原文 content。")
    raw = await service.cancel_temporary_memo(memo_id=memo or None, content=text or None, stream_id=stream)
    cancelled = int(raw.get("cancelled") or 0)
    if not cancelled:
        raise _MemoError("当前聊天没有找到这条便签（只能取消当前聊天的便签），可先用 action=list 查看。")
    return {"mode": "cancelled", "cancelled": cancelled, "message": f"已取消 {cancelled} 条便签"}


__all__ = [
    "MEMO_ACTIONS",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "parameter_descriptions",
    "run_temporary_memo",
    "tool_schema",
]

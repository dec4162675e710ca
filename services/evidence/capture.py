"""Recording the chat messages the host passes to the plugin (``on_message_received`` / ``on_message_sent``).

The store a message belongs to is derived exactly as the plugin derives the scope of a chat stream for its tools
(``scope_for_chat`` with the stream's platform, chat type and stream id), so the evidence of a conversation lands in
the same store as the memories made in it, and a chat in one store can never be recalled from another. Nothing in the
message text takes part in that decision.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import time
from typing import TYPE_CHECKING, Any

from ..chat_scope import scope_for_chat
from ..errors import ValidationError
from ..scope import WriteContext
from .audit_events import write_event
from .hub import evidence_hub
from .vectors import CHAT_TIER

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

DIRECTIONS = ("received", "sent")
CAPTURE_ACTOR = "booku-chat-capture"
TRUNCATION_MARK = "…（消息过长，其余部分未收录）"


def _timestamp(value: Any) -> float:
    if value is None:
        return time.time()
    if isinstance(value, _dt.datetime):
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ValidationError("sent_at 必须是 Unix 时间戳（秒）、datetime 或 None（表示现在）")
    # Some hosts report milliseconds.
    return float(value) / 1000.0 if value > 1e11 else float(value)


async def record_host_message(
    runtime: BookuRuntime,
    *,
    message_id: str,
    stream_id: str,
    platform: str,
    chat_type: str,
    sender_id: str,
    sender_name: str,
    text: str,
    sent_at: Any,
    direction: str,
) -> dict[str, Any]:
    """Record one chat message as immutable evidence in the store of its conversation.

    Returns ``{"recorded": bool, "entry_id": str, "store_key": str, "reason": str}``; ``reason`` is ``disabled``
    (``evidence.enabled = false``, or a sent message with ``evidence.record_sent = false``), ``empty`` (no text),
    or ``duplicate`` (this host message id was already recorded in this stream). Bad arguments raise
    ValidationError. The vector is computed in the background after the commit, so the host's event handler (5 s
    budget) never waits for the embedder.
    """
    hub = evidence_hub(runtime)
    settings = hub.evidence
    kind = str(direction or "").strip().lower()
    if kind not in DIRECTIONS:
        raise ValidationError(f"direction 取值 {direction!r} 无效，可选：{'、'.join(DIRECTIONS)}")
    stream = str(stream_id or "").strip()
    host_id = str(message_id or "").strip()
    if not stream or not host_id:
        raise ValidationError("message_id 和 stream_id 都不能为空（来自宿主的消息对象）")
    if not settings.enabled or (kind == "sent" and not settings.record_sent):
        return {"recorded": False, "entry_id": "", "store_key": "", "reason": "disabled"}
    body = str(text or "").strip()
    if not body:
        return {"recorded": False, "entry_id": "", "store_key": "", "reason": "empty"}
    if len(body) > settings.max_message_chars:
        body = body[: settings.max_message_chars] + TRUNCATION_MARK
    scope = scope_for_chat(runtime.config.scope, platform=platform, chat_type=chat_type, stream_id=stream)
    row = {
        "message_id": host_id,
        "stream_id": stream,
        "store_key": scope.writable_store_key,
        "owner_uid": scope.owner_uid,
        "platform": str(platform or "").strip(),
        "chat_type": str(chat_type or "").strip().lower(),
        "direction": kind,
        "sender_id": str(sender_id or "").strip(),
        "sender_name": str(sender_name or "").strip(),
        "sent_at": _timestamp(sent_at),
        "text": body,
    }
    ctx = WriteContext(authority="mechanical", actor=CAPTURE_ACTOR, cause=f"host_event:on_message_{kind}")
    async with runtime.db.transaction() as conn:
        stored, created = await hub.chat_log.insert_message(conn, row)
        if created:
            await hub.vectors.enqueue(conn, CHAT_TIER, stored["entry_id"], stored["store_key"])
            await write_event(
                conn,
                action="chat_captured",
                subject_id=stored["entry_id"],
                owner_uid=stored["owner_uid"],
                store_key=stored["store_key"],
                ctx=ctx,
                details={
                    "stream_id": stream,
                    "direction": kind,
                    "sender_id": row["sender_id"],
                    "sent_at": row["sent_at"],
                    "chars": len(body),
                },
            )
    if not created:
        return {
            "recorded": False,
            "entry_id": stored["entry_id"],
            "store_key": stored["store_key"],
            "reason": "duplicate",
        }
    hub.schedule_vector_drain()
    return {"recorded": True, "entry_id": stored["entry_id"], "store_key": stored["store_key"], "reason": ""}

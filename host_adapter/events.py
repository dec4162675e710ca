"""Event handlers: prompt additions (flashback, tool-usage warning, memos, session self-knowledge), the chat
evidence log and the background startup ingest. Each is a thin view: the plugin instance does the work."""

import time
import uuid
from typing import Any

from src.app.plugin_system.base import BaseEventHandler
from src.core.components.types import EventType
from src.kernel.event import EventDecision

from ..services.errors import BookuError
from ..services.evidence.capture import record_host_message
from ..tools import ToolUsageTracker, append_extra
from . import logger

USER_PROMPT_TEMPLATE = "default_chatter_user_prompt"
"""The default chatter's per-turn user prompt; its ``values`` carry ``extra``, ``stream_id``, ``chat_type``…"""


def _user_prompt_values(params: dict[str, Any]) -> dict[str, Any] | None:
    """The mutable ``values`` of a default-chatter user prompt build, else ``None`` (other templates pass through)."""
    if params.get("name") != USER_PROMPT_TEMPLATE:
        return None
    values = params.get("values")
    return values if isinstance(values, dict) else None


class MemoryToolUsageWarningHandler(BaseEventHandler):
    """Counts actor rounds without ``memory_command`` per stream and adds a one-shot warning to the next prompt.

    The default chatter reports the names the LLM called, i.e. ``tool-memory_command``; ``ToolUsageTracker``
    normalises them (the reference compared the bare name and so never reset its counter).
    """

    handler_name = "memory_tool_usage_warning_handler"
    handler_description = "连续多轮未使用 memory_command 时，在下一次回复提示词中提醒模型"
    weight = 12
    init_subscribe = [EventType.AFTER_CHATTER_STEP, "on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        tracker: ToolUsageTracker = self.plugin.tool_usage
        if event_name == EventType.AFTER_CHATTER_STEP:
            stream_id = str(params.get("stream_id") or "").strip()
            if params.get("step_scope") == "actor_round" and stream_id:
                tracker.record_round(stream_id, params.get("used_tools") or [])
            return EventDecision.SUCCESS, params
        values = _user_prompt_values(params)
        if values is not None:
            warning = tracker.take_warning(str(values.get("stream_id") or "").strip())
            if warning:
                values["extra"] = append_extra(values.get("extra"), warning)
        return EventDecision.SUCCESS, params


class MemoryFlashbackInjector(BaseEventHandler):
    """Now and then appends one old memory to the user prompt (``[flashback]``; off by default)."""

    handler_name = "memory_flashback_injector"
    handler_description = "构建回复提示词时按概率闪回一条旧记忆"
    weight = 10
    init_subscribe = ["on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        values = _user_prompt_values(params)
        if values is not None:
            block = await self.plugin.flashback_text(str(values.get("stream_id") or "").strip())
            if block:
                values["extra"] = append_extra(values.get("extra"), block)
        return EventDecision.SUCCESS, params


class StreamMemoReminderHandler(BaseEventHandler):
    """Puts the memos of the stream whose prompt is being built into the ``临时备忘录`` reminder.

    The host's reminder store is global, not per stream, and the actor context injects it when the user prompt
    built here is added; refreshing it at this moment (lowest weight, so right before the prompt is used) is what
    keeps one chat's memos out of another chat's context.
    """

    handler_name = "booku_memory_stream_memos"
    handler_description = "构建回复提示词前，把当前聊天流的临时备忘录写入 system reminder"
    weight = -10
    init_subscribe = ["on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        values = _user_prompt_values(params)
        if values is not None:
            await self.plugin.sync_memo_reminder(
                stream_id=str(values.get("stream_id") or "").strip(),
                chat_type=values.get("chat_type"),
                stream_name=values.get("stream_name"),
            )
        return EventDecision.SUCCESS, params


class SessionSelfKnowledgeHandler(BaseEventHandler):
    """Starts each chat's session with the latest self-knowledge ("I") entries (the seed's SessionStart rule).

    The host has no session event; the first default-chatter user prompt a stream builds after the plugin loaded is
    its session start here, so the entries are appended to that prompt's ``extra`` once per stream. Nothing happens
    while the companion service has no ``latest_self_entries`` or there is no formal entry yet.
    """

    handler_name = "booku_memory_session_self"
    handler_description = "每个聊天流本次会话的第一次回复提示词里，附上最近 3 条正式自我认知"
    weight = 14
    init_subscribe = ["on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        values = _user_prompt_values(params)
        if values is not None:
            block = await self.plugin.session_start_text(str(values.get("stream_id") or "").strip())
            if block:
                values["extra"] = append_extra(values.get("extra"), block)
        return EventDecision.SUCCESS, params


class ChatEvidenceHandler(BaseEventHandler):
    """Records received and sent chat messages into the immutable, scoped chat log (``[evidence]``).

    The text is stored as evidence for recall and dreaming, never as an instruction; vectors are computed in the
    background so the handler stays far inside the host's 5 s budget. It never changes the event parameters.
    """

    handler_name = "booku_memory_chat_evidence"
    handler_description = "把收到和发出的聊天消息记入不可修改的聊天证据日志"
    weight = 1
    init_subscribe = [EventType.ON_MESSAGE_RECEIVED, EventType.ON_MESSAGE_SENT]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        runtime = self.plugin.running_runtime()
        message = params.get("message")
        config = self.plugin.booku_config.evidence
        sent = str(event_name) == EventType.ON_MESSAGE_SENT.value or event_name == EventType.ON_MESSAGE_SENT
        if runtime is None or message is None or not config.enabled or (sent and not config.record_sent):
            return EventDecision.SUCCESS, params
        text = str(getattr(message, "processed_plain_text", "") or getattr(message, "content", "") or "")
        message_id = str(getattr(message, "message_id", "") or "") or f"sent-{uuid.uuid4().hex}"
        try:
            await record_host_message(
                runtime,
                message_id=message_id,
                stream_id=str(getattr(message, "stream_id", "") or ""),
                platform=str(getattr(message, "platform", "") or ""),
                chat_type=str(getattr(message, "chat_type", "") or ""),
                sender_id=str(getattr(message, "sender_id", "") or ""),
                sender_name=str(getattr(message, "sender_name", "") or ""),
                text=text,
                sent_at=float(getattr(message, "time", 0) or time.time()),
                direction="sent" if sent else "received",
            )
        except BookuError as exc:
            logger.warning(f"聊天证据未记录：{exc}")
        return EventDecision.SUCCESS, params


class StartupIngestHandler(BaseEventHandler):
    """On ``on_start`` runs the knowledge-folder ingest in the background (handlers time out after 5 s)."""

    handler_name = "booku_memory_startup_ingest"
    handler_description = "启动后在后台导入配置的知识库文件夹"
    weight = 5
    init_subscribe = [EventType.ON_START]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        self.plugin.start_startup_ingest()
        return EventDecision.SUCCESS, params


EVENT_HANDLERS: tuple[type[BaseEventHandler], ...] = (
    ChatEvidenceHandler,
    SessionSelfKnowledgeHandler,
    MemoryFlashbackInjector,
    MemoryToolUsageWarningHandler,
    StreamMemoReminderHandler,
    StartupIngestHandler,
)

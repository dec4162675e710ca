"""The long-lived evidence state of one runtime: settings, stores, the chat model, locks and the stage status.

Services (``EvidenceService``, ``ReviewService``) are cheap views created per call, like the memory service; what
must live as long as the runtime lives here, one hub per runtime. ``evidence_hub(runtime)`` returns it (built from
the runtime's config on first use); ``attach_evidence`` replaces it, for the host adapter (which injects the host's
light LLM profile) and for tests (explicit settings, a stand-in model).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .chat_model import ChatModel, HostChatFn, build_chat_model
from .chat_store import ChatLog
from .dream_store import DreamStore
from .settings import DreamingSettings, EvidenceSettings, dreaming_settings, evidence_settings
from .vectors import EvidenceVectors

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

STATUS_META_KEY = "evidence.dreaming_status"


@dataclass
class StageStatus:
    """What the last run of a stage did; ``state`` is ok | unavailable | disabled | error | never."""

    state: str = "never"
    reason: str = ""
    at: float = 0.0
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state, "reason": self.reason, "at": self.at, **self.details}


class EvidenceHub:
    def __init__(
        self,
        runtime: BookuRuntime,
        *,
        evidence: EvidenceSettings | None = None,
        dreaming: DreamingSettings | None = None,
        chat_model: ChatModel | None = None,
        host_chat_fn: HostChatFn | None = None,
    ) -> None:
        self.runtime = runtime
        self.evidence = evidence or evidence_settings(runtime.config)
        self.dreaming = dreaming or dreaming_settings(runtime.config)
        self.chat_log = ChatLog(runtime.db)
        self.dream_store = DreamStore(runtime.db)
        self.vectors = EvidenceVectors(runtime, self.chat_log)
        self.chat_model: ChatModel | None
        if chat_model is not None:
            self.chat_model, self.chat_model_reason = chat_model, ""
        else:
            self.chat_model, self.chat_model_reason = build_chat_model(self.dreaming, host_chat_fn=host_chat_fn)
        self.review_lock = asyncio.Lock()
        self.stage_a_lock = asyncio.Lock()
        self.stage_b_lock = asyncio.Lock()
        self.stages: dict[str, StageStatus] = {
            "stage_a": StageStatus(),
            "stage_b": StageStatus(),
            "retention": StageStatus(),
        }
        self._drain_task: asyncio.Task | None = None
        self._drain_again = False

    # ------------------------------------------------------------- status
    async def set_status(self, stage: str, state: str, reason: str = "", **details: Any) -> StageStatus:
        """Remember a stage's outcome in memory and in ``booku_meta`` (so a dashboard of another process sees it)."""
        status = StageStatus(state, reason, time.time(), details)
        self.stages[stage] = status
        payload = json.dumps({name: s.as_dict() for name, s in self.stages.items()}, ensure_ascii=False)
        async with self.runtime.db.transaction() as conn:
            await conn.execute(
                "INSERT INTO booku_meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET "
                "value = excluded.value",
                [STATUS_META_KEY, payload],
            )
        return status

    async def report_unavailable(self, stage: str, label: str, waiting: int, waiting_what: str) -> str:
        """A stage without a chat model reports "unavailable" (status and log), never a silent skip."""
        reason = self.chat_model_reason or "没有可用的聊天模型"
        if waiting:
            logger.warning("梦境整理%s不可用：%s（%d %s）", label, reason, waiting, waiting_what)
        else:
            logger.info("梦境整理%s不可用：%s", label, reason)
        await self.set_status(stage, "unavailable", reason, waiting=waiting)
        return reason

    async def stored_status(self) -> dict[str, Any]:
        raw = await self.runtime.db.fetch_value("SELECT value FROM booku_meta WHERE key = ?", [STATUS_META_KEY], None)
        try:
            return json.loads(raw) if raw else {}
        except ValueError:
            return {}

    def model_state(self) -> dict[str, Any]:
        if self.chat_model is None:
            return {"available": False, "model_id": "", "reason": self.chat_model_reason}
        return {"available": True, "model_id": self.chat_model.model_id, "reason": ""}

    # ------------------------------------------------------------ vectors
    def schedule_vector_drain(self) -> None:
        """Drain the evidence vector outbox in the background (a chat event must not wait for the embedder)."""
        if self._drain_task is not None and not self._drain_task.done():
            self._drain_again = True
            return
        self._drain_again = False
        self._drain_task = self.runtime.spawn(self._drain_loop(), name="booku-evidence-vectors")

    async def _drain_loop(self) -> None:
        while True:
            try:
                await self.vectors.drain()
            except Exception:  # the outbox keeps the work; the next tick or event retries it
                logger.exception("聊天证据向量同步失败，将在下次重试")
            if not self._drain_again:
                return
            self._drain_again = False

    async def aclose(self) -> None:
        close = getattr(self.chat_model, "aclose", None)
        if close is not None:
            await close()


_hubs: weakref.WeakKeyDictionary[Any, EvidenceHub] = weakref.WeakKeyDictionary()


def evidence_hub(runtime: BookuRuntime) -> EvidenceHub:
    """The runtime's hub, created from its config on first use."""
    hub = _hubs.get(runtime)
    if hub is None:
        hub = EvidenceHub(runtime)
        _hubs[runtime] = hub
    return hub


def attach_evidence(
    runtime: BookuRuntime,
    *,
    evidence: EvidenceSettings | None = None,
    dreaming: DreamingSettings | None = None,
    chat_model: ChatModel | None = None,
    host_chat_fn: HostChatFn | None = None,
) -> EvidenceHub:
    """Give the runtime a hub with explicit settings and/or chat model (replacing any earlier one)."""
    hub = EvidenceHub(runtime, evidence=evidence, dreaming=dreaming, chat_model=chat_model, host_chat_fn=host_chat_fn)
    _hubs[runtime] = hub
    return hub

"""The background loop of evidence and dreaming: retention, vector retries, stage A often, stage B rarely.

One loop per runtime, started by the host adapter (or the runtime) after start-up and stopped before close. Each
tick: expire old message text (hourly), retry pending evidence vectors, run stage A when its interval has passed,
stage B when its own (longer) interval has. A stage failing never stops the loop; it is logged and shows in
``status()``. With ``dreaming.enabled = false`` the stages report ``disabled`` once and the loop only keeps the
evidence housekeeping going; ``stop()`` cancels the loop between or inside steps, which is safe because every step
commits atomically after its model calls.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from .chat_model import ChatModel, HostChatFn
from .episodes import EpisodeStage
from .hub import EvidenceHub, attach_evidence, evidence_hub
from .proposals import ProposalStage
from .retraction import Retraction

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

RETENTION_INTERVAL_SECONDS = 3600.0


class DreamingScheduler:
    """``start()`` after ``runtime.start()``; ``await stop()`` before ``runtime.close()``."""

    def __init__(
        self,
        runtime: BookuRuntime,
        *,
        host_chat_fn: HostChatFn | None = None,
        chat_model: ChatModel | None = None,
        hub: EvidenceHub | None = None,
    ) -> None:
        self.rt = runtime
        if hub is not None:
            self.hub = hub
        elif host_chat_fn is not None or chat_model is not None:
            self.hub = attach_evidence(runtime, host_chat_fn=host_chat_fn, chat_model=chat_model)
        else:
            self.hub = evidence_hub(runtime)
        self._task: asyncio.Task | None = None
        self._last: dict[str, float] = {"stage_a": 0.0, "stage_b": 0.0, "retention": 0.0}
        self._reported_disabled = False

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def start(self) -> None:
        """Start the loop (idempotent). Logs once whether dreaming is on, and which model it uses."""
        if self.running:
            return
        dreaming = self.hub.dreaming
        if not dreaming.enabled:
            logger.info("梦境整理已关闭（dreaming.enabled = false）；只运行聊天证据的保留期清理与向量同步")
        elif self.hub.chat_model is None:
            logger.warning(
                "梦境整理已开启，但没有可用的聊天模型：%s。阶段 A/B 将报告“不可用”", self.hub.chat_model_reason
            )
        else:
            logger.info("梦境整理已开启，聊天模型 %s", self.hub.chat_model.model_id)
        self._task = self.rt.spawn(self._loop(), name="booku-dreaming")

    async def stop(self) -> None:
        """Cancel the loop and close the chat model's connections."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.hub.aclose()

    async def _loop(self) -> None:
        while True:
            try:
                await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception:
                logger.exception("梦境整理周期出错，下个周期重试")
            await asyncio.sleep(self.hub.dreaming.tick_seconds)

    async def tick(self, *, now: float | None = None) -> dict[str, Any]:
        """One round of whatever is due. Returns what ran: ``{"retention", "vectors", "stage_a", "stage_b"}``."""
        moment = time.time() if now is None else now
        dreaming = self.hub.dreaming
        done: dict[str, Any] = {}
        if moment - self._last["retention"] >= RETENTION_INTERVAL_SECONDS:
            self._last["retention"] = moment
            done["retention"] = await Retraction(self.rt, self.hub).purge_expired(now=moment)
        report = await self.hub.vectors.drain()
        done["vectors"] = {"applied": report.applied, "pending": report.pending, "error": report.error}
        if not dreaming.enabled:
            if not self._reported_disabled:
                self._reported_disabled = True
                done["stage_a"] = (await EpisodeStage(self.rt, self.hub).run(now=moment)).as_dict()
                done["stage_b"] = (await ProposalStage(self.rt, self.hub).run()).as_dict()
            return done
        if moment - self._last["stage_a"] >= dreaming.stage_a_interval_seconds:
            self._last["stage_a"] = moment
            done["stage_a"] = (await EpisodeStage(self.rt, self.hub).run(now=moment)).as_dict()
        if moment - self._last["stage_b"] >= dreaming.stage_b_interval_seconds:
            self._last["stage_b"] = moment
            done["stage_b"] = (await ProposalStage(self.rt, self.hub).run()).as_dict()
        return done

"""Dreaming stage A: summarise windows of unprocessed chat, per channel, into episodes.

A window is a run of one channel's messages that no episode covers yet, cut where the conversation paused for
``episode_idle_seconds`` and at ``episode_max_messages``. The newest window of a channel is only summarised once it
is closed (full, or quiet since its last message), so a conversation in progress is not cut in half.

The model call happens outside any transaction. Each episode then commits in one transaction with its message links,
keyword row, vector outbox entry and audit row, after checking that its messages are still live and still
unprocessed (a retraction or another run may have happened meanwhile): a failed or interrupted run leaves the
messages unprocessed, and the next run summarises them; nothing is skipped and nothing is summarised twice.

No model: the stage reports ``unavailable`` with the reason and the number of windows waiting (status and log), on
every run, instead of quietly doing nothing. Dreaming disabled: the stage reports ``disabled`` and returns.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..scope import WriteContext
from .audit_events import write_event
from .chat_model import ChatModelUnavailableError
from .hub import EvidenceHub
from .prompts import ModelAnswerError, episode_messages, parse_episode_answer
from .vectors import EPISODE_TIER

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

DREAMING_ACTOR = "booku-dreaming"


@dataclass
class StageReport:
    """The outcome of one run; ``state`` is ok | unavailable | disabled | error."""

    stage: str
    state: str
    reason: str = ""
    batch_id: str = ""
    created: list[str] = field(default_factory=list)
    waiting: int = 0
    failures: list[str] = field(default_factory=list)
    details: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "state": self.state,
            "reason": self.reason,
            "batch_id": self.batch_id,
            "created": list(self.created),
            "waiting": self.waiting,
            "failures": list(self.failures),
            **self.details,
        }


def split_windows(
    messages: list[dict[str, Any]], *, idle_seconds: float, max_messages: int, channel_last_at: float, now: float
) -> list[list[dict[str, Any]]]:
    """Closed windows of one channel's unprocessed messages (oldest first); the open tail is left for later."""
    windows: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    for message in messages:
        if current and (message["sent_at"] - current[-1]["sent_at"] > idle_seconds or len(current) >= max_messages):
            windows.append(current)
            current = []
        current.append(message)
    if current:
        quiet = now - max(channel_last_at, current[-1]["sent_at"]) >= idle_seconds
        if len(current) >= max_messages or quiet:
            windows.append(current)
    return windows


class EpisodeStage:
    def __init__(self, runtime: BookuRuntime, hub: EvidenceHub) -> None:
        self.rt = runtime
        self.hub = hub

    async def closed_windows(self, *, now: float, limit: int) -> list[list[dict[str, Any]]]:
        """Up to ``limit`` closed windows over all channels, oldest channel first."""
        settings = self.hub.dreaming
        found: list[list[dict[str, Any]]] = []
        for channel in await self.hub.chat_log.channels_with_unprocessed():
            if len(found) >= limit:
                break
            messages = await self.hub.chat_log.unprocessed_messages(
                store_key=channel["store_key"],
                owner_uid=channel["owner_uid"],
                stream_id=channel["stream_id"],
                limit=settings.episode_max_messages * (limit - len(found)),
            )
            last_at = await self.hub.chat_log.latest_sent_at(
                store_key=channel["store_key"], stream_id=channel["stream_id"]
            )
            found.extend(
                split_windows(
                    messages,
                    idle_seconds=settings.episode_idle_seconds,
                    max_messages=settings.episode_max_messages,
                    channel_last_at=last_at,
                    now=now,
                )
            )
        return found[:limit]

    async def run(self, *, now: float | None = None) -> StageReport:
        """One pass over the closed windows (at most ``stage_a_max_windows``). Never raises for model trouble."""
        settings = self.hub.dreaming
        if not settings.enabled:
            await self.hub.set_status("stage_a", "disabled", "dreaming.enabled = false")
            return StageReport("stage_a", "disabled", "dreaming.enabled = false")
        async with self.hub.stage_a_lock:
            moment = time.time() if now is None else now
            windows = await self.closed_windows(now=moment, limit=settings.stage_a_max_windows)
            model = self.hub.chat_model
            if model is None:
                reason = await self.hub.report_unavailable("stage_a", "阶段 A ", len(windows), "个聊天窗口等待生成剧集")
                return StageReport("stage_a", "unavailable", reason, waiting=len(windows))
            report = StageReport("stage_a", "ok", batch_id=f"dream-a-{uuid.uuid4().hex[:16]}")
            ctx = WriteContext(
                authority="dreaming", actor=DREAMING_ACTOR, batch_id=report.batch_id, cause="dreaming_stage_a"
            )
            for window in windows:
                try:
                    answer = await model.complete(
                        episode_messages(window),
                        max_tokens=settings.max_output_tokens,
                        temperature=settings.temperature,
                    )
                    topic, summary = parse_episode_answer(answer)
                except (ChatModelUnavailableError, ModelAnswerError) as exc:
                    report.failures.append(f"{window[0]['stream_id']}: {exc}")
                    logger.warning("剧集生成失败，窗口保持未处理，下次重试：%s", exc)
                    if isinstance(exc, ChatModelUnavailableError):
                        break  # the model is down: the remaining windows would fail the same way
                    continue
                episode_id = await self._commit(window, topic, summary, model.model_id, ctx)
                if episode_id:
                    report.created.append(episode_id)
            report.waiting = len(windows) - len(report.created)
            if report.failures and not report.created:
                report.state, report.reason = "error", report.failures[0]
            await self.hub.set_status(
                "stage_a",
                report.state,
                report.reason,
                created=len(report.created),
                waiting=report.waiting,
                batch_id=report.batch_id,
            )
        if report.created:
            self.hub.schedule_vector_drain()
        return report

    async def _commit(
        self, window: list[dict[str, Any]], topic: str, summary: str, model_id: str, ctx: WriteContext
    ) -> str:
        entry_ids = [m["entry_id"] for m in window]
        first = window[0]
        episode = {
            "episode_id": f"epi-{uuid.uuid4().hex[:20]}",
            "store_key": first["store_key"],
            "owner_uid": first["owner_uid"],
            "stream_id": first["stream_id"],
            "topic": topic,
            "summary": summary,
            "start_at": float(window[0]["sent_at"]),
            "end_at": float(window[-1]["sent_at"]),
            "message_count": len(window),
            "model_id": model_id,
            "batch_id": ctx.batch_id,
            "created_at": time.time(),
        }
        async with self.rt.db.transaction() as conn:
            if not await self.hub.chat_log.still_unprocessed(conn, entry_ids):
                logger.info("聊天窗口在摘要期间已变化（撤回或已被处理），本次不写入剧集")
                return ""
            await self.hub.chat_log.insert_episode(conn, episode, entry_ids)
            await self.hub.vectors.enqueue(conn, EPISODE_TIER, episode["episode_id"], episode["store_key"])
            await write_event(
                conn,
                action="episode_created",
                subject_id=episode["episode_id"],
                owner_uid=episode["owner_uid"],
                store_key=episode["store_key"],
                ctx=ctx,
                details={
                    "stream_id": episode["stream_id"],
                    "message_ids": entry_ids,
                    "start_at": episode["start_at"],
                    "end_at": episode["end_at"],
                    "model_id": model_id,
                },
            )
        return episode["episode_id"]

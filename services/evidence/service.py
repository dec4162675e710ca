"""EvidenceService: the public async API over chat evidence, recall, episodes, retraction and dreaming status.

A cheap view on the runtime in a scope, like ``BookuMemoryService``; everything long-lived is in the runtime's
``EvidenceHub``. Human review of proposals is ``ReviewService`` (``review.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..memory_fields import checked_limit
from ..scope import Scope
from ..text_input import guarded_text_inputs
from .episodes import EpisodeStage
from .hub import EvidenceHub, evidence_hub
from .proposals import ProposalStage
from .retraction import Retraction
from .review import public_message
from .search import EPISODE_NOTICE, EvidenceSearch

if TYPE_CHECKING:
    from ..runtime import BookuRuntime


def public_episode(episode: dict[str, Any]) -> dict[str, Any]:
    """An episode as callers see it: its text always says that the raw messages are authoritative."""
    return {
        "id": episode["episode_id"],
        "store_key": episode["store_key"],
        "stream_id": episode["stream_id"],
        "topic": episode["topic"],
        "summary": episode["summary"],
        "notice": EPISODE_NOTICE,
        "text": f"{episode['topic']}：{episode['summary']}\n{EPISODE_NOTICE}",
        "message_ids": list(episode["entry_ids"]),
        "start_at": episode["start_at"],
        "end_at": episode["end_at"],
        "message_count": episode["message_count"],
        "model_id": episode["model_id"],
        "batch_id": episode["batch_id"],
        "created_at": episode["created_at"],
    }


@guarded_text_inputs
class EvidenceService:
    def __init__(self, runtime: Any, scope: Scope | None = None, *, hub: EvidenceHub | None = None) -> None:
        self.rt: BookuRuntime = runtime
        self.scope = scope or runtime.default_scope
        self.hub = hub or evidence_hub(runtime)

    @property
    def runtime(self) -> Any:
        """The runtime, under the name the other services use (``text_input`` reads its query limit there)."""
        return self.rt

    @property
    def _stores(self) -> list[str]:
        return list(self.scope.readable_store_keys)

    # ---------------------------------------------------------------- recall
    async def search(
        self,
        query: str,
        *,
        sources: Sequence[str] | None = None,
        limit: int | None = None,
        max_chars: int | None = None,
        since: Any = None,
        until: Any = None,
        channels: Sequence[str] | None = None,
        half_life_days: float | None = None,
        record_activation: bool = True,
    ) -> dict[str, Any]:
        """Chat recall and memory/knowledge recall in parallel, time-decayed, merged within a budget, every result
        labelled with its source (see ``recall.EvidenceSearch.search`` for the shape)."""
        return await EvidenceSearch(self.rt, self.scope, self.hub).search(
            query,
            sources=sources,
            limit=limit,
            max_chars=max_chars,
            since=since,
            until=until,
            channels=channels,
            half_life_days=half_life_days,
            record_activation=record_activation,
        )

    async def chat_recall(self, query: str, **options: Any) -> dict[str, Any]:
        """Only the chat side of ``search`` (messages and episodes)."""
        return await self.search(query, sources=("chat", "episode"), **options)

    # ----------------------------------------------------------------- reads
    async def list_channels(self) -> dict[str, Any]:
        """Channels (streams) with recorded messages in the visible stores: ``{"action", "total", "items"}``."""
        items = await self.hub.chat_log.channels(store_keys=self._stores)
        return {"action": "list_channels", "total": len(items), "items": items}

    async def list_messages(
        self,
        *,
        channel: str | None = None,
        limit: int = 50,
        offset: int = 0,
        since: float | None = None,
        until: float | None = None,
    ) -> dict[str, Any]:
        """Recorded messages newest first (retracted ones without text): ``{"action", "total", "matched", "items"}``."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError("offset 必须是非负整数")
        rows, matched = await self.hub.chat_log.list_messages(
            store_keys=self._stores,
            channels=[channel] if channel else None,
            since=since,
            until=until,
            limit=checked_limit("limit", limit, default=50, maximum=500),
            offset=offset,
        )
        return {
            "action": "list_messages",
            "total": len(rows),
            "matched": matched,
            "items": [public_message(r) for r in rows],
        }

    async def get_message(self, entry_id: str) -> dict[str, Any]:
        found = (await self.hub.chat_log.messages([str(entry_id or "").strip()], store_keys=self._stores)).get(
            str(entry_id or "").strip()
        )
        if found is None:
            raise NotFoundError(f"聊天消息 {entry_id} 不存在或不在当前可见的记忆库中")
        return {"action": "get_message", "item": public_message(found)}

    async def list_episodes(self, *, channel: str | None = None, limit: int = 50, offset: int = 0) -> dict[str, Any]:
        """Episodes newest first: ``{"action", "total", "items"}`` (each item says raw messages are authoritative)."""
        rows = await self.hub.chat_log.list_episodes(
            store_keys=self._stores,
            channels=[channel] if channel else None,
            limit=checked_limit("limit", limit, default=50, maximum=500),
            offset=max(0, int(offset)),
        )
        return {"action": "list_episodes", "total": len(rows), "items": [public_episode(e) for e in rows]}

    async def get_episode(self, episode_id: str) -> dict[str, Any]:
        """One episode with its covered messages: ``{"action", "item", "messages"}``."""
        key = str(episode_id or "").strip()
        episode = (await self.hub.chat_log.episodes([key], store_keys=self._stores)).get(key)
        if episode is None:
            raise NotFoundError(f"剧集 {key} 不存在或不在当前可见的记忆库中")
        messages = await self.hub.chat_log.messages(episode["entry_ids"], store_keys=self._stores)
        return {
            "action": "get_episode",
            "item": public_episode(episode),
            "messages": [public_message(messages[i]) for i in episode["entry_ids"] if i in messages],
        }

    # ------------------------------------------------------------ retraction
    async def retract_message(
        self,
        entry_id: str | None = None,
        *,
        stream_id: str | None = None,
        message_id: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Remove a message's bytes and what only repeats them (``retraction.Retraction.retract``)."""
        return await Retraction(self.rt, self.hub).retract(
            self.scope, entry_id=entry_id, stream_id=stream_id, message_id=message_id, reason=reason
        )

    async def purge_expired(self) -> dict[str, Any]:
        """Apply ``evidence.retention_days`` now."""
        return await Retraction(self.rt, self.hub).purge_expired()

    # -------------------------------------------------------------- dreaming
    async def run_stage_a(self, *, now: float | None = None) -> dict[str, Any]:
        """Run dreaming stage A once (episodes). Returns the stage report."""
        return (await EpisodeStage(self.rt, self.hub).run(now=now)).as_dict()

    async def run_stage_b(self) -> dict[str, Any]:
        """Run dreaming stage B once (proposals). Returns the stage report."""
        return (await ProposalStage(self.rt, self.hub).run()).as_dict()

    async def status(self) -> dict[str, Any]:
        """Evidence counts of the visible stores, proposal counts, the chat model and the last run of each stage
        (``state``: ok | unavailable | disabled | error | never)."""
        stages = {name: status.as_dict() for name, status in self.hub.stages.items()}
        stored = await self.hub.stored_status()
        for name, status in stages.items():
            if status["state"] == "never" and name in stored:
                stages[name] = stored[name]
        return {
            "action": "evidence_status",
            "evidence": {
                "enabled": self.hub.evidence.enabled,
                **await self.hub.chat_log.counts(store_keys=self._stores),
                "vector_pending": await self.hub.vectors.pending(),
                "retention_days": self.hub.evidence.retention_days,
            },
            "proposals": await self.hub.dream_store.status_counts(store_keys=self._stores),
            "dreaming": {"enabled": self.hub.dreaming.enabled, "model": self.hub.model_state(), **stages},
        }

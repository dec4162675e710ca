"""Vectors of chat messages and episodes: the ``chat`` and ``episode`` tiers of the shared Chroma index.

They follow the rows through an outbox (``booku_evidence_vector_outbox``), like memory vectors: the row and its
outbox entry commit together, ``drain()`` embeds and upserts after the commit (or deletes, for a retraction), and a
crash in between is healed by the next drain (the scheduler drains on every tick). Partitions are per (tier, store),
so a query opens only the collections of the stores a scope may read.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiosqlite
import numpy as np

from ..errors import EmbeddingUnavailableError
from ..storage.database import placeholders
from .chat_store import ChatLog

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

CHAT_TIER = "chat"
EPISODE_TIER = "episode"
EVIDENCE_TIERS = (CHAT_TIER, EPISODE_TIER)


@dataclass
class DrainReport:
    applied: int = 0
    pending: int = 0
    error: str = ""


def episode_text(episode: dict[str, Any]) -> str:
    """The text whose vector represents an episode."""
    return f"{episode['topic']}\n{episode['summary']}"


class EvidenceVectors:
    def __init__(self, runtime: BookuRuntime, chat_log: ChatLog) -> None:
        self.rt = runtime
        self.chat = chat_log
        self._lock = asyncio.Lock()

    async def enqueue(
        self, conn: aiosqlite.Connection, tier: str, item_id: str, store_key: str, *, op: str = "upsert"
    ) -> None:
        await conn.execute(
            "INSERT INTO booku_evidence_vector_outbox (tier, item_id, store_key, op, created_at) VALUES (?, "
            "?, ?, ?, ?)",
            [tier, item_id, store_key, op, time.time()],
        )

    async def pending(self) -> int:
        return int(await self.rt.db.fetch_value("SELECT COUNT(*) FROM booku_evidence_vector_outbox", (), 0))

    async def drain(self, *, batch: int = 256) -> DrainReport:
        """Apply queued vector work until the outbox is empty or only work that needs the (absent) model is left."""
        report = DrainReport()
        async with self._lock:
            after = 0
            while True:
                rows = await self.rt.db.fetch_all(
                    "SELECT outbox_id, tier, item_id, store_key, op FROM booku_evidence_vector_outbox "
                    "WHERE outbox_id > ? ORDER BY outbox_id LIMIT ?",
                    [after, batch],
                )
                if not rows:
                    break
                applied, failed, error = await self._apply(rows)
                report.applied += applied
                report.error = error or report.error
                after = max(after, max((r["outbox_id"] for r in rows), default=0))
                if len(rows) < batch:
                    break
        report.pending = await self.pending()
        return report

    async def _apply(self, rows: Sequence[aiosqlite.Row]) -> tuple[int, int, str]:
        by_item: dict[tuple[str, str], list[aiosqlite.Row]] = defaultdict(list)
        for row in rows:
            by_item[(row["tier"], row["item_id"])].append(row)
        chat_ids = [item for tier, item in by_item if tier == CHAT_TIER]
        episode_ids = [item for tier, item in by_item if tier == EPISODE_TIER]
        messages = await self.chat.messages(chat_ids, store_keys=None) if chat_ids else {}
        episodes = await self.chat.episodes(episode_ids, store_keys=None) if episode_ids else {}

        wanted: list[tuple[str, str, str, str]] = []  # (tier, store, id, text)
        removals: dict[tuple[str, str], list[str]] = defaultdict(list)
        for (tier, item_id), items in by_item.items():
            if tier == CHAT_TIER:
                message = messages.get(item_id)
                live = message is not None and not message["retracted_at"] and items[-1]["op"] == "upsert"
                if message is not None and live:
                    wanted.append((tier, message["store_key"], item_id, message["text"]))
                    continue
            else:
                episode = episodes.get(item_id)
                if episode is not None and items[-1]["op"] == "upsert":
                    wanted.append((tier, episode["store_key"], item_id, episode_text(episode)))
                    continue
            for store_key in {item["store_key"] for item in items}:
                removals[(tier, store_key)].append(item_id)

        for (tier, store_key), ids in removals.items():
            await self.rt.vectors.delete(store_key, ids, tiers=(tier,))
        handled = {(tier, item_id) for (tier, _), ids in removals.items() for item_id in ids}
        error = ""
        if wanted:
            try:
                if not self.rt.embedding_available():
                    raise EmbeddingUnavailableError(self.rt.degraded_reason() or "嵌入模型不可用")
                matrix = await self.rt.embed_documents([text for *_, text in wanted])
            except EmbeddingUnavailableError as exc:
                error = str(exc)
                logger.warning("聊天证据向量同步暂缓（%d 条）：%s", len(wanted), error)
            else:
                groups: dict[tuple[str, str], list[int]] = defaultdict(list)
                for index, (tier, store_key, _, _) in enumerate(wanted):
                    groups[(tier, store_key)].append(index)
                for (tier, store_key), indexes in groups.items():
                    await self.rt.vectors.upsert(
                        tier, store_key, [wanted[i][2] for i in indexes], np.stack([matrix[i] for i in indexes])
                    )
                handled |= {(tier, item_id) for tier, _, item_id, _ in wanted}
        done = [row["outbox_id"] for key, items in by_item.items() if key in handled for row in items]
        failed = [row["outbox_id"] for key, items in by_item.items() if key not in handled for row in items]
        async with self.rt.db.transaction() as conn:
            if done:
                await conn.execute(
                    f"DELETE FROM booku_evidence_vector_outbox WHERE outbox_id IN ({placeholders(len(done))})", done
                )
            if failed:
                await conn.execute(
                    f"UPDATE booku_evidence_vector_outbox SET attempts = attempts + 1, last_error = ? "
                    f"WHERE outbox_id IN ({placeholders(len(failed))})",
                    [error, *failed],
                )
        return len(done), len(failed), error

    async def query(
        self, tier: str, vector: np.ndarray, *, store_keys: Sequence[str], limit: int
    ) -> list[tuple[str, float]]:
        """``(item_id, cosine)`` nearest first, over the partitions of ``store_keys`` only."""
        hits = await self.rt.vectors.query(vector, store_keys=list(store_keys), tiers=[tier], limit=limit)
        return [(hit.memory_id, float(hit.similarity)) for hit in hits]

    async def enqueue_all(self) -> int:
        """Queue every live message and every episode for a vector rebuild (after a reindex dropped all collections)."""
        now = time.time()
        async with self.rt.db.transaction() as conn:
            cur = await conn.execute(
                "INSERT INTO booku_evidence_vector_outbox (tier, item_id, store_key, op, created_at) "
                "SELECT 'chat', entry_id, store_key, 'upsert', ? FROM booku_chat_messages WHERE retracted_at = 0",
                [now],
            )
            messages = cur.rowcount
            cur = await conn.execute(
                "INSERT INTO booku_evidence_vector_outbox (tier, item_id, store_key, op, created_at) "
                "SELECT 'episode', episode_id, store_key, 'upsert', ? FROM booku_episodes",
                [now],
            )
        return messages + cur.rowcount

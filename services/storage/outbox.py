"""Applies the vector outbox: makes the Chroma index follow SQLite.

A record change and its outbox row commit in one SQLite transaction. ``VectorSync.drain()`` then (re)computes the
record's vector (from the embedding cache when the text is unchanged), removes the id from partitions it no longer
belongs to, upserts it into the right one and only then deletes the outbox rows it handled. A crash anywhere in
between leaves the outbox rows in place, and the next drain (at start-up at the latest) finishes the job; Chroma's
upsert and delete are idempotent, so doing a step twice is harmless.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..embedding.base import Embedder
from ..embedding.cached import text_hash
from ..errors import EmbeddingUnavailableError
from ..logic.text import compose_embedding_text
from .database import Database, placeholders
from .records import RecordRepository
from .vector_index import TIERS, VectorIndex, tier_of

logger = logging.getLogger(__name__)


@dataclass
class SyncReport:
    applied: int = 0
    pending: int = 0
    error: str = ""


def embedding_text(record: dict[str, Any]) -> str:
    """The exact text whose passage embedding represents a record."""
    return compose_embedding_text(record.get("title", ""), record.get("content", ""))


class VectorSync:
    def __init__(self, db: Database, records: RecordRepository, vectors: VectorIndex,
                 embedder: Callable[[], Embedder | None]) -> None:
        self.db = db
        self.records = records
        self.vectors = vectors
        self._embedder = embedder
        self._lock = asyncio.Lock()
        self.last_error = ""
        # Vectors of freshly written records that are committed in SQLite but not yet in Chroma, keyed by id:
        # (store_key, tier, text hash, vector). Writers stage them so the next writer's merge check sees them, and
        # the drain upserts them without asking the embedder again.
        self.staged: dict[str, tuple[str, str, str, np.ndarray]] = {}

    def stage(self, record: dict[str, Any], vector: np.ndarray) -> None:
        tier = tier_of(record)
        if tier is not None:
            self.staged[record["memory_id"]] = (record["store_key"], tier, text_hash(embedding_text(record)), vector)

    def staged_hits(self, vector: np.ndarray, *, store_key: str, tier: str) -> list[tuple[str, float, np.ndarray]]:
        """(memory_id, cosine, vector) of staged vectors in one partition, for the merge check."""
        return [(memory_id, float(np.dot(vector, staged)), staged)
                for memory_id, (store, staged_tier, _, staged) in list(self.staged.items())
                if store == store_key and staged_tier == tier]

    async def pending_count(self) -> int:
        return int(await self.db.fetch_value("SELECT COUNT(*) FROM booku_vector_outbox", (), 0))

    async def drain(self, *, batch: int = 256, max_batches: int | None = None) -> SyncReport:
        """Apply queued vector work until the outbox is empty or only unembeddable work is left."""
        report = SyncReport()
        async with self._lock:
            done_batches = 0
            skip_after = 0
            while max_batches is None or done_batches < max_batches:
                rows = await self.db.fetch_all(
                    "SELECT outbox_id, memory_id, store_key, op FROM booku_vector_outbox "
                    "WHERE outbox_id > ? ORDER BY outbox_id LIMIT ?",
                    [skip_after, batch],
                )
                if not rows:
                    break
                applied, failed_max_id, error = await self._apply(rows)
                report.applied += applied
                if error:
                    report.error = error
                skip_after = max(skip_after, failed_max_id)
                done_batches += 1
                if len(rows) < batch:
                    break
        report.pending = await self.pending_count()
        self.last_error = report.error
        return report

    async def _apply(self, rows) -> tuple[int, int, str]:
        by_memory: dict[str, list] = defaultdict(list)
        for row in rows:
            by_memory[row["memory_id"]].append(row)
        records = await self.records.get_many(list(by_memory), include_deleted=True)

        removals: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
        wanted: list[tuple[dict[str, Any], str]] = []
        for memory_id, items in by_memory.items():
            record = records.get(memory_id)
            target = tier_of(record) if record else None
            for store_key in {item["store_key"] for item in items} | ({record["store_key"]} if record else set()):
                keep = target if (record and store_key == record["store_key"]) else None
                removals[store_key].append((memory_id, tuple(t for t in TIERS if t != keep)))
            if record is not None and target is not None:
                wanted.append((record, target))

        for store_key, entries in removals.items():
            by_tiers: dict[tuple[str, ...], list[str]] = defaultdict(list)
            for memory_id, tiers in entries:
                by_tiers[tiers].append(memory_id)
            for tiers, ids in by_tiers.items():
                await self.vectors.delete(store_key, ids, tiers=tiers)

        error = ""
        handled = set(by_memory) - {record["memory_id"] for record, _ in wanted}
        hashes: dict[str, str] = {}
        if wanted:
            embedder = self._embedder()
            texts = [embedding_text(record) for record, _ in wanted]
            try:
                ready = {}
                for index, (record, _) in enumerate(wanted):
                    staged = self.staged.get(record["memory_id"])
                    if staged is not None and staged[2] == text_hash(texts[index]):
                        ready[index] = staged[3]
                missing = [i for i in range(len(wanted)) if i not in ready]
                if missing:
                    if embedder is None:
                        raise EmbeddingUnavailableError("未配置嵌入模型")
                    fresh = await embedder.embed_documents([texts[i] for i in missing])
                    ready.update(zip(missing, fresh))
                matrix = [ready[i] for i in range(len(wanted))]
            except EmbeddingUnavailableError as exc:
                error = str(exc)
                logger.warning("向量同步暂缓（%d 条）：%s", len(wanted), error)
            else:
                groups: dict[tuple[str, str], list[int]] = defaultdict(list)
                for index, (record, tier) in enumerate(wanted):
                    groups[(tier, record["store_key"])].append(index)
                    hashes[record["memory_id"]] = text_hash(texts[index])
                for (tier, store_key), indexes in groups.items():
                    await self.vectors.upsert(
                        tier, store_key,
                        [wanted[i][0]["memory_id"] for i in indexes],
                        np.stack([matrix[i] for i in indexes]),
                        [{"folder_id": wanted[i][0]["folder_id"], "memory_type": wanted[i][0]["memory_type"]}
                         for i in indexes],
                    )
                handled |= {record["memory_id"] for record, _ in wanted}
        for memory_id in handled:
            self.staged.pop(memory_id, None)

        done_ids = [row["outbox_id"] for m in handled for row in by_memory[m]]
        failed_ids = [row["outbox_id"] for m in by_memory if m not in handled for row in by_memory[m]]
        async with self.db.transaction() as conn:
            if done_ids:
                await conn.execute(
                    f"DELETE FROM booku_vector_outbox WHERE outbox_id IN ({placeholders(len(done_ids))})", done_ids
                )
            if failed_ids:
                await conn.execute(
                    f"UPDATE booku_vector_outbox SET attempts = attempts + 1, last_error = ? "
                    f"WHERE outbox_id IN ({placeholders(len(failed_ids))})",
                    [error, *failed_ids],
                )
            for memory_id, digest in hashes.items():
                await self.records.set_embedded_hash(conn, memory_id, digest)
        return len(done_ids), max(failed_ids, default=0), error

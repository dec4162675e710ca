"""Applies the vector outbox: makes the Chroma index follow SQLite.

A record change and its outbox row commit in one SQLite transaction. ``VectorSync.drain()`` then (re)computes the
record's vector (from the embedding cache when the text is unchanged), removes the id from partitions it no longer
belongs to, upserts it into the right one and only then deletes the outbox rows it handled. A crash anywhere in
between leaves the outbox rows in place, and the next drain (at start-up at the latest) finishes the job; Chroma's
upsert and delete are idempotent, so doing a step twice is harmless.

Write-behind: a new memory's vector is known the moment it is written (the writer embedded it), so the writer
*stages* it here after its commit and returns; the runtime's flusher drains staged vectors in batches, one Chroma
upsert per partition. Until then ``merge_staged`` lets vector reads see staged vectors (exact cosine over the small
buffer), and the outbox row committed with the record keeps a crash from losing anything: the next drain rebuilds the
vector from the embedding cache.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..embedding.base import PassageEmbedder
from ..embedding.cached import text_hash
from ..errors import EmbeddingUnavailableError
from ..logic.text import compose_embedding_text
from .database import Database, placeholders
from .records import RecordRepository
from .vector_index import TIERS, VectorHit, VectorIndex, tier_of
from .write_plans import PlanStatement, WritePlan, run_plan_in_transaction

logger = logging.getLogger(__name__)


@dataclass
class SyncReport:
    applied: int = 0
    pending: int = 0
    error: str = ""


# How many recent vector removals ``merge_staged`` remembers: enough for every removal that can happen while one
# query is in flight (removals are applied in drain batches of a few hundred at most).
REMOVAL_LOG_SIZE = 4096


@dataclass(eq=False)
class StagedVector:
    """A committed record's vector that Chroma may not hold yet.

    ``state`` says what the entry means for a read that captured it before its Chroma query: ``staged`` (only
    here), ``flushed`` (Chroma now holds exactly this vector in this partition) or ``gone`` (superseded or removed;
    the entry no longer describes the index).
    """

    store_key: str
    tier: str
    digest: str
    vector: np.ndarray
    state: str = "staged"


def embedding_text(record: dict[str, Any]) -> str:
    """The exact text whose passage embedding represents a record (``title_shared`` as ``vector_sources`` reads it)."""
    return compose_embedding_text(
        record.get("title", ""), record.get("content", ""), title_shared=bool(record.get("title_shared"))
    )


class VectorSync:
    def __init__(
        self,
        db: Database,
        records: RecordRepository,
        vectors: VectorIndex,
        embedder: Callable[[], PassageEmbedder | None],
    ) -> None:
        self.db = db
        self.records = records
        self.vectors = vectors
        self._embedder = embedder
        self._lock = asyncio.Lock()
        self.last_error = ""
        # Vectors of freshly written records that are committed in SQLite but not yet in Chroma, keyed by id.
        # Writers stage them after their commit so the next writer's merge check and every read through
        # ``merge_staged`` see them, and the drain upserts them without asking the embedder again.
        self.staged: dict[str, StagedVector] = {}
        # Ids whose vector the drain removed (deleted records), with a running number, so a read whose Chroma
        # query started before the removal can still drop them.
        self._removals: OrderedDict[str, int] = OrderedDict()
        self.removal_seq = 0
        # The staged vectors stacked in staging order (``_staged_rows``): rows [:len(self._rows)] of the buffer.
        self._rows: list[tuple[str, StagedVector]] = []
        self._row_buffer = np.zeros((0, 0), dtype=np.float32)
        # (store_key, title) pairs the last drains found shared (``shared_titles``): how writers frame a new vector
        # without a read of their own; the drain re-embeds whatever a stale answer framed wrongly.
        self.shared_titles: set[tuple[str, str]] = set()

    def stage(self, record: dict[str, Any], vector: np.ndarray) -> None:
        """Stage a just-committed record's vector (call after COMMIT: a rolled-back record must leave no trace)."""
        tier = tier_of(record)
        if tier is None:
            return
        entry = StagedVector(
            record["store_key"], tier, text_hash(embedding_text(record)), np.asarray(vector, dtype=np.float32)
        )
        previous = self.staged.get(record["memory_id"])
        if previous is not None:
            previous.state = "gone"
        self.staged[record["memory_id"]] = entry

    def _unstage(self, memory_id: str, entry: StagedVector, state: str) -> None:
        entry.state = state
        if self.staged.get(memory_id) is entry:
            del self.staged[memory_id]

    def _log_removal(self, memory_id: str) -> None:
        self.removal_seq += 1
        self._removals[memory_id] = self.removal_seq
        self._removals.move_to_end(memory_id)
        while len(self._removals) > REMOVAL_LOG_SIZE:
            self._removals.popitem(last=False)

    def current_staged(self, captured: dict[str, StagedVector]) -> dict[str, StagedVector]:
        """The staged entries a reader that captured ``captured`` must see: what is staged now (in staging order),
        then entries of ``captured`` flushed since (Chroma may have answered before their upsert); entries dropped
        since are gone."""
        current = dict(self.staged)
        for memory_id, old in captured.items():
            if memory_id not in current and old.state == "flushed":
                current[memory_id] = old
        return current

    def _staged_rows(self) -> tuple[list[tuple[str, StagedVector]], np.ndarray]:
        """Every staged entry in staging order, with their vectors stacked in that order (a view, not a copy).

        Why kept between calls: every vector read stacks the staged buffer, and between two reads a writer on its
        own stages one vector, so the stack grows by a row instead of being rebuilt (up to a flush batch of
        vectors per write). Rebuilt whenever the buffer changed otherwise (a flush, a replaced entry).
        """
        rows, staged = self._rows, self.staged
        keys = list(staged)
        if keys[: len(rows)] != [memory_id for memory_id, _ in rows] or any(
            staged[memory_id] is not entry for memory_id, entry in rows
        ):
            rows = []
        new = [(memory_id, staged[memory_id]) for memory_id in keys[len(rows) :]]
        if not rows and not new:
            self._rows = []
            return [], self._row_buffer[:0]
        dimension = (rows or new)[0][1].vector.shape[0]
        if any(entry.vector.shape != (dimension,) for _, entry in new):
            # Not one matrix (a model change mid-buffer): stacking fails as it always did.
            np.stack([entry.vector for _, entry in rows + new])
        buffer = self._row_buffer
        if not rows or buffer.shape[1] != dimension or buffer.shape[0] < len(rows) + len(new):
            capacity = max(64, 2 * (len(rows) + len(new)))
            grown = np.empty((capacity, dimension), dtype=np.float32)
            if rows:
                grown[: len(rows)] = buffer[: len(rows)]
            buffer = self._row_buffer = grown
        for offset, (_, entry) in enumerate(new, start=len(rows)):
            buffer[offset] = entry.vector
        self._rows = rows + new
        return self._rows, buffer[: len(self._rows)]

    def merge_staged(
        self,
        vectors: Iterable[np.ndarray],
        found: Sequence[list[VectorHit]],
        captured: dict[str, StagedVector],
        *,
        removal_seq: int,
        store_keys: Sequence[str],
        tiers: Sequence[str],
        limit: int,
        with_embeddings: bool,
    ) -> list[list[VectorHit]]:
        """Each row's Chroma hits (``found[i]`` for ``vectors[i]``) merged with staged vectors, best first, at most
        ``limit`` per row.

        ``captured`` is ``dict(self.staged)`` and ``removal_seq`` the removal counter, both taken just before the
        Chroma query: an entry flushed while the query ran still counts (Chroma may have answered before the
        upsert), an entry dropped meanwhile does not, and a staged entry replaces Chroma's copy of the same id.
        Ids removed since the query started are dropped from Chroma's answer as well.

        Why all rows at once: the staged buffer (up to a flush batch of vectors) is sorted out and stacked once
        per call, not once per row, and only each row's best ``limit`` staged entries become hits. When nothing
        was flushed while the query ran (the usual case), the stack kept by ``_staged_rows`` serves.
        """
        wanted_stores, wanted_tiers = set(store_keys), set(tiers)
        staged_matrix: np.ndarray | None = None
        if captured == self.staged:
            current = self.staged
            rows, stacked = self._staged_rows()
            chosen = [
                index
                for index, (_, entry) in enumerate(rows)
                if entry.store_key in wanted_stores and entry.tier in wanted_tiers
            ]
            matching = [rows[index] for index in chosen]
            if matching:
                staged_matrix = stacked if len(chosen) == len(rows) else stacked[chosen]
        else:
            current = self.current_staged(captured)
            matching = [
                (memory_id, entry)
                for memory_id, entry in current.items()
                if entry.store_key in wanted_stores and entry.tier in wanted_tiers
            ]
            staged_matrix = np.stack([entry.vector for _, entry in matching]) if matching else None
        removed = (
            {memory_id for memory_id, seq in self._removals.items() if seq > removal_seq}
            if self.removal_seq > removal_seq
            else set()
        )
        results: list[list[VectorHit]] = []
        for vector, hits in zip(vectors, found):
            merged = [hit for hit in hits if hit.memory_id not in current and hit.memory_id not in removed]
            if staged_matrix is not None:
                similarities = staged_matrix @ np.asarray(vector, dtype=np.float32).reshape(-1)
                # A stable sort keeps equal similarities in buffer order, so the hits are exactly those of
                # sorting every staged entry: no staged entry beyond a row's best ``limit`` can make its top.
                for index in np.argsort(-similarities, kind="stable")[:limit]:
                    memory_id, entry = matching[index]
                    merged.append(
                        VectorHit(
                            memory_id, float(similarities[index]), entry.tier, entry.vector if with_embeddings else None
                        )
                    )
            merged.sort(key=lambda hit: hit.similarity, reverse=True)
            results.append(merged[:limit])
        return results

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
        # The staged entries as this batch found them: only these are settled below, so a vector staged while the
        # batch runs (its outbox row is not in this batch) stays staged for the next drain.
        seen_staged = dict(self.staged)
        by_memory: dict[str, list] = defaultdict(list)
        for row in rows:
            by_memory[row["memory_id"]].append(row)
        records = await self.records.vector_sources(by_memory)
        for source in records.values():
            pair = (source["store_key"], source["title"])
            if source["title_shared"]:
                self.shared_titles.add(pair)
            else:
                self.shared_titles.discard(pair)

        removals: dict[str, list[tuple[str, tuple[str, ...]]]] = defaultdict(list)
        wanted: list[tuple[dict[str, Any], str]] = []
        for memory_id, items in by_memory.items():
            record = records.get(memory_id)
            target = tier_of(record) if record else None
            entry = seen_staged.get(memory_id)
            # A vector that is still only staged belongs to a record created here and never flushed (only new
            # records are staged, and a flush unstages them), so no partition holds a copy to remove: skipping
            # the delete saves a Chroma call per partition, each holding the GIL, on every flush of new writes.
            if entry is None or entry.state != "staged":
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
                    entry = self.staged.get(record["memory_id"])
                    if entry is not None and entry.digest == text_hash(texts[index]):
                        ready[index] = entry.vector
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
                    # No Chroma metadata: nothing filters or reads it (the partition is the collection, and every
                    # other field lives in SQLite), and writing it makes each upsert markedly slower, all of
                    # it with the GIL held (see runtime.VECTOR_FLUSH_DELAY_SECONDS).
                    await self.vectors.upsert(
                        tier,
                        store_key,
                        [wanted[i][0]["memory_id"] for i in indexes],
                        np.stack([matrix[i] for i in indexes]),
                    )
                handled |= {record["memory_id"] for record, _ in wanted}
        placed = {
            record["memory_id"]: (record["store_key"], tier)
            for record, tier in wanted
            if record["memory_id"] in handled
        }
        for memory_id in handled:
            if memory_id not in placed:
                self._log_removal(memory_id)
            entry = seen_staged.get(memory_id)
            if entry is not None:
                # "flushed" only when Chroma now holds this very vector where the entry says; otherwise the entry
                # is stale (moved, re-embedded or removed) and reads must trust Chroma.
                same = placed.get(memory_id) == (entry.store_key, entry.tier) and hashes.get(memory_id) == entry.digest
                self._unstage(memory_id, entry, "flushed" if same else "gone")

        done_ids = [row["outbox_id"] for m in handled for row in by_memory[m]]
        failed_ids = [row["outbox_id"] for m in by_memory if m not in handled for row in by_memory[m]]
        # One hop to the writer for BEGIN, the three statements and COMMIT: the drain runs while writers wait for
        # the database's write lock, and a hop per statement held it four times as long.
        await run_plan_in_transaction(self.db, self._settle_plan(done_ids, failed_ids, error, hashes))
        return len(done_ids), max(failed_ids, default=0), error

    def _settle_plan(
        self, done_ids: list[int], failed_ids: list[int], error: str, hashes: dict[str, str]
    ) -> WritePlan[None]:
        """Forget the outbox rows a drain batch handled, count an attempt on the rest, and record which text each
        stored vector embeds (``RecordRepository.set_embedded_hashes_plan``)."""
        if done_ids:
            yield PlanStatement(
                f"DELETE FROM booku_vector_outbox WHERE outbox_id IN ({placeholders(len(done_ids))})", done_ids
            )
        if failed_ids:
            yield PlanStatement(
                f"UPDATE booku_vector_outbox SET attempts = attempts + 1, last_error = ? "
                f"WHERE outbox_id IN ({placeholders(len(failed_ids))})",
                [error, *failed_ids],
            )
        yield from self.records.set_embedded_hashes_plan(hashes)

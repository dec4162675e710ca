"""Every write of the memory service: upsert with safe merge, updates, deletes, moves, lifecycle, history, memos.

Writes that need a novelty check hold ``runtime.write_lock`` from the neighbour look-up until the new vector is
staged, so two coroutines writing near-duplicates at once end with one record, not two or zero. SQLite commits first
(with an outbox row); the vector follows from the outbox (see storage/outbox.py). ``upsert`` does not wait for it:
its vector is staged and the runtime's flusher writes staged vectors to Chroma in batches, while every vector read
(``runtime.query_vectors``) already sees them.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import EmbeddingUnavailableError, NotFoundError, ValidationError
from .logic.blas import single_threaded_blas
from .logic.merge import merge_texts
from .logic.text import compose_embedding_text, keyword_title
from .memory_fields import MemoryDraft, record_item
from .scope import Scope
from .storage.fact_cue_store import CueBook, cue_book_plan, store_cues_plan
from .storage.keyword_rows import KeywordRow, deferred_keyword_rows_plan, presegment
from .storage.record_filter import RecordFilter
from .storage.rows import RecordRow
from .storage.vector_index import VectorHit, tier_of
from .storage.write_plans import WritePlan, run_plan_in_transaction, savepoint_plan
from .write_decision import NewFact, WriteJudgement, judge_write, supersession_mark

if TYPE_CHECKING:
    from .runtime import BookuRuntime

REVERTIBLE_COLUMNS = (
    "title",
    "name",
    "folder_id",
    "bucket",
    "content",
    "source",
    "memory_type",
    "status",
    "person_id",
    "relation_memory_ids",
    "relation_aliases",
    "event_start_at",
    "event_end_at",
    "related_people",
    "knowledge_type",
    "address_or_coord",
    "place_type",
    "asset_type",
    "disposition_status",
    "procedure_type",
    "importance",
    "valence",
    "arousal",
    "domains",
    "pinned",
    "protected",
    "anchor",
    "digested",
    "resolved",
    "why_remembered",
    "extra",
    "tags",
    "core_tags",
    "diffusion_tags",
    "opposing_tags",
    "valid_from",
    "superseded_at",
    "superseded_by",
    "time_zone",
)


def merged_list(old: Sequence[str], new: Sequence[str]) -> list[str]:
    return list(dict.fromkeys([*old, *new]))


def merge_changes(target: dict[str, Any], draft: MemoryDraft, novelty: float) -> dict[str, Any]:
    """Fold a near-duplicate write into its target without losing what either said (reference bug B1)."""
    return merge_values(target, draft.as_record(), novelty)


def merge_values(target: Mapping[str, Any], new: Mapping[str, Any], novelty: float) -> dict[str, Any]:
    """The changes that fold the record values ``new`` into ``target`` losslessly (a write's draft, or a stored
    memory a reviewer found to restate ``target``)."""
    changes: dict[str, Any] = {
        "content": merge_texts(target["content"], new.get("content") or ""),
        "novelty_energy": novelty,
    }
    for group in (
        "tags",
        "core_tags",
        "diffusion_tags",
        "opposing_tags",
        "relation_memory_ids",
        "relation_aliases",
        "related_people",
    ):
        changes[group] = merged_list(target.get(group) or [], new.get(group) or [])
    # Scalars: a value the new write actually states fills a blank; an existing value is never wiped by a default.
    for column in (
        "knowledge_type",
        "address_or_coord",
        "place_type",
        "asset_type",
        "disposition_status",
        "procedure_type",
        "person_id",
    ):
        if new.get(column) and not target.get(column):
            changes[column] = new[column]
    for column in ("event_start_at", "event_end_at"):
        if new.get(column) and not target.get(column):
            changes[column] = new[column]
    return changes


UPSERT_BATCH_MAX = 64
"""Most upserts one group commit takes; the rest wait for the next holder of the write lock.

Why a bound: the batch holds the write lock for its whole transaction, and other writes (deletes, updates) queue
behind it; 64 writes is about one Chroma query plus a few tens of milliseconds of SQLite."""


UPSERT_SAVEPOINT = "booku_upsert"
"""Savepoint of each write of a group commit, so a failing write fails alone."""


@dataclass
class WriteOutcome:
    """What one upsert did: ``mode`` (created|merged), the stored record, its novelty, the older record it
    superseded (its new version), if any, and the older memory it may update or restate (id, ``maybe_update`` |
    ``maybe_duplicate``) when the local decision was unsure: a model or a reviewer decides that after the commit."""

    mode: str
    record: dict[str, Any]
    novelty: float
    superseded: dict[str, Any] | None = None
    unsure: tuple[str, str] | None = None


@dataclass(eq=False)
class PendingUpsert:
    """An embedded upsert waiting for the write lock; ``future`` gets a ``WriteOutcome`` or the error."""

    writer: MemoryWriter
    draft: MemoryDraft
    vector: np.ndarray | None
    allow_merge: bool
    future: asyncio.Future
    title_shared: bool = False  # how ``vector`` was framed (``storage.shared_titles``)


def partition_of(draft: MemoryDraft) -> str:
    """The vector partition a draft's neighbours live in (see ``storage.vector_index.tier_of``)."""
    return "knowledge" if draft.bucket == "knowledge" else ("live" if draft.status == "active" else "archive")


async def _drain_upsert_queue(runtime: BookuRuntime) -> None:
    """Group commit: write every queued upsert, a batch per turn of ``write_lock``, until the queue is empty.

    Concurrent writers each embed, queue up and wait for their result; this one task takes the queue (up to
    ``UPSERT_BATCH_MAX`` at a time): one Chroma query per partition for all their neighbour checks, then one
    transaction in queue order, where each write also sees the writes before it in the batch (two near-duplicates
    in one batch still end as one record). A failing write is rolled back to its savepoint and fails alone. New
    vectors are staged after COMMIT and before the lock is released, so the next batch's merge checks see them.
    It runs as its own task, so a caller that gives up never cancels a transaction that carries other writes; the
    lock is released between batches so other writers (deletes, companion writes) keep their turn.
    """
    try:
        while runtime.pending_upserts:
            async with runtime.write_lock:
                await _run_upsert_batch(runtime, runtime.pending_upserts)
    finally:
        runtime.upsert_task = None


async def _run_upsert_batch(runtime: BookuRuntime, queue: list[PendingUpsert]) -> None:
    batch = queue[:UPSERT_BATCH_MAX]
    del queue[: len(batch)]
    try:
        outcomes = await _write_batch(runtime, batch)
    except Exception as exc:  # the transaction itself failed (COMMIT, I/O): every write of the batch failed
        for job in batch:
            if not job.future.done():
                job.future.set_exception(exc)
        return
    except BaseException:  # the loop is shutting down under us: nobody will answer these callers
        for job in batch:
            job.future.cancel()
        raise
    for job, outcome in zip(batch, outcomes):
        if job.future.done():  # its caller gave up; the write itself is committed
            continue
        if isinstance(outcome, BaseException):
            job.future.set_exception(outcome)
        else:
            job.future.set_result(outcome)


async def _write_batch(runtime: BookuRuntime, batch: list[PendingUpsert]) -> list[Any]:
    wc = runtime.config.write_conflict
    hits_of: dict[int, list[VectorHit]] = {}
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, job in enumerate(batch):
        if job.allow_merge and job.vector is not None:
            groups[(job.writer.scope.writable_store_key, partition_of(job.draft))].append(index)
    queries = {
        key: asyncio.ensure_future(
            runtime.query_vectors_many(
                np.stack([staged for i in indexes if (staged := batch[i].vector) is not None]),
                store_keys=[key[0]],
                tiers=[key[1]],
                limit=wc.top_n,
                with_embeddings=True,
            )
        )
        for key, indexes in groups.items()
    }
    try:
        if queries:
            await asyncio.sleep(0)  # let the queries reach Chroma's thread, which releases the GIL while it searches
        # Meanwhile segment the batch's texts for the keyword index (Python), off the writer's turn.
        presegment(
            text for job in batch for text in (keyword_title(job.draft.title, job.draft.content), job.draft.content)
        )
        for key, indexes in groups.items():
            try:
                hits_of.update(zip(indexes, await queries[key]))
            except EmbeddingUnavailableError:  # the vector index broke meanwhile: these write without merging
                pass
    except BaseException:
        for task in queries.values():
            task.cancel()
        raise
    neighbour_ids = [hit.memory_id for hits in hits_of.values() for hit in hits]
    # The whole batch is one plan in one transaction, and BEGIN, the plan and COMMIT take one hop to the writer
    # thread: a hop per write (or per BEGIN and COMMIT) costs more than the SQL once other threads hold the
    # GIL, most of all for a writer on its own, whose batch is one write.
    outcomes, written = await run_plan_in_transaction(
        runtime.db, _batch_plan(runtime, batch, hits_of, neighbour_ids, limit=wc.top_n)
    )
    # After COMMIT (a rolled-back record must leave no staged vector) and still under the lock.
    for job, record in written:
        if job.vector is not None:
            runtime.vector_sync.stage({**record, "title_shared": job.title_shared}, job.vector)
    return outcomes


def _batch_plan(
    runtime: BookuRuntime,
    batch: list[PendingUpsert],
    hits_of: dict[int, list[VectorHit]],
    neighbour_ids: Sequence[str],
    *,
    limit: int,
) -> WritePlan[tuple[list[Any], list[tuple[PendingUpsert, dict[str, Any]]]]]:
    """Every write of a group commit, in queue order, as one plan (see ``storage.write_plans.run_plan``).

    Returns (one outcome per job: a ``WriteOutcome`` or the exception it failed with; the jobs that created
    a record, with that record). The neighbours' rows are read first, inside the transaction (slim rows: the merge
    decision reads a few columns of each; its chosen target is re-read in full), and updated as the batch goes,
    so each write judges against the versions the earlier writes of its batch left. The keyword-index rows of the
    writes that succeeded are written last, after every savepoint (``storage.keyword_rows.deferred_keyword_rows_plan``),
    and so are the fact cues the batch had to read (``storage.fact_cue_store``): the neighbours' stored cues are read
    with their rows, so a write reads the text of a neighbour only once in its life.
    """
    records = (yield from runtime.records.merge_candidates_plan(neighbour_ids)) if neighbour_ids else {}
    cues = yield from cue_book_plan(records)
    outcomes: list[Any] = []
    written: list[tuple[PendingUpsert, dict[str, Any]]] = []
    keyword_rows: list[KeywordRow] = []
    # One BLAS limit for the whole batch's novelty checks (``write_decision.judge_write``), not one per write:
    # setting and restoring the thread count cost about half as much as the novelty computation itself. The limit
    # is process-wide either way (other threads' BLAS calls meanwhile run on one thread too, as they did during
    # each write's own limit), and every novelty check still runs under it.
    with single_threaded_blas():
        for index, job in enumerate(batch):
            hits = hits_of.get(index, [])
            if index in hits_of:
                hits = _with_batch_neighbours(job, hits, written, limit=limit)
            rows_of_write: list[KeywordRow] = []
            try:
                outcome = yield from job.writer._write_one_plan(job, hits, records, rows_of_write, cues)
            except Exception as exc:  # its savepoint rolled back whatever it wrote (see ``_write_one_plan``)
                outcomes.append(exc)
                continue
            keyword_rows.extend(rows_of_write)  # only a write that stands gets its keyword row
            # Later writes of the batch judge against these versions.
            records[outcome.record["memory_id"]] = outcome.record
            if outcome.superseded is not None:
                records[outcome.superseded["memory_id"]] = outcome.superseded
            if outcome.mode == "created":
                written.append((job, outcome.record))
            outcomes.append(outcome)
    yield from deferred_keyword_rows_plan(keyword_rows)
    yield from store_cues_plan(cues.rows_to_store(records))
    return outcomes, written


def _with_batch_neighbours(
    job: PendingUpsert, hits: list[VectorHit], written: list[tuple[PendingUpsert, dict[str, Any]]], *, limit: int
) -> list[VectorHit]:
    """``hits`` plus the records created earlier in this batch in the same store and partition, best first."""
    store_key, tier = job.writer.scope.writable_store_key, partition_of(job.draft)
    vector = job.vector
    extra = [
        VectorHit(record["memory_id"], float(np.dot(vector, other.vector)), tier, other.vector)
        for other, record in written
        if vector is not None
        and other.vector is not None
        and record["store_key"] == store_key
        and tier_of(record) == tier
    ]
    if not extra:
        return hits
    merged = sorted([*hits, *extra], key=lambda hit: hit.similarity, reverse=True)
    return merged[:limit]


class MemoryWriter:
    def __init__(self, runtime: BookuRuntime, scope: Scope) -> None:
        self.rt = runtime
        self.scope = scope

    @property
    def snippet_chars(self) -> int:
        return self.rt.config.retrieval.snippet_chars

    async def visible(self, memory_ids: Sequence[str], *, include_deleted: bool) -> dict[str, RecordRow]:
        """Records by id restricted to this scope's stores."""
        records = await self.rt.records.get_many(memory_ids, include_deleted=include_deleted)
        readable = set(self.scope.readable_store_keys)
        return {k: v for k, v in records.items() if v["store_key"] in readable}

    async def writable(self, memory_ids: Sequence[str], *, include_deleted: bool, conn=None) -> dict[str, RecordRow]:
        """Records this scope may change through the memory API.

        Knowledge chunks are left out: they belong to their document (re-ingest or delete the document instead),
        and editing or restoring one chunk alone would bring back text its document no longer has.
        """
        records = await self.rt.records.get_many(memory_ids, include_deleted=include_deleted, conn=conn)
        return {
            k: v
            for k, v in records.items()
            if v["store_key"] == self.scope.writable_store_key and v["bucket"] != "knowledge"
        }

    def ensure_may_author(self, what: str) -> None:
        """Mechanical writes (maintenance, lifecycle) may change state but never author content."""
        if self.scope.authority == "mechanical":
            raise ValidationError(f"mechanical 权限不能撰写内容（{what}），只能改变状态，且必须注明原因")

    # ------------------------------------------------------------- upsert
    async def upsert(self, draft: MemoryDraft, *, allow_merge: bool = True) -> dict[str, Any]:
        """Write a memory, merging it into a restatement of the same store, folder and type, or marking the older
        memory it updates as superseded (``logic.supersession``).

        Returns ``{"mode": "created"|"merged", "id", "collection", "novelty_energy", "item"}`` (+ ``"superseded":
        [{"id", "title"}]`` when an older memory was marked superseded by this one, + ``"degraded"`` when no vector
        could be computed). Concurrent calls are group-committed (see ``_drain_upsert_queue``).
        """
        self.ensure_may_author("写入记忆")
        # What the vector drain last read from SQLite (no read here: concurrent writes must reach the embedder in the
        # same tick to share one call). A stale answer (the write that makes a title shared, another process's
        # writes) costs one re-embedding: the drain frames every record from SQLite and re-embeds a mismatch.
        title_shared = (self.scope.writable_store_key, draft.title) in self.rt.vector_sync.shared_titles
        text = compose_embedding_text(draft.title, draft.content, title_shared=title_shared)
        vector: np.ndarray | None = None
        degraded = ""
        if self.rt.embedding_available():
            try:
                vector = (await self.rt.embed_documents([text]))[0]
            except EmbeddingUnavailableError as exc:
                degraded = str(exc)
        else:
            degraded = self.rt.degraded_reason()

        job = PendingUpsert(
            self, draft, vector, allow_merge, asyncio.get_running_loop().create_future(), title_shared=title_shared
        )
        self.rt.pending_upserts.append(job)
        if self.rt.upsert_task is None:
            self.rt.upsert_task = asyncio.create_task(_drain_upsert_queue(self.rt), name="booku-upsert-batch")
        try:
            outcome: WriteOutcome = await asyncio.shield(job.future)
        except asyncio.CancelledError:
            if job in self.rt.pending_upserts:  # not picked up yet: the write does not happen
                self.rt.pending_upserts.remove(job)
            raise
        # Write-behind: the flusher sends staged vectors (and re-embeds merged text) to Chroma in batches.
        self.rt.defer_vector_sync()
        record = outcome.record
        await self.rt.notify_changed(outcome.mode, [record["memory_id"]])
        if outcome.superseded is not None:
            await self.rt.notify_changed("supersede", [outcome.superseded["memory_id"]])
        result = {
            "mode": outcome.mode,
            "id": record["memory_id"],
            "collection": tier_of(record) or "",
            "novelty_energy": float(outcome.novelty),
            "item": record_item(record, snippet_chars=self.snippet_chars),
        }
        if outcome.superseded is not None:
            result["superseded"] = [
                {"id": outcome.superseded["memory_id"], "title": outcome.superseded.get("title") or ""}
            ]
        if outcome.unsure is not None:
            # After the commit and outside any transaction: a model's answer may take seconds.
            from .evidence.unsure_pairs import schedule_unsure_pair

            schedule_unsure_pair(self.rt, self.scope, record["memory_id"], *outcome.unsure)
            result["unsure"] = [{"id": outcome.unsure[0], "kind": outcome.unsure[1]}]
        if degraded:
            result["degraded"] = f"向量不可用，已仅写入数据库并跳过相似合并检查：{degraded}"
        return result

    def _write_one_plan(
        self,
        job: PendingUpsert,
        hits: list[VectorHit],
        records: dict[str, dict[str, Any]],
        keyword_rows: list[KeywordRow],
        cues: CueBook,
    ) -> WritePlan[WriteOutcome]:
        """One upsert of a batch, inside the batch's transaction: merge or update decision, then insert or merge.

        ``hits`` are the job's neighbours (Chroma, staged and earlier writes of this batch) and ``records`` their
        rows as this batch last saw them (``MERGE_CHECK_COLUMNS`` at least). Only the final writes write, and they
        run inside the savepoint ``UPSERT_SAVEPOINT``: a failing write leaves no rows (a new memory and the mark on
        the memory it supersedes land together or not at all) and the batch's transaction goes on. Its
        keyword-index row is appended to ``keyword_rows`` for the batch to write after its savepoints.
        """
        draft, vector = job.draft, job.vector
        judgement = WriteJudgement()
        if job.allow_merge and vector is not None and hits:
            fact = NewFact(
                draft.content,
                draft.folder_id,
                draft.memory_type,
                draft.person_id,
                dated=bool(draft.fields.get("event_start_at")),
            )
            judgement = judge_write(self.rt.config.write_conflict, fact, vector, hits, records, cues_of=cues.of)
        target, novelty, replaces, unsure = judgement.target, judgement.novelty, judgement.replaces, judgement.unsure
        if job.allow_merge and draft.memory_type == "person" and draft.person_id:
            # Same layer only: a current fact merged into an archived person record would vanish from retrieval.
            # Read through the transaction, so a person created earlier in this batch counts.
            person = yield from self.rt.records.find_person_plan(
                draft.person_id,
                store_keys=[self.scope.writable_store_key],
                statuses=("active",) if draft.status == "active" else ("archived", "expired"),
            )
            if person is not None:
                target, replaces, unsure = person, None, None
        if target is not None:
            # Re-read inside the transaction: never merge into a record deleted meanwhile (bug B8).
            target = yield from self.rt.records.read_plan(target["memory_id"])
        if target is not None:
            record = yield from self.rt.records.update_plan(
                target["memory_id"],
                merge_changes(target, draft, novelty),
                action="merge",
                actor=self.scope.context,
                note=f"合并写入：{draft.title[:60]}",
                savepoint=UPSERT_SAVEPOINT,
                keyword_rows=keyword_rows,
            )
            assert record is not None, "read in this transaction, so it exists"
            return WriteOutcome("merged", record, novelty)
        values = {
            **draft.as_record(),
            "memory_id": f"mem-{uuid.uuid4().hex}",
            "owner_uid": self.scope.owner_uid,
            "store_key": self.scope.writable_store_key,
            "novelty_energy": novelty,
        }
        record, superseded = yield from savepoint_plan(
            self._create_plan(values, replaces, keyword_rows), UPSERT_SAVEPOINT
        )
        return WriteOutcome("created", record, novelty, superseded, None if superseded else unsure)

    def _create_plan(
        self, values: dict[str, Any], replaces: str | None, keyword_rows: list[KeywordRow]
    ) -> WritePlan[tuple[dict[str, Any], dict[str, Any] | None]]:
        """Insert the new memory and, when it updates ``replaces``, mark that one superseded by it (an audited
        change of the writer's authority; its text is never touched). Returns (new record, superseded record)."""
        record = yield from self.rt.records.insert_plan(
            values, action="create", actor=self.scope.context, keyword_rows=keyword_rows
        )
        if replaces is None:
            return record, None
        old = yield from self.rt.records.read_plan(replaces)
        if old is None or old["superseded_by"]:  # deleted or replaced meanwhile
            return record, None
        changes, note = supersession_mark(record)
        superseded = yield from self.rt.records.update_plan(
            replaces, changes, action="supersede", actor=self.scope.context, touch=False, note=note
        )
        assert superseded is not None, "read in this transaction, so it exists"
        return record, superseded

    # ------------------------------------------------------------- update
    async def update(self, memory_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        if set(changes) - {"status", "folder_id"}:
            self.ensure_may_author("修改内容或标签")
        async with self.rt.db.transaction() as conn:
            current = (await self.writable([memory_id], include_deleted=False, conn=conn)).get(memory_id)
            if current is None:
                return {
                    "action": "update_memory_by_id",
                    "updated": 0,
                    "items": [],
                    "missing": [memory_id],
                    "changed_fields": [],
                }
            effective = {k: v for k, v in changes.items() if current.get(k) != v}
            if not effective:
                return {
                    "action": "update_memory_by_id",
                    "updated": 0,
                    "items": [record_item(current, full=True)],
                    "missing": [],
                    "changed_fields": [],
                }
            record = await self.rt.records.update(conn, memory_id, effective, action="update", actor=self.scope.context)
            assert record is not None, "read in this transaction, so it exists"
        await self.rt.sync_vectors()
        await self.rt.notify_changed("updated", [memory_id])
        return {
            "action": "update_memory_by_id",
            "updated": 1,
            "items": [record_item(record, full=True)],
            "missing": [],
            "changed_fields": sorted(effective),
        }

    # ------------------------------------------------------- bulk changes
    async def change_many(
        self,
        memory_ids: Sequence[str],
        changes: dict[str, Any],
        *,
        action: str,
        include_deleted: bool = False,
        only_if=None,
    ) -> tuple[list[dict], list[str], list[str]]:
        """Apply the same change to many records in one transaction. Returns (changed, skipped, missing)."""
        changed, skipped = [], []
        async with self.rt.db.transaction() as conn:
            records = await self.writable(memory_ids, include_deleted=include_deleted, conn=conn)
            for memory_id in memory_ids:
                record = records.get(memory_id)
                if record is None:
                    continue
                if only_if is not None and not only_if(record):
                    skipped.append(memory_id)
                    continue
                updated = await self.rt.records.update(
                    conn, memory_id, changes, action=action, actor=self.scope.context
                )
                assert updated is not None, "read in this transaction, so it exists"
                changed.append(updated)
        missing = [i for i in memory_ids if i not in {r["memory_id"] for r in changed} and i not in skipped]
        if changed:
            await self.rt.sync_vectors()
            await self.rt.notify_changed(action, [r["memory_id"] for r in changed])
        return changed, skipped, missing

    async def soft_delete(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        now = time.time()
        changed, _, missing = await self.change_many(
            memory_ids, {"is_deleted": True, "deleted_at": now}, action="delete"
        )
        return {
            "action": "delete_memories",
            "mode": "soft",
            "deleted": len(changed),
            "requested": len(memory_ids),
            "missing": missing,
            "ids": [r["memory_id"] for r in changed],
        }

    async def hard_delete(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        async with self.rt.db.transaction() as conn:
            records = await self.writable(memory_ids, include_deleted=True, conn=conn)
            deleted = await self.rt.records.hard_delete(conn, list(records), actor=self.scope.context)
        await self.rt.sync_vectors()
        await self.rt.notify_changed("hard_delete", list(records))
        return {
            "action": "delete_memories",
            "mode": "hard",
            "deleted": deleted,
            "requested": len(memory_ids),
            "missing": [i for i in memory_ids if i not in records],
            "ids": list(records),
        }

    async def restore(self, memory_ids: Sequence[str]) -> dict[str, Any]:
        changed, _, missing = await self.change_many(
            memory_ids,
            {"is_deleted": False, "deleted_at": 0.0},
            action="restore",
            include_deleted=True,
            only_if=lambda r: r["is_deleted"],
        )
        return {
            "action": "restore_memories",
            "restored": len(changed),
            "missing": missing,
            "items": [record_item(r, snippet_chars=self.snippet_chars) for r in changed],
        }

    async def revert(self, memory_id: str, version: int) -> dict[str, Any]:
        self.ensure_may_author("回退版本")
        history = await self.rt.records.history(memory_id)
        if not history:
            raise NotFoundError(f"记忆 {memory_id} 不存在或没有历史版本")
        snapshot = next((h["snapshot"] for h in history if h["version"] == version), None)
        if snapshot is None:
            versions = ", ".join(str(h["version"]) for h in history)
            raise ValidationError(f"记忆 {memory_id} 没有版本 {version}，可用版本：{versions}")
        if snapshot.get("store_key") != self.scope.writable_store_key or snapshot.get("bucket") == "knowledge":
            raise NotFoundError(f"记忆 {memory_id} 不存在或没有历史版本")
        changes = {c: snapshot[c] for c in REVERTIBLE_COLUMNS if c in snapshot}
        async with self.rt.db.transaction() as conn:
            current = await self.rt.records.get(memory_id, include_deleted=True, conn=conn)
            if current is None:
                # Hard-deleted: bring it back from its snapshot.
                record = await self.rt.records.insert(
                    conn,
                    {
                        **changes,
                        "memory_id": memory_id,
                        "owner_uid": snapshot.get("owner_uid", self.scope.owner_uid),
                        "store_key": self.scope.writable_store_key,
                        "created_at": snapshot.get("created_at", time.time()),
                        "is_deleted": False,
                        "version": history[-1]["version"] + 1,
                    },
                    action="revert",
                    actor=self.scope.context,
                    note=f"从版本 {version} 恢复",
                )
            else:
                updated = await self.rt.records.update(
                    conn,
                    memory_id,
                    {**changes, "is_deleted": False, "deleted_at": 0.0},
                    action="revert",
                    actor=self.scope.context,
                    note=f"回退到版本 {version}",
                )
                assert updated is not None, "read in this transaction, so it exists"
                record = updated
        await self.rt.sync_vectors()
        await self.rt.notify_changed("revert", [memory_id])
        return {
            "action": "revert_memory",
            "memory_id": memory_id,
            "reverted_to": version,
            "version": record["version"],
            "item": record_item(record, full=True),
        }

    async def supersede(self, memory_id: str, successor_id: str) -> dict[str, Any]:
        """Mark ``memory_id`` superseded by ``successor_id`` by hand (a reviewer accepting "可能是更新"), audited as
        ``supersede`` with this scope's authority; the text of neither changes. Raises ``NotFoundError`` for an
        unknown id and ``ValidationError`` for a memory already superseded, itself, or a successor that the memory
        replaced (a loop)."""
        self.ensure_may_author("标记取代")
        if memory_id == successor_id:
            raise ValidationError("一条记忆不能取代它自己，请给出另一条记忆的 id")
        async with self.rt.db.transaction() as conn:
            found = await self.writable([memory_id, successor_id], include_deleted=False, conn=conn)
            missing = [i for i in (memory_id, successor_id) if i not in found]
            if missing:
                raise NotFoundError(f"记忆 {'、'.join(missing)} 不存在或不可修改")
            old, successor = found[memory_id], found[successor_id]
            if old["superseded_by"]:
                raise ValidationError(f"记忆 {memory_id} 已被 {old['superseded_by']} 取代；如需改动请先撤销取代")
            if successor["superseded_by"] == memory_id:
                raise ValidationError(f"记忆 {successor_id} 已被 {memory_id} 取代，不能再反过来取代它")
            record = await self.rt.records.update(
                conn,
                memory_id,
                {"superseded_at": time.time(), "superseded_by": successor_id},
                action="supersede",
                actor=self.scope.context,
                touch=False,
                note=f"被 {successor_id} 取代",
            )
            assert record is not None, "read in this transaction, so it exists"
        await self.rt.notify_changed("supersede", [memory_id])
        return {
            "action": "supersede_memory",
            "memory_id": memory_id,
            "superseded_by": successor_id,
            "version": record["version"],
            "item": record_item(record, full=True),
        }

    async def unsupersede(self, memory_id: str) -> dict[str, Any]:
        """Undo a supersession ("撤销取代"): the memory is current again, its successor stays as it is. Audited as
        ``unsupersede`` with this scope's authority. Raises ``NotFoundError`` for an unknown id and
        ``ValidationError`` for a memory nothing superseded."""
        self.ensure_may_author("撤销取代")
        async with self.rt.db.transaction() as conn:
            current = (await self.writable([memory_id], include_deleted=False, conn=conn)).get(memory_id)
            if current is None:
                raise NotFoundError(f"记忆 {memory_id} 不存在或不可修改")
            successor = current["superseded_by"]
            if not successor:
                raise ValidationError(f"记忆 {memory_id} 没有被其他记忆取代，无需撤销取代")
            record = await self.rt.records.update(
                conn,
                memory_id,
                {"superseded_at": 0.0, "superseded_by": ""},
                action="unsupersede",
                actor=self.scope.context,
                touch=False,
                note=f"撤销取代：不再视为被 {successor} 取代",
            )
            assert record is not None, "read in this transaction, so it exists"
        await self.rt.notify_changed("unsupersede", [memory_id])
        return {
            "action": "unsupersede_memory",
            "memory_id": memory_id,
            "was_superseded_by": successor,
            "version": record["version"],
            "item": record_item(record, full=True),
        }

    # ---------------------------------------------------------- lifecycle
    async def promote_stale_emergent(self, folder_id: str | None) -> dict[str, Any]:
        """Emergent (active) memories older than the window: promote when recalled enough, else expire (soft)."""
        window = self.rt.config.time_window
        now = time.time()
        cutoff = now - window.emergent_days * 86400
        flt = RecordFilter(
            store_keys=[self.scope.writable_store_key],
            statuses=("active",),
            created_before=cutoff,
            folder_id=folder_id,
            extra_sql=[
                "r.pinned = 0",
                "r.protected = 0",
                "r.anchor = 0",
                "r.source != 'promoted'",
                # companion memories age through the decay engine
                "r.source != 'companion'",
            ],
        )
        stale = await self.rt.records.list_records(flt, limit=10000, order_by="r.created_at")
        promote = [
            r["memory_id"]
            for r in stale
            if r["activation_count"] >= window.activation_threshold and r["last_activated_at"] >= cutoff
        ]
        expire = [r["memory_id"] for r in stale if r["memory_id"] not in set(promote)]
        lifecycle = MemoryWriter(
            self.rt, self.scope.acting(authority="mechanical", actor="booku-lifecycle", cause="emergent_window_closed")
        )
        promoted, _, _ = await lifecycle.change_many(promote, {"status": "archived"}, action="promote")
        expired, _, _ = await lifecycle.change_many(expire, {"status": "expired"}, action="expire")
        return {
            "action": "promote_stale_emergent",
            "promoted": len(promoted),
            "discarded": len(expired),
            "folder_id": folder_id or "all",
            "promoted_ids": [r["memory_id"] for r in promoted],
            "expired_ids": [r["memory_id"] for r in expired],
        }

    # ---------------------------------------------------------- audit undo
    async def restore_audit_entries(self, entries: list[dict[str, Any]], *, cause: str) -> list[str]:
        """Put each record back to its state before the audited change (newest change first).

        A change that created a record is undone by a soft delete (nothing is destroyed); a hard delete is undone by
        re-inserting the record from its last snapshot. Every undo is itself audited.
        """
        ctx = replace(self.scope.context, cause=cause)
        restored: list[str] = []
        async with self.rt.db.transaction() as conn:
            for entry in entries:
                memory_id, before = entry["memory_id"], entry["before"]
                current = await self.rt.records.get(memory_id, include_deleted=True, conn=conn)
                if before is None:
                    if current is not None and not current["is_deleted"]:
                        await self.rt.records.update(
                            conn,
                            memory_id,
                            {"is_deleted": True, "deleted_at": time.time()},
                            action="undo_create",
                            actor=ctx,
                        )
                        restored.append(memory_id)
                    continue
                changes = {c: before[c] for c in REVERTIBLE_COLUMNS if c in before}
                changes.update(is_deleted=before.get("is_deleted", False), deleted_at=before.get("deleted_at", 0.0))
                if current is None:
                    # Hard-deleted: re-insert after the last recorded version (the deletion itself is one).
                    last = await self.rt.records.history(memory_id)
                    await self.rt.records.insert(
                        conn,
                        {
                            **changes,
                            "memory_id": memory_id,
                            "owner_uid": before["owner_uid"],
                            "store_key": before["store_key"],
                            "created_at": before.get("created_at", time.time()),
                            "version": (last[-1]["version"] if last else 0) + 1,
                        },
                        action="undo_delete",
                        actor=ctx,
                    )
                else:
                    await self.rt.records.update(conn, memory_id, changes, action="undo", actor=ctx)
                restored.append(memory_id)
        await self.rt.sync_vectors()
        await self.rt.notify_changed("undo", restored)
        return restored

    # -------------------------------------------------------------- memos
    async def create_memo(self, content: Any, expire_hours: Any, stream_id: Any, allow_shorten: bool) -> dict[str, Any]:
        memo_cfg = self.rt.config.memo
        text = "" if content is None else str(content).strip()
        if not text:
            raise ValidationError("content 不能为空")
        if len(text) > memo_cfg.max_chars:
            raise ValidationError(f"临时备忘录 content 最多 {memo_cfg.max_chars} 个字符，当前 {len(text)} 个")
        try:
            hours = float(expire_hours)
        except (TypeError, ValueError) as exc:
            raise ValidationError("expire_hours 必须是正数小时数") from exc
        if not math.isfinite(hours) or hours <= 0:
            raise ValidationError(f"expire_hours 必须是大于 0 且不超过 {memo_cfg.max_expire_hours} 的有限小时数")
        if hours > memo_cfg.max_expire_hours:
            raise ValidationError(f"expire_hours={hours} 超过上限 {memo_cfg.max_expire_hours} 小时")
        now = time.time()
        stream = str(stream_id or "").strip()
        memo, created = await self.rt.memos.upsert(
            owner_uid=self.scope.owner_uid,
            stream_id=stream,
            content=text,
            expires_at=now + hours * 3600,
            allow_shorten=allow_shorten,
            now=now,
        )
        active = await self.rt.memos.list_active(owner_uid=self.scope.owner_uid, stream_id=stream, now=now)
        await self.rt.notify_changed("memo", [])
        public = {k: memo[k] for k in ("memo_id", "stream_id", "content", "expires_at", "created_at", "updated_at")}
        return {
            "action": "create_temporary_memo",
            "mode": "created" if created else "refreshed",
            "memo_id": memo["memo_id"],
            "expires_at": memo["expires_at"],
            "active_memo_count": len(active),
            "item": public,
        }

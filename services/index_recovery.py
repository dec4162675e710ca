"""Keeps the vector index honest: serve on the keyword route while it is broken, rebuild it from SQLite, recover.

SQLite is the source of truth and the Chroma index is derived from it, so a missing, corrupted or emptied index is
never a reason to fail a request or a start-up. The runtime owns one ``IndexRecovery``:

- ``open_index`` opens Chroma at start-up; a store that will not open is moved aside (renamed with a timestamp,
  never deleted) and a new empty one opened in its place, and a rebuild is queued.
- ``missing_partitions`` notices an index that opened fine but lacks whole partitions SQLite has memories for
  (a deleted directory opens as a new, empty store), so it is rebuilt instead of answering with no vectors.
- ``report_failure`` is what ``VectorIndex`` calls when a Chroma call fails while serving (a collection dropped
  underneath, a file that is no longer a database, a panic in Chroma's core); a watchdog also notices the index's
  file being deleted or replaced. Similarity reads are closed at once, so every read takes the keyword route and
  says ``degraded``, and a background job rebuilds the index, retrying with a growing pause if it fails.
- ``reindex`` / ``start_reindex`` run the same job on request (the ``reindex`` CLI, the dashboard's button): one
  job at a time, progress as done/total, the keyword route serving meanwhile.

Writes keep landing in SQLite throughout: their outbox rows stay pending and the rebuild (which re-queues every
live record) or the next drain gives them their vectors. Re-embedding costs little: vectors of unchanged text come
from the embedding cache.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import BookuError, EmbeddingUnavailableError, VectorIndexUnavailableError
from .storage.vector_index import collection_name, describe_fault, tier_of

if TYPE_CHECKING:
    from .runtime import BookuRuntime

logger = logging.getLogger(__name__)

Progress = Callable[[int, int, str], None]

REBUILD_BATCH = 256
"""Outbox rows per drain step of a rebuild: progress moves in steps of this size."""

RETRY_SECONDS = (2.0, 10.0, 60.0, 300.0)
"""Pauses before retrying a failed automatic rebuild (the last one repeats): a store that keeps failing (disk full,
a model that is down) is not hammered, one that failed once by chance recovers within seconds."""

WATCH_SECONDS = 2.0
"""How often the watchdog checks that the index's file is still the one that was opened (one ``stat``)."""


def _quiet(done: int, total: int, label: str) -> None:
    return None


@dataclass
class RebuildJob:
    """One rebuild of the vector index (``kind``: ``recovery`` after a fault, ``reindex`` on request)."""

    kind: str
    reason: str
    started_at: float = field(default_factory=time.time)
    done: int = 0
    total: int = 0
    finished_at: float | None = None
    moved_to: str = ""
    error: str = ""
    result: dict[str, Any] | None = None

    @property
    def running(self) -> bool:
        return self.finished_at is None

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "running": self.running}


class IndexRecovery:
    """The vector index's health (``ok`` | ``degraded`` | ``rebuilding``) and the one rebuild job at a time."""

    def __init__(self, runtime: BookuRuntime) -> None:
        self.rt = runtime
        self.state = "ok"
        self.reason = ""
        self.job: RebuildJob | None = None
        """The running rebuild, or the last one."""
        self.recoveries = 0
        """Rebuilds that finished with every vector in place (automatic and requested)."""
        self._lock = asyncio.Lock()
        self._task: asyncio.Task | None = None
        self._watch_task: asyncio.Task | None = None

    # ---------------------------------------------------------------- status
    @property
    def healthy(self) -> bool:
        return self.state == "ok"

    def snapshot(self) -> dict[str, Any]:
        """``{"state", "reason", "recoveries", "job": {...} | None}`` for ``status`` and the dashboard."""
        return {
            "state": self.state,
            "reason": self.reason,
            "recoveries": self.recoveries,
            "job": self.job.as_dict() if self.job is not None else None,
        }

    def _set(self, state: str, reason: str) -> None:
        self.state, self.reason = state, reason
        if state == "ok":
            self.rt.vectors.open_reads()
        else:
            self.rt.vectors.close_reads(reason)

    # ------------------------------------------------------------- start-up
    async def open_index(self) -> str:
        """Open Chroma; returns why a rebuild is needed ("" when the index opened as it was).

        A store that fails to open is moved aside and replaced by a new empty one, so start-up goes on.
        """
        try:
            await self.rt.vectors.open()
        except VectorIndexUnavailableError as exc:
            return await self._replace(str(exc))
        return ""

    async def check_index(self) -> str:
        """``VectorIndex.check_model`` that moves a store aside when merely reading it fails; returns why a
        rebuild is needed. A model mismatch still raises ``ModelMismatchError``."""
        try:
            await self.rt.vectors.check_model()
        except VectorIndexUnavailableError as exc:
            return await self._replace(str(exc))
        return ""

    async def _replace(self, why: str) -> str:
        if self.rt.vectors.path is None:  # a Chroma server: nothing of ours to move; it is rebuilt in place
            return why
        moved = await self.rt.vectors.replace_files()
        logger.error("向量索引无法使用，已移到 %s 并新建空索引，将从数据库重建：%s", moved, why)
        return f"{why}；旧索引已移到 {moved}" if moved else why

    async def missing_partitions(self) -> list[str]:
        """Collections SQLite says must exist (live records whose vectors are not pending) that Chroma lacks.

        Why partitions and not counts: counting a collection makes Chroma load its whole index, for every owner's
        store at once, while listing them costs nothing, and a deleted or emptied store shows up as missing
        collections. Vectors missing inside a collection are found by ``check`` (``services.integrity``).
        """
        if self.rt.embedder is None:
            return []
        rows = await self.rt.db.fetch_all(
            "SELECT DISTINCT store_key, bucket, status FROM booku_memory_records WHERE is_deleted = 0 "
            "AND memory_id NOT IN (SELECT memory_id FROM booku_vector_outbox)",
            (),
        )
        expected = {
            collection_name(tier_of({"bucket": row["bucket"], "status": row["status"]}) or "live", row["store_key"])
            for row in rows
        }
        if not expected:
            return []
        present = set(await self.rt.vectors.partitions())
        return sorted(expected - present)

    def begin_recovery(self, reason: str, *, move_aside: bool = False) -> None:
        """Close similarity reads and rebuild in the background (retrying until it succeeds)."""
        self._set("degraded", reason)
        if self._task is None or self._task.done():
            self._task = self.rt.spawn(self._recover(reason, move_aside), name="booku-index-recovery")

    def start_watchdog(self) -> None:
        if self.rt.vectors.path is not None and self._watch_task is None:
            self._watch_task = self.rt.spawn(self._watch(), name="booku-index-watchdog")

    async def _watch(self) -> None:
        try:
            while True:
                await asyncio.sleep(WATCH_SECONDS)
                if self.healthy and self.rt.vectors.files_replaced():
                    self.report_failure(FileNotFoundError("向量索引文件已被删除或替换"), broken=True)
        finally:
            self._watch_task = None

    # ------------------------------------------------------------- failures
    def report_failure(self, exc: BaseException, broken: bool) -> None:
        """A Chroma call failed while serving: degrade now, rebuild in the background (one job at a time; a
        failure reported while a job runs or waits to retry is that job's business)."""
        if not self.rt.started or (self._task is not None and not self._task.done()):
            return
        logger.error("向量索引故障，检索暂时只走关键词路线，后台从数据库重建：%s: %s", type(exc).__name__, exc)
        self.begin_recovery(describe_fault(exc), move_aside=broken)

    async def _recover(self, reason: str, move_aside: bool) -> None:
        attempt = 0
        while not self.healthy:  # a reindex finished meanwhile also ends the wait
            job = RebuildJob("recovery", reason)
            try:
                await self._rebuild(job, move_aside=move_aside, keywords=False, progress=_quiet)
            except Exception as exc:
                # Chroma failed again (its files are suspect now: move them aside next time), or the model, the
                # disk or the database failed: stay on the keyword route and try again later.
                move_aside = move_aside or isinstance(exc, VectorIndexUnavailableError)
                pause = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
                self._set("degraded", f"向量索引重建失败，{pause:.0f} 秒后重试：{exc}")
                logger.error("向量索引重建失败，%.0f 秒后重试：%s", pause, exc)
            else:
                if self.healthy:
                    return
                pause = RETRY_SECONDS[min(attempt, len(RETRY_SECONDS) - 1)]
            attempt += 1
            await asyncio.sleep(pause)

    # ------------------------------------------------------------- requests
    def start_reindex(self) -> RebuildJob:
        """Start a full reindex (keyword rows and every vector) in the background; returns its job.

        Raises ``BookuError`` when a rebuild is already running, ``EmbeddingUnavailableError`` without a model.
        """
        self._require_embedder()
        if self.job is not None and self.job.running:
            raise BookuError(f"已有索引重建任务在运行（{self.job.done}/{self.job.total}），请等它完成")
        job = RebuildJob("reindex", "管理员请求重建索引")
        self.job = job  # visible (and refusing a second request) before the task first runs
        self.rt.spawn(self._requested(job), name="booku-reindex")
        return job

    async def _requested(self, job: RebuildJob) -> None:
        try:
            await self._rebuild(job, move_aside=False, keywords=True, progress=_quiet)
        except Exception as exc:  # reported through the job and the state; the API polls for it
            logger.exception("索引重建失败")
            job.error = job.error or str(exc)

    async def reindex(self, *, progress: Progress = _quiet, batch: int = REBUILD_BATCH) -> dict[str, Any]:
        """Rebuild the keyword index and every vector now (waits for a running rebuild first); returns
        ``{"action": "reindex", "keyword_rows", "vectors", "pending", "evidence_vectors", "model", "dimension",
        "error"}``."""
        self._require_embedder()
        job = RebuildJob("reindex", "重建索引")
        return await self._rebuild(job, move_aside=False, keywords=True, progress=progress, batch=batch)

    def _require_embedder(self) -> None:
        if self.rt.embedder is None:
            raise EmbeddingUnavailableError(f"无法重建向量：{self.rt.degraded_reason()}")

    # --------------------------------------------------------------- the job
    async def _rebuild(
        self, job: RebuildJob, *, move_aside: bool, keywords: bool, progress: Progress, batch: int = REBUILD_BATCH
    ) -> dict[str, Any]:
        async with self._lock:
            self.job = job
            job.started_at = time.time()
            try:
                return await self._rebuild_locked(
                    job, move_aside=move_aside, keywords=keywords, progress=progress, batch=batch
                )
            except BaseException as exc:
                job.error = job.error or str(exc) or type(exc).__name__
                if not isinstance(exc, asyncio.CancelledError):
                    self._set("degraded", f"向量索引重建失败：{job.error}")
                    if job.kind != "recovery":  # nobody else would bring the index back
                        self.begin_recovery(self.reason)
                raise
            finally:
                job.finished_at = time.time()

    async def _rebuild_locked(
        self, job: RebuildJob, *, move_aside: bool, keywords: bool, progress: Progress, batch: int
    ) -> dict[str, Any]:
        rt = self.rt
        vectors = rt.vectors
        self._set("rebuilding", "向量索引重建中，检索暂时只走关键词路线")
        # Queue first, then empty the index: a crash after the commit leaves every vector queued for the next
        # start's drain, a crash before it leaves the old index untouched.
        async with rt.db.transaction() as conn:
            keyword_rows = await rt.records.rebuild_keyword_index(conn) if keywords else 0
            job.total = await rt.records.enqueue_all_vectors(conn)
        from .evidence.hub import evidence_hub

        evidence_vectors = evidence_hub(rt).vectors
        await evidence_vectors.enqueue_all()
        if move_aside and vectors.path is not None:
            job.moved_to = str(await vectors.replace_files() or "")
        else:
            await vectors.drained()
            try:
                await vectors.drop_all()
            except VectorIndexUnavailableError:
                if vectors.path is None:
                    raise
                job.moved_to = str(await vectors.replace_files() or "")
        if rt.embedder is not None:
            vectors.bind_model(rt.embedder.model_id, await rt._probe_dimension())
        report = None
        while True:
            report = await rt.vector_sync.drain(batch=batch, max_batches=1)
            job.done = min(job.total, job.done + report.applied)
            self._set("rebuilding", f"向量索引重建中（{job.done}/{job.total}），检索暂时只走关键词路线")
            progress(job.done, job.total, "重建向量")
            if report.pending == 0 or report.applied == 0:
                break
        evidence_report = await evidence_vectors.drain(batch=batch)
        job.result = {
            "action": "reindex",
            "keyword_rows": keyword_rows,
            "vectors": job.done,
            "pending": report.pending,
            "evidence_vectors": evidence_report.applied,
            "model": vectors.model_id,
            "dimension": vectors.dimension,
            "error": report.error,
            "moved_to": job.moved_to,
        }
        if report.pending:
            job.error = report.error or f"还有 {report.pending} 条向量待同步"
            self._set("degraded", f"向量索引未能完整重建：{job.error}")
        else:
            self.recoveries += 1
            self._set("ok", "")
            logger.info("向量索引已重建：%d 条向量", job.done)
        return job.result

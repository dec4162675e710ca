"""The long-lived runtime of one plugin instance (or one standalone handle).

It owns the SQLite connections, the Chroma client, the embedder with its cache, the write lock, the vector flusher
and the maintenance loop. Services, tools and routes are cheap views on it: the host builds a new service object on
every ``get_service`` call, and none of them opens anything.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from ..config import BookuConfig, load_config
from .embedding.base import Embedder
from .embedding.cached import CachedEmbedder
from .embedding.factory import build_embedder
from .errors import EmbeddingUnavailableError
from .index_recovery import IndexRecovery
from .logic.segmentation import warm_up as warm_up_segmentation
from .logic.supersession import warm_up as warm_up_fact_reading
from .ownership import Ownership
from .scope import DEFAULT_SCOPE, Scope
from .storage.audit import AuditLog
from .storage.database import Database
from .storage.embedding_cache import SqliteEmbeddingCache
from .storage.file_modes import private_dir
from .storage.memos import MemoRepository
from .storage.outbox import SyncReport, VectorSync
from .storage.records import RecordRepository
from .storage.vector_index import VectorHit, VectorIndex
from .time_zone import deployment_zone

logger = logging.getLogger(__name__)

VECTOR_FLUSH_DELAY_SECONDS = 0.25
"""How long the flusher lets deferred vector work gather before one batched drain.

Why: a Chroma upsert call persists its batch and holds the GIL throughout, freezing the event loop and every
writer, and most of its cost is fixed per call, not per vector. Writers therefore stage their vector and return,
and the flusher pays the fixed cost once per burst; a much shorter delay pays it many times a second under a stream
of writes. Longer gathers save less and less (the per-vector
part stays) while each flush freezes the process longer, so the batch bound below caps the freeze. Reads see
staged vectors meanwhile (``query_vectors``), and the outbox row committed with each write keeps a crash from
losing one, so the delay bounds how long vectors live only in memory (and in the outbox), never what a read finds."""

VECTOR_FLUSH_BATCH = 128
"""Staged vectors that start a flush at once, without waiting for ``VECTOR_FLUSH_DELAY_SECONDS``.

Why: bounds both the staged buffer (scanned exactly by every vector read) and how long one flush holds the GIL;
beyond that a Chroma upsert no longer gets cheaper per vector."""

ChangeListener = Callable[[str, Sequence[str]], Awaitable[None] | None]


class CoalescedEmbedding:
    """Concurrent embedding requests that arrive while one is running share the next call.

    Why: sixteen writers embedding one text each cost sixteen cache look-ups, sixteen cache transactions (each
    waiting for the SQLite write lock) and, on a cache miss, sixteen model calls; coalesced they cost one of each,
    and a batched model call is several times faster per text. A request arriving while nothing runs is sent at once.
    """

    def __init__(self, call: Callable[[list[str]], Awaitable[Any]]) -> None:
        self._call = call
        self._waiting: list[tuple[list[str], asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    async def submit(self, texts: Sequence[str]) -> Any:
        """The ``(len(texts), d)`` matrix for ``texts``; raises what the embedder raised for the shared call."""
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((list(texts), future))
        if self._task is None:
            # Not a cancellable runtime job: cancelling it mid-transaction (the cache write) would strand SQLite.
            self._task = asyncio.create_task(self._run(), name="booku-embedding-batch")
        return await future

    async def wait_idle(self) -> None:
        """Wait until no shared call is running (close waits here before flushing vectors)."""
        while self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        batch: list[tuple[list[str], asyncio.Future]] = []
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, []
                flat = [text for texts, _ in batch for text in texts]
                try:
                    matrix = await self._call(flat)
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                start = 0
                for texts, future in batch:
                    if not future.done():
                        future.set_result(matrix[start : start + len(texts)])
                    start += len(texts)
        except asyncio.CancelledError:  # the runtime is closing: nobody will answer these requests
            for _, future in [*batch, *self._waiting]:
                future.cancel()
            self._waiting = []
            raise
        finally:
            self._task = None


class BookuRuntime:
    """One per plugin instance. ``await start()`` before use, ``await close()`` at the end."""

    def __init__(
        self,
        config: BookuConfig | dict | str | Path | None,
        data_dir: str | Path,
        *,
        embedder: Embedder | None = None,
        host_embed_fn: Callable[[list[str]], Awaitable[list[list[float]]]] | None = None,
        host_chat_fn: Callable[[list[dict[str, str]]], Awaitable[str]] | None = None,
        default_scope: Scope = DEFAULT_SCOPE,
        entry_point: str = "open",
        accepts_clients: bool = False,
    ) -> None:
        self.config: BookuConfig = load_config(config)
        self.data_dir = Path(data_dir).expanduser().resolve()
        # Written into the owner record at start (``services.ownership``): who owns the data dir, and whether
        # other processes should wait for its client endpoint rather than be refused.
        self.entry_point = entry_point
        self.accepts_clients = accepts_clients
        self.ownership: Ownership | None = None
        self.default_scope = default_scope
        self._given_embedder = embedder
        self._host_embed_fn = host_embed_fn
        self._host_chat_fn = host_chat_fn
        self.dreaming: Any = None
        self.db = Database(self._resolve(self.config.storage.database_path))
        self.records = RecordRepository(
            self.db,
            posting_budget=self.config.retrieval.keyword_posting_budget,
            in_memory_keywords=self.config.retrieval.in_memory_keyword_index,
            in_memory_candidates=self.config.retrieval.in_memory_candidates,
            in_memory_vectors=self.config.retrieval.in_memory_vectors,
        )
        # Where a query's dates are read and in which zone new memories keep their times (``time_zone``).
        self.time_zone = deployment_zone(self.config.retrieval.timezone)
        self.records.write_zone = self.time_zone.name
        self.memos = MemoRepository(self.db)
        self.audit = AuditLog(self.db)
        self.embedding_cache = SqliteEmbeddingCache(self.db)
        self.embedder: CachedEmbedder | None = None
        self.embedder_error = ""
        vector = self.config.vector
        if vector.backend == "http":
            self.vectors = VectorIndex(
                http_host=vector.http_host,
                http_port=vector.http_port,
                http_ssl=vector.http_ssl,
                ef_search=vector.ef_search,
            )
        else:
            self.vectors = VectorIndex(path=self._resolve(self.config.storage.vector_path), ef_search=vector.ef_search)
        self.vector_sync = VectorSync(self.db, self.records, self.vectors, lambda: self if self.embedder else None)
        self.records.memory_keywords.vector_model = self._bound_vector_model
        self.index_recovery = IndexRecovery(self)
        self.vectors.on_failure = self.index_recovery.report_failure
        self.write_lock = asyncio.Lock()
        # Upserts waiting for their group commit (memory_writes: one task writes them in batches, one transaction each).
        self.pending_upserts: list[Any] = []
        self._document_embeddings = CoalescedEmbedding(lambda texts: self._embed_tracked(texts, query=False))
        self.upsert_task: asyncio.Task | None = None  # the group-commit task of memory_writes, while it runs
        # Write-behind vectors: writers defer their outbox drain to the flusher task (see defer_vector_sync).
        self._deferred_vectors = False
        self._flush_wanted = asyncio.Event()
        self._flush_now = asyncio.Event()
        self._flusher_task: asyncio.Task | None = None
        self._flusher_stopping = False
        self.vectors.set_read_barrier(self.settle_deferred_vectors)
        self._listeners: list[ChangeListener] = []
        self._maintenance_task: asyncio.Task | None = None
        self._background: set[asyncio.Task] = set()
        self.started = False
        self.documents: Any = None

    def _resolve(self, path: str) -> Path:
        candidate = Path(path.replace("\\", "/")).expanduser()
        return candidate if candidate.is_absolute() else self.data_dir / candidate

    def resolve_path(self, path: str) -> Path:
        """Relative paths (POSIX or Windows separators) resolve against the data directory."""
        return self._resolve(path)

    # -------------------------------------------------------------- lifecycle
    async def start(self, *, check_model: bool = True) -> None:
        """Take ownership of the data dir (raises ``DataDirBusy`` when another runtime holds it, before anything
        is opened), then open SQLite, the vector index and the embedder."""
        private_dir(self.data_dir)
        self.ownership = Ownership.claim(
            self.data_dir, entry_point=self.entry_point, accepts_clients=self.accepts_clients
        )
        await self.db.open()
        # A migration that reshapes the keyword index leaves it empty and flags it; refill it once, here, because
        # its segmentation (jieba) runs in Python, before any search could miss rows.
        rebuilt = await self.records.rebuild_keyword_index_if_requested()
        if rebuilt is not None:
            logger.info("关键词索引已按新结构重建：%d 条记忆", rebuilt)
        inner = self._given_embedder or build_embedder(self.config.embedding, host_request_fn=self._host_embed_fn)
        if inner is not None:
            # Cache rows from the embedder ride in the next write transaction (the upsert that embedded the text).
            self.embedder = CachedEmbedder(inner, self.embedding_cache.deferring())
        else:
            self.embedder_error = "嵌入模型已在配置中关闭（embedding.provider = none）"
        # Derived data never blocks start-up: an index that will not open is moved aside and rebuilt in the
        # background (``index_recovery``) while the keyword route serves.
        rebuild_reason = await self.index_recovery.open_index()
        if self.embedder is not None and self.embedder.dimension:
            # The model announces its dimension: bind and check now, so a model change fails at start-up.
            self.vectors.bind_model(self.embedder.model_id, int(self.embedder.dimension))
            if check_model:
                rebuild_reason = await self.index_recovery.check_index() or rebuild_reason
        self._check_model = check_model
        # Keyword searches take the FTS5 route until the in-memory copy of the index is loaded (seconds for a
        # large store, in a thread of its own; a small store is loaded before start-up returns). It holds the
        # stored vectors of the model bound just above (a model bound later has them loaded when first asked).
        await self.records.memory_keywords.start()
        from .storage.documents import DocumentRepository

        self.documents = DocumentRepository(self.db, self.records)
        self.started = True
        if not rebuild_reason and (missing := await self.index_recovery.missing_partitions()):
            rebuild_reason = f"向量索引缺少 {len(missing)} 个分区（数据库中有对应记忆）"
        if rebuild_reason and self.embedder is not None:
            logger.error("向量索引需要重建，后台进行：%s", rebuild_reason)
            self.index_recovery.begin_recovery(rebuild_reason)
        elif self.vectors.model_id is None and self.embedder is not None:
            # A remote model (host task, HTTP endpoint) learns its dimension from a first call; probing it must
            # not hold up the host's plugin loading, so it happens in the background (degraded until then).
            self.spawn(self.sync_vectors(), name="booku-embedding-probe")
        else:
            await self.sync_vectors()
        self._flusher_stopping = False
        self._flusher_task = asyncio.create_task(self._vector_flusher(), name="booku-vector-flusher")
        self.index_recovery.start_watchdog()
        if self.config.maintenance.enabled:
            self._maintenance_task = asyncio.create_task(self._maintenance_loop(), name="booku-maintenance")
            self.spawn(self.vectors.warm_up(), name="booku-vector-warmup")
            self.spawn(asyncio.to_thread(warm_up_segmentation), name="booku-segmentation-warmup")
            self.spawn(asyncio.to_thread(warm_up_fact_reading), name="booku-fact-reading-warmup")
            # Chat-evidence upkeep and dreaming (stage A/B run only when [dreaming] is enabled).
            from .evidence.scheduler import DreamingScheduler

            self.dreaming = DreamingScheduler(self, host_chat_fn=self._host_chat_fn)
            self.dreaming.start()

    async def _probe_dimension(self) -> int:
        assert self.embedder is not None
        dimension = getattr(self.embedder, "dimension", 0)
        if dimension:
            return int(dimension)
        return int((await self.embed_queries(["维度探测"])).shape[1])

    async def close(self) -> None:
        """Stop background work, flush vectors, close the stores, then release the data dir (even if a store
        failed to close: the process is letting go of it either way)."""
        try:
            await self._close_stores()
        finally:
            if self.ownership is not None:  # last: no other process may open the stores before they are closed
                self.ownership.release()
                self.ownership = None

    async def _close_stores(self) -> None:
        if self.dreaming is not None:
            await self.dreaming.stop()
            self.dreaming = None
        if self._maintenance_task is not None:
            self._maintenance_task.cancel()
            try:
                await self._maintenance_task
            except (asyncio.CancelledError, Exception):
                pass
        for task in list(self._background):
            task.cancel()
        await asyncio.gather(*self._background, return_exceptions=True)
        # Writes already queued finish (never cancelled mid-transaction), then their vectors are flushed.
        while self.upsert_task is not None:
            await asyncio.gather(self.upsert_task, return_exceptions=True)
        await self._document_embeddings.wait_idle()
        await self._stop_flusher()
        if self.embedder is not None and hasattr(self.embedder, "aclose"):
            await self.embedder.aclose()
        await self.vectors.close()
        await self.records.memory_keywords.close()
        await self.db.close()
        self.started = False

    # ------------------------------------------------------------ embeddings
    def embedding_available(self) -> bool:
        """Whether the vector route may be tried (each call still falls back to keywords if the model fails)."""
        return self.embedder is not None and self.vectors.model_id is not None and not self.vectors.reads_closed

    def degraded_reason(self) -> str:
        """Why answers are (or were, on the last call) keyword-only; empty when the model works."""
        if self.vectors.reads_closed:
            return self.vectors.reads_closed
        if self.embedder is None:
            return self.embedder_error or "未配置嵌入模型"
        if self.vectors.model_id is None:
            return self.embedder_error or "嵌入模型尚未就绪"
        return self.embedder_error

    async def embed_queries(self, texts: list[str]):
        return await self._embed_tracked(texts, query=True)

    async def embed_documents(self, texts: list[str]):
        """Passage vectors ``(n, d)``; concurrent calls are coalesced into one (see ``CoalescedEmbedding``)."""
        return await self._document_embeddings.submit(texts)

    async def _embed_tracked(self, texts: list[str], *, query: bool):
        """Embed through the cache and remember whether the model answered, so status tells the truth."""
        if self.embedder is None:
            raise EmbeddingUnavailableError(self.degraded_reason())
        try:
            matrix = await (self.embedder.embed_queries(texts) if query else self.embedder.embed_documents(texts))
        except EmbeddingUnavailableError as exc:
            self.embedder_error = str(exc)
            raise
        self.embedder_error = ""
        return matrix

    def _bound_vector_model(self) -> tuple[str, int] | None:
        """The vector index's (model, dimension) once bound, else None."""
        model, dimension = self.vectors.model_id, self.vectors.dimension
        return (model, int(dimension)) if model and dimension else None

    async def sync_vectors(self) -> Any:
        """Apply pending vector work (after every write, at start-up and from the maintenance loop).

        While the index is broken or being rebuilt the work stays in the outbox: the rebuild drains it."""
        if not self.index_recovery.healthy:
            return SyncReport(pending=await self.vector_sync.pending_count(), error=self.index_recovery.reason)
        if self.vectors.model_id is None and self.embedder is not None:
            try:
                self.vectors.bind_model(self.embedder.model_id, await self._probe_dimension())
            except EmbeddingUnavailableError:
                pass
            else:
                if getattr(self, "_check_model", True):
                    try:
                        await self.vectors.check_model()
                    except Exception as exc:
                        self.vectors.model_id = None
                        self.embedder_error = str(exc)
                        logger.error("%s", exc)
                        raise
        return await self.vector_sync.drain()

    # ------------------------------------------------------- vector flusher
    def defer_vector_sync(self) -> None:
        """A write committed outbox work and left it to the flusher (its new vector, if any, is staged).

        The outbox row is in the write's transaction, so nothing is lost if the process dies before the flush: the
        next drain (at start-up at the latest) rebuilds the vector from the embedding cache.
        """
        self._deferred_vectors = True
        self._flush_wanted.set()
        if len(self.vector_sync.staged) >= VECTOR_FLUSH_BATCH:
            self._flush_now.set()

    async def settle_deferred_vectors(self) -> None:
        """Apply deferred vector work now, so an exact read of the index (counts, stored vectors) sees every write."""
        if self._deferred_vectors and self.started:
            await self.flush_vectors()

    async def flush_vectors(self) -> Any:
        """Drain deferred vector work (staged vectors go to Chroma in one upsert per partition)."""
        self._deferred_vectors = False
        return await self.sync_vectors()

    async def _vector_flusher(self) -> None:
        while True:
            await self._flush_wanted.wait()
            if self._flusher_stopping:
                return
            if len(self.vector_sync.staged) < VECTOR_FLUSH_BATCH:
                try:
                    await asyncio.wait_for(self._flush_now.wait(), VECTOR_FLUSH_DELAY_SECONDS)
                except TimeoutError:
                    pass
            self._flush_wanted.clear()
            self._flush_now.clear()
            if self._flusher_stopping:
                return
            try:
                await self.flush_vectors()
            except Exception:  # Chroma or the model failed: the outbox keeps the work, the next write retries
                logger.exception("向量批量写入失败，待下次写入或维护时重试")

    async def _stop_flusher(self) -> None:
        """Stop the flusher after the drain it is running, then flush everything still deferred or staged."""
        task, self._flusher_task = self._flusher_task, None
        if task is None:
            return
        self._flusher_stopping = True
        self._flush_wanted.set()
        self._flush_now.set()
        await asyncio.gather(task, return_exceptions=True)
        if self._deferred_vectors or self.vector_sync.staged:
            try:
                await self.flush_vectors()
            except Exception:  # the outbox keeps the work for the next start
                logger.exception("关闭时写入向量失败，下次启动时会从待同步队列补齐")

    async def query_vectors(
        self,
        vector: Any,
        *,
        store_keys: Sequence[str],
        tiers: Sequence[str],
        limit: int,
        with_embeddings: bool = False,
        index_embeddings: bool | None = None,
    ) -> list[VectorHit]:
        """Nearest neighbours across the chosen partitions, best first, including vectors not yet flushed.

        Same arguments and result as ``VectorIndex.query``; every vector read of memories goes through here so a
        memory is findable the moment ``upsert_memory`` returns (see ``VectorSync.merge_staged``).
        ``index_embeddings``: whether the vector index hands over its hits' vectors (default ``with_embeddings``);
        False with ``with_embeddings`` leaves them None for a caller that reads them elsewhere
        (``MemorySearch._stored_vectors``), while the hits not flushed yet keep theirs.
        """
        captured = dict(self.vector_sync.staged)
        removal_seq = self.vector_sync.removal_seq
        from_index = with_embeddings if index_embeddings is None else index_embeddings
        hits = await self.vectors.query(
            vector, store_keys=store_keys, tiers=tiers, limit=limit, with_embeddings=from_index
        )
        return self.vector_sync.merge_staged(
            [vector],
            [hits],
            captured,
            removal_seq=removal_seq,
            store_keys=store_keys,
            tiers=tiers,
            limit=limit,
            with_embeddings=with_embeddings,
        )[0]

    async def query_vectors_many(
        self,
        vectors: Any,
        *,
        store_keys: Sequence[str],
        tiers: Sequence[str],
        limit: int,
        with_embeddings: bool = False,
    ) -> list[list[VectorHit]]:
        """``query_vectors`` for several vectors in one Chroma call per partition; one hit list per vector."""
        captured = dict(self.vector_sync.staged)
        removal_seq = self.vector_sync.removal_seq
        found = await self.vectors.query_many(
            vectors, store_keys=store_keys, tiers=tiers, limit=limit, with_embeddings=with_embeddings
        )
        return self.vector_sync.merge_staged(
            vectors,
            found,
            captured,
            removal_seq=removal_seq,
            store_keys=store_keys,
            tiers=tiers,
            limit=limit,
            with_embeddings=with_embeddings,
        )

    # ---------------------------------------------------------------- events
    def add_change_listener(self, listener: ChangeListener) -> None:
        self._listeners.append(listener)

    async def notify_changed(self, kind: str, memory_ids: Sequence[str] = ()) -> None:
        """Tell listeners (reminder digests, dashboard caches) that memories changed."""
        for listener in list(self._listeners):
            try:
                result = listener(kind, list(memory_ids))
                if asyncio.iscoroutine(result):
                    await result
            except Exception:  # a broken listener must never fail a write
                logger.exception("记忆变更监听器出错")

    def spawn(self, coro, *, name: str) -> asyncio.Task:
        """Run a background job owned by the runtime (cancelled on close)."""
        task = asyncio.create_task(coro, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        return task

    # ------------------------------------------------------------ maintenance
    async def run_maintenance(self) -> dict[str, Any]:
        """One maintenance pass: expire memos, run the emergent lifecycle, retry pending vectors, trim the keyword
        journal (``storage.mirrors.keyword_mirror``)."""
        from .companion import refresh_decay

        purged = await self.memos.purge_expired()
        lifecycle = await self.memory_service().promote_stale_emergent()
        decay = await refresh_decay(self)
        sync = await self.sync_vectors()
        trimmed = await self.records.trim_keyword_journal()
        return {
            "memos_purged": purged,
            "lifecycle": lifecycle,
            "decay": decay,
            "vector_pending": sync.pending,
            "keyword_journal_trimmed": trimmed,
        }

    async def _maintenance_loop(self) -> None:
        interval = self.config.maintenance.interval_seconds
        while True:
            await asyncio.sleep(interval)
            try:
                await self.run_maintenance()
            except Exception:
                logger.exception("记忆维护任务失败，将在下个周期重试")

    # ----------------------------------------------------------------- views
    def memory_service(self, scope: Scope | None = None):
        from .memory_service import BookuMemoryService

        return BookuMemoryService(self, scope=scope)

    def knowledge_service(self, scope: Scope | None = None):
        from .knowledge_service import BookuKnowledgeService

        return BookuKnowledgeService(self, scope=scope)

"""The vector index: Chroma collections partitioned by (tier, store).

Why partitions instead of metadata filters: a filtered HNSW query in Chroma costs several times an unfiltered one,
and the reference leaked soft-deleted and archived memories into results because it never filtered at all. Here the
tier of a record decides its collection (``live`` = active memories, ``archive`` = archived/expired memories,
``knowledge`` = document chunks; soft-deleted records have no vector), so a query simply picks the collections it
may see. Collection names are hashes, never raw user text (reference bug B12).

Chroma is synchronous; every call runs in a worker thread so the event loop never blocks. Writes (upsert, delete)
have a thread of their own, in order, so a batched upsert (Chroma persists on every call) never holds up a query;
readers that must see vectors not yet written go through ``BookuRuntime.query_vectors``.

Every Chroma call is guarded: whatever it raises (``NotFoundError`` for a collection dropped underneath, an
``InternalError`` for a file that is not a database, a ``PanicException`` from the Rust core, which derives from
``BaseException``) becomes a ``VectorIndexUnavailableError`` and is reported to ``on_failure``, so the runtime can
fall back to the keyword route and rebuild the index from SQLite (``services.index_recovery``). While the index is
being rebuilt its reads are closed (``close_reads``): a half-filled index would rank as if most memories were gone.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import sqlite3
import time
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import ModelMismatchError, VectorIndexUnavailableError
from .file_modes import private_dir, private_sqlite

logger = logging.getLogger(__name__)

TIERS = ("live", "archive", "knowledge")

CHROMA_SQLITE_FILE = "chroma.sqlite3"
"""The SQLite file an embedded Chroma keeps its write log and metadata in (inside the vector directory)."""

FailureListener = Callable[[BaseException, bool], None]
"""Called on the event loop with what Chroma raised and whether its files are broken (move them aside) rather than
only missing collections (rebuild in place)."""

_chroma_paths_opened: set[str] = set()
"""Vector directories an embedded Chroma holds open in this process (until ``VectorIndex.close`` releases them)."""


def use_write_ahead_log(directory: Path) -> None:
    """Put Chroma's SQLite file in WAL journal mode, creating it in that mode when the store is new.

    Why: Chroma creates its file with a rollback journal, so every upsert commits with a journal file created, synced
    and deleted (several fsyncs per upsert call), while Chroma's Python binding holds the GIL for the whole call, during
    which no other coroutine or thread of the process can run. In WAL mode a commit appends to the log and syncs it;
    Chroma's bundled SQLite keeps ``synchronous=FULL`` in WAL mode (``SQLITE_DEFAULT_WAL_SYNCHRONOUS=2``), so a returned
    upsert is exactly as durable as before and the outbox may forget it as before. The mode is stored in the file, so
    this changes a store once.

    Only before Chroma first opens ``directory`` in this process: Python's ``sqlite3`` and Chroma's bundled SQLite
    are two libraries, and closing a file one of them opened drops the POSIX locks the other holds on it (Chroma
    then fails with disk I/O errors). While this process's Chroma holds a store open, later opens leave
    the file alone. A file that cannot be switched (locked by another process) is left as it is.
    """
    key = str(directory.resolve())
    if key in _chroma_paths_opened:
        return
    _chroma_paths_opened.add(key)
    try:
        with contextlib.closing(sqlite3.connect(directory / CHROMA_SQLITE_FILE, timeout=1.0)) as conn:
            (mode,) = conn.execute("PRAGMA journal_mode").fetchone()
            if str(mode).lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        logger.warning("向量库 SQLite 文件未能切换到 WAL 模式（不影响使用，仅写入较慢）：%s", exc)


def _is_fatal(exc: BaseException) -> bool:
    """Exceptions that must travel on untouched: interpreter shutdown and task cancellation, never Chroma faults."""
    return isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit, asyncio.CancelledError))


class _ChromaFault(Exception):
    """What a guarded Chroma call raised, carried out of the worker thread (a ``PanicException`` must not cross
    ``run_in_executor`` as a ``BaseException``: asyncio would treat it as fatal to the loop)."""

    def __init__(self, original: BaseException) -> None:
        super().__init__(str(original))
        self.original = original


def _guarded(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except BaseException as exc:
        if _is_fatal(exc):
            raise
        raise _ChromaFault(exc) from exc


def broken_files(exc: BaseException) -> bool:
    """Whether a Chroma fault means its files are unusable (anything but a collection that is simply gone)."""
    from chromadb.errors import NotFoundError

    return not isinstance(exc, NotFoundError)


def describe_fault(exc: BaseException) -> str:
    """A one-line Chinese reason for status pages and ``degraded`` notes."""
    return f"向量索引不可用（{type(exc).__name__}: {str(exc)[:160]}）"


@dataclass
class VectorHit:
    memory_id: str
    similarity: float  # cosine similarity in [-1, 1]
    tier: str
    embedding: np.ndarray | None


DEFAULT_EF_SEARCH = 200
"""HNSW candidates a query walks (``vector.ef_search``).

Why this many: a retrieval asks for a pool of 50 or more neighbours, and with a search list barely larger than the
pool the approximate search in a big store misses many of the exact nearest, most often the memories written last,
which a crowded graph links to least. A longer list finds more of them, but Chroma walks it with the GIL held, on
every retrieval and on every write's neighbour check, and past this length the retrieval's results no longer
change: the keyword route's hits that the vector search missed are scored by their stored vectors, and the memories
written beside the strong hits are read by position. A collection smaller than the list is searched almost
exhaustively, which is cheap at that size."""


def tier_of(record: dict[str, Any]) -> str | None:
    """Which partition a record's vector belongs to, or None when it must not be searchable."""
    if record.get("is_deleted"):
        return None
    if record.get("bucket") == "knowledge":
        return "knowledge"
    return "live" if record.get("status") == "active" else "archive"


def collection_name(tier: str, store_key: str) -> str:
    digest = hashlib.sha1(store_key.encode("utf-8")).hexdigest()[:16]
    return f"booku_{tier}_{digest}"


class VectorIndex:
    """Thin async facade over a Chroma client (embedded PersistentClient or HttpClient)."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        http_host: str | None = None,
        http_port: int = 8000,
        http_ssl: bool = False,
        ef_search: int = DEFAULT_EF_SEARCH,
    ) -> None:
        self._path = path
        self.ef_search = ef_search
        self._http = (http_host, http_port, http_ssl) if http_host else None
        self._client: Any = None
        self._collections: dict[str, Any] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="booku-chroma")
        self._write_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="booku-chroma-write")
        self.model_id: str | None = None
        self.dimension: int | None = None
        self._read_barrier: Callable[[], Awaitable[None]] | None = None
        self.on_failure: FailureListener | None = None
        self.reads_closed = ""
        """Why similarity reads are refused right now (empty: open); set while the index is broken or rebuilt."""
        self._identity: tuple[int, int] | None = None

    @property
    def path(self) -> Path | None:
        """The embedded index's directory (None for a Chroma server)."""
        return None if self._http else self._path

    def close_reads(self, reason: str) -> None:
        """Refuse similarity reads (they raise ``VectorIndexUnavailableError(reason)``); writes still go through."""
        self.reads_closed = reason

    def open_reads(self) -> None:
        self.reads_closed = ""

    def _check_reads(self) -> None:
        if self.reads_closed:
            raise VectorIndexUnavailableError(self.reads_closed)

    def files_replaced(self) -> bool:
        """Whether the embedded index's SQLite file was deleted or replaced since it was opened.

        Why: Chroma keeps reading an unlinked file, so a deleted directory answers queries from the old data and
        fails only at the next write; a stat is enough to notice it at once."""
        if self._identity is None or self._path is None:
            return False
        try:
            info = os.stat(self._path / CHROMA_SQLITE_FILE)
        except OSError:
            return True
        return (info.st_dev, info.st_ino) != self._identity

    def set_read_barrier(self, barrier: Callable[[], Awaitable[None]] | None) -> None:
        """Awaited before ``get_embeddings`` and ``count``: the runtime flushes write-behind vectors there.

        Why: those two read the stored index exactly (status counts, exports, checks), so they must not miss a
        vector that a committed write staged a few milliseconds ago. Similarity reads merge staged vectors instead
        (``BookuRuntime.query_vectors``) and never wait for a flush.
        """
        self._read_barrier = barrier

    async def _settle(self) -> None:
        if self._read_barrier is not None:
            await self._read_barrier()

    async def _run(self, fn, *args, **kwargs):
        return await self._call(self._executor, lambda: fn(*args, **kwargs))

    async def _run_write(self, fn, *args, **kwargs):
        return await self._call(self._write_executor, lambda: fn(*args, **kwargs))

    async def _call(self, executor: ThreadPoolExecutor, work: Callable[[], Any]) -> Any:
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, _guarded, work)
        except _ChromaFault as fault:
            exc = fault.original
            logger.warning("向量索引调用失败：%s: %s", type(exc).__name__, exc)
            if self.on_failure is not None:
                self.on_failure(exc, bool(self._path) and not self._http and broken_files(exc))
            raise VectorIndexUnavailableError(describe_fault(exc)) from exc

    async def open(self) -> None:
        """Open the client; a broken index raises ``VectorIndexUnavailableError`` (nothing is reported)."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, _guarded, self._open_sync)
        except _ChromaFault as fault:
            raise VectorIndexUnavailableError(describe_fault(fault.original)) from fault.original

    async def drained(self) -> None:
        """Wait until every Chroma call queued so far has finished (both threads run in order)."""
        loop = asyncio.get_running_loop()
        await asyncio.gather(
            loop.run_in_executor(self._executor, lambda: None), loop.run_in_executor(self._write_executor, lambda: None)
        )

    async def replace_files(self) -> Path | None:
        """Close the embedded index, rename its directory aside with a timestamp and open a new, empty one.

        Returns where the old directory went (None when there was none). Never deletes: the broken files stay for
        the operator to inspect or remove. Call after ``drained`` with reads closed.
        """
        assert self._path is not None and not self._http
        await self.drained()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._write_executor, self._replace_files_sync)

    def _replace_files_sync(self) -> Path | None:
        client, self._client = self._client, None
        self._collections.clear()
        if client is not None:
            self._release(client)
        assert self._path is not None
        _chroma_paths_opened.discard(str(self._path.resolve()))
        moved: Path | None = None
        if self._path.exists():
            stamp = time.strftime("%Y%m%d-%H%M%S")
            moved = self._path.with_name(f"{self._path.name}.broken-{stamp}")
            suffix = 1
            while moved.exists():
                suffix += 1
                moved = self._path.with_name(f"{self._path.name}.broken-{stamp}-{suffix}")
            self._path.rename(moved)
        self._identity = None
        self._open_sync()
        return moved

    def _open_sync(self) -> None:
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
        import chromadb
        from chromadb.config import Settings

        settings = Settings(anonymized_telemetry=False, allow_reset=False)
        if self._http:
            host, port, ssl = self._http
            self._client = chromadb.HttpClient(host=host, port=port, ssl=ssl, settings=settings)
        else:
            assert self._path is not None
            private_dir(self._path)
            private_sqlite(self._path / CHROMA_SQLITE_FILE)
            use_write_ahead_log(self._path)
            try:
                self._client = chromadb.PersistentClient(path=str(self._path), settings=settings)
                self._client.list_collections()  # a file that is not a database fails here, not at a query
            except BaseException:
                # Chroma caches the System it failed to start under the path: forget it, or every later open in
                # this process (the new, empty index included) would reuse the broken one.
                self._client = None
                self._forget_system()
                raise
            info = os.stat(self._path / CHROMA_SQLITE_FILE)
            self._identity = (info.st_dev, info.st_ino)

    async def close(self) -> None:
        self._write_executor.shutdown(wait=True)
        self._executor.shutdown(wait=True)
        self._collections.clear()
        client, self._client = self._client, None
        if client is not None and self._path is not None and not self._http:
            # Release Chroma's shared System, so a later open in this process reads the files as they are then
            # (a restart in-process must notice an index damaged meanwhile, as a new process would).
            await asyncio.to_thread(self._release, client)

    def _release(self, client: Any) -> None:
        try:
            client.close()
        except BaseException as exc:  # a broken store may fail to close; its System is dropped all the same
            if _is_fatal(exc):
                raise
            logger.warning("关闭向量索引时出错（忽略）：%s", exc)
            self._forget_system()
        from chromadb.api.shared_system_client import SharedSystemClient

        assert self._path is not None
        if str(self._path) not in SharedSystemClient._identifier_to_system:
            _chroma_paths_opened.discard(str(self._path.resolve()))

    def _forget_system(self) -> None:
        """Drop Chroma's cached System for this path (Chroma has no public call for a System that failed)."""
        from chromadb.api.shared_system_client import SharedSystemClient

        SharedSystemClient._identifier_to_system.pop(str(self._path), None)
        SharedSystemClient._identifier_to_refcount.pop(str(self._path), None)

    # ----------------------------------------------------------------- model
    def bind_model(self, model_id: str, dimension: int) -> None:
        self.model_id, self.dimension = model_id, dimension

    async def stored_model(self) -> tuple[str, int] | None:
        """The model recorded on any existing collection (all collections share one)."""

        def probe():
            for col in self._client.list_collections():
                meta = col.metadata or {}
                if str(col.name).startswith("booku_") and "model_id" in meta:
                    return str(meta["model_id"]), int(meta["dimension"])
            return None

        return await self._run(probe)

    async def check_model(self) -> None:
        stored = await self.stored_model()
        if stored and stored != (self.model_id, self.dimension):
            raise ModelMismatchError(
                f"向量索引由模型 {stored[0]}（{stored[1]} 维）建立，当前嵌入模型为 "
                f"{self.model_id}（{self.dimension} 维）。"
                f"请运行 `python -m booku_memory reindex` 用当前模型重建全部向量。"
            )

    # ----------------------------------------------------------- collections
    def _collection_sync(self, tier: str, store_key: str, create: bool):
        name = collection_name(tier, store_key)
        col = self._collections.get(name)
        if col is not None:
            return col
        if create:
            col = self._client.get_or_create_collection(
                name,
                embedding_function=None,
                configuration={"hnsw": {"space": "cosine", "ef_search": self.ef_search}},
                metadata={
                    "model_id": self.model_id or "",
                    "dimension": int(self.dimension or 0),
                    "tier": tier,
                    "store_key": store_key,
                },
            )
        else:
            try:
                col = self._client.get_collection(name, embedding_function=None)
            except Exception:  # chroma raises NotFoundError/ValueError depending on backend
                return None
        self._apply_ef_search(col)
        self._collections[name] = col
        return col

    def _apply_ef_search(self, col: Any) -> None:
        """Give an existing collection this index's ``ef_search`` when it was created with another one.

        Why here: Chroma keeps the value in the collection's stored configuration and reads it when it loads the
        HNSW segment, so it must change before the first query of this process loads it; stores made before the
        setting existed, or under another value, follow the configuration from their next open."""
        hnsw = (col.configuration_json or {}).get("hnsw") or {}
        if hnsw.get("ef_search") != self.ef_search:
            col.modify(configuration={"hnsw": {"ef_search": self.ef_search}})

    async def warm_up(self) -> int:
        """Open every booku collection ahead of the first query that needs it.

        Opening a collection loads its HNSW index, which
        otherwise lands on the first query of every owner. Each collection is opened as its own job on the Chroma
        thread, so live queries wait behind at most one of them.
        """
        names = await self._run(
            lambda: [str(c.name) for c in self._client.list_collections() if str(c.name).startswith("booku_")]
        )

        def open_one(name: str) -> None:
            if name not in self._collections:
                col = self._client.get_collection(name, embedding_function=None)
                self._apply_ef_search(col)
                self._collections[name] = col

        for name in names:
            await self._run(open_one, name)
        return len(names)

    async def upsert(
        self,
        tier: str,
        store_key: str,
        ids: Sequence[str],
        vectors: np.ndarray,
        metadatas: Sequence[dict[str, Any]] | None = None,
    ) -> None:
        if not ids:
            return

        def work():
            col = self._collection_sync(tier, store_key, create=True)
            matrix = np.asarray(vectors, dtype=np.float32)
            col.upsert(ids=list(ids), embeddings=matrix, metadatas=list(metadatas) if metadatas else None)

        await self._run_write(work)

    async def delete(self, store_key: str, ids: Sequence[str], tiers: Sequence[str] = TIERS) -> None:
        if not ids:
            return

        def work():
            for tier in tiers:
                col = self._collection_sync(tier, store_key, create=False)
                if col is not None:
                    col.delete(ids=list(ids))

        await self._run_write(work)

    async def query(
        self,
        vector: np.ndarray,
        *,
        store_keys: Sequence[str],
        tiers: Sequence[str],
        limit: int,
        with_embeddings: bool = False,
    ) -> list[VectorHit]:
        """Nearest neighbours across the chosen partitions, best first (``query_many`` with one row)."""
        found = await self.query_many(
            np.asarray(vector, dtype=np.float32).reshape(1, -1),
            store_keys=store_keys,
            tiers=tiers,
            limit=limit,
            with_embeddings=with_embeddings,
        )
        return found[0]

    async def query_many(
        self,
        vectors: np.ndarray,
        *,
        store_keys: Sequence[str],
        tiers: Sequence[str],
        limit: int,
        with_embeddings: bool = False,
    ) -> list[list[VectorHit]]:
        """``query`` for several vectors at once: one Chroma call per partition for all of them.

        Returns one hit list per row of ``vectors``, each best first. Why: the fixed cost of a Chroma query
        dwarfs the HNSW search itself, so a batch of concurrent writers checks its neighbours in one call.
        """
        self._check_reads()
        matrix = np.asarray(vectors, dtype=np.float32).reshape(len(vectors), -1)
        if not len(matrix):
            return []

        def work():
            found: list[list[VectorHit]] = [[] for _ in range(len(matrix))]
            for store_key in store_keys:
                for tier in tiers:
                    col = self._collection_sync(tier, store_key, create=False)
                    if col is None:
                        continue
                    include = ["distances", "embeddings"] if with_embeddings else ["distances"]
                    # No count() first: it is slow on a large partition, and Chroma already returns fewer
                    # results (none for an empty partition) when asked for more than it holds.
                    res = col.query(query_embeddings=matrix, n_results=limit, include=include)
                    for row, ids in enumerate(res["ids"]):
                        similarities = [1.0 - float(distance) for distance in res["distances"][row]]
                        if with_embeddings and res.get("embeddings") is not None and len(ids):
                            embs = list(np.asarray(res["embeddings"][row], dtype=np.float32))
                        else:
                            embs = [None] * len(ids)
                        for memory_id, similarity, emb in zip(ids, similarities, embs):
                            found[row].append(VectorHit(memory_id, similarity, tier, emb))
            for hits in found:
                hits.sort(key=lambda h: h.similarity, reverse=True)
                del hits[limit:]
            return found

        return await self._run(work)

    async def get_embeddings(
        self, store_key: str, ids: Sequence[str], tiers: Sequence[str] = TIERS
    ) -> dict[str, np.ndarray]:
        """Stored vectors of ``ids`` in one store, ``{memory_id: vector}`` (ids without a vector are absent)."""
        self._check_reads()
        await self._settle()

        def work():
            found: dict[str, np.ndarray] = {}
            for tier in tiers:
                col = self._collection_sync(tier, store_key, create=False)
                if col is None:
                    continue
                res = col.get(ids=list(ids), include=["embeddings"])
                for memory_id, emb in zip(res["ids"], res["embeddings"] if res["embeddings"] is not None else []):
                    found[memory_id] = np.asarray(emb, dtype=np.float32)
            return found

        return await self._run(work)

    async def count(self, *, store_keys: Sequence[str] | None = None, tiers: Sequence[str] = TIERS) -> dict[str, int]:
        """Vector counts per tier, over the given stores (all known booku collections when None)."""
        self._check_reads()
        await self._settle()

        def work():
            counts = {tier: 0 for tier in tiers}
            for col in self._client.list_collections():
                meta = col.metadata or {}
                tier = meta.get("tier")
                if tier not in counts or not str(col.name).startswith("booku_"):
                    continue
                if store_keys is not None and meta.get("store_key") not in store_keys:
                    continue
                counts[tier] += self._client.get_collection(col.name, embedding_function=None).count()
            return counts

        return await self._run(work)

    async def partitions(self) -> dict[str, tuple[str, str]]:
        """Every booku collection: ``{name: (tier, store_key)}`` from the collections' own metadata."""

        def work():
            found: dict[str, tuple[str, str]] = {}
            for col in self._client.list_collections():
                meta = col.metadata or {}
                if str(col.name).startswith("booku_"):
                    found[str(col.name)] = (str(meta.get("tier", "")), str(meta.get("store_key", "")))
            return found

        return await self._run(work)

    async def stored_ids(self, name: str, *, page: int = 5000) -> list[str]:
        """Every id stored in the collection ``name`` (read in pages; no vectors), for consistency checks."""

        def work():
            col = self._client.get_collection(name, embedding_function=None)
            ids: list[str] = []
            while True:
                chunk = col.get(include=[], limit=page, offset=len(ids))["ids"]
                ids.extend(chunk)
                if len(chunk) < page:
                    return ids

        return await self._run(work)

    async def delete_from(self, name: str, ids: Sequence[str]) -> None:
        """Remove ``ids`` from the collection ``name`` (stray vectors found by a check)."""
        if not ids:
            return

        def work():
            self._client.get_collection(name, embedding_function=None).delete(ids=list(ids))

        await self._run_write(work)

    async def drop_all(self) -> None:
        """Delete every booku collection (reindex starts from a clean slate)."""

        def work():
            for col in self._client.list_collections():
                if str(col.name).startswith("booku_"):
                    self._client.delete_collection(col.name)
            self._collections.clear()

        await self._run_write(work)

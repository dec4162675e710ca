"""The vector index: Chroma collections partitioned by (tier, store).

Why partitions instead of metadata filters: a filtered HNSW query in Chroma costs several times an unfiltered one,
and the reference leaked soft-deleted and archived memories into results because it never filtered at all. Here the
tier of a record decides its collection (``live`` = active memories, ``archive`` = archived/expired memories,
``knowledge`` = document chunks; soft-deleted records have no vector), so a query simply picks the collections it
may see. Collection names are hashes, never raw user text (reference bug B12).

Chroma is synchronous; every call runs in a worker thread so the event loop never blocks. Writes (upsert, delete)
have a thread of their own, in order, so a batched upsert (Chroma persists on every call) never holds up a query;
readers that must see vectors not yet written go through ``BookuRuntime.query_vectors``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

import numpy as np

from ..errors import ModelMismatchError
from .file_modes import private_dir, private_sqlite
from .vector_copy import VectorCopy, read_cached_vectors

logger = logging.getLogger(__name__)

TIERS = ("live", "archive", "knowledge")

CHROMA_SQLITE_FILE = "chroma.sqlite3"
"""The SQLite file an embedded Chroma keeps its write log and metadata in (inside the vector directory)."""

_chroma_paths_opened: set[str] = set()
"""Vector directories an embedded Chroma has opened in this process (Chroma keeps each open until exit)."""


def use_write_ahead_log(directory: Path) -> None:
    """Put Chroma's SQLite file in WAL journal mode, creating it in that mode when the store is new.

    Why: Chroma creates its file with a rollback journal, so every upsert commits with a journal file created,
    synced and deleted (eight fsyncs per upsert call, measured), while Chroma's Python binding holds the GIL for
    the whole call: on the 10k bench store 20-60 ms per flush in which no other coroutine or thread of the process
    could run. In WAL mode a commit appends to the log and syncs it; Chroma's bundled SQLite keeps
    ``synchronous=FULL`` in WAL mode (``SQLITE_DEFAULT_WAL_SYNCHRONOUS=2``), so a returned upsert is exactly as
    durable as before and the outbox may forget it as before. The mode is stored in the file, so this changes a
    store once.

    Only before Chroma first opens ``directory`` in this process: Python's ``sqlite3`` and Chroma's bundled SQLite
    are two libraries, and closing a file one of them opened drops the POSIX locks the other holds on it (measured:
    Chroma then failed with disk I/O errors). Chroma keeps a store open until the process exits, so later opens
    leave the file alone. A file that cannot be switched (locked by another process) is left as it is.
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


@dataclass
class VectorHit:
    memory_id: str
    similarity: float  # cosine similarity in [-1, 1]
    tier: str
    embedding: np.ndarray | None


def tier_of(record: dict[str, Any]) -> str | None:
    """Which partition a record's vector belongs to, or None when it must not be searchable."""
    if record.get("is_deleted"):
        return None
    if record.get("bucket") == "knowledge":
        return "knowledge"
    return "live" if record.get("status") == "active" else "archive"


def _collection_of_record(store_key: str, bucket: str, status: str) -> str:
    return collection_name(tier_of({"bucket": bucket, "status": status}) or "live", store_key)


def collection_name(tier: str, store_key: str) -> str:
    digest = hashlib.sha1(store_key.encode("utf-8")).hexdigest()[:16]
    return f"booku_{tier}_{digest}"


class VectorIndex:
    """Thin async facade over a Chroma client (embedded PersistentClient or HttpClient)."""

    def __init__(self, *, path: Path | None = None, http_host: str | None = None, http_port: int = 8000,
                 http_ssl: bool = False, copy_vectors: bool = False) -> None:
        """``copy_vectors``: keep the stored vectors in memory too (``storage.vector_copy``), so queries that need
        the hits' vectors ask Chroma for distances only (``retrieval.in_memory_vectors``)."""
        self._path = path
        self.copy = VectorCopy() if copy_vectors else None
        self._http = (http_host, http_port, http_ssl) if http_host else None
        self._client: Any = None
        self._collections: dict[str, Any] = {}
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="booku-chroma")
        self._write_executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="booku-chroma-write")
        self.model_id: str | None = None
        self.dimension: int | None = None
        self._read_barrier: Callable[[], Awaitable[None]] | None = None

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
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, lambda: fn(*args, **kwargs))

    async def _run_write(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._write_executor, lambda: fn(*args, **kwargs))

    async def open(self) -> None:
        await self._run(self._open_sync)

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
            self._client = chromadb.PersistentClient(path=str(self._path), settings=settings)

    async def close(self) -> None:
        self._write_executor.shutdown(wait=True)
        self._executor.shutdown(wait=True)
        self._collections.clear()
        self._client = None

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
                f"向量索引由模型 {stored[0]}（{stored[1]} 维）建立，当前嵌入模型为 {self.model_id}（{self.dimension} 维）。"
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
                configuration={"hnsw": {"space": "cosine", "ef_search": 64}},
                metadata={"model_id": self.model_id or "", "dimension": int(self.dimension or 0),
                          "tier": tier, "store_key": store_key},
            )
            if self.copy is not None and self.copy.listed is not None and name not in self.copy.listed:
                self.copy.loaded.add(name)  # created after the copy's load listed the collections: new, empty
        else:
            try:
                col = self._client.get_collection(name, embedding_function=None)
            except Exception:  # chroma raises NotFoundError/ValueError depending on backend
                return None
        self._collections[name] = col
        return col

    async def warm_up(self) -> int:
        """Open every booku collection ahead of the first query that needs it.

        Opening a collection loads its HNSW index (about 100 ms each, measured with 1,000 owner stores), which
        otherwise lands on the first query of every owner. Each collection is opened as its own job on the Chroma
        thread, so live queries wait behind at most one of them.
        """
        names = await self._run(lambda: [str(c.name) for c in self._client.list_collections()
                                         if str(c.name).startswith("booku_")])

        def open_one(name: str) -> None:
            if name not in self._collections:
                self._collections[name] = self._client.get_collection(name, embedding_function=None)

        for name in names:
            await self._run(open_one, name)
        return len(names)

    async def upsert(self, tier: str, store_key: str, ids: Sequence[str], vectors: np.ndarray,
                     metadatas: Sequence[dict[str, Any]] | None = None) -> None:
        if not ids:
            return

        def work():
            col = self._collection_sync(tier, store_key, create=True)
            matrix = np.asarray(vectors, dtype=np.float32)
            col.upsert(ids=list(ids), embeddings=matrix, metadatas=list(metadatas) if metadatas else None)
            if self.copy is not None:
                self.copy.put(ids, matrix)
        await self._run_write(work)

    async def delete(self, store_key: str, ids: Sequence[str], tiers: Sequence[str] = TIERS) -> None:
        if not ids:
            return

        def work():
            for tier in tiers:
                col = self._collection_sync(tier, store_key, create=False)
                if col is not None:
                    col.delete(ids=list(ids))
            if self.copy is not None:
                self.copy.drop(ids)
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
        found = await self.query_many(np.asarray(vector, dtype=np.float32).reshape(1, -1), store_keys=store_keys,
                                      tiers=tiers, limit=limit, with_embeddings=with_embeddings)
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

        Returns one hit list per row of ``vectors``, each best first. Why: the fixed cost of a Chroma query (~3 ms)
        dwarfs the HNSW search itself, so a batch of concurrent writers checks its neighbours in one call.
        """
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
                    copied = with_embeddings and self.copy is not None and str(col.name) in self.copy.loaded
                    include = ["distances", "embeddings"] if with_embeddings and not copied else ["distances"]
                    # No count() first: it cost ~10 ms at 100k vectors, and Chroma already returns fewer
                    # results (none for an empty partition) when asked for more than it holds.
                    res = col.query(query_embeddings=matrix, n_results=limit, include=include)
                    for row, ids in enumerate(res["ids"]):
                        similarities = [1.0 - float(distance) for distance in res["distances"][row]]
                        if copied:
                            embs = self._copied_vectors(col, matrix[row], ids, similarities)
                        elif with_embeddings and res.get("embeddings") is not None:
                            embs = [np.asarray(emb, dtype=np.float32) for emb in res["embeddings"][row]]
                            if self.copy is not None:
                                self.copy.put(ids, embs)
                        else:
                            embs = [None] * len(ids)
                        for memory_id, similarity, emb in zip(ids, similarities, embs):
                            found[row].append(VectorHit(memory_id, similarity, tier, emb))
            for hits in found:
                hits.sort(key=lambda h: h.similarity, reverse=True)
                del hits[limit:]
            return found
        return await self._run(work)

    def _copied_vectors(self, col: Any, query: np.ndarray, ids: Sequence[str],
                        similarities: Sequence[float]) -> list[np.ndarray | None]:
        """The hits' vectors from the copy, those it cannot vouch for read from ``col`` (and copied)."""
        assert self.copy is not None
        vectors = self.copy.verified(query, ids, similarities)
        missing = [memory_id for memory_id, vector in zip(ids, vectors) if vector is None]
        if missing:
            res = col.get(ids=missing, include=["embeddings"])
            read = dict(zip(res["ids"], res["embeddings"] if res["embeddings"] is not None else []))
            self.copy.put(list(read), list(read.values()))
            vectors = [vector if vector is not None else
                       (np.asarray(read[memory_id], dtype=np.float32) if memory_id in read else None)
                       for memory_id, vector in zip(ids, vectors)]
        return vectors

    async def load_copy(self, database_path: Path) -> int:
        """Fill the vector copy from the embedding cache in ``database_path`` (``storage.vector_copy``) and mark the
        collections it holds vectors of as loaded; returns the vectors copied. Nothing is copied before a model is
        bound.

        Why no count per collection to check that the cache covers it: ``count()`` made Chroma load every
        collection's index, 3.5 GB of RSS with 1,000 owners' stores. The cache keeps every passage vector the
        current model made (nothing prunes it); a vector it lacks is read from Chroma when a query finds it."""
        copy = self.copy
        if copy is None or self.model_id is None or not self.dimension:
            return 0
        try:
            names = await self._run(lambda: [str(c.name) for c in self._client.list_collections()
                                             if str(c.name).startswith("booku_")])
            copy.listed = set(names)
            copied = await asyncio.to_thread(read_cached_vectors, database_path, self.model_id, self.dimension, copy,
                                             _collection_of_record)
        except Exception as exc:  # queries keep asking Chroma for the vectors
            logger.warning("向量内存副本加载失败，检索继续由 Chroma 返回向量：%s", exc)
            return 0
        copy.loaded.update(name for name in names if copied[name])
        return sum(copied.values())

    async def get_embeddings(self, store_key: str, ids: Sequence[str], tiers: Sequence[str] = TIERS) -> dict[str, np.ndarray]:
        """Stored vectors of ``ids`` in one store, ``{memory_id: vector}`` (ids without a vector are absent)."""
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

    async def drop_all(self) -> None:
        """Delete every booku collection (reindex starts from a clean slate)."""
        def work():
            if self.copy is not None:
                self.copy.clear()
            for col in self._client.list_collections():
                if str(col.name).startswith("booku_"):
                    self._client.delete_collection(col.name)
            self._collections.clear()
        await self._run_write(work)

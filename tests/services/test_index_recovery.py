"""A broken, missing or emptied vector index never fails a request nor blocks start-up (issue 29.2, issue 31.7).

Reads fall back to the keyword route with ``degraded`` set, writes land in SQLite, the runtime moves a broken index
aside (never deleting it) and rebuilds the vectors from SQLite in the background, then recovers by itself.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from pathlib import Path

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.integrity import check_store
from booku_memory.services.storage.vector_index import CHROMA_SQLITE_FILE

from .memory_support import MEMORY_SERVICE

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}

FACTS = [
    ("小橘喜欢鱼干", "小橘是一只橘猫，最喜欢吃鱼干。"),
    ("周末去香山", "上周末和朋友去香山爬山，看了红叶。"),
    ("咖啡偏好", "早上只喝美式咖啡，不加糖。"),
]


def _open(data: Path):
    return booku_memory.open(data, QUIET_CONFIG, embedder=DeterministicTestEmbedder())


async def _seed(service) -> list[str]:
    return [(await service.upsert_memory(content, title=title))["id"] for title, content in FACTS]


async def _until_recovered(runtime, service, query: str, *, timeout: float = 30.0) -> list[dict]:
    """Search repeatedly until the answer is no longer degraded; every answer on the way must be a real one."""
    answers = []
    deadline = time.monotonic() + timeout
    while True:
        result = await service.retrieve_memories(query, top_k=3)
        answers.append(result)
        if "degraded" not in result and runtime.index_recovery.healthy:
            return answers
        assert time.monotonic() < deadline, f"not recovered: {runtime.index_recovery.snapshot()}"
        await asyncio.sleep(0.1)


def _moved_aside(vector_dir: Path) -> list[Path]:
    return sorted(vector_dir.parent.glob(f"{vector_dir.name}.broken-*"))


async def test_index_deleted_under_a_running_runtime_degrades_then_recovers(tmp_path: Path) -> None:
    async with _open(tmp_path / "data") as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        ids = await _seed(service)
        await runtime.flush_vectors()
        # Holding the rebuild job's turn stands for a slow rebuild: the index stays broken until it is let go.
        async with runtime.index_recovery._lock:
            shutil.rmtree(runtime.vectors.path)
            deadline = time.monotonic() + 10
            while runtime.index_recovery.healthy:  # the watchdog notices within seconds
                assert time.monotonic() < deadline, "the deleted index went unnoticed"
                await asyncio.sleep(0.05)
            during = await service.retrieve_memories("小橘 鱼干", top_k=3)
            written = await service.upsert_memory("索引重建期间写下的记忆：喜欢下雨天。", title="新的事实")
            assert (await service.get_status())["index"]["state"] == "degraded"
        answers = await _until_recovered(runtime, service, "小橘 鱼干")

        assert during["results"][0]["id"] == ids[0] and "关键词" in during["degraded"]
        assert "向量" in written["degraded"]
        assert answers[-1]["results"][0]["id"] == ids[0]
        assert answers[-1]["results"][0]["score_parts"].get("cosine") is not None  # the vector route is back
        assert runtime.index_recovery.recoveries >= 1
        assert (await runtime.vectors.count())["live"] == len(ids) + 1
        assert (await check_store(runtime))["ok"]
        assert written["id"] in {
            item["id"] for item in (await service.retrieve_memories("喜欢下雨天", top_k=3))["results"]
        }


async def test_collection_dropped_underneath_falls_back_and_rebuilds_in_place(tmp_path: Path) -> None:
    async with _open(tmp_path / "data") as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        ids = await _seed(service)
        await runtime.flush_vectors()
        await service.retrieve_memories("咖啡", top_k=3)  # the collection object is now cached in the runtime
        import chromadb
        from chromadb.config import Settings

        other = chromadb.PersistentClient(
            path=str(runtime.vectors.path), settings=Settings(anonymized_telemetry=False, allow_reset=False)
        )
        for col in other.list_collections():
            other.delete_collection(col.name)

        first = await service.retrieve_memories("咖啡 美式", top_k=3)
        assert first["results"][0]["id"] == ids[2]
        assert "关键词" in first["degraded"]
        await _until_recovered(runtime, service, "咖啡 美式")
        assert _moved_aside(runtime.vectors.path) == []  # the files were fine: rebuilt where they are
        assert (await runtime.vectors.count())["live"] == len(ids)


async def test_corrupted_index_at_start_is_moved_aside_and_rebuilt(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with _open(data) as memory:
        ids = await _seed(memory.get_service(MEMORY_SERVICE))
        vector_dir = memory.runtime.vectors.path
    # The header page is overwritten, and so is the write-ahead log's header when Chroma's closing has not folded
    # the log back yet (a loaded machine): a log left intact would still hold the first page and mask the damage.
    for damaged in (vector_dir / CHROMA_SQLITE_FILE, vector_dir / f"{CHROMA_SQLITE_FILE}-wal"):
        if damaged.exists():
            with open(damaged, "r+b") as handle:
                handle.write(os.urandom(4096))

    async with _open(data) as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        assert runtime.started
        moved = _moved_aside(vector_dir)
        assert len(moved) == 1 and (moved[0] / CHROMA_SQLITE_FILE).exists()  # kept, not deleted
        first = await service.retrieve_memories("香山 红叶", top_k=3)
        assert first["results"][0]["id"] == ids[1]
        await _until_recovered(runtime, service, "香山 红叶")
        assert (await runtime.vectors.count())["live"] == len(ids)
        status = await service.get_status()
        assert status["index"]["state"] == "ok" and status["index"]["recoveries"] >= 1


async def test_deleted_index_directory_at_start_is_rebuilt_not_opened_empty(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with _open(data) as memory:
        ids = await _seed(memory.get_service(MEMORY_SERVICE))
        vector_dir = memory.runtime.vectors.path
    shutil.rmtree(vector_dir)

    async with _open(data) as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        assert not runtime.index_recovery.healthy or runtime.index_recovery.recoveries >= 1
        await _until_recovered(runtime, service, "小橘")
        assert (await runtime.vectors.count())["live"] == len(ids)


async def test_reindex_job_reports_progress_and_keyword_route_serves_meanwhile(tmp_path: Path) -> None:
    async with _open(tmp_path / "data") as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        ids = await _seed(service)
        job = runtime.index_recovery.start_reindex()
        second = None
        try:
            runtime.index_recovery.start_reindex()
        except ValueError as exc:
            second = str(exc)
        answers = await _until_recovered(runtime, service, "小橘 鱼干")
        assert second is not None and "已有索引重建任务" in second
        assert all(answer["results"][0]["id"] == ids[0] for answer in answers)
        assert not job.running and job.error == ""
        assert job.done == job.total == len(ids)
        assert job.result["keyword_rows"] == len(ids)


async def test_check_finds_and_repairs_derived_differences(tmp_path: Path) -> None:
    async with _open(tmp_path / "data") as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        ids = await _seed(service)
        await runtime.flush_vectors()
        assert (await check_store(runtime))["ok"]
        # Behind the runtime's back: a vector lost, a stray vector, a keyword row lost.
        await runtime.vectors.delete("shared", [ids[0]])
        import numpy as np

        await runtime.vectors.upsert("live", "shared", ["ghost"], np.ones((1, runtime.vectors.dimension), np.float32))
        rid = await runtime.db.fetch_value("SELECT rid FROM booku_memory_records WHERE memory_id = ?", [ids[1]])
        async with runtime.db.transaction() as conn:
            await conn.execute("DELETE FROM booku_memory_fts WHERE rowid = ?", [rid])

        result = await check_store(runtime, repair=True)
        found = result["found"]
        assert [i for values in found["missing_vectors"].values() for i in values] == [ids[0]]
        assert [i for values in found["stray_vectors"].values() for i in values] == ["ghost"]
        assert found["keyword_rows_missing"] == [rid]
        assert result["ok"] and result["after"]["problems"] == 0
        assert (await check_store(runtime))["ok"]
        hits = await service.retrieve_memories("香山 红叶", top_k=3)
        assert hits["results"][0]["id"] == ids[1] and "degraded" not in hits


class PanicException(BaseException):
    """The shape of pyo3's ``PanicException`` (a Rust panic inside Chroma's core): a ``BaseException``."""


async def test_a_panic_inside_chroma_degrades_instead_of_escaping(tmp_path: Path, monkeypatch) -> None:
    async with _open(tmp_path / "data") as memory:
        runtime, service = memory.runtime, memory.get_service(MEMORY_SERVICE)
        ids = await _seed(service)
        await runtime.flush_vectors()
        await service.retrieve_memories("咖啡", top_k=3)
        (collection,) = [col for name, col in runtime.vectors._collections.items() if name.startswith("booku_live")]

        def panic(*args, **kwargs):
            raise PanicException("called `Result::unwrap()` on an `Err` value")

        monkeypatch.setattr(type(collection), "query", panic)
        answer = await service.retrieve_memories("咖啡 美式", top_k=3)
        monkeypatch.undo()
        assert answer["results"][0]["id"] == ids[2] and "PanicException" in answer["degraded"]
        await _until_recovered(runtime, service, "咖啡 美式")
        assert len(_moved_aside(runtime.vectors.path)) == 1

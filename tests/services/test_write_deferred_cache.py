"""Embedding-cache rows ride in the next write transaction instead of paying for one of their own.

What a user must never notice: a memory whose write returned has its vector's cache row committed with it (a crash
right after costs no model call), a cache row is readable the moment it is computed, a transaction that rolls back
does not lose the rows that rode in it, a rider's failure never fails the write it rides in, a DELETE of a cache row
(retraction) inside the carrying transaction wins, and closing the store writes whatever is still deferred.
"""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from booku_memory.services.embedding.cached import text_hash
from booku_memory.services.logic.text import compose_embedding_text
from booku_memory.services.storage import embedding_cache as cache_module
from booku_memory.services.storage.database import RiderRows

from .memory_support import CAT, MEMORY_SERVICE, open_store

NEVER = 3600.0


def committed_hashes(data_dir: Path, mode: str) -> set[str]:
    """Cache keys a separate connection sees, i.e. what is committed on disk."""
    with sqlite3.connect(data_dir / "booku_memory.db") as conn:
        rows = conn.execute("SELECT text_hash FROM booku_embedding_cache WHERE mode = ?", [mode]).fetchall()
    return {row[0] for row in rows}


def unit(seed: int) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return vector / np.linalg.norm(vector)


@pytest.fixture
def no_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Deferred rows are written only by a transaction that carries them (or by close)."""
    monkeypatch.setattr(cache_module, "DEFERRED_FLUSH_SECONDS", NEVER)


async def test_upsert_commits_the_cache_row_of_its_vector_with_the_memory(tmp_path: Path, no_timer: None) -> None:
    data = tmp_path / "data"
    async with open_store(data) as memory:
        result = await memory.get_service(MEMORY_SERVICE).upsert_memory(CAT[1], title=CAT[0])
        digest = text_hash(compose_embedding_text(CAT[0], CAT[1]))
        assert digest in committed_hashes(data, "passage")
        with sqlite3.connect(data / "booku_memory.db") as conn:
            assert (
                conn.execute(
                    "SELECT COUNT(*) FROM booku_memory_records WHERE memory_id = ?", [result["id"]]
                ).fetchone()[0]
                == 1
            )
        assert not memory.runtime.embedding_cache.pending


async def test_a_computed_vector_is_readable_at_once_and_close_writes_it(tmp_path: Path, no_timer: None) -> None:
    data = tmp_path / "data"
    query = "用户的猫叫什么名字"
    async with open_store(data) as memory:
        rt = memory.runtime
        vector = (await rt.embed_queries([query]))[0]
        digest = text_hash(query)
        assert digest not in committed_hashes(data, "query")  # no write came along yet
        found = await rt.embedding_cache.get_many(rt.embedder.model_id, "query", [digest])
        assert found[digest].tobytes() == vector.tobytes()
    assert digest in committed_hashes(data, "query")


async def test_rows_of_a_rolled_back_transaction_ride_in_the_next_one(tmp_path: Path, no_timer: None) -> None:
    data = tmp_path / "data"
    async with open_store(data) as memory:
        rt = memory.runtime
        cache = rt.embedding_cache
        cache.defer_many("model-x", "passage", [("h" * 64, unit(1))])
        with pytest.raises(RuntimeError):
            async with rt.db.transaction():
                raise RuntimeError("写入失败（测试注入）")
        assert "h" * 64 not in committed_hashes(data, "passage")
        assert cache.pending
        async with rt.db.transaction():
            pass
        assert "h" * 64 in committed_hashes(data, "passage")
        assert not cache.pending
        stored = await cache.get_many("model-x", "passage", ["h" * 64])
        assert stored["h" * 64].tobytes() == unit(1).tobytes()


async def test_a_delete_inside_the_carrying_transaction_wins(tmp_path: Path, no_timer: None) -> None:
    """A retraction deletes a cache row in its own transaction: a deferred copy must not come back after it."""
    data = tmp_path / "data"
    digest = "d" * 64
    async with open_store(data) as memory:
        rt = memory.runtime
        rt.embedding_cache.defer_many("model-x", "passage", [(digest, unit(2))])
        async with rt.db.transaction() as conn:
            await conn.execute("DELETE FROM booku_embedding_cache WHERE text_hash = ?", [digest])
        assert not rt.embedding_cache.pending
        assert await rt.embedding_cache.get_many("model-x", "passage", [digest]) == {}
    assert digest not in committed_hashes(data, "passage")


class BrokenRider:
    """A rider whose statement always fails."""

    def __init__(self) -> None:
        self.settled: list[bool] = []
        self.rows = True

    @property
    def pending(self) -> bool:
        return self.rows

    def take(self) -> tuple[RiderRows, Any]:
        if not self.rows:
            return [], None
        return [("INSERT INTO no_such_table (x) VALUES (?)", [(1,)])], "token"

    def settle(self, token: Any, committed: bool) -> None:
        self.settled.append(committed)
        self.rows = False


async def test_a_failing_rider_never_fails_the_write_it_rides_in(tmp_path: Path, no_timer: None) -> None:
    async with open_store(tmp_path / "data") as memory:
        rt = memory.runtime
        rider = BrokenRider()
        rt.db.add_rider(rider)
        rt.embedding_cache.defer_many("model-x", "passage", [("e" * 64, unit(3))])
        result = await memory.get_service(MEMORY_SERVICE).upsert_memory(CAT[1], title=CAT[0])
        assert result["mode"] == "created"
        assert rider.settled == [True]  # given up, not retried by every later transaction
        assert (
            await rt.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records WHERE memory_id = ?", [result["id"]])
            == 1
        )


async def test_rows_no_write_carries_get_a_transaction_of_their_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_module, "DEFERRED_FLUSH_SECONDS", 0.01)
    data = tmp_path / "data"
    async with open_store(data) as memory:
        cache = memory.runtime.embedding_cache
        cache.defer_many("model-x", "query", [("f" * 64, unit(4))])

        async def written() -> None:
            while cache.pending:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(written(), timeout=30)
        assert "f" * 64 in committed_hashes(data, "query")

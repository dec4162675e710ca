"""Write-behind vectors: ``upsert_memory`` returns after the SQLite commit, the flusher writes vectors later.

What a user must never notice: a crash before the flush loses nothing, a memory is findable the moment the write
returns, a deleted memory never comes back through a late flush, and closing the store leaves nothing unflushed.
The flusher's delay is stretched to an hour here so "before the flush" is a state the test controls, not a race.
"""

from __future__ import annotations

import asyncio
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from booku_memory.services import runtime as runtime_module
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

from .memory_support import CAT, COFFEE, HIKE, MEMORY_SERVICE, STORE, Probe, expected_vector, open_store, seed

NEVER = 3600.0


@pytest.fixture(autouse=True)
def flusher_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The flusher only runs when a test (or close) asks for it."""
    monkeypatch.setattr(runtime_module, "VECTOR_FLUSH_DELAY_SECONDS", NEVER)
    monkeypatch.setattr(runtime_module, "VECTOR_FLUSH_BATCH", 10_000)


class CountingEmbedder:
    """The deterministic test embedder, counting how many texts reach the model."""

    def __init__(self) -> None:
        self.inner = DeterministicTestEmbedder()
        self.model_id = self.inner.model_id
        self.dimension = self.inner.dimension
        self.texts = 0

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return await self.inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += len(texts)
        return await self.inner.embed_queries(texts)

    async def aclose(self) -> None:
        """Nothing to release."""


async def chroma_ids(rt: Any, vector: np.ndarray, tiers: Sequence[str] = ("live",)) -> list[str]:
    """What Chroma itself holds (no staged vectors, no flush first)."""
    return [hit.memory_id for hit in await rt.vectors.query(vector, store_keys=[STORE], tiers=tiers, limit=10)]


async def merged_ids(rt: Any, vector: np.ndarray, tiers: Sequence[str] = ("live",)) -> list[str]:
    return [hit.memory_id for hit in await rt.query_vectors(vector, store_keys=[STORE], tiers=tiers, limit=10)]


CRASH_AFTER_UPSERT = textwrap.dedent(
    """
    import asyncio, os, sys
    import booku_memory
    from booku_memory.services import runtime as runtime_module
    from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

    runtime_module.VECTOR_FLUSH_DELAY_SECONDS = 3600.0  # the flusher must not run before the kill

    async def main():
        async with booku_memory.open(sys.argv[1], {"maintenance": {"enabled": False},
                                                   "startup_ingest": {"enabled": False}},
                                     embedder=DeterministicTestEmbedder()) as memory:
            service = memory.get_service(booku_memory.MEMORY_SERVICE)
            result = await service.upsert_memory(sys.argv[3], title=sys.argv[2])
            pending = await memory.runtime.vector_sync.pending_count()
            print(result["id"], pending, flush=True)
            os._exit(17)  # killed after upsert returned, before the flusher wrote the vector

    asyncio.run(main())
    """
)


async def test_kill_after_upsert_returned_keeps_the_vector_without_a_model_call(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.run(
        [sys.executable, "-c", CRASH_AFTER_UPSERT, str(data), *CAT], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 17, proc.stderr
    memory_id, pending = proc.stdout.split()
    assert int(pending) >= 1  # the vector really was still waiting for the flusher

    embedder = CountingEmbedder()
    async with open_store(data, embedder=embedder) as handle:
        rt = handle.runtime
        assert await rt.vector_sync.pending_count() == 0
        stored = await rt.vectors.get_embeddings(STORE, [memory_id], tiers=["live"])
        np.testing.assert_allclose(stored[memory_id], expected_vector(*CAT), atol=1e-5)
        # Rebuilt from the embedding cache written before the crash: the model was not asked again.
        assert embedder.texts == 0
        result = await handle.get_service(MEMORY_SERVICE).retrieve_memories("小橘 鱼干", top_k=3)
        assert result["results"][0]["id"] == memory_id


async def test_memory_is_found_right_after_upsert_before_any_flush(svc: Any, rt: Any) -> None:
    (cat,) = await seed(svc, CAT)
    vector = expected_vector(*CAT)

    assert cat not in await chroma_ids(rt, vector)  # not flushed yet
    hits = await rt.query_vectors(vector, store_keys=[STORE], tiers=["live"], limit=5, with_embeddings=True)
    assert hits[0].memory_id == cat and hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(hits[0].embedding, vector, atol=1e-6)
    assert await merged_ids(rt, vector, tiers=["archive"]) == []  # staged vectors keep to their partition
    assert [r["id"] for r in (await svc.retrieve_memories("小橘 鱼干", top_k=3))["results"]][0] == cat

    await rt.flush_vectors()
    assert cat in await chroma_ids(rt, vector)
    assert (await merged_ids(rt, vector)).count(cat) == 1  # Chroma's copy and the staged one never both count


async def test_near_duplicate_written_before_the_flush_is_merged(svc: Any, rt: Any, probe: Probe) -> None:
    first = await svc.upsert_memory(CAT[1], title=CAT[0])
    again = await svc.upsert_memory(CAT[1], title=CAT[0])

    assert (first["mode"], again["mode"]) == ("created", "merged") and again["id"] == first["id"]
    assert await probe.count("booku_memory_records") == 1


async def test_deleting_a_staged_memory_never_resurrects_its_vector(svc: Any, rt: Any, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    await svc.delete_memories(memory_ids=[cat])

    assert cat not in await merged_ids(rt, expected_vector(*CAT))
    assert cat not in await chroma_ids(rt, expected_vector(*CAT))
    await rt.flush_vectors()
    assert await probe.tiers_of(cat) == []
    assert await probe.tiers_of(hike) == ["live"]
    assert cat not in await merged_ids(rt, expected_vector(*CAT))


async def test_delete_racing_the_flusher_leaves_no_vector(svc: Any, rt: Any, probe: Probe) -> None:
    ids = await seed(svc, CAT, HIKE, COFFEE)

    # The flush and the delete interleave at every await; whichever order they take, the outbox orders them.
    await asyncio.gather(rt.flush_vectors(), svc.delete_memories(memory_ids=ids[:2]), rt.flush_vectors())

    assert [await probe.tiers_of(memory_id) for memory_id in ids] == [[], [], ["live"]]
    assert await probe.pending() == 0
    for title, content in (CAT, HIKE):
        assert not set(ids[:2]) & set(await merged_ids(rt, expected_vector(title, content)))


async def test_archiving_a_staged_memory_moves_its_vector(svc: Any, rt: Any, probe: Probe) -> None:
    (cat,) = await seed(svc, CAT)
    await svc.archive_memories([cat])

    vector = expected_vector(*CAT)
    assert cat not in await merged_ids(rt, vector, tiers=["live"])
    assert cat in await merged_ids(rt, vector, tiers=["archive"])
    assert await probe.tiers_of(cat) == ["archive"]


async def test_read_during_a_flush_still_sees_the_memory(svc: Any, rt: Any) -> None:
    ids = await seed(svc, CAT, HIKE, COFFEE)
    vector = expected_vector(*HIKE)

    flushed, seen = await asyncio.gather(rt.flush_vectors(), merged_ids(rt, vector))

    assert flushed.pending == 0 and seen[0] == ids[1]
    assert rt.vector_sync.staged == {}


async def test_close_flushes_every_staged_vector(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with open_store(data) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await seed(svc, CAT, HIKE, COFFEE)
        assert await handle.runtime.vector_sync.pending_count() == 3
        assert len(handle.runtime.vector_sync.staged) == 3

    with sqlite3.connect(data / "booku_memory.db") as db:
        assert db.execute("SELECT COUNT(*) FROM booku_vector_outbox").fetchone()[0] == 0
        hashes = dict(db.execute("SELECT memory_id, embedded_text_hash FROM booku_memory_records").fetchall())
    assert set(hashes) == set(ids) and all(hashes.values())
    async with open_store(data) as handle:
        for (title, content), memory_id in zip((CAT, HIKE, COFFEE), ids):
            assert (await chroma_ids(handle.runtime, expected_vector(title, content)))[0] == memory_id

"""A process killed between the SQLite commit and the vector write heals at the next start."""

import subprocess
import sys
import textwrap

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}

CRASHING_WRITER = textwrap.dedent(
    """
    import asyncio, os, sys
    import booku_memory
    from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
    from booku_memory.services.storage.outbox import VectorSync

    async def die(self, **kwargs):
        if self.records.db.path.exists() and await self.pending_count():
            os._exit(17)  # killed after COMMIT, before any vector is written
        return await ORIGINAL(self, **kwargs)

    ORIGINAL = VectorSync.drain

    async def main():
        quiet = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
        async with booku_memory.open(sys.argv[1], quiet, embedder=DeterministicTestEmbedder()) as memory:
            VectorSync.drain = die
            service = memory.get_service(booku_memory.MEMORY_SERVICE)
            await service.upsert_memory("王五下周三要去上海出差", title="王五出差")

    asyncio.run(main())
    """
)


async def test_kill_between_commit_and_vector_write_recovers_on_restart(tmp_path):
    data = tmp_path / "data"
    proc = subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(data)], capture_output=True, text=True)
    assert proc.returncode == 17, proc.stderr

    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
        runtime = memory.runtime
        rows = await runtime.db.fetch_all("SELECT memory_id FROM booku_memory_records")
        assert len(rows) == 1
        memory_id = rows[0]["memory_id"]
        assert await runtime.vector_sync.pending_count() == 0
        vectors = await runtime.vectors.get_embeddings("shared", [memory_id])
        assert memory_id in vectors
        result = await memory.get_service(booku_memory.MEMORY_SERVICE).retrieve_memories("王五出差")
        assert result["results"][0]["id"] == memory_id

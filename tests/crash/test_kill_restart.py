"""SIGKILL the owner at random points of writes, reindex and import; restart; nothing acknowledged is lost and the
derived indexes agree with SQLite (issue 29.3).

Each round starts ``owner_child.py`` on the same data dir (its start-up heals what the previous kill left), lets
it work for a random moment and kills it. At the end the store is opened once more and checked: every write the
child acknowledged is there with its text, an import that returned left all its records, ``check`` finds nothing
to repair (SQLite ``integrity_check``, every vector in its partition and none stray, keyword rows, outboxes), and
no memory exists twice.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.integrity import check_store
from booku_memory.services.portability import export_jsonl

CHILD = Path(__file__).with_name("owner_child.py")
CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
MODES = ("write", "reindex", "import", "reindex")
READY_TIMEOUT_SECONDS = 60.0


async def _export_file(tmp_path: Path) -> tuple[Path, set[str]]:
    """An export of 60 memories from another store, for the import rounds."""
    async with booku_memory.open(tmp_path / "source", CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        results = await asyncio.gather(
            *(service.upsert_memory(f"导入来源第{n}条：编号 src{n} 的独立事实", title=f"来源 {n}") for n in range(60))
        )
        path = tmp_path / "export.jsonl"
        await export_jsonl(memory.runtime, path)
    return path, {result["id"] for result in results}


def _run_round(data: Path, mode: str, number: int, import_file: Path, rng: random.Random) -> list[str]:
    """One child life: start, wait for READY, work for a random moment, SIGKILL; returns its stdout lines."""
    child = subprocess.Popen(
        [sys.executable, str(CHILD), str(data), mode, str(number), str(import_file)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    lines: list[str] = []
    try:
        assert child.stdout is not None
        started = time.monotonic()
        for line in child.stdout:
            lines.append(line.strip())
            if line.strip() == "READY":
                break
            assert time.monotonic() - started < READY_TIMEOUT_SECONDS
        assert lines and lines[-1] == "READY", f"round {number} ({mode}) never got ready: {lines[-5:]}"
        time.sleep(rng.uniform(0.3, 1.5))
    finally:
        os.kill(child.pid, signal.SIGKILL)
        rest, _ = child.communicate()
    # A line cut by the kill is not an acknowledgement: only whole lines count.
    return lines + [line for line in rest.split("\n")[:-1]]


async def _wait_healthy(runtime) -> None:
    deadline = time.monotonic() + 60
    while not runtime.index_recovery.healthy or await runtime.vector_sync.pending_count():
        assert time.monotonic() < deadline, runtime.index_recovery.snapshot()
        await asyncio.sleep(0.1)


async def test_sigkill_during_writes_reindex_and_import_loses_nothing(tmp_path: Path) -> None:
    seed = int(os.environ.get("BOOKU_KILL_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    import_file, imported_ids = await _export_file(tmp_path)
    data = tmp_path / "data"
    acknowledged: dict[str, str] = {}
    imports_done = reindexes_done = 0
    for number, mode in enumerate(MODES):
        for line in await asyncio.to_thread(_run_round, data, mode, number, import_file, rng):
            if line.startswith("ACK "):
                _, memory_id, marker = line.split(" ")
                acknowledged[memory_id] = marker
            imports_done += line.startswith("IMPORTED ")
            reindexes_done += line == "REINDEXED"

    async with booku_memory.open(data, CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        runtime = memory.runtime
        await _wait_healthy(runtime)
        stored = await runtime.records.get_many(list(acknowledged))
        lost = sorted(set(acknowledged) - set(stored))
        wrong = sorted(
            memory_id
            for memory_id, marker in acknowledged.items()
            if memory_id in stored and marker not in stored[memory_id]["content"]
        )
        missing_imports = sorted(imported_ids - set(await runtime.records.get_many(list(imported_ids))))
        result = await check_store(runtime)

    print(
        f"kill test (seed {seed}): {len(MODES)} SIGKILLs during {', '.join(MODES)}; "
        f"{len(acknowledged)} acknowledged writes all present: {not lost}; {imports_done} finished imports "
        f"({len(imported_ids)} records each) present: {not missing_imports or not imports_done}; "
        f"{reindexes_done} finished reindexes; check after restart: {result['found']}"
    )
    assert acknowledged, "no write was acknowledged: the rounds were too short to test anything"
    assert lost == [] and wrong == []
    assert imports_done == 0 or missing_imports == []
    assert result["found"]["sqlite_integrity"] == "ok"
    assert result["found"]["duplicates"] == []
    assert result["ok"], result["found"]

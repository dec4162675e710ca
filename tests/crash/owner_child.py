"""The owner process of the kill test (``test_kill_restart.py``): opens a data dir and writes until it is killed.

Usage: ``python owner_child.py DATA_DIR MODE ROUND [IMPORT_FILE]`` with MODE ``write`` (concurrent upserts),
``reindex`` (reindex jobs back to back while writing) or ``import`` (an import while writing). It prints ``READY``
once start-up (and its healing) is done and a first write went through, ``ACK <id> <marker>`` after each acknowledged
write and ``IMPORTED <n>`` after an import returned; the parent kills it with SIGKILL at a random moment.
"""

from __future__ import annotations

import asyncio
import sys

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.portability import import_jsonl, reindex

CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
WRITERS = 4


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def write_forever(service, round_: str, writer: int) -> None:
    number = 0
    while True:
        number += 1
        marker = f"r{round_}w{writer}n{number}"
        result = await service.upsert_memory(
            f"崩溃测试 {marker}：第{round_}轮第{writer}路的第{number}条记忆", title=f"记录 {marker}"
        )
        say(f"ACK {result['id']} {marker}")


async def main(data_dir: str, mode: str, round_: str, import_file: str | None) -> None:
    async with booku_memory.open(data_dir, CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        # One write before READY: the first one loads the word segmenter (seconds on a busy machine).
        first = await service.upsert_memory(f"崩溃测试第{round_}轮开始", title=f"第{round_}轮")
        say(f"ACK {first['id']} 第{round_}轮开始")
        say("READY")
        jobs = [asyncio.create_task(write_forever(service, round_, writer)) for writer in range(WRITERS)]
        if mode == "reindex":
            while True:
                await reindex(memory.runtime)
                say("REINDEXED")
        elif mode == "import":
            assert import_file is not None
            imported = await import_jsonl(memory.runtime, import_file)
            say(f"IMPORTED {imported['record'] + imported['skipped']}")
        await asyncio.gather(*jobs)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] if len(sys.argv) > 4 else None))

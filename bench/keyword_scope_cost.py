"""What per-store bm25 statistics cost a scoped keyword-only retrieval, on both keyword routes.

Run from the repository root:

    .venv/bin/python bench/keyword_scope_cost.py                         # 8 stores x 250 memories
    .venv/bin/python bench/keyword_scope_cost.py --stores 20 --per-store 500

It writes ``stores x per_store`` short memories through ``upsert_memory`` (no embedder, so every retrieval is the
keyword route alone), then times ``retrieve_memories`` for a reader of one private store (what ``scope_for_chat``
gives a private chat; its statistics are its own store's) and for a reader of every store (whose statistics are the
whole table's, as before), with the in-memory keyword index and with FTS5. Figures are wall-clock milliseconds of
the public call; on a shared machine they are noisy, so compare runs made back to back.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_line, markdown_table, percentiles  # noqa: E402

import booku_memory  # noqa: E402
from booku_memory.services.embedding.deterministic import UnavailableEmbedder  # noqa: E402
from booku_memory.services.scope import Scope  # noqa: E402

CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "scope": {"mode": "per_chat"}}
WORDS = (
    "giraffe zoo keeper morning coffee tea lake garden museum painting concert ticket train station rain "
    "birthday cake friend sister brother holiday beach mountain hiking camera book library chess piano "
    "西湖 绿茶 咖啡 生日 蛋糕 朋友 旅行 爬山 电影 音乐 图书馆 火车 下雨 周末 公园 晚饭 医院 考试 工作 猫"
).split()


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 16)))


def store_scope(number: int) -> Scope:
    store = f"private:bench:{number}"
    return Scope(owner_uid=f"bench:{number}", readable_store_keys=(store,), writable_store_key=store)


async def timed_calls(service: Any, queries: Sequence[str]) -> list[float]:
    samples = []
    for query in queries:
        started = time.perf_counter()
        await service.retrieve_memories(query, top_k=10, record_activation=False)
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def run(stores: int, per_store: int, queries: int) -> None:
    rng = random.Random(31)
    with tempfile.TemporaryDirectory() as directory:
        async with booku_memory.open(Path(directory) / "data", CONFIG, embedder=UnavailableEmbedder()) as memory:
            started = time.perf_counter()
            for number in range(stores):
                writer = memory.get_service(booku_memory.MEMORY_SERVICE, scope=store_scope(number))
                for _ in range(per_store):
                    await writer.upsert_memory(sentence(rng))
            print(f"built {stores * per_store} memories in {time.perf_counter() - started:.0f} s", flush=True)
            keywords = memory.runtime.records.memory_keywords
            await keywords.wait_ready()
            every = tuple(f"private:bench:{number}" for number in range(stores))
            readers = {
                "one store": memory.get_service(booku_memory.MEMORY_SERVICE, scope=store_scope(0)),
                "every store": memory.get_service(
                    booku_memory.MEMORY_SERVICE,
                    scope=Scope(owner_uid="bench:all", readable_store_keys=every, writable_store_key=every[0]),
                ),
            }
            texts = [" ".join(rng.sample(WORDS, 3)) for _ in range(queries)]
            rows = []
            for route, enabled in (("in-memory", True), ("FTS5", False)):
                keywords.enabled = enabled
                for label, service in readers.items():
                    await timed_calls(service, texts[:20])  # warm caches
                    stats = percentiles(await timed_calls(service, texts))
                    rows.append([route, label, round(stats["p50"], 2), round(stats["p95"], 2)])
            keywords.enabled = True
    print(machine_line())
    print(markdown_table(["keyword route", "reader", "p50 ms", "p95 ms"], rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=8)
    parser.add_argument("--per-store", type=int, default=250)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args(argv)
    asyncio.run(run(args.stores, args.per_store, args.queries))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What working through the data dir's owner costs (issue 29): the same calls in the owner and in a client.

Run from the repository root:

    .venv/bin/python bench/owner_overhead.py               # 300 memories, 40 calls per row
    .venv/bin/python bench/owner_overhead.py --memories 1000 --calls 100

One process opens a fresh store with ``booku_memory.open(..., accept_clients=True)`` and a second handle on the
same data dir with a plain ``booku_memory.open()``, which finds it owned and becomes a client: its calls travel
over loopback HTTP to the owner's endpoint (``owner_rpc``), exactly as another process's would. Each row times the
same public service call through both handles, interleaved, so load from other jobs hits both alike. Then the CLI
is timed as a whole program (``python -m booku_memory command status``): once as a client of that owner, once as
the owner itself after the first process let go, i.e. what a user waits for in a terminal.

The store uses ``DeterministicTestEmbedder`` so the figures are the transport and the service, not the model (a
real query embedding adds the same ~25 ms to both sides). Figures are milliseconds, p50 / p95.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import machine_line, markdown_table, percentiles  # noqa: E402

import booku_memory  # noqa: E402
from booku_memory.services.embedding.deterministic import TEST_EMBEDDER_ENV, DeterministicTestEmbedder  # noqa: E402

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
PLACES = ["书店", "咖啡馆", "南湖", "老槐树", "菜市场", "图书馆", "海边", "山顶", "车站", "医院"]
PEOPLE = ["小林", "外公", "阿姨", "同事", "老板", "邻居", "表妹", "老师"]


def memory_fields(number: int) -> dict:
    place, person = PLACES[number % len(PLACES)], PEOPLE[number % len(PEOPLE)]
    return {
        "title": f"{person}在{place}（第{number}次）",
        "content": f"第{number}次和{person}去{place}，聊到了编号 {number * 7919 % 10007} 的旧事。",
        "core_tags": [person],
        "diffusion_tags": [place],
        "opposing_tags": ["无关"],
    }


async def timed(call) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


def cli_ms(data_dir: Path, runs: int) -> list[float]:
    env = {**os.environ, TEST_EMBEDDER_ENV: "deterministic"}
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(
            [sys.executable, "-m", "booku_memory", "command", "status", "--data-dir", str(data_dir)],
            check=True,
            capture_output=True,
            env=env,
        )
        samples.append((time.perf_counter() - started) * 1000)
    return samples


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--cli-runs", type=int, default=3)
    args = parser.parse_args()
    print(machine_line())
    data_dir = Path(tempfile.mkdtemp(prefix="booku-owner-bench-")) / "data"
    rows = []
    async with booku_memory.open(
        data_dir, QUIET_CONFIG, embedder=DeterministicTestEmbedder(), accept_clients=True
    ) as owner:
        local = owner.get_service(booku_memory.MEMORY_SERVICE)
        await asyncio.gather(*(local.create_memory(**memory_fields(n)) for n in range(args.memories)))
        async with booku_memory.open(data_dir, QUIET_CONFIG) as client:
            remote = client.get_service(booku_memory.MEMORY_SERVICE)
            cases = {
                "list_folder_ids (smallest call)": lambda s, n: s.list_folder_ids(),
                "retrieve_memories, top 10": lambda s, n: s.retrieve_memories(
                    f"{PEOPLE[n % 8]} {PLACES[n % 10]} 旧事", record_activation=False
                ),
                "create_memory": lambda s, n: s.create_memory(**memory_fields(args.memories + 2 * n + (s is remote))),
            }
            for label, call in cases.items():
                samples: dict[str, list[float]] = {"owner": [], "client": []}
                for n in range(args.calls):
                    samples["owner"].append(await timed(lambda: call(local, n)))
                    samples["client"].append(await timed(lambda: call(remote, n)))
                mine, theirs = percentiles(samples["owner"]), percentiles(samples["client"])
                rows.append(
                    (
                        label,
                        f"{mine['p50']:.1f} / {mine['p95']:.1f}",
                        f"{theirs['p50']:.1f} / {theirs['p95']:.1f}",
                        theirs["p50"] - mine["p50"],
                    )
                )
        # In a thread: the owner's event loop must stay free to answer the CLI's call.
        as_client = percentiles(await asyncio.to_thread(cli_ms, data_dir, args.cli_runs))
    as_owner = percentiles(cli_ms(data_dir, args.cli_runs))
    rows.append(
        (
            "CLI `command status`, whole program",
            f"{as_owner['p50']:.0f} / {as_owner['max']:.0f} (max)",
            f"{as_client['p50']:.0f} / {as_client['max']:.0f} (max)",
            as_client["p50"] - as_owner["p50"],
        )
    )
    print(f"\n{args.memories} memories, {args.calls} calls per row (CLI: {args.cli_runs} runs each)\n")
    print(markdown_table(["call", "in the owner, ms", "through the owner, ms", "p50 difference, ms"], rows))


if __name__ == "__main__":
    asyncio.run(main())

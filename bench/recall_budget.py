"""How much LoCoMo gold evidence lands inside a 6,500-character typed-recall block, versus plain top-k.

Protocol: LoCoMo conversations (default 0–2), every turn written through ``upsert_memory`` (one store per
conversation, as in ``locomo_service.py``; turns are ordinary memories, i.e. the ``entities`` recall category).
For each question:

* typed recall: ``recall(q, quotas={"entities": N}, max_chars=6500, min_score=-1)``; a gold turn counts as covered
  when its memory is in the block with its text (mode ``full`` or ``summary``), not as a bare uri;
* plain top-k: ``retrieve_memories(q, top_k=k)``; the whole result counts, whatever its size, and the mean size of
  the k snippets' full texts is printed next to it.

Run: ``.venv/bin/python bench/recall_budget.py [--conversations 0-2] [--quota 60]``.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence
from pathlib import Path
from statistics import mean

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_CONFIG,
    MEMORY_SERVICE,
    RESULTS_DIR,
    PrecomputedEmbedder,
    load_locomo,
    markdown_table,
    parse_range,
)
from locomo_service import write_conversation  # noqa: E402

import booku_memory  # noqa: E402

BUDGET = 6500
TOP_KS = (5, 10, 25)


async def evaluate(indices: Sequence[int], quota: int) -> None:
    embedder = PrecomputedEmbedder()
    coverage: dict[str, list[float]] = {"recall block": [], **{f"top-{k}": [] for k in TOP_KS}}
    sizes: dict[str, list[int]] = {key: [] for key in coverage}
    entries_in_block: list[int] = []
    for conv in load_locomo(indices):
        directory = RESULTS_DIR / "recall_budget" / f"conv-{conv.index}"
        if directory.exists():
            import shutil

            shutil.rmtree(directory)
        written = await write_conversation(conv, directory, embedder)
        turns_of = written["turns_of"]
        async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
            service = memory.get_service(MEMORY_SERVICE)
            for question in conv.questions:
                gold = set(question.gold)
                block = await service.recall(
                    question.text, quotas={"entities": quota}, max_chars=BUDGET, min_score=-1.0
                )
                inside = {
                    turn
                    for entry in block["entries"]
                    if entry["mode"] in ("full", "summary")
                    for turn in turns_of.get(entry["id"], set())
                }
                coverage["recall block"].append(len(gold & inside) / len(gold))
                sizes["recall block"].append(len(block["rendered"]))
                entries_in_block.append(sum(1 for e in block["entries"] if e["mode"] != "uri"))
                for k in TOP_KS:
                    plain = await service.retrieve_memories(question.text, top_k=k, record_activation=False)
                    found = {turn for item in plain["results"] for turn in turns_of.get(item["id"], set())}
                    coverage[f"top-{k}"].append(len(gold & found) / len(gold))
                    full = await service.read_full_content(memory_ids=[item["id"] for item in plain["results"]])
                    sizes[f"top-{k}"].append(sum(len(item["content"]) for item in full["items"]))
    rows = [
        (name, f"{100 * mean(values):.1f}", f"{mean(sizes[name]):.0f}", f"{max(sizes[name])}")
        for name, values in coverage.items()
    ]
    print(
        f"LoCoMo conversations {list(indices)}, {len(coverage['recall block'])} questions, quota {quota}, "
        f"budget {BUDGET} chars; mean entries with text in the block: {mean(entries_in_block):.1f}"
    )
    print(markdown_table(("method", "gold evidence covered %", "mean chars", "max chars"), rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", default="0-2")
    parser.add_argument("--quota", type=int, default=60)
    args = parser.parse_args(argv)
    asyncio.run(evaluate(parse_range(args.conversations), args.quota))
    return 0


if __name__ == "__main__":
    sys.exit(main())

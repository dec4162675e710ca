"""Among many other memories, the answer written right after a strong hit is read back by its write position
(``MemorySearch._read_write_neighbours``) even when no route returned it, and is lifted by its question."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.memory_search import searchable_filter
from booku_memory.services.storage.record_reads import written_beside_sql

from .memory_support import MEMORY_SERVICE, open_store, write_turns

# Unrelated chat written first: with a candidate pool of 30 (three times top_k) of 51 memories, no route reaches
# the answer below.
OTHER_TURNS = [
    f"Guest {n}: the {word} in room {n} was {colour} and quiet."
    for n, (word, colour) in enumerate(
        [
            (w, c)
            for w in ("lamp", "chair", "desk", "rug", "clock", "shelf")
            for c in ("red", "blue", "green", "grey", "white", "black", "pink", "brown")
        ]
    )
]
CHAT = [
    "Caroline: What did you paint for the art fair this year?",
    "Melanie: A sunset over the lake behind our cabin.",
    "Caroline: My dog learned to fetch the newspaper.",
]
SMALL_POOL = {"retrieval": {"candidate_pool": 5}}


async def test_an_answer_no_route_found_is_lifted_by_its_question(tmp_path: Path) -> None:
    async with open_store(tmp_path, config=SMALL_POOL) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await write_turns(svc, OTHER_TURNS)
        question, answer, _ = await write_turns(svc, CHAT)
        result = await svc.retrieve_memories("What was painted for the art fair?", top_k=10)
    ranked = [item["id"] for item in result["results"]]
    parts = {item["id"]: item["score_parts"] for item in result["results"]}
    assert ranked[0] == answer and question in ranked[:5]  # the question only asks: it sinks below its answer
    assert parts[answer]["keyword"] == 0 and parts[answer]["vector"] == 0  # no route found it
    assert parts[answer]["neighbour"] > 0  # its question lifted it


async def test_the_neighbours_respect_the_retrieval_filter(tmp_path: Path) -> None:
    async with open_store(tmp_path, config=SMALL_POOL) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await write_turns(svc, OTHER_TURNS)
        question, answer, _ = await write_turns(svc, CHAT)
        await svc.delete_memories(memory_ids=[answer])
        result = await svc.retrieve_memories("What was painted for the art fair?", top_k=10)
    ranked = [item["id"] for item in result["results"]]
    assert question in ranked and answer not in ranked


async def test_written_beside_reads_the_partition_within_the_radius(tmp_path: Path) -> None:
    async with open_store(tmp_path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await write_turns(svc, [*CHAT, "Melanie: We drove home after the fair."])
        records = handle.runtime.records
        rows = await records.candidates(ids, with_tags=False)
        seed = rows[ids[1]]
        flt = searchable_filter(handle.runtime.default_scope, include_archived=False, include_knowledge=False)
        seeds = [(seed["store_key"], seed["bucket"], int(seed["rid"]))]
        assert sorted(await records.written_beside(seeds, 1, flt, exclude=[ids[1]])) == sorted([ids[0], ids[2]])
        assert set(await records.written_beside(seeds, 2, flt, exclude=[ids[1]])) == {ids[0], ids[2], ids[3]}
        assert await records.written_beside(seeds, 0, flt) == []
        assert await records.written_beside([("another-store", "memory", int(seed["rid"]))], 2, flt) == []


async def test_the_neighbours_are_read_by_rowid_ranges(tmp_path: Path) -> None:
    async with open_store(tmp_path) as handle:
        flt = searchable_filter(handle.runtime.default_scope, include_archived=False, include_knowledge=False)
        db_path = handle.runtime.db.path
    sql, params = written_beside_sql([("s", "memory", 10), ("s", "memory", 500)], 2, flt)
    with sqlite3.connect(db_path) as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute("EXPLAIN QUERY PLAN " + sql, params).fetchall())
    assert "INTEGER PRIMARY KEY" in plan and "INDEX idx_" not in plan


async def test_without_the_vector_route_only_the_memories_holding_the_words_return(tmp_path: Path) -> None:
    async with open_store(tmp_path, embedder=UnavailableEmbedder()) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        question, answer, _ = await write_turns(svc, CHAT)
        result = await svc.retrieve_memories("What was painted for the art fair?", top_k=10)
    assert "degraded" in result and [item["id"] for item in result["results"]] == [question]

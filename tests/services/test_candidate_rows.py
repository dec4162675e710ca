"""The in-memory candidate rows (``storage.mirrors.candidate_rows``) answer ``RecordRepository.candidates`` exactly as
its SQL read does, follow every change whoever makes it, and leave retrieval unchanged.

Each check compares the held rows with the SQL read of the same file (``keep_candidates`` switched off), and also
checks that the rows were held, not read in SQL: the SQL fallback for records not held would otherwise hide a copy
that lost them.
"""

import time

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import (
    DeterministicTestEmbedder,
    UnavailableEmbedder,
)
from booku_memory.services.logic.shape import question_share
from booku_memory.services.storage.mirrors import keyword_mirror
from booku_memory.services.storage.mirrors.candidate_rows import CandidateRows
from booku_memory.services.storage.record_columns import CANDIDATE_KEYS

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
TRIPLE = {"tags": ["湖"], "core_tags": ["lake"], "diffusion_tags": ["旅行"], "opposing_tags": ["沙漠"]}
TEXTS = [
    "周末去西湖边喝绿茶",
    "你周末想去西湖吗？",
    "Caroline went to the café near the lake",
    "Melanie painted a sunrise over the lake last summer",
    "Did Caroline paint the lake too?",
    "会议改到周三下午三点，地点在三号会议室",
    "Running every morning keeps Melanie calm",
    "她最喜欢的电影是千与千寻",
]


async def write_corpus(service) -> list[str]:
    ids = []
    for number, text in enumerate(TEXTS):
        ids.append((await service.upsert_memory(text, **(TRIPLE if number % 2 == 0 else {})))["id"])
    person = await service.create_memory(
        title="Caroline",
        content="Caroline: I love the lake at dawn",
        memory_type="person",
        person_id="qq:10001",
        tags=["朋友"],
        core_tags=["Caroline"],
        diffusion_tags=["湖"],
        opposing_tags=["沙漠"],
        relation_memory_ids=[ids[2]],
    )
    ids.append(person["id"])
    return ids


async def held_and_sql(records, ids: list[str], *, tags_for: list[str] | None = None):
    """The candidate rows of ``ids`` from the held copy and from SQL, and the live ids the copy did not hold."""
    loaded = records.memory_keywords._loaded
    held = await records.candidates(ids, with_tags=True, tags_only_for=tags_for)
    _, not_held = loaded.candidates.lookup(ids, None)
    records.memory_keywords.keep_candidates = False
    try:
        by_sql = await records.candidates(ids, with_tags=True, tags_only_for=tags_for)
    finally:
        records.memory_keywords.keep_candidates = True
    return held, by_sql, [memory_id for memory_id in not_held if memory_id in by_sql]


async def test_held_rows_equal_the_sql_read(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        ids = await write_corpus(service)
        records = memory.runtime.records
        assert await records.memory_keywords.wait_ready()
        held, by_sql, not_held = await held_and_sql(records, [*ids, "no-such-id", ids[0], ""])
        assert held == by_sql and list(held) == ids and not not_held
        row = held[ids[-1]]
        assert set(row) == {*CANDIDATE_KEYS, "tags", "core_tags", "diffusion_tags", "opposing_tags"}
        assert row["relation_memory_ids"] == [ids[2]] and row["core_tags"] == ["caroline"]
        assert held[ids[1]]["question_share"] == 1.0 and held[ids[0]]["question_share"] is None
        assert held[ids[1]]["tags"] == []  # written without tags
        # A caller changing a returned row changes nothing held.
        row["relation_memory_ids"].append("x")
        row["core_tags"].clear()
        again = await records.candidates([ids[-1]], with_tags=True)
        assert again[ids[-1]]["relation_memory_ids"] == [ids[2]] and again[ids[-1]]["core_tags"] == ["caroline"]
        # Tags only for the ids asked, as the SQL read does.
        held, by_sql, _ = await held_and_sql(records, ids, tags_for=ids[:2])
        assert held == by_sql and "tags" in held[ids[0]] and "tags" not in held[ids[2]]


async def test_held_rows_follow_every_change_by_another_runtime(tmp_path, lock_ignored) -> None:
    """Moves, type, person, time, relation, tag and text edits, archive, soft and hard delete, restore and new
    records, all written by a second runtime (as another process would): the first runtime's held rows follow them
    through the journal, with no reload. The folder, type, person, time and relation edits are journalled by the
    trigger of migration 0013 only; without it this test fails."""
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as first:
        ids = await write_corpus(first.get_service(booku_memory.MEMORY_SERVICE))
        records = first.runtime.records
        assert await records.memory_keywords.wait_ready()
        held, by_sql, not_held = await held_and_sql(records, ids)  # the copy holds the corpus from here on
        assert held == by_sql and not not_held
        with lock_ignored():  # a second runtime beside the owner, as a lock-ignoring process would be
            async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as second:
                other = second.get_service(booku_memory.MEMORY_SERVICE)
                await other.move_memories(memory_ids=[ids[0]], to_folder_id="travel")
                await other.update_memory_by_id(memory_id=ids[1], memory_type="preference")
                await other.update_memory_by_id(memory_id=ids[-1], person_id="qq:20002", relation_memory_ids=[ids[3]])
                start = time.time() - 86400
                await other.update_memory_by_id(
                    memory_id=ids[3], memory_type="event", event_start_at=start, event_end_at=start + 3600
                )
                await other.update_memory_by_id(
                    memory_id=ids[4], core_tags=["画"], diffusion_tags=["湖"], opposing_tags=["城市"]
                )
                await other.update_memory_by_id(memory_id=ids[5], content="会议取消了，下周再约？")
                await other.archive_memories(memory_ids=[ids[6]])
                await other.delete_memories(memory_ids=[ids[7]])
                await other.delete_memories(memory_ids=[ids[2]], hard=True)
                await other.delete_memories(memory_ids=[ids[0]])
                await other.restore_memories(memory_ids=[ids[0]])
                added = (await other.upsert_memory("新写入的一条：明天去爬山？", **TRIPLE))["id"]
        every = [*ids, added]
        held, by_sql, not_held = await held_and_sql(records, every)
        assert held == by_sql and not not_held
        assert ids[7] not in held and ids[2] not in held  # soft and hard deleted
        assert held[ids[0]]["folder_id"] == "travel" and held[ids[1]]["memory_type"] == "preference"
        assert held[ids[-1]]["person_id"] == "qq:20002" and held[ids[-1]]["relation_memory_ids"] == [ids[3]]
        assert held[ids[3]]["event_start_at"] == pytest.approx(start)
        assert held[ids[4]]["core_tags"] == ["画"] and held[ids[5]]["question_share"] == question_share(
            "会议取消了，下周再约？"
        )
        assert held[ids[6]]["status"] == "archived" and held[added]["core_tags"] == ["lake"]
        assert records.memory_keywords.loads == 1  # the journal, not a reload


async def test_a_record_not_held_is_read_in_sql(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        ids = await write_corpus(memory.get_service(booku_memory.MEMORY_SERVICE))
        records = memory.runtime.records
        assert await records.memory_keywords.wait_ready()
        rows: CandidateRows = records.memory_keywords._loaded.candidates
        await records.candidates(ids, with_tags=False)  # the copy holds the corpus from here on
        rows.set(ids[3], None)
        held, by_sql, not_held = await held_and_sql(records, ids)
        assert held == by_sql and not_held == [ids[3]]


async def test_a_second_read_as_of_the_last_one_takes_held_rows_without_a_hop_and_reads_the_rest(
    tmp_path, monkeypatch
) -> None:
    """EPA pass 2's read (``as_of_last_read``): the rows held as the last read left them, looked up without a hop
    to the reader and without following the journal; the ids not held are read as usual (journal, then SQL)."""
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        ids = await write_corpus(service)
        records = memory.runtime.records
        assert await records.memory_keywords.wait_ready()
        first = await records.candidates(ids, with_tags=True)  # follows the journal: the copy holds the corpus
        rows: CandidateRows = records.memory_keywords._loaded.candidates
        rows.set(ids[3], None)  # as if not held
        hops = []
        original = keyword_mirror.MemoryKeywordIndex.candidates

        async def counted(self, *args, **kwargs):
            hops.append(list(args[0]))
            return await original(self, *args, **kwargs)

        monkeypatch.setattr(keyword_mirror.MemoryKeywordIndex, "candidates", counted)
        second = await records.candidates([*ids, "no-such-id"], with_tags=True, as_of_last_read=True)
        assert hops == [[ids[3], "no-such-id"]]  # only the ids not held took the hop
        assert second == first
        hops.clear()
        held_only = [memory_id for memory_id in ids if memory_id != ids[3]]
        assert await records.candidates(held_only, with_tags=True, as_of_last_read=True) == {
            memory_id: first[memory_id] for memory_id in held_only
        }
        assert hops == []


@pytest.mark.parametrize("tagged", [False, True])
async def test_retrieval_is_the_same_with_and_without_held_rows(tmp_path, tagged: bool) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        await write_corpus(service)
        records = memory.runtime.records
        assert await records.memory_keywords.wait_ready()
        tags = {"core_tags": ["lake"], "diffusion_tags": ["湖"]} if tagged else {}
        for query in ("西湖 绿茶", "Caroline lake", "Melanie painted", "周三的会议", "千与千寻"):
            held = await service.retrieve_memories(query, top_k=5, record_activation=False, **tags)
            records.memory_keywords.keep_candidates = False
            by_sql = await service.retrieve_memories(query, top_k=5, record_activation=False, **tags)
            records.memory_keywords.keep_candidates = True
            assert held["results"], query
            assert [(item["id"], item["score"]) for item in held["results"]] == [
                (item["id"], item["score"]) for item in by_sql["results"]
            ], query


async def test_more_changes_than_the_journal_applies_read_sql_then_reload(tmp_path, monkeypatch, lock_ignored) -> None:
    """A burst of changes beyond ``SYNC_LIMIT`` (a bulk import by another process) is not applied row by row: the
    read that finds it answers from SQL, the copy is dropped and reloaded, and then holds the new state."""
    monkeypatch.setattr(keyword_mirror, "SYNC_LIMIT", 3)
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as first:
        ids = await write_corpus(first.get_service(booku_memory.MEMORY_SERVICE))
        records = first.runtime.records
        assert await records.memory_keywords.wait_ready()
        await records.candidates(ids, with_tags=False)  # the corpus's journal is past the limit: reloaded too
        assert await records.memory_keywords.wait_ready()
        loads, old_copy = records.memory_keywords.loads, records.memory_keywords._loaded
        with lock_ignored():  # a second runtime beside the owner, as a lock-ignoring process would be
            async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as second:
                await second.get_service(booku_memory.MEMORY_SERVICE).move_memories(memory_ids=ids, to_folder_id="旅行")
        held = await records.candidates(ids, with_tags=True)
        assert {row["folder_id"] for row in held.values()} == {"旅行"}  # answered by SQL
        # Dropped and reloaded (the reload of a store this small may already be done here, so wait for it).
        assert await records.memory_keywords.wait_ready() and records.memory_keywords.loads == loads + 1
        assert records.memory_keywords._loaded is not old_copy
        held, by_sql, not_held = await held_and_sql(records, ids)
        assert held == by_sql and not not_held and {row["folder_id"] for row in held.values()} == {"旅行"}

"""Keyword-index rows of a group commit are written after its writes' savepoints, once per record.

Whatever a batch does (create, merge into an existing record, create and merge within the batch, fail), every live
record ends with exactly one keyword row, segmented from its stored text, and a failed write leaves none.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.logic.segmentation import segment_for_index
from booku_memory.services.logic.text import keyword_title
from booku_memory.services.storage import keyword_rows

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


@pytest.fixture
async def runtime(tmp_path) -> AsyncIterator[Any]:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        yield handle.runtime


async def keyword_rows_match_records(runtime) -> dict[str, tuple[str, str]]:
    """Each record's keyword row (title, content), after checking it is the one its stored text gives."""
    records = await runtime.db.fetch_all("SELECT rid, memory_id, title, content FROM booku_memory_records")
    rows = {
        row["rowid"]: row for row in await runtime.db.fetch_all("SELECT rowid, title, content FROM booku_memory_fts")
    }
    assert sorted(rows) == sorted(record["rid"] for record in records)
    found = {}
    for record in records:
        row = rows[record["rid"]]
        assert (row["title"], row["content"]) == (
            segment_for_index(keyword_title(record["title"], record["content"])),
            segment_for_index(record["content"]),
        )
        found[record["memory_id"]] = (row["title"], row["content"])
    return found


async def test_a_mixed_batch_leaves_one_keyword_row_per_record(runtime, monkeypatch):
    service = runtime.memory_service()
    existing = await service.upsert_memory("每天早上七点起床跑步五公里")

    def failing_segmentation(text: str) -> str:
        if "BOOM" in text:
            raise RuntimeError("分词失败（测试注入）")
        return segment_for_index(text)

    monkeypatch.setattr(keyword_rows, "segment_for_index", failing_segmentation)
    texts = [
        "每天早上七点起床跑步五公里",  # merges into the record written before the batch
        "下个月要去杭州看西湖",  # created, then merged into by the last write of the batch
        "BOOM 这条写入会失败",
        "晚饭做了番茄炒蛋",
        "下个月要去杭州看西湖",
    ]
    results = await asyncio.gather(*(service.upsert_memory(text) for text in texts), return_exceptions=True)
    assert [r["mode"] if isinstance(r, dict) else type(r).__name__ for r in results] == [
        "merged",
        "created",
        "RuntimeError",
        "created",
        "merged",
    ]
    assert results[0]["id"] == existing["id"] and results[4]["id"] == results[1]["id"]

    rows = await keyword_rows_match_records(runtime)
    assert set(rows) == {existing["id"], results[1]["id"], results[3]["id"]}
    matched = await runtime.db.fetch_all(
        "SELECT r.memory_id FROM booku_memory_fts f JOIN booku_memory_records r ON r.rid = f.rowid "
        "WHERE booku_memory_fts MATCH ?",
        ['content : "西湖"'],
    )
    assert [row["memory_id"] for row in matched] == [results[1]["id"]]


async def test_a_failing_batch_transaction_leaves_no_keyword_rows(runtime, monkeypatch):
    service = runtime.memory_service()

    def failing_keyword_rows(rows):
        raise RuntimeError("关键词索引写入失败（测试注入）")
        yield  # a plan is a generator

    monkeypatch.setattr("booku_memory.services.memory_writes.deferred_keyword_rows_plan", failing_keyword_rows)
    results = await asyncio.gather(
        *(service.upsert_memory(text) for text in ("买了一本新书", "明天下雨要带伞")), return_exceptions=True
    )
    assert [type(r).__name__ for r in results] == ["RuntimeError", "RuntimeError"]
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records") == 0
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_fts") == 0
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_vector_outbox") == 0


async def test_a_given_title_is_indexed_and_a_guessed_one_is_not(runtime):
    service = runtime.memory_service()
    guessed = await service.upsert_memory("周末去爬了香山\n山顶的红叶很好看")
    given = await service.upsert_memory("每周二晚上练习书法", title="书法课安排")
    rows = await keyword_rows_match_records(runtime)
    assert rows[guessed["id"]][0] == ""  # the first line is already in the content column, once
    assert rows[given["id"]][0] == segment_for_index("书法课安排")
    stored = await service.get_memory_detail(memory_id=guessed["id"])
    assert stored["item"]["title"] == "周末去爬了香山"  # the record keeps its guessed title; only the index skips it


async def test_migration_0010_rebuilds_keyword_rows_without_guessed_titles(tmp_path):
    data = tmp_path / "old"
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as handle:
        runtime = handle.runtime
        created = await runtime.memory_service().upsert_memory("周末去爬了香山\n山顶的红叶很好看")
        # The row as a store written before 0010 held it: the guessed title indexed in the title column.
        rid = await runtime.db.fetch_value("SELECT rid FROM booku_memory_records WHERE memory_id = ?", [created["id"]])
        async with runtime.db.transaction() as conn:
            await conn.execute(
                "UPDATE booku_memory_fts SET title = ? WHERE rowid = ?", [segment_for_index("周末去爬了香山"), rid]
            )
            await conn.execute("ALTER TABLE booku_memory_records DROP COLUMN time_zone")  # added by 0015
            await conn.execute("PRAGMA user_version = 9")
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as handle:
        runtime = handle.runtime
        assert await runtime.db.schema_version() >= 10
        rows = await keyword_rows_match_records(runtime)
        assert rows[created["id"]][0] == ""
        assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_meta WHERE key = 'keyword_index_rebuild'") == 0

"""What a group commit (concurrent upserts written in one transaction) must never change for a user.

A failing write fails alone and leaves nothing behind, and the other writes of its batch end exactly as they would
have without it, including a merge into a record created earlier in the same batch; writes that share a batch end
with the same modes and novelty as the same writes one at a time, with identical keyword-index rows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.logic.segmentation import segment_for_index
from booku_memory.services.storage import keyword_rows

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


@pytest.fixture
async def runtime(tmp_path) -> AsyncIterator[Any]:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        yield handle.runtime


def fail_on_boom(monkeypatch) -> None:
    def failing_segmentation(text: str) -> str:
        if "BOOM" in text:
            raise RuntimeError("分词失败（测试注入）")
        return segment_for_index(text)

    monkeypatch.setattr(keyword_rows, "segment_for_index", failing_segmentation)


async def test_a_failing_write_does_not_stop_a_later_write_merging_into_an_earlier_one(runtime, monkeypatch):
    fail_on_boom(monkeypatch)
    service = runtime.memory_service()
    texts = ["今天去公园散步看到了很多樱花", "BOOM 这条写入会失败", "今天去公园散步看到了很多樱花"]
    results = await asyncio.gather(*(service.upsert_memory(text) for text in texts), return_exceptions=True)
    assert [r["mode"] if isinstance(r, dict) else type(r).__name__ for r in results] == [
        "created",
        "RuntimeError",
        "merged",
    ]
    assert results[2]["id"] == results[0]["id"]
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records") == 1
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_fts") == 1
    versions = [
        row[0] for row in await runtime.db.fetch_all("SELECT version FROM booku_memory_revisions ORDER BY version")
    ]
    assert versions == [1, 2]  # the create and the merge, nothing of the failed write


async def test_a_batch_without_failures_matches_the_same_writes_one_at_a_time(runtime, tmp_path):
    texts = ["周末和朋友一起吃火锅很开心", "周末和朋友一起吃火锅很开心", "下周三要去上海出差", "下周三要去上海出差"]
    service = runtime.memory_service()
    together = await asyncio.gather(*(service.upsert_memory(text) for text in texts))
    async with booku_memory.open(tmp_path / "alone", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        alone_service = handle.runtime.memory_service()
        alone = [await alone_service.upsert_memory(text) for text in texts]
    assert [(r["mode"], r["novelty_energy"]) for r in together] == [(r["mode"], r["novelty_energy"]) for r in alone]
    keyword_rows = await runtime.db.fetch_all("SELECT title, content FROM booku_memory_fts ORDER BY rowid")
    assert [tuple(row) for row in keyword_rows] == [
        ("", segment_for_index(text)) for text in ("周末和朋友一起吃火锅很开心", "下周三要去上海出差")
    ]  # guessed titles

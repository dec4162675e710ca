"""The record write path (``RecordRepository.insert`` / ``update``) written as one-hop statement plans.

What must hold whichever way a plan runs (one hop to aiosqlite's worker thread, or one public call per statement):
the record returned is exactly what a fresh read gives, and the row, its tags, its keyword row, its revision, its
audit row and its outbox entry are written together, or, when a statement fails inside a savepoint, not at all.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.logic.segmentation import segment_for_index
from booku_memory.services.scope import WriteContext
from booku_memory.services.storage import keyword_rows, write_plans
from booku_memory.services.storage.keyword_rows import store_token
from booku_memory.services.storage.record_rows import snapshot_of

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
EDITOR = WriteContext(authority="human", actor="editor", cause="整理", batch_id="batch-7")


@pytest.fixture(params=["one_hop", "per_statement"])
async def runtime(request, tmp_path, monkeypatch) -> AsyncIterator[Any]:
    if request.param == "per_statement":
        # The fallback for an aiosqlite without ``_execute``: every statement through the public API.
        monkeypatch.setattr(write_plans, "_one_hop_runner", lambda conn: None)
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        yield handle.runtime


def full_record(memory_id: str = "mem-insert-path") -> dict[str, Any]:
    """A record with every writable column and every tag group set (tags with blanks and duplicates)."""
    return {
        "memory_id": memory_id,
        "owner_uid": "u-1",
        "store_key": "user:u-1",
        "title": "上海出差计划",
        "name": "出差",
        "folder_id": "travel",
        "bucket": "memory",
        "content": "王五下周三要去上海出差，住在静安。",
        "source": "chat",
        "memory_type": "event",
        "status": "archived",
        "person_id": "person-wang",
        "relation_memory_ids": ["mem-a", " mem-b ", ""],
        "relation_aliases": ["老王"],
        "event_start_at": 1.5,
        "event_end_at": 2.5,
        "related_people": ["王五", "赵六"],
        "knowledge_type": "plan",
        "address_or_coord": "静安区",
        "place_type": "hotel",
        "asset_type": "ticket",
        "disposition_status": "kept",
        "procedure_type": "booking",
        "novelty_energy": 0.4,
        "importance": 8,
        "valence": 0.2,
        "arousal": 0.9,
        "domains": ["work", "travel"],
        "pinned": True,
        "protected": True,
        "anchor": True,
        "digested": True,
        "resolved": True,
        "why_remembered": "要提前订票",
        "extra": {"ticket": [1, 2], "note": "靠窗"},
        "document_id": "doc-1",
        "chunk_index": 3,
        "is_deleted": True,
        "deleted_at": 9.0,
        "created_at": 100.0,
        "updated_at": 101.0,
        "last_activated_at": 5.0,
        "activation_count": 4,
        "author": "someone",
        "tags": [" 出差 ", "出差", "", "上海"],
        "core_tags": ["王五"],
        "diffusion_tags": ["高铁", "静安"],
        "opposing_tags": ["取消"],
    }


async def satellites(conn, memory_id: str, rid: int) -> dict[str, list[dict[str, Any]]]:
    """Every row the write path keeps about one record, read through the open transaction."""
    queries = {
        "tags": (
            "SELECT tag_type, tag_value, position FROM booku_memory_tags WHERE memory_id = ? "
            "ORDER BY tag_type, position",
            memory_id,
        ),
        "keyword": ("SELECT title, content, tags, store FROM booku_memory_fts WHERE rowid = ?", rid),
        "revisions": (
            "SELECT version, action, snapshot, actor, note, authority FROM booku_memory_revisions "
            "WHERE memory_id = ? ORDER BY version",
            memory_id,
        ),
        "audit": (
            "SELECT authority, actor, cause, batch_id, action, store_key, version, before, after "
            "FROM booku_audit_log WHERE memory_id = ? ORDER BY audit_id",
            memory_id,
        ),
        "outbox": ("SELECT store_key, op FROM booku_vector_outbox WHERE memory_id = ? ORDER BY outbox_id", memory_id),
    }
    found = {}
    for name, (sql, key) in queries.items():
        async with conn.execute(sql, [key]) as cur:
            found[name] = [dict(row) for row in await cur.fetchall()]
    return found


def expected_keyword_row(record: dict[str, Any]) -> dict[str, str]:
    tags = " ".join(record["tags"] + record["core_tags"] + record["diffusion_tags"])
    return {
        "title": segment_for_index(record["title"]),
        "content": segment_for_index(record["content"]),
        "tags": segment_for_index(tags),
        "store": store_token(record["store_key"]),
    }


async def test_insert_returns_exactly_what_a_fresh_read_gives(runtime):
    records = runtime.records
    async with runtime.db.transaction() as conn:
        stored = await records.insert(conn, full_record(), action="create", actor=EDITOR, note="导入")
        in_transaction = await records.get(stored["memory_id"], include_deleted=True, conn=conn)
    assert stored == in_transaction
    assert stored == await records.get(stored["memory_id"], include_deleted=True)
    # Defaults and managed columns come from the row SQLite wrote.
    assert stored["version"] == 1 and stored["embedded_text_hash"] == "" and stored["rid"] > 0
    assert stored["authority"] == "human" and stored["author"] == "someone"
    assert stored["tags"] == ["出差", "上海"]
    assert stored["relation_memory_ids"] == ["mem-a", "mem-b"]
    assert stored["extra"] == {"ticket": [1, 2], "note": "靠窗"}


async def test_insert_writes_tags_keyword_row_revision_audit_and_outbox(runtime):
    async with runtime.db.transaction() as conn:
        stored = await runtime.records.insert(conn, full_record(), action="create", actor=EDITOR, note="导入")
        rows = await satellites(conn, stored["memory_id"], stored["rid"])
    assert rows["tags"] == [
        {"tag_type": "core", "tag_value": "王五", "position": 1},
        {"tag_type": "diffusion", "tag_value": "高铁", "position": 1},
        {"tag_type": "diffusion", "tag_value": "静安", "position": 2},
        {"tag_type": "opposing", "tag_value": "取消", "position": 1},
        {"tag_type": "tag", "tag_value": "出差", "position": 1},
        {"tag_type": "tag", "tag_value": "上海", "position": 2},
    ]
    assert rows["keyword"] == [expected_keyword_row(stored)]
    [revision] = rows["revisions"]
    assert json.loads(revision.pop("snapshot")) == snapshot_of(stored)
    assert revision == {"version": 1, "action": "create", "actor": "editor", "note": "导入", "authority": "human"}
    [audit] = rows["audit"]
    assert json.loads(audit.pop("after")) == snapshot_of(stored)
    assert audit == {
        "authority": "human",
        "actor": "editor",
        "cause": "整理",
        "batch_id": "batch-7",
        "action": "create",
        "store_key": "user:u-1",
        "version": 1,
        "before": None,
    }
    assert rows["outbox"] == [{"store_key": "user:u-1", "op": "upsert"}]


async def test_update_returns_exactly_what_a_fresh_read_gives_and_moves_every_satellite(runtime):
    records = runtime.records
    async with runtime.db.transaction() as conn:
        before = await records.insert(conn, full_record(), actor=EDITOR)
        after = await records.update(
            conn,
            before["memory_id"],
            {"title": "杭州出差计划", "store_key": "user:u-2", "core_tags": [" 赵六 ", "赵六"], "extra": {"k": 1}},
            action="update",
            actor="agent",
            note="改签",
        )
        fresh = await records.get(before["memory_id"], include_deleted=True, conn=conn)
        rows = await satellites(conn, before["memory_id"], before["rid"])
    assert after == fresh
    assert after["version"] == 2 and after["core_tags"] == ["赵六"] and after["tags"] == ["出差", "上海"]
    assert rows["keyword"] == [expected_keyword_row(after)]
    assert [json.loads(r["snapshot"]) for r in rows["revisions"]] == [snapshot_of(before), snapshot_of(after)]
    assert json.loads(rows["audit"][1]["before"]) == snapshot_of(before)
    assert json.loads(rows["audit"][1]["after"]) == snapshot_of(after)
    # The vector leaves the old store's partition and enters the new one.
    assert rows["outbox"][1:] == [{"store_key": "user:u-1", "op": "upsert"}, {"store_key": "user:u-2", "op": "upsert"}]


async def test_update_without_tag_changes_keeps_tags_and_queues_no_vector_work(runtime):
    records = runtime.records
    async with runtime.db.transaction() as conn:
        before = await records.insert(conn, full_record(), actor=EDITOR)
        after = await records.update(conn, before["memory_id"], {"importance": 2}, action="update", touch=False)
        fresh = await records.get(before["memory_id"], include_deleted=True, conn=conn)
        rows = await satellites(conn, before["memory_id"], before["rid"])
        missing = await records.update(conn, "mem-missing", {"importance": 1}, action="update")
    assert missing is None
    assert after == fresh
    assert after["updated_at"] == before["updated_at"] and after["importance"] == 2
    assert {g: after[g] for g in ("tags", "core_tags", "diffusion_tags", "opposing_tags")} == {
        g: before[g] for g in ("tags", "core_tags", "diffusion_tags", "opposing_tags")
    }
    assert rows["keyword"] == [expected_keyword_row(before)]
    assert len(rows["outbox"]) == 1  # the insert's only


async def test_update_failing_inside_a_savepoint_leaves_no_residue(runtime):
    records = runtime.records
    async with runtime.db.transaction() as conn:
        stored = await records.insert(conn, full_record(), actor=EDITOR)
        # A revision row already holding version 2 makes the update fail after its row, tags and keyword row.
        await conn.execute(
            "INSERT INTO booku_memory_revisions (memory_id, version, action, snapshot, created_at) "
            "VALUES (?, 2, 'squatter', '{}', 0)",
            [stored["memory_id"]],
        )
        untouched = await satellites(conn, stored["memory_id"], stored["rid"])
        await conn.execute("SAVEPOINT failing_update")
        with pytest.raises(Exception, match="UNIQUE"):
            await records.update(
                conn, stored["memory_id"], {"content": "改成去杭州", "tags": ["杭州"]}, action="update"
            )
        await conn.execute("ROLLBACK TO failing_update")
        await conn.execute("RELEASE failing_update")
        assert await satellites(conn, stored["memory_id"], stored["rid"]) == untouched
        assert await records.get(stored["memory_id"], include_deleted=True, conn=conn) == stored


async def test_insert_failing_inside_a_savepoint_leaves_no_residue(runtime):
    records = runtime.records
    async with runtime.db.transaction() as conn:
        await conn.execute(
            "INSERT INTO booku_memory_revisions (memory_id, version, action, snapshot, created_at) "
            "VALUES ('mem-squatted', 1, 'squatter', '{}', 0)"
        )
        await conn.execute("SAVEPOINT failing_insert")
        with pytest.raises(Exception, match="UNIQUE"):
            await records.insert(conn, full_record("mem-squatted"))
        await conn.execute("ROLLBACK TO failing_insert")
        await conn.execute("RELEASE failing_insert")
        assert await records.get("mem-squatted", include_deleted=True, conn=conn) is None
        async with conn.execute("SELECT COUNT(*) FROM booku_memory_fts") as cur:
            assert (await cur.fetchone())[0] == 0
        rows = await satellites(conn, "mem-squatted", 0)
    assert rows["tags"] == [] and rows["audit"] == [] and rows["outbox"] == []
    assert [r["action"] for r in rows["revisions"]] == ["squatter"]


async def test_hard_delete_and_import_round_trip_through_plans(runtime):
    records = runtime.records
    async with runtime.db.transaction() as conn:
        stored = await records.insert(conn, full_record(), actor=EDITOR)
        history = await satellites(conn, stored["memory_id"], stored["rid"])
        assert await records.hard_delete(conn, [stored["memory_id"]], actor=EDITOR) == 1
        gone = await satellites(conn, stored["memory_id"], stored["rid"])
        assert gone["tags"] == [] and gone["keyword"] == []
        assert gone["audit"][-1]["action"] == "hard_delete" and gone["audit"][-1]["after"] is None
        assert gone["outbox"][-1] == {"store_key": "user:u-1", "op": "delete"}
        revisions = [{**r, "snapshot": json.loads(r["snapshot"]), "created_at": 1.0} for r in history["revisions"]]
        assert await records.import_record(conn, stored, revisions) is True
        assert await records.import_record(conn, stored, revisions) is False
        imported = await records.get(stored["memory_id"], include_deleted=True, conn=conn)
        rows = await satellites(conn, stored["memory_id"], imported["rid"])
    assert {k: v for k, v in imported.items() if k != "rid"} == {k: v for k, v in stored.items() if k != "rid"}
    assert rows["keyword"] == [expected_keyword_row(imported)]
    assert rows["outbox"][-1] == {"store_key": "user:u-1", "op": "upsert"}


async def test_a_write_failing_inside_a_group_commit_fails_alone_and_leaves_no_rows(runtime, monkeypatch):
    """Three concurrent upserts share one batch transaction; the middle one fails after its row was written."""

    def failing_segmentation(text: str) -> str:
        if "BOOM" in text:
            raise RuntimeError("分词失败（测试注入）")
        return segment_for_index(text)

    monkeypatch.setattr(keyword_rows, "segment_for_index", failing_segmentation)
    service = runtime.memory_service()
    texts = ["今天去公园散步看到了很多樱花", "BOOM 这条写入会失败", "周末和朋友一起吃火锅很开心"]
    results = await asyncio.gather(*(service.upsert_memory(text) for text in texts), return_exceptions=True)
    assert [r["mode"] if isinstance(r, dict) else type(r).__name__ for r in results] == [
        "created",
        "RuntimeError",
        "created",
    ]
    written = {results[0]["id"], results[2]["id"]}
    for table in ("booku_memory_records", "booku_memory_revisions", "booku_audit_log"):
        ids = {row[0] for row in await runtime.db.fetch_all(f"SELECT DISTINCT memory_id FROM {table}")}
        assert ids == written, table
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_fts") == 2
    assert await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records WHERE content LIKE '%BOOM%'") == 0
    outbox_ids = {row[0] for row in await runtime.db.fetch_all("SELECT memory_id FROM booku_vector_outbox")}
    assert outbox_ids <= written

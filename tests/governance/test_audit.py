"""Audit completeness, write authority rules and batch restore."""

import sqlite3

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ValidationError
from booku_memory.services.scope import Scope, WriteContext

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


@pytest.fixture
async def memory(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        yield handle


async def audit_count(memory) -> int:
    return await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_audit_log", (), 0)


TRIPLE = dict(core_tags=["a"], diffusion_tags=["b"], opposing_tags=["c"])


async def test_every_mutating_method_leaves_one_audit_row_per_changed_record(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    steps = []

    async def step(name, call, changed):
        before = await audit_count(memory)
        result = await call
        steps.append((name, await audit_count(memory) - before, changed))
        return result

    one = await step("create", service.create_memory(title="甲", content="第一条记忆，关于北京", **TRIPLE), 1)
    two = await step("upsert", service.upsert_memory("第二条记忆，关于上海的天气", title="乙"), 1)
    await step("merge", service.upsert_memory("第二条记忆，关于上海的天气", title="乙"), 1)
    ids = [one["id"], two["id"]]
    await step("update", service.update_memory_by_id(memory_id=one["id"], content="第一条记忆，关于北京和天津"), 1)
    await step("update-noop", service.update_memory_by_id(memory_id=one["id"], content="第一条记忆，关于北京和天津"), 0)
    await step("move", service.move_memories(memory_ids=ids, to_folder_id="城市"), 2)
    await step("archive", service.archive_memories(ids), 2)
    await step("delete", service.delete_memories(memory_ids=ids), 2)
    await step("restore", service.restore_memories(memory_ids=ids), 2)
    await step("revert", service.revert_memory(memory_id=one["id"], version=1), 1)
    await step("hard-delete", service.delete_memories(memory_ids=[two["id"]], hard=True), 1)
    await step("activation", service.update_activated(one["id"]), 0)
    for name, rows, changed in steps:
        assert rows == changed, f"{name}: {rows} audit rows for {changed} changed records"


async def test_audit_rows_carry_who_when_and_before_after(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    created = await service.upsert_memory("原始内容", title="标题")
    await service.update_memory_by_id(memory_id=created["id"], content="修改后的内容")
    log = await service.list_audit_log(memory_id=created["id"])
    update, create = log["items"]
    assert create["action"] == "create" and create["before"] is None and create["after"]["content"] == "原始内容"
    assert update["before"]["content"] == "原始内容" and update["after"]["content"] == "修改后的内容"
    assert update["authority"] == "agent" and update["at"] >= create["at"]


async def test_audit_log_is_append_only_even_for_raw_sql(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    await service.upsert_memory("任何内容", title="t")
    for statement in ("UPDATE booku_audit_log SET actor = 'x'", "DELETE FROM booku_audit_log"):
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            await memory.runtime.db.writer.execute(statement)
    assert not hasattr(service, "delete_audit_log")


async def test_mechanical_writes_cannot_author_content_and_need_a_cause(memory):
    with pytest.raises(ValueError, match="cause"):
        WriteContext(authority="mechanical", actor="cron")
    mechanical = memory.runtime.memory_service(Scope(authority="mechanical", actor="cron", cause="nightly"))
    with pytest.raises(ValidationError, match="mechanical"):
        await mechanical.upsert_memory("机器不能写内容")
    human = memory.get_service(booku_memory.MEMORY_SERVICE)
    created = await human.upsert_memory("人写的内容", title="人")
    with pytest.raises(ValidationError, match="mechanical"):
        await mechanical.update_memory_by_id(memory_id=created["id"], content="机器改写")
    changed = await mechanical.update_memory_by_id(memory_id=created["id"], status="archived")
    assert changed["updated"] == 1
    row = (await human.list_audit_log(memory_id=created["id"], limit=1))["items"][0]
    assert row["authority"] == "mechanical" and row["cause"] == "nightly"


async def test_lifecycle_runs_with_mechanical_authority(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    created = await service.upsert_memory("很久以前的记忆", title="旧")
    async with memory.runtime.db.transaction() as conn:
        await conn.execute("UPDATE booku_memory_records SET created_at = 0 WHERE memory_id = ?", [created["id"]])
    result = await service.promote_stale_emergent()
    assert result["discarded"] == 1
    row = (await service.list_audit_log(memory_id=created["id"], limit=1))["items"][0]
    assert (row["authority"], row["action"], row["cause"]) == ("mechanical", "expire", "emergent_window_closed")


async def test_unknown_authority_is_refused():
    with pytest.raises(ValueError, match="authority"):
        Scope(authority="root")


async def test_dreaming_writes_stay_labelled_and_a_batch_can_be_undone(memory):
    human = memory.runtime.memory_service(Scope(authority="human", actor="admin"))
    kept = await human.upsert_memory("人工确认过的事实：用户住在杭州", title="住址")
    dreaming = memory.runtime.memory_service(Scope(authority="dreaming", actor="dreamer", batch_id="dream-7"))
    proposed = await dreaming.upsert_memory("梦境推测：用户可能喜欢爬山", title="爬山")
    await dreaming.update_memory_by_id(memory_id=kept["id"], content="人工确认过的事实：用户住在杭州西湖区")
    detail = await human.get_memory_detail(memory_id=proposed["id"])
    assert detail["item"]["metadata"]["authority"] == "dreaming"
    undone = await human.restore_batch(batch_id="dream-7")
    assert undone["changes"] == 2 and set(undone["restored"]) == {proposed["id"], kept["id"]}
    assert (await human.get_memory_detail(memory_id=proposed["id"]))["item"]["metadata"]["is_deleted"] is True
    back = await human.read_full_content(memory_ids=[kept["id"]])
    assert back["items"][0]["content"] == "人工确认过的事实：用户住在杭州"
    undo_rows = (await human.list_audit_log(action="undo"))["items"]
    assert undo_rows and all(r["authority"] == "human" and r["cause"] == "batch:dream-7" for r in undo_rows)


async def test_single_audit_entry_restore(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    created = await service.upsert_memory("第一版", title="版本")
    await service.update_memory_by_id(memory_id=created["id"], content="第二版")
    update_row = (await service.list_audit_log(memory_id=created["id"], action="update"))["items"][0]
    await service.restore_from_audit(audit_id=update_row["audit_id"])
    assert (await service.read_full_content(memory_ids=[created["id"]]))["items"][0]["content"] == "第一版"


async def test_restoring_a_hard_delete_from_the_audit_log_brings_the_record_back(memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    created = await service.upsert_memory("会被永久删除的内容", title="永久")
    await service.delete_memories(memory_ids=[created["id"]], hard=True)
    row = (await service.list_audit_log(memory_id=created["id"], action="hard_delete"))["items"][0]
    assert row["after"] is None and row["before"]["content"] == "会被永久删除的内容"
    await service.restore_from_audit(audit_id=row["audit_id"])
    back = await service.read_full_content(memory_ids=[created["id"]])
    assert back["items"][0]["content"] == "会被永久删除的内容"
    versions = [v["version"] for v in (await service.get_memory_history(memory_id=created["id"]))["versions"]]
    assert versions == sorted(set(versions))

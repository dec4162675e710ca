"""The companion tools keep memory current as ``upsert_memory`` does (issue 28, item 6): a held or grown fact that
updates an older one marks it superseded (its text kept, audited, revertible), a grown restatement merges, a fact
that only adds supersedes nothing, an unsure pair goes to the review queue, and every reply says so in the words
``memory_command create`` uses.

The real local model embeds: whether two texts are near enough to compare is a question of meaning.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import booku_memory
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.embedding.local import LocalE5Embedder
from booku_memory.services.evidence.unsure_pairs import UnsurePairs
from booku_memory.tools import run_memory_command

from .conftest import QUIET_CONFIG

OLD_HOME = "我住在北京朝阳区，离公司不远。"
NEW_HOME = "上个月我搬到上海浦东了，新家在世纪公园旁边。"
BACKGROUND = ["我喜欢周末去钓鱼。", "我老婆叫刘静，我们结婚七年了。", "I keep a journal and write in it most evenings."]


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
async def memory(tmp_path: Path, e5: LocalE5Embedder) -> AsyncIterator[Any]:
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=e5) as handle:
        yield handle


@pytest.fixture
def companion(memory: Any) -> BookuCompanionService:
    return BookuCompanionService(memory.runtime)


async def settle(runtime: Any) -> None:
    """Wait for the unsure pairs' jobs, which run after the write returned."""
    while pending := [task for task in runtime._background if task.get_name().startswith("booku-unsure-")]:
        await asyncio.gather(*pending, return_exceptions=True)


async def test_a_held_move_supersedes_the_old_home_and_says_so(companion, memory) -> None:
    for text in BACKGROUND:
        await companion.hold(text)
    old = await companion.hold(OLD_HOME)
    new = await companion.hold(NEW_HOME)
    svc = memory.runtime.memory_service()
    old_item = (await svc.get_memory_detail(memory_id=old["id"]))["item"]
    assert new["mode"] == "created" and new["superseded"] == [{"id": old["id"], "title": OLD_HOME}]
    assert f"并把旧记录 {old['id']}《{OLD_HOME}》标记为过时" in new["text"]
    assert old_item["content"] == OLD_HOME and old_item["metadata"]["superseded_by"] == new["id"]
    history = await svc.get_memory_history(memory_id=old["id"])
    assert [v["action"] for v in history["versions"]] == ["hold", "supersede"]
    assert "supersede" in [e["action"] for e in (await svc.list_audit_log(memory_id=old["id"]))["items"]]
    # breath_search still finds the old home, marked as outdated; 撤销取代 makes it current again.
    found = await companion.breath_search("北京朝阳区")
    assert f"已过时：已被 {new['id']} 取代" in found["text"]
    assert next(i for i in found["items"] if i["id"] == old["id"])["superseded_by"] == new["id"]
    traced = await companion.trace(old["id"], importance=6)
    assert f"已过时：已被 {new['id']} 取代" in traced["text"]
    await svc.unsupersede_memory(memory_id=old["id"])
    assert (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"] == ""


async def test_memory_command_and_hold_report_a_supersession_in_the_same_words(companion, memory) -> None:
    svc = memory.runtime.memory_service()
    await companion.hold(OLD_HOME)
    held = await companion.hold(NEW_HOME)
    envelope = await run_memory_command(
        svc,
        'create -type event -title 搬到杭州 -triple_tags "住址|杭州|北京" '
        '-content "我又搬家了，上周搬到杭州西湖区，离公司更远了。"',
    )
    created = envelope["results"][0]["result"]
    sentence = next(line for line in held["text"].splitlines() if "标记为过时" in line)
    tail = sentence.split("标记为过时", 1)[1]
    assert created["superseded"] == [held["id"]] and created["message"].endswith(tail)


async def test_grow_merges_a_restatement_and_keeps_a_different_place_apart(companion, memory) -> None:
    base = await companion.hold("我在北京海淀区的一家医院当护士。")
    grown = await companion.grow(
        items=["我是护士，在北京海淀区的一家医院工作。", "我是护士，在上海徐汇区的一家医院工作。"]
    )
    content = (await memory.runtime.records.get(base["id"]))["content"]
    assert grown["modes"] == ["merged", "created"] and grown["ids"][0] == base["id"]
    assert "当护士" in content and "医院工作" in content  # lossless
    assert "与已有记忆" in grown["text"] and "已合并进这条记忆" in grown["text"]


async def test_a_held_restatement_stays_its_own_memory(companion) -> None:
    base = await companion.hold("我在北京海淀区的一家医院当护士。")
    again = await companion.hold("我是护士，在北京海淀区的一家医院工作。")
    assert again["mode"] == "created" and again["id"] != base["id"] and "superseded" not in again


async def test_grown_facts_that_only_add_supersede_nothing(companion, memory) -> None:
    first = await companion.hold("我的好朋友小雨怀孕了。")
    swim = await companion.hold("我每周三晚上去游泳。")
    grown = await companion.grow(items=["小雨的宝宝预产期在明年四月。", "我每周六早上也会去爬山。"])
    rows = [await memory.runtime.records.get(memory_id) for memory_id in (first["id"], swim["id"])]
    assert grown["modes"] == ["created", "created"] and "superseded" not in grown
    assert [row["superseded_by"] for row in rows] == ["", ""] and "过时" not in grown["text"]


async def test_a_grown_update_is_reported_per_item(companion) -> None:
    old = await companion.hold(OLD_HOME)
    grown = await companion.grow(items=[NEW_HOME, "周日晚上包了饺子。"])
    assert grown["superseded"] == [{"id": old["id"], "title": OLD_HOME, "by": grown["ids"][0]}]
    assert "其中 1 条取代了旧记录" in grown["text"] and f"并把旧记录 {old['id']}" in grown["text"]


async def test_an_unsure_held_fact_goes_to_the_review_queue(companion, memory) -> None:
    old = await companion.hold("我的手机号是13800001111。")
    new = await companion.hold("我的手机号是13900002222。")
    await settle(memory.runtime)
    [pair] = (await UnsurePairs(memory.runtime).list_pairs())["items"]
    assert new["unsure"] == [{"id": old["id"], "kind": "maybe_update"}] and "superseded" not in new
    assert f"可能是它的更新：{old['id']}" in new["text"]
    assert (pair["old_memory_id"], pair["new_memory_id"]) == (old["id"], new["id"])
    assert (await memory.runtime.records.get(old["id"]))["superseded_by"] == ""


async def test_hold_reads_the_neighbours_stored_fact_cues(companion, memory) -> None:
    """Hold judges with the cues ``upsert_memory`` stores (``storage.fact_cue_store``): a stored reading of the old
    home as the user's father's makes the move supersede nothing."""
    from booku_memory.services.embedding.cached import text_hash
    from booku_memory.services.logic.supersession import fact_cues
    from booku_memory.services.storage.fact_cue_store import cues_to_json, reader_version

    for text in BACKGROUND:
        await companion.hold(text)
    old = await companion.hold(OLD_HOME)
    async with memory.runtime.db.transaction() as conn:
        await conn.execute(
            "INSERT INTO booku_fact_cues (memory_id, content_hash, reader, cues) VALUES (?, ?, ?, ?)",
            [
                old["id"],
                text_hash(OLD_HOME),
                reader_version(),
                cues_to_json(fact_cues("我爸住在北京朝阳区，离公司不远。")),
            ],
        )
    new = await companion.hold(NEW_HOME)
    assert new["mode"] == "created" and "superseded" not in new

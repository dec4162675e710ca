"""dream (window, latest full text, 40 by decay score, digested hidden, extra sections), pulse (counts, storage,
engine state, anchor marks, archive) and the decay engine pass (scores, archiving with audit, exemptions)."""

from __future__ import annotations

import pytest

from booku_memory.services.companion import refresh_decay
from booku_memory.services.companion.extensions import (
    DreamSection,
    register_dream_section,
)
from booku_memory.services.errors import ValidationError

from .support import age, ids, row


# -------------------------------------------------------------------- dream
async def test_dream_returns_memories_changed_in_the_window_with_full_text(companion, memory) -> None:
    recent = await companion.hold("昨天和爸爸聊了很久。\n" + "他讲了很多年轻时候的事。" * 200)
    old = await companion.hold("三天前去了趟超市。")
    await age(memory.runtime, recent["id"], 1)
    await age(memory.runtime, old["id"], 3)
    dream = await companion.dream()
    assert ids(dream) == [recent["id"]] and dream["window_hours"] == 48
    assert dream["items"][0]["content"].endswith("他讲了很多年轻时候的事。" * 200)
    assert ("他讲了很多年轻时候的事。" * 200) in dream["text"]
    assert set(ids(await companion.dream(window_hours=96))) == {recent["id"], old["id"]}


async def test_dream_counts_a_change_in_the_window_even_for_an_old_memory(companion, memory) -> None:
    held = await companion.hold("去年的旅行。")
    await age(memory.runtime, held["id"], 300)
    assert ids(await companion.dream()) == []
    await companion.trace(held["id"], why_remembered="想再去一次")
    assert ids(await companion.dream()) == [held["id"]]


async def test_dream_hides_digested_and_lets_resolved_sink(companion) -> None:
    digested = await companion.hold("已经消化的事。", importance=9)
    resolved = await companion.hold("已经放下的事。", importance=9)
    normal = await companion.hold("普通的事。", importance=2)
    await companion.trace(digested["id"], digested=1)
    await companion.trace(resolved["id"], resolved=1)
    dream = await companion.dream()
    assert ids(dream) == [normal["id"], resolved["id"]]
    assert "trace(bucket_id, resolved=1)" in dream["text"] and "feel=True" in dream["text"]


async def test_dream_takes_the_forty_highest_scores(companion) -> None:
    made = [(await companion.hold(f"第{i}件小事。", importance=1 + i % 10))["id"] for i in range(45)]
    dream = await companion.dream()
    assert dream["candidates"] == 45 and dream["total"] == 40
    scores = [item["score"] for item in dream["items"]]
    assert scores == sorted(scores, reverse=True)
    left_out = set(made) - set(ids(dream))
    assert all(item["importance"] >= 2 for item in dream["items"]) and len(left_out) == 5
    assert "前 40 条" in dream["text"]


async def test_dream_window_is_validated(companion) -> None:
    with pytest.raises(ValidationError, match="window_hours"):
        await companion.dream(window_hours=0)


async def test_dream_appends_registered_sections_after_the_memories(companion) -> None:
    held = await companion.hold("一次重要的谈话。")
    seen = []

    async def plans(service, context):
        seen.append([item["id"] for item in context.items])
        return DreamSection(key="plans", title="进行中的计划", items=[{"id": "plan-1"}], text="- 学会游泳")

    remove = register_dream_section("test-plans", plans, order=10)
    try:
        dream = await companion.dream()
    finally:
        remove()
    assert seen == [[held["id"]]]
    assert dream["sections"][0]["title"] == "进行中的计划"
    assert dream["text"].rstrip().endswith("【进行中的计划】\n- 学会游泳")
    assert (await companion.dream())["sections"] == []


# -------------------------------------------------------------------- pulse
async def test_pulse_counts_kinds_and_states_and_marks_anchors(companion, memory) -> None:
    pinned = await companion.hold("准则。", pinned=True)
    dynamic = await companion.hold("普通记忆。", domain="生活", importance=6)
    feeling = await companion.hold("一种感受。", feel=True)
    anchored = await companion.hold("坐标。", domain="地点")
    await companion.anchor(anchored["id"])
    faded = await companion.hold("会被遗忘的小事。", importance=1)
    await age(memory.runtime, faded["id"], 400)
    await refresh_decay(memory.runtime)
    pulse = await companion.pulse()
    counts = pulse["counts"]
    assert (counts["permanent"], counts["dynamic"], counts["archived"]) == (1, 1, 1)
    assert counts["kinds"]["feel"] == 1 and counts["anchors"] == 1 and counts["anchor_limit"] == 24
    assert f"[{anchored['id']}] 坐标。 | 地点 | 5 ⚓ [anchor]" in pulse["lines"]
    assert f"[{dynamic['id']}] 普通记忆。 | 生活 | 6" in pulse["lines"]
    listed = {item["id"] for item in pulse["items"]}
    assert {pinned["id"], dynamic["id"], feeling["id"], anchored["id"]} <= listed and faded["id"] not in listed
    assert "固化 1 · 动态 1 · 归档 1" in pulse["text"] and "感受 1" in pulse["text"]
    assert pulse["storage"]["content_chars"] > 0 and pulse["storage"]["database_bytes"] > 0
    assert pulse["decay_engine"]["last_run"]["archived"] == 1 and "上次运行" in pulse["text"]
    with_archive = await companion.pulse(include_archive=True)
    assert faded["id"] in {item["id"] for item in with_archive["items"]}


async def test_pulse_reports_an_engine_that_never_ran(companion) -> None:
    pulse = await companion.pulse()
    assert pulse["decay_engine"]["last_run"] is None and "尚未运行过" in pulse["text"]
    assert pulse["decay_engine"]["scheduled"] is False


# -------------------------------------------------------------- decay engine
async def test_refresh_decay_stores_scores_and_archives_faded_companion_memories(companion, memory) -> None:
    fresh = await companion.hold("新鲜的记忆。")
    faded = await companion.hold("陈旧的记忆。", importance=3)
    await age(memory.runtime, faded["id"], 200)
    result = await refresh_decay(memory.runtime)
    assert result["archived_ids"] == [faded["id"]] and result["checked"] == 2
    assert (await row(memory.runtime, fresh["id"]))["decay_score"] == pytest.approx(5 * 1.24, rel=1e-3)
    audit = await memory.runtime.memory_service().list_audit_log(memory_id=faded["id"], action="decay_archive")
    entry = audit["items"][0]
    assert (entry["authority"], entry["cause"], entry["batch_id"]) == (
        "mechanical",
        "decay_below_threshold",
        result["batch_id"],
    )
    restored = await memory.runtime.memory_service().restore_batch(batch_id=result["batch_id"])
    assert restored["restored"] == [faded["id"]]
    assert (await row(memory.runtime, faded["id"]))["status"] == "active"


async def test_refresh_decay_never_archives_exempt_or_non_companion_memories(companion, memory) -> None:
    pinned = await companion.hold("准则。", pinned=True)
    feeling = await companion.hold("感受。", feel=True)
    service = memory.runtime.memory_service()
    other = await service.upsert_memory("通过 memory_command 写入的旧知识。")
    for memory_id in (pinned["id"], feeling["id"], other["id"]):
        await age(memory.runtime, memory_id, 2000)
    result = await refresh_decay(memory.runtime)
    assert result["archived_ids"] == [] and result["checked"] == 3
    assert (await row(memory.runtime, other["id"]))["decay_score"] < 0.3  # scored, but its lifecycle is not ours


async def test_refresh_decay_does_not_touch_updated_at_or_history_of_scored_memories(companion, memory) -> None:
    held = await companion.hold("一件事。")
    before = await row(memory.runtime, held["id"])
    await refresh_decay(memory.runtime)
    after = await row(memory.runtime, held["id"])
    assert (after["updated_at"], after["version"]) == (before["updated_at"], before["version"])

"""plan: registration (status, weight, related bucket, why), never decaying, never in breath, the active section at the
end of dream, the completion hint after hold/grow that never closes a plan, and closing only through trace(status)."""

from __future__ import annotations

import pytest

from booku_memory.services.companion import refresh_decay
from booku_memory.services.errors import NotFoundError, ValidationError

from .support import age, ids, row


async def plan_status(runtime, plan_id: str) -> str:
    import json

    return json.loads((await row(runtime, plan_id))["extra"])["status"]


async def count_records(runtime) -> int:
    return int(await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records", (), 0))


async def test_a_plan_is_registered_with_status_weight_and_reason(companion, memory) -> None:
    anchor = await companion.hold("小雨说她想学游泳。")
    made = await companion.plan("陪小雨去学游泳", related_bucket=anchor["id"], weight=0.9, why_remembered="我答应过她")
    item = made["item"]
    assert made["mode"] == "created" and item["kind"] == "plan"
    assert (item["plan_status"], item["weight"], item["related_bucket"]) == ("active", 0.9, anchor["id"])
    assert item["content"] == "陪小雨去学游泳" and item["why_remembered"] == "我答应过她"
    assert (await row(memory.runtime, made["id"]))["source"] == "companion"
    default = await companion.plan("周末整理书架")
    assert (default["item"]["plan_status"], default["item"]["weight"]) == ("active", 0.5)
    closed = await companion.plan("去年就做完的事", status="resolved")
    assert closed["item"]["plan_status"] == "resolved"


async def test_plan_input_is_validated_before_anything_is_written(companion, memory) -> None:
    feel = await companion.hold("有点累。", feel=True)
    plan = await companion.plan("一个计划")
    before = await count_records(memory.runtime)
    with pytest.raises(ValidationError, match="weight"):
        await companion.plan("太重的承诺", weight=1.5)
    with pytest.raises(ValidationError, match="weight"):
        await companion.plan("不是数字的重量", weight="heavy")
    with pytest.raises(ValidationError, match="status"):
        await companion.plan("状态不对", status="done")
    with pytest.raises(NotFoundError, match="related_bucket"):
        await companion.plan("关联不存在的记忆", related_bucket="mem-nope")
    with pytest.raises(ValidationError, match="related_bucket"):
        await companion.plan("关联到另一个计划", related_bucket=plan["id"])
    with pytest.raises(ValidationError, match="content"):
        await companion.plan("   ")
    assert await count_records(memory.runtime) == before
    assert (await companion.plan("关联到一条感受", related_bucket=feel["id"]))["mode"] == "created"


async def test_the_same_active_plan_is_not_registered_twice(companion) -> None:
    first = await companion.plan("每天给妈妈打电话")
    again = await companion.plan("每天给妈妈打电话")
    assert again["mode"] == "duplicate" and again["id"] == first["id"]
    await companion.trace(first["id"], status="resolved")
    renewed = await companion.plan("每天给妈妈打电话")
    assert renewed["mode"] == "created" and renewed["id"] != first["id"]


async def test_plans_never_surface_in_breath_or_search(companion) -> None:
    plan = await companion.plan("学会做红烧肉", weight=1.0)
    memory_item = await companion.hold("昨天吃了红烧肉。", importance=1)
    assert plan["id"] not in ids(await companion.breath())
    assert ids(await companion.breath_search("红烧肉")) == [memory_item["id"]]
    assert plan["id"] not in ids(await companion.breath_advanced(catalog=True))


async def test_plans_never_decay(companion, memory) -> None:
    plan = await companion.plan("总有一天去看极光")
    ordinary = await companion.hold("很久以前的一次散步。", importance=1)
    await age(memory.runtime, plan["id"], 800)
    await age(memory.runtime, ordinary["id"], 800)
    result = await refresh_decay(memory.runtime)
    assert result["archived_ids"] == [ordinary["id"]]
    assert (await row(memory.runtime, plan["id"]))["status"] == "active"
    assert await plan_status(memory.runtime, plan["id"]) == "active"


async def test_active_plans_come_at_the_very_end_of_dream(companion, memory) -> None:
    light = await companion.plan("把相册整理好", weight=0.2)
    heavy = await companion.plan("陪爸爸去复查", weight=0.9)
    await age(memory.runtime, light["id"], 30)  # outside the dream window: active plans are listed anyway
    recent = await companion.hold("今天和朋友吃了火锅。")
    dream = await companion.dream()
    assert ids(dream) == [recent["id"]]
    assert dream["sections"][-1]["key"] == "active_plans"
    assert [item["id"] for item in dream["sections"][-1]["items"]] == [heavy["id"], light["id"]]
    assert dream["text"].rstrip().endswith("把相册整理好")
    assert dream["text"].index("今天和朋友吃了火锅。") < dream["text"].index("陪爸爸去复查")


async def test_only_trace_status_closes_a_plan_and_it_then_leaves_dream(companion, memory) -> None:
    done = await companion.plan("读完《百年孤独》")
    dropped = await companion.plan("学日语")
    await companion.trace(done["id"], status="resolved")
    await companion.trace(dropped["id"], status="abandoned")
    assert [s["key"] for s in (await companion.dream())["sections"]] == []
    history = await memory.runtime.records.history(done["id"])
    assert [entry["action"] for entry in history] == ["plan", "trace"]
    await companion.trace(dropped["id"], status="active")
    section = (await companion.dream())["sections"][-1]
    assert [item["id"] for item in section["items"]] == [dropped["id"]]
    with pytest.raises(ValidationError, match="status"):
        await companion.trace(done["id"], status="finished")


async def test_a_hold_that_looks_like_completing_a_plan_only_says_so(companion, memory) -> None:
    plan = await companion.plan("学会游泳")
    other = await companion.plan("给阳台的花换盆")
    held = await companion.hold("今天终于学会游泳了，在泳池里游了二十米！")
    hints = [n for n in held["notices"] if "可能完成了计划" in n]
    assert len(hints) == 1 and plan["id"] in hints[0] and other["id"] not in hints[0]
    assert f'trace(bucket_id="{plan["id"]}", status="resolved")' in held["text"]
    assert await plan_status(memory.runtime, plan["id"]) == "active"
    assert plan["id"] in [i["id"] for i in (await companion.dream())["sections"][-1]["items"]]
    unrelated = await companion.hold("晚饭吃了面条。")
    assert not any("可能完成了计划" in n for n in unrelated["notices"])


async def test_grow_items_also_get_the_completion_hint(companion, memory) -> None:
    plan = await companion.plan("把毕业论文的初稿写完")
    grown = await companion.grow(items=["上午开了组会。", "晚上终于把毕业论文的初稿写完了。"])
    hints = [n for n in grown["notices"] if "可能完成了计划" in n]
    assert len(hints) == 1 and plan["id"] in hints[0] and grown["ids"][1] in hints[0]
    assert await plan_status(memory.runtime, plan["id"]) == "active"


async def test_no_hint_once_the_plan_is_closed(companion) -> None:
    plan = await companion.plan("学会游泳")
    await companion.trace(plan["id"], status="resolved")
    held = await companion.hold("今天又去学会游泳的那个泳池游了一次。")
    assert not any("可能完成了计划" in n for n in held["notices"])


async def test_mechanical_authority_cannot_register_plans(memory) -> None:
    from booku_memory.services.companion.service import BookuCompanionService

    scope = memory.runtime.default_scope.acting(authority="mechanical", actor="maintenance", cause="test")
    with pytest.raises(ValidationError, match="mechanical"):
        await BookuCompanionService(memory.runtime, scope).plan("自动生成的计划")

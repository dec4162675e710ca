"""trace, anchor and release: protections and their exclusivity, the importance lock, digested exceptions, name vs
title, plan-only status, quote corrections, reinforce, history and audit, and the anchor cap of 24."""

from __future__ import annotations

import pytest
from booku_memory.services.companion.settings import ANCHOR_LIMIT
from booku_memory.services.errors import NotFoundError, ValidationError

from .support import age, ids, row


async def versions(memory, memory_id: str) -> list[str]:
    history = await memory.runtime.memory_service().get_memory_history(memory_id=memory_id)
    return [v["action"] for v in history["versions"]]


# -------------------------------------------------------------------- trace
async def test_resolved_one_lets_go_and_zero_reactivates(companion) -> None:
    held = await companion.hold("和朋友吵了一架。")
    await companion.trace(held["id"], resolved=1)
    assert held["id"] not in ids(await companion.breath())
    await companion.trace(held["id"], resolved=0)
    assert held["id"] in ids(await companion.breath())


async def test_pinned_locks_importance_at_ten(companion, memory) -> None:
    held = await companion.hold("守时。", importance=4)
    traced = await companion.trace(held["id"], pinned=1)
    assert traced["item"]["pinned"] and traced["item"]["importance"] == 10
    with pytest.raises(ValidationError, match="锁定为 10"):
        await companion.trace(held["id"], importance=6)


async def test_protected_is_exclusive_with_pinned_and_anchor_and_locks_ten(companion) -> None:
    pinned = await companion.hold("核心：诚实。", pinned=True)
    with pytest.raises(ValidationError, match="互斥"):
        await companion.trace(pinned["id"], protected=1)
    anchored = await companion.hold("坐标：家在杭州。")
    await companion.anchor(anchored["id"])
    with pytest.raises(ValidationError, match="互斥"):
        await companion.trace(anchored["id"], protected=1)
    plain = await companion.hold("重要但不必每天看到的事。", importance=3)
    traced = await companion.trace(plain["id"], protected=1)
    assert traced["item"]["protected"] and traced["item"]["importance"] == 10
    with pytest.raises(ValidationError, match="互斥"):
        await companion.anchor(plain["id"])
    switched = await companion.trace(plain["id"], protected=0, pinned=1)
    assert switched["item"]["pinned"] and not switched["item"]["protected"]


async def test_protected_memories_do_not_decay_but_are_not_forced_to_surface(companion, memory) -> None:
    held = await companion.hold("一件受保护的旧事。", importance=2)
    await companion.trace(held["id"], protected=1)
    await age(memory.runtime, held["id"], 1000)
    breath = await companion.breath()
    assert held["id"] not in ids({"items": breath["pinned"]}) and held["id"] in ids(breath)
    assert breath["items"][0]["score"] == pytest.approx(10 * 1.24)


async def test_removing_the_last_protection_requires_an_explicit_importance(companion, memory) -> None:
    held = await companion.hold("曾经的核心准则。", pinned=True)
    with pytest.raises(ValidationError, match="必须在同一次调用显式传入 importance"):
        await companion.trace(held["id"], pinned=0)
    await age(memory.runtime, held["id"], 365)
    traced = await companion.trace(held["id"], pinned=0, importance=4)
    assert not traced["item"]["pinned"] and traced["item"]["importance"] == 4
    assert traced["item"]["score"] == pytest.approx(4 * 1.24, rel=1e-3)  # decay restarts from now


async def test_digested_hides_from_breath_but_not_for_anchors(companion) -> None:
    held = await companion.hold("终于把论文交了。")
    await companion.trace(held["id"], digested=1)
    assert held["id"] not in ids(await companion.breath())
    anchored = await companion.hold("坐标：大学在武汉。", domain="地点")
    await companion.anchor(anchored["id"])
    traced = await companion.trace(anchored["id"], digested=1)
    assert traced["changed_fields"] == [] and "不生效" in traced["notices"][0]
    assert anchored["id"] in ids(await companion.breath(domain="地点"))


async def test_name_and_title_are_different_fields(companion, memory) -> None:
    held = await companion.hold("写给十年后的自己。", title="原标题")
    await companion.trace(held["id"], name="时间胶囊")
    stored = await row(memory.runtime, held["id"])
    assert (stored["name"], stored["title"]) == ("时间胶囊", "原标题")
    await companion.trace(held["id"], title="新标题")
    stored = await row(memory.runtime, held["id"])
    assert (stored["name"], stored["title"]) == ("时间胶囊", "新标题")


async def test_status_is_only_for_plans(companion) -> None:
    held = await companion.hold("一件普通的事。")
    with pytest.raises(ValidationError, match="status 只适用于"):
        await companion.trace(held["id"], status="resolved")


async def test_quotes_can_be_corrected_or_removed_but_never_added(companion) -> None:
    bare = await companion.hold("没有引语的记忆。")
    with pytest.raises(ValidationError, match="不能补录"):
        await companion.trace(bare["id"], quotes_replace=["补一句"])
    quoted = await companion.hold("有引语的记忆。", quotes=["第一句", "第二句"])
    with pytest.raises(ValidationError, match="只能保持或减少"):
        await companion.trace(quoted["id"], quotes_replace=["一", "二", "三"])
    await companion.trace(quoted["id"], quotes_replace=["第一句（订正）"])
    hit = (await companion.breath_search("有引语", quotes=True))["items"][0]
    assert hit["quotes"] == [{"text": "第一句（订正）"}]
    await companion.trace(quoted["id"], quotes_replace=[])
    assert (await companion.breath_search("有引语", quotes=True))["items"][0]["quotes"] == []


async def test_content_edit_is_verbatim_and_feel_domain_is_fixed(companion, memory) -> None:
    held = await companion.hold("初稿。")
    await companion.trace(held["id"], content="  改过的正文\n@小周：我也这么觉得  ")
    assert (await row(memory.runtime, held["id"]))["content"] == "  改过的正文\n@小周：我也这么觉得  "
    feeling = await companion.hold("有点想哭。", feel=True)
    with pytest.raises(ValidationError, match="固定为 feel"):
        await companion.trace(feeling["id"], domain="生活")


async def test_reinforce_counts_activation_and_revives_an_archived_memory(companion, memory) -> None:
    held = await companion.hold("学会了一道新菜。", importance=1)
    await age(memory.runtime, held["id"], 300)
    from booku_memory.services.companion import refresh_decay

    await refresh_decay(memory.runtime)
    assert (await row(memory.runtime, held["id"]))["status"] == "archived"
    traced = await companion.trace(held["id"], reinforce=True)
    stored = await row(memory.runtime, held["id"])
    assert stored["status"] == "active" and stored["activation_count"] == 1
    assert "已从归档区恢复" in traced["text"] and held["id"] in ids(await companion.breath())


async def test_every_trace_goes_to_history_and_audit_as_agent(companion, memory) -> None:
    held = await companion.hold("记一件事。")
    await companion.trace(held["id"], resolved=1)
    await companion.trace(held["id"], why_remembered="怕忘")
    assert await versions(memory, held["id"]) == ["hold", "trace", "trace"]
    audit = await memory.runtime.memory_service().list_audit_log(memory_id=held["id"])
    assert [e["authority"] for e in audit["items"]] == ["agent"] * 3


async def test_trace_refuses_unknown_ids_and_empty_calls(companion) -> None:
    with pytest.raises(NotFoundError, match="不存在"):
        await companion.trace("mem-missing", resolved=1)
    held = await companion.hold("一件事。")
    with pytest.raises(ValidationError, match="没有要修改的字段"):
        await companion.trace(held["id"])
    with pytest.raises(ValidationError, match="只能是 0 或 1"):
        await companion.trace(held["id"], resolved=2)


# ------------------------------------------------------------ anchor/release
async def test_anchor_cap_is_twenty_four_and_the_twenty_fifth_is_refused(companion, memory) -> None:
    made = [(await companion.hold(f"坐标 {i}：一件值得记住的事 {i}。"))["id"] for i in range(ANCHOR_LIMIT + 1)]
    for memory_id in made[:ANCHOR_LIMIT]:
        assert (await companion.anchor(memory_id))["changed"]
    with pytest.raises(ValidationError, match="硬上限 24.*请先 release"):
        await companion.anchor(made[ANCHOR_LIMIT])
    assert not (await row(memory.runtime, made[ANCHOR_LIMIT]))["anchor"]
    await companion.release(made[0])
    assert (await companion.anchor(made[ANCHOR_LIMIT]))["anchors"] == ANCHOR_LIMIT


async def test_anchors_leave_default_breath_but_match_queries_and_never_decay(companion, memory) -> None:
    held = await companion.hold("坐标：我们是在一次读书会上认识的。", importance=3)
    answer = await companion.anchor(held["id"])
    assert answer["changed"] and "⚓" in answer["text"]
    await age(memory.runtime, held["id"], 2000)
    assert held["id"] not in ids(await companion.breath())
    found = await companion.breath_search("读书会 认识")
    assert ids(found) == [held["id"]] and "⚓ [anchor]" in found["text"]
    from booku_memory.services.companion import refresh_decay

    await refresh_decay(memory.runtime)
    assert (await row(memory.runtime, held["id"]))["status"] == "active"


async def test_release_keeps_pinned_and_rejoins_breath(companion, memory) -> None:
    held = await companion.hold("一条既是准则又是坐标的记忆。", pinned=True)
    await companion.anchor(held["id"])
    assert held["id"] not in ids({"items": (await companion.breath())["pinned"]})
    released = await companion.release(held["id"])
    assert released["changed"] and released["item"]["pinned"] and "pinned 状态保留" in released["text"]
    assert ids({"items": (await companion.breath())["pinned"]}) == [held["id"]]
    again = await companion.release(held["id"])
    assert not again["changed"] and "不是 anchor" in again["text"]
    assert await versions(memory, held["id"]) == ["hold", "anchor", "release"]


async def test_released_old_memory_is_not_archived_at_once(companion, memory) -> None:
    held = await companion.hold("很久以前的坐标。", importance=2)
    await companion.anchor(held["id"])
    await age(memory.runtime, held["id"], 500)
    await companion.release(held["id"])
    from booku_memory.services.companion import refresh_decay

    assert held["id"] not in (await refresh_decay(memory.runtime))["archived_ids"]
    assert held["id"] in ids(await companion.breath())

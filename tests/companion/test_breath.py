"""breath, breath_search and breath_advanced: what surfaces, limits and defaults, verbatim return, never-truncate,
date bounds, quotes, catalog, importance / emotion / tag filters, anchors, and the keyword fallback notice."""

from __future__ import annotations

import inspect
from datetime import datetime
from pathlib import Path
from types import SimpleNamespace

import pytest

import booku_memory
from booku_memory.services.companion.rendering import estimate_tokens
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.companion.settings import companion_settings
from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.errors import ValidationError

from .conftest import QUIET_CONFIG
from .support import age, ids, set_created


async def hold_many(companion, count: int, **kwargs) -> list[str]:
    return [(await companion.hold(f"第{i}条平常的记忆：今天做了件小事 {i}。", **kwargs))["id"] for i in range(count)]


# ------------------------------------------------------------------ breath
def test_breath_needs_no_parameter() -> None:
    parameters = inspect.signature(BookuCompanionService.breath).parameters
    assert all(p.default is not inspect.Parameter.empty for name, p in parameters.items() if name != "self")


async def test_breath_returns_pinned_principles_first_then_weighted_unresolved_undigested(companion, memory) -> None:
    principle = await companion.hold("不替用户做决定。", pinned=True)
    strong = await companion.hold("拿到了录取通知书！", importance=9, arousal=0.9)
    weak = await companion.hold("路过了一家新开的面包店。", importance=2)
    resolved = await companion.hold("和房东的押金纠纷。", importance=8)
    digested = await companion.hold("搬家那天很累。", importance=8)
    await companion.trace(resolved["id"], resolved=1)
    await companion.trace(digested["id"], digested=1)
    breath = await companion.breath()
    assert ids({"items": breath["pinned"]}) == [principle["id"]]
    assert ids(breath) == [strong["id"], weak["id"]]
    assert breath["text"].index("不替用户做决定。") < breath["text"].index("拿到了录取通知书！")
    found = await companion.breath_search("押金 纠纷 搬家")
    assert {resolved["id"], digested["id"]} <= set(ids(found))  # still findable by an explicit query


async def test_digested_has_no_effect_on_pinned_principles(companion) -> None:
    principle = await companion.hold("每天睡前说晚安。", pinned=True)
    traced = await companion.trace(principle["id"], digested=1)
    assert traced["changed_fields"] == [] and "不生效" in traced["text"]
    assert ids({"items": (await companion.breath())["pinned"]}) == [principle["id"]]


async def test_breath_max_results_defaults_to_twenty_and_allows_at_most_fifty(companion) -> None:
    await hold_many(companion, 23)
    assert len((await companion.breath())["items"]) == 20
    assert len((await companion.breath(max_results=3))["items"]) == 3
    with pytest.raises(ValidationError, match="max_results.*1 到 50"):
        await companion.breath(max_results=51)


async def test_breath_defaults_come_from_config_with_documented_fallbacks(companion, memory) -> None:
    assert companion_settings(SimpleNamespace()).breath_max_results == 20
    assert companion_settings(SimpleNamespace()).breath_max_tokens == 20000
    await hold_many(companion, 4)
    memory.runtime.config.surfacing = SimpleNamespace(breath_max_results=2, breath_max_tokens=None)
    try:
        assert len((await companion.breath())["items"]) == 2
        assert companion.settings.breath_max_tokens == 20000
    finally:
        del memory.runtime.config.surfacing


async def test_breath_domain_filters_and_brings_back_anchors_of_that_domain(companion) -> None:
    work = await companion.hold("项目上线了。", domain="工作")
    life = await companion.hold("周末去看了海。", domain="生活")
    coordinate = await companion.hold("我的工作原则：先写测试。", domain="工作")
    await companion.anchor(coordinate["id"])
    assert coordinate["id"] not in ids(await companion.breath())
    scoped = await companion.breath(domain="工作")
    assert set(ids(scoped)) == {work["id"], coordinate["id"]} and life["id"] not in ids(scoped)


async def test_feelings_stay_out_of_breath_unless_their_domain_is_asked_for(companion) -> None:
    feeling = await companion.hold("想家了。", feel=True)
    assert feeling["id"] not in ids(await companion.breath())
    assert ids(await companion.breath(domain="feel")) == [feeling["id"]]


async def test_breath_reading_is_not_activity(companion, memory) -> None:
    held = await companion.hold("第一次看极光。")
    await companion.breath()
    await companion.breath_search("极光")
    row = await memory.runtime.db.fetch_one(
        "SELECT activation_count, last_activated_at FROM booku_memory_records WHERE memory_id = ?", [held["id"]]
    )
    assert (row["activation_count"], row["last_activated_at"]) == (0, 0)


# ----------------------------------------------------------- token budget
async def test_token_budget_drops_whole_memories_and_never_cuts_one(companion) -> None:
    long_text = "这是一段很长的回忆。" * 300  # ~3000 tokens
    big = await companion.hold(long_text, importance=10)
    small = await companion.hold("一句短短的话。", importance=1)
    answer = await companion.breath_advanced(max_tokens=1000)
    assert ids(answer) == [small["id"]] and answer["omitted"] == [big["id"]]
    assert "整条省略" in answer["text"] and "这是一段很长的回忆" not in answer["text"]
    roomy = await companion.breath_advanced(max_tokens=5000)
    assert ids(roomy) == [big["id"], small["id"]] and roomy["items"][0]["content"] == long_text
    assert estimate_tokens(long_text) > 1000


async def test_max_tokens_is_validated(companion) -> None:
    with pytest.raises(ValidationError, match="max_tokens"):
        await companion.breath_advanced(max_tokens=10)


# ------------------------------------------------------------ breath_search
async def test_breath_search_needs_a_query(companion) -> None:
    with pytest.raises(ValidationError, match="query 不能为空"):
        await companion.breath_search("  ")


async def test_breath_search_date_bounds_use_creation_time_and_same_day_covers_it(companion, memory) -> None:
    times = {
        "before": datetime(2024, 4, 30, 23, 59, 59),
        "start": datetime(2024, 5, 1, 0, 0, 0),
        "late": datetime(2024, 5, 1, 23, 59, 59),
        "after": datetime(2024, 5, 2, 0, 0, 0),
    }
    made = {}
    for label, moment in times.items():
        made[label] = (await companion.hold(f"散步记录 {label}：沿着河边走。"))["id"]
        await set_created(memory.runtime, made[label], moment.timestamp())
    day = await companion.breath_search("散步 河边", date_from="2024-05-01", date_to="2024-05-01")
    assert set(ids(day)) == {made["start"], made["late"]}
    morning = await companion.breath_search("散步 河边", date_from="2024-04-30T23:00:00", date_to="2024-05-01T12:00:00")
    assert set(ids(morning)) == {made["before"], made["start"]}
    only_to = await companion.breath_search("散步 河边", date_to="2024-04-30")
    assert ids(only_to) == [made["before"]]


async def test_breath_search_domain_prefilters(companion) -> None:
    await companion.hold("读书会讨论了三体。", domain="爱好")
    work = await companion.hold("读书会的场地预订。", domain="工作")
    assert ids(await companion.breath_search("读书会", domain="工作")) == [work["id"]]


async def test_breath_search_finds_archived_memories_and_marks_them(companion, memory) -> None:
    faded = await companion.hold("小时候养过一只兔子。", importance=1)
    await age(memory.runtime, faded["id"], 400)
    from booku_memory.services.companion import refresh_decay

    assert faded["id"] in (await refresh_decay(memory.runtime))["archived_ids"]
    assert faded["id"] not in ids(await companion.breath())
    found = await companion.breath_search("兔子")
    assert ids(found) == [faded["id"]] and "已归档" in found["text"]


async def test_keyword_fallback_is_announced_when_vectors_are_unavailable(tmp_path: Path) -> None:
    async with booku_memory.open(tmp_path / "down", QUIET_CONFIG, embedder=UnavailableEmbedder()) as handle:
        companion = BookuCompanionService(handle.runtime)
        held = await companion.hold("在图书馆借到了绝版的诗集。")
        assert any("向量暂不可用" in n and "是否更新旧记忆的判断本次跳过" in n for n in held["notices"])
        found = await companion.breath_search("诗集")
        assert ids(found) == [held["id"]]
        assert "退回关键词检索" in found["degraded"] and found["text"].startswith("⚠")


# ---------------------------------------------------------- breath_advanced
async def test_catalog_is_one_line_per_memory_with_anchor_marks(companion) -> None:
    first = await companion.hold("第一次去日本旅行。", domain="旅行", importance=7)
    second = await companion.hold("护照快到期了。", domain="事务")
    await companion.anchor(first["id"])
    catalog = await companion.breath_advanced(catalog=True)
    assert catalog["mode"] == "catalog"
    assert f"[{first['id']}] 第一次去日本旅行。 | 旅行 | 7 ⚓ [anchor]" in catalog["lines"]
    assert f"[{second['id']}] 护照快到期了。 | 事务 | 5" in catalog["lines"]
    assert all("content" not in item for item in catalog["items"])
    assert len((await companion.breath_advanced(catalog=True, domain="事务"))["lines"]) == 1
    assert len((await companion.breath_advanced(catalog=True, max_results=1))["lines"]) == 1


async def test_catalog_uses_the_bucket_name_when_one_is_set(companion) -> None:
    held = await companion.hold("和小林的第一次约会。")
    await companion.trace(held["id"], name="初次约会")
    line = (await companion.breath_advanced(catalog=True))["lines"][0]
    assert line.startswith(f"[{held['id']}] 初次约会 |")


async def test_importance_min_lists_by_importance_including_digested(companion) -> None:
    low = await companion.hold("买了新杯子。", importance=2)
    high = await companion.hold("决定换工作。", importance=9)
    mid = await companion.hold("开始学游泳。", importance=6)
    await companion.trace(mid["id"], digested=1)
    answer = await companion.breath_advanced(importance_min=5)
    assert answer["mode"] == "importance" and ids(answer) == [high["id"], mid["id"]] and low["id"] not in ids(answer)


async def test_emotion_mode_finds_close_memories_including_anchors(companion) -> None:
    joyful = await companion.hold("收到了惊喜生日礼物。", valence=0.9, arousal=0.8)
    sad = await companion.hold("送别老朋友。", valence=0.1, arousal=0.4)
    await companion.anchor(joyful["id"])
    answer = await companion.breath_advanced(valence=0.85, arousal=0.75)
    assert answer["mode"] == "emotion" and ids(answer) == [joyful["id"]] and sad["id"] not in ids(answer)
    searched = await companion.breath_advanced(query="老朋友 送别", valence=0.9)
    assert sad["id"] not in ids(searched)


async def test_tags_are_anded_and_feel_tag_means_the_feel_domain(companion) -> None:
    both = await companion.hold("和猫一起晒太阳。", tags="猫,午后")
    one = await companion.hold("给猫买了罐头。", tags="猫")
    feeling = await companion.hold("有猫陪着真好。", feel=True)
    assert ids(await companion.breath_advanced(tags="猫,午后", catalog=True)) == [both["id"]]
    assert set(ids(await companion.breath_advanced(tags="猫", catalog=True))) == {both["id"], one["id"]}
    assert ids(await companion.breath_advanced(tags="feel")) == [feeling["id"]]
    assert ids(await companion.breath_advanced(tags="__feel__", catalog=True)) == [feeling["id"]]


async def test_advanced_without_conditions_is_breath(companion) -> None:
    principle = await companion.hold("说真话。", pinned=True)
    moment = await companion.hold("看了一场日落。")
    answer = await companion.breath_advanced()
    assert answer["mode"] == "surfacing" and ids(answer) == [moment["id"]]
    assert ids({"items": answer["pinned"]}) == [principle["id"]]


async def test_advanced_query_mode_returns_verbatim_hits_with_filters(companion) -> None:
    kept = await companion.hold("  演唱会的最后一首歌是《晴天》。\n", domain="音乐", importance=8)
    await companion.hold("演唱会门票好贵。", domain="音乐", importance=3)
    answer = await companion.breath_advanced(query="演唱会", importance_min=7)
    assert ids(answer) == [kept["id"]] and answer["items"][0]["content"] == "  演唱会的最后一首歌是《晴天》。\n"

"""The "I": candidates that surface and decay like memories, every dream showing them beside related memories and
witnessing them by date, promotion only after three different dates, formal entries out of breath and dream,
superseding within an aspect without deleting a word, and the old belief's return when the challenge is withdrawn."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

import booku_memory
from booku_memory.services.companion import refresh_decay
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.errors import NotFoundError, ValidationError

from .support import Clock, age, ids, row

DAY = 86400.0
START = datetime(2030, 5, 1, 21, 0).timestamp()  # a local evening


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def me(memory: Any, clock: Clock) -> BookuCompanionService:
    return BookuCompanionService(memory.runtime, clock=clock)


async def witness_on_days(service: BookuCompanionService, clock: Clock, days: int) -> None:
    """One dream on each of ``days`` consecutive local dates."""
    for _ in range(days):
        await service.dream()
        clock.now += DAY


async def formal_entry(service: BookuCompanionService, clock: Clock, content: str, aspect: str) -> str:
    candidate = await service.self_knowledge(content, aspect=aspect)
    await witness_on_days(service, clock, 3)
    return (await service.self_knowledge(promote=candidate["id"]))["id"]


def self_section(dream: dict) -> dict:
    return next(section for section in dream["sections"] if section["key"] == "self_candidates")


# --------------------------------------------------------------------------------------------------- candidates
async def test_a_candidate_is_an_ordinary_memory_that_surfaces(me, memory) -> None:
    written = await me.self_knowledge("我觉得我在意被理解。", aspect="values")
    assert written["mode"] == "candidate"
    item = written["item"]
    assert (item["kind"], item["self_stage"], item["aspect"]) == ("self_candidate", "candidate", "values")
    assert written["id"] in ids(await me.breath())
    assert written["id"] in ids(await me.breath_search("在意被理解"))
    assert "自我认知候选" in (await me.breath())["text"]
    again = await me.self_knowledge("我觉得我在意被理解。", aspect="values")
    assert again["mode"] == "duplicate" and again["id"] == written["id"]


async def test_grow_never_folds_other_text_into_a_candidate(me, memory) -> None:
    written = await me.self_knowledge("我觉得我在意被理解。", aspect="values")
    grown = await me.grow(items=["我觉得我在意被理解。", "晚上散步时想到的。"])
    assert grown["modes"] == ["created", "created"] and written["id"] not in grown["ids"]
    assert (await row(memory.runtime, written["id"]))["content"] == "我觉得我在意被理解。"


async def test_a_candidate_decays_like_other_memories(me, memory) -> None:
    written = await me.self_knowledge("我觉得我总是回避冲突。", aspect="patterns")
    await age(memory.runtime, written["id"], 200)
    result = await refresh_decay(memory.runtime)
    assert written["id"] in result["archived_ids"]
    assert (await row(memory.runtime, written["id"]))["status"] == "archived"


@pytest.mark.parametrize(
    "content, aspect, message",
    [
        ("我认为我很勇敢。", None, "我觉得"),
        ("今天去了公园。", None, "我觉得"),
        ("我觉得我很勇敢。", "courage", "aspect"),
        ("   ", None, "content"),
    ],
)
async def test_a_candidate_must_be_a_statement_with_a_known_aspect(me, content, aspect, message) -> None:
    with pytest.raises(ValidationError, match=message):
        await me.self_knowledge(content, aspect=aspect)


async def test_conflicting_modes_are_rejected(me) -> None:
    with pytest.raises(ValidationError, match="read"):
        await me.self_knowledge("我觉得我喜欢安静。", read=True)
    with pytest.raises(ValidationError, match="promote"):
        await me.self_knowledge(promote="mem-x", supersedes="mem-y")
    with pytest.raises(ValidationError, match="supersedes"):
        await me.self_knowledge(supersedes="mem-y")
    with pytest.raises(NotFoundError, match="promote"):
        await me.self_knowledge(promote="mem-nope")


# ------------------------------------------------------------------------------------------------------- dream
async def test_every_dream_shows_candidates_beside_related_memories(me, memory) -> None:
    candidate = await me.self_knowledge("我觉得我很在意被理解。", aspect="values")
    related = await me.hold("和妈妈吵架以后很难过，觉得自己没有被理解。", feel=True)
    await me.hold("今天的晚饭是面条。")
    await age(memory.runtime, candidate["id"], 10)  # far outside the 48-hour window: still in every dream
    dream = await me.dream()
    assert candidate["id"] not in ids(dream)
    section = self_section(dream)
    assert [item["id"] for item in section["items"]] == [candidate["id"]]
    assert section["items"][0]["related"] == [related["id"]]
    assert "觉得自己没有被理解" in section["text"] and "今天的晚饭是面条" not in section["text"]
    assert section["items"][0]["witness_dates"] == ["2030-05-01"]
    assert [s["key"] for s in dream["sections"]].index("self_candidates") == 0


async def test_withdrawn_candidates_leave_the_dream(me) -> None:
    candidate = await me.self_knowledge("我觉得我不需要别人。", aspect="nature")
    await me.trace(candidate["id"], resolved=1)
    assert [s["key"] for s in (await me.dream())["sections"]] == []


# ----------------------------------------------------------------------------------------------- witness rule
async def test_promotion_needs_dreams_on_three_different_dates(me, clock, memory) -> None:
    candidate = await me.self_knowledge("我觉得我在慢慢学会求助。", aspect="becoming")
    with pytest.raises(ValidationError, match="0 个不同日期"):
        await me.self_knowledge(promote=candidate["id"])
    await me.dream()
    clock.now += 3600  # same evening
    await me.dream()
    with pytest.raises(ValidationError, match="只被 1 个不同日期.*还差 2 个"):
        await me.self_knowledge(promote=candidate["id"])
    clock.now += DAY
    await me.dream()
    with pytest.raises(ValidationError, match="还差 1 个"):
        await me.self_knowledge(promote=candidate["id"])
    clock.now += DAY
    dream = await me.dream()
    assert self_section(dream)["items"][0]["witnesses_needed"] == 0
    promoted = await me.self_knowledge("我觉得我正在学会向人求助。", promote=candidate["id"])
    assert promoted["mode"] == "promote"
    assert promoted["item"]["witness_dates"] == ["2030-05-01", "2030-05-02", "2030-05-03"]
    assert promoted["item"]["kind"] == "self" and promoted["item"]["content"] == "我觉得我正在学会向人求助。"
    history = await memory.runtime.records.history(candidate["id"])
    assert history[0]["snapshot"]["content"] == "我觉得我在慢慢学会求助。" and history[-1]["action"] == "promote"


async def test_formal_entries_stay_out_of_breath_search_and_dream(me, clock) -> None:
    formal = await formal_entry(me, clock, "我觉得我是一个慢热的人。", "nature")
    assert formal not in ids(await me.breath())
    assert formal not in ids(await me.breath_search("慢热的人"))
    dream = await me.dream(window_hours=8760)
    assert formal not in ids(dream) and [s["key"] for s in dream["sections"]] == []
    read = await me.self_knowledge(read=True)
    assert [item["id"] for item in read["formal"]] == [formal]
    assert "我觉得我是一个慢热的人。" in read["text"]
    assert (await me.self_knowledge())["formal"] == read["formal"]  # nothing given = read


async def test_a_withdrawn_or_faded_candidate_cannot_be_promoted(me, clock, memory) -> None:
    candidate = await me.self_knowledge("我觉得我害怕被抛下。", aspect="limits")
    await witness_on_days(me, clock, 3)
    await me.trace(candidate["id"], resolved=1)
    with pytest.raises(ValidationError, match="撤回"):
        await me.self_knowledge(promote=candidate["id"])
    await me.trace(candidate["id"], resolved=0)
    await age(memory.runtime, candidate["id"], 200)
    await refresh_decay(memory.runtime)
    with pytest.raises(ValidationError, match="归档"):
        await me.self_knowledge(promote=candidate["id"])


# ---------------------------------------------------------------------------------------- supersede / withdraw
async def test_superseding_retires_the_old_belief_without_deleting_a_word(me, clock, memory) -> None:
    old = await formal_entry(me, clock, "我觉得独处最让我安心。", "values")
    old_row = await row(memory.runtime, old)
    challenge = await me.self_knowledge("我觉得和信任的人在一起最让我安心。", aspect="values", supersedes=old)
    assert challenge["item"]["supersedes"] == old and "不再作为当前信念" in challenge["text"]
    assert (await me.latest_self_entries())["items"] == []
    read = await me.self_knowledge(read=True)
    assert read["formal"] == [] and [i["id"] for i in read["superseded"]] == [old]
    assert read["superseded"][0]["superseded_by"] == [challenge["id"]]
    assert read["superseded"][0]["content"] == "我觉得独处最让我安心。"
    current = await row(memory.runtime, old)
    assert (current["content"], current["version"], current["is_deleted"]) == (
        old_row["content"],
        old_row["version"],
        0,
    )


async def test_withdrawing_the_challenge_brings_the_old_belief_back(me, clock, memory) -> None:
    old = await formal_entry(me, clock, "我觉得我不擅长表达。", "limits")
    challenge = await me.self_knowledge("我觉得我其实挺会表达，只是慢。", supersedes=old)
    assert challenge["item"]["aspect"] == "limits"  # the aspect of the entry it challenges
    assert (await me.latest_self_entries())["items"] == []
    await me.trace(challenge["id"], resolved=1)
    assert [i["id"] for i in (await me.latest_self_entries())["items"]] == [old]
    await me.trace(challenge["id"], resolved=0)
    assert (await me.latest_self_entries())["items"] == []
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    await service.delete_memories(memory_ids=[challenge["id"]])
    assert [i["id"] for i in (await me.latest_self_entries())["items"]] == [old]
    await service.restore_memories(memory_ids=[challenge["id"]])
    assert (await me.latest_self_entries())["items"] == []


async def test_a_challenge_that_fades_away_is_withdrawn_too(me, clock, memory) -> None:
    old = await formal_entry(me, clock, "我觉得规律的生活最适合我。", "patterns")
    challenge = await me.self_knowledge("我觉得我需要一些变化。", supersedes=old)
    await age(memory.runtime, challenge["id"], 200)
    await refresh_decay(memory.runtime)
    assert [i["id"] for i in (await me.latest_self_entries())["items"]] == [old]


async def test_a_promoted_challenger_replaces_the_old_belief(me, clock) -> None:
    old = await formal_entry(me, clock, "我觉得我必须一直有用。", "values")
    challenge = await me.self_knowledge("我觉得我不用一直有用，也值得被爱。", supersedes=old)
    await witness_on_days(me, clock, 3)
    await me.self_knowledge(promote=challenge["id"])
    latest = await me.latest_self_entries()
    assert [i["id"] for i in latest["items"]] == [challenge["id"]]
    assert "也值得被爱" in latest["text"] and "必须一直有用" not in latest["text"]


async def test_superseding_is_only_within_one_aspect_and_only_of_formal_entries(me, clock) -> None:
    old = await formal_entry(me, clock, "我觉得我站在弱者一边。", "stance")
    with pytest.raises(ValidationError, match="同一 aspect"):
        await me.self_knowledge("我觉得我更看重公平。", aspect="values", supersedes=old)
    candidate = await me.self_knowledge("我觉得我容易心软。", aspect="patterns")
    with pytest.raises(ValidationError, match="正式条目"):
        await me.self_knowledge("我觉得我其实不心软。", aspect="patterns", supersedes=candidate["id"])
    with pytest.raises(NotFoundError, match="supersedes"):
        await me.self_knowledge("我觉得……", supersedes="mem-missing")


async def test_session_start_gets_the_latest_three_current_beliefs(me, clock, memory) -> None:
    made = []
    for index, aspect in enumerate(("nature", "values", "patterns", "limits")):
        made.append(await formal_entry(me, clock, f"我觉得这是第{index + 1}条认识。", aspect))
    latest = await me.latest_self_entries()
    assert [i["id"] for i in latest["items"]] == made[::-1][:3]
    assert latest["text"].startswith("【自我认知】") and "第1条认识" not in latest["text"]
    assert [i["id"] for i in (await me.latest_self_entries(limit=1))["items"]] == [made[-1]]
    extra = json.loads((await row(memory.runtime, made[0]))["extra"])
    assert extra["kind"] == "self" and extra["self"]["stage"] == "formal"

"""The companion over simulated weeks: moments are held on different days, breath changes as they decay, one is
digested by a feeling, one pinned, one anchored, faded ones are archived by the decay engine, and dream reviews the
last two days."""

from __future__ import annotations

import pytest

from booku_memory.services.companion import refresh_decay

from .support import advance, ids, row


async def test_a_month_with_the_companion(companion, memory) -> None:
    runtime = memory.runtime

    # Day 0: moving in. Intense and important.
    moving = await companion.hold(
        "搬进了新家，窗外能看到江。\n@房东：有事随时找我", importance=6, arousal=0.8, domain="生活"
    )
    await advance(runtime, 10)
    # Day 10: cooking alone for the first time.
    cooking = await companion.hold("第一次一个人做了完整的晚饭。", importance=5, domain="生活")
    await advance(runtime, 15)
    # Day 25: the project slips. Low importance, calm.
    project = await companion.hold("项目又延期了，心里有点烦。", importance=4, arousal=0.2, domain="工作")
    await advance(runtime, 5)
    # Day 30 (today): meeting an old friend.
    friend = await companion.hold("今天和十年没见的老朋友重逢了。", importance=5, domain="朋友")

    await refresh_decay(runtime)
    first = await companion.breath()
    assert ids(first) == [friend["id"], project["id"], cooking["id"], moving["id"]]
    scores = [item["score"] for item in first["items"]]
    assert scores == sorted(scores, reverse=True) and scores[0] == pytest.approx(6.2, rel=1e-3)
    assert '{"speaker": "房东", "text": "有事随时找我"}' in first["text"]

    # A promise to keep, pinned: always present, never decays.
    promise = await companion.hold("答应过自己：再忙也要每周给家里打一次电话。", pinned=True)
    # Digest one: a feeling written for the cooking memory.
    feeling = await companion.hold("现在想起那顿饭，更多的是骄傲而不是孤单。", feel=True, source_bucket=cooking["id"])
    # Anchor one: the move becomes a coordinate.
    await companion.anchor(moving["id"])

    second = await companion.breath()
    assert ids({"items": second["pinned"]}) == [promise["id"]]
    assert ids(second) == [friend["id"], project["id"]]
    assert feeling["id"] not in ids(second) and cooking["id"] not in ids(second)
    assert ids(await companion.breath_search("晚饭 一个人"))[0] == cooking["id"]  # digested, still findable
    assert moving["id"] in ids(await companion.breath_search("新家 江"))  # anchored, still findable

    # Ten weeks pass without touching anything: what was not protected fades out, digested memories included.
    await advance(runtime, 70)
    decayed = await refresh_decay(runtime)
    assert set(decayed["archived_ids"]) == {friend["id"], project["id"], cooking["id"]}
    for memory_id in (promise["id"], moving["id"], feeling["id"]):
        assert (await row(runtime, memory_id))["status"] == "active"

    today = await companion.hold("今天收到了老朋友寄来的明信片。", importance=6, domain="朋友")
    third = await companion.breath()
    assert ids({"items": third["pinned"]}) == [promise["id"]]
    assert third["pinned"][0]["score"] == pytest.approx(second["pinned"][0]["score"])
    assert ids(third) == [today["id"]]

    # Dream over the last two days: only what changed in the window, with full text.
    await companion.trace(project["id"], reinforce=True)  # remembering the project brings it back
    dream = await companion.dream(window_hours=48)
    assert set(ids(dream)) == {today["id"], project["id"]}
    assert "今天收到了老朋友寄来的明信片。" in dream["text"]

    pulse = await companion.pulse()
    assert pulse["counts"]["archived"] == 2 and pulse["counts"]["anchors"] == 1
    assert pulse["counts"]["permanent"] == 1 and pulse["counts"]["kinds"]["feel"] == 1

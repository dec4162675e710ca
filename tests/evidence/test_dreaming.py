"""Dreaming: stage A (episodes) and stage B (proposals), their failure modes and the scheduler."""

from __future__ import annotations

import logging

import pytest

from booku_memory.services.evidence import (
    DreamingScheduler,
    EvidenceService,
    HostChatModel,
    OpenAICompatibleChatModel,
    attach_evidence,
    build_chat_model,
    dreaming_settings,
)
from booku_memory.services.evidence.episodes import EpisodeStage, split_windows
from booku_memory.services.evidence.prompts import (
    EPISODE_TASK_MARK,
    PROPOSAL_TASK_MARK,
    parse_proposal_answer,
    proposal_messages,
)
from booku_memory.services.evidence.proposals import ProposalStage, _Superseded

from .conftest import ALICE_STORE, ALICE_STREAM, BOB_STREAM, T0, human
from .support import find_message, say


def rows(*times: float) -> list[dict]:
    return [{"entry_id": f"c{i}", "sent_at": t} for i, t in enumerate(times)]


def test_windows_split_at_quiet_gaps_and_at_the_size_limit_and_leave_the_open_tail():
    messages = rows(0, 60, 120, 2000, 2060, 2120, 2180)
    closed = split_windows(messages, idle_seconds=600, max_messages=3, channel_last_at=2180, now=2200)
    assert [[m["entry_id"] for m in w] for w in closed] == [["c0", "c1", "c2"], ["c3", "c4", "c5"]]
    later = split_windows(messages, idle_seconds=600, max_messages=3, channel_last_at=2180, now=2780)
    assert [[m["entry_id"] for m in w] for w in later][-1] == ["c6"]


async def chat(runtime, stream=ALICE_STREAM, count=3, start=T0, sender="u1"):
    return [
        await say(
            runtime, stream, f"第{i}句：周末去杭州看西湖", start + i * 60, sender=sender, message_id=f"{stream}-{i}"
        )
        for i in range(count)
    ]


async def test_stage_a_summarises_closed_windows_per_channel_and_waits_for_open_ones(runtime, hub, model):
    alice = await chat(runtime)
    await chat(runtime, stream=BOB_STREAM, sender="u2")
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    still_talking = await evidence.run_stage_a(now=T0 + 200)
    assert still_talking["created"] == [] and model.calls == []
    done = await evidence.run_stage_a(now=T0 + 2000)
    assert done["state"] == "ok" and len(done["created"]) == 2
    [episode] = (await evidence.list_episodes())["items"]
    assert episode["message_ids"] == alice and episode["stream_id"] == ALICE_STREAM
    assert (episode["start_at"], episode["end_at"]) == (T0, T0 + 120)
    assert episode["summary"].startswith("小明：第0句") and "原始聊天消息才是权威" in episode["notice"]
    assert (await evidence.run_stage_a(now=T0 + 4000))["created"] == []
    assert len(model.tasks(EPISODE_TASK_MARK)) == 2  # nothing summarised twice
    await hub.vectors.drain()
    found = await evidence.search("杭州 西湖", sources=["episode"])
    assert [r["id"] for r in found["results"]] == [episode["id"]] and found["results"][0]["trusted"] is False


async def test_without_a_model_stage_a_reports_unavailable_and_keeps_the_work(runtime, caplog):
    hub = attach_evidence(
        runtime,
        dreaming=dreaming_settings(runtime.config, enabled=True, chat_provider="none", episode_idle_seconds=600.0),
    )
    await chat(runtime)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    with caplog.at_level(logging.WARNING):
        report = await evidence.run_stage_a(now=T0 + 5000)
    assert report["state"] == "unavailable" and report["waiting"] == 1 and "chat_provider = none" in report["reason"]
    assert any("阶段 A 不可用" in record.getMessage() for record in caplog.records)
    status = await evidence.status()
    assert status["dreaming"]["stage_a"]["state"] == "unavailable"
    assert status["dreaming"]["model"]["available"] is False
    assert status["evidence"]["unprocessed"] == 3 and status["evidence"]["episodes"] == 0
    assert (await evidence.run_stage_b())["state"] == "unavailable"
    assert hub.stages["stage_b"].state == "unavailable"


async def test_disabled_dreaming_stops_cleanly(runtime, model):
    attach_evidence(runtime, dreaming=dreaming_settings(runtime.config, enabled=False), chat_model=model)
    await chat(runtime)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    assert (await evidence.run_stage_a(now=T0 + 5000))["state"] == "disabled"
    assert (await evidence.run_stage_b())["state"] == "disabled"
    scheduler = DreamingScheduler(runtime, chat_model=model)
    tick = await scheduler.tick(now=T0 + 5000)
    assert tick["stage_a"]["state"] == "disabled" and model.calls == []
    scheduler.start()
    assert scheduler.running
    await scheduler.stop()
    assert not scheduler.running and (await evidence.status())["evidence"]["unprocessed"] == 3


async def test_a_model_outage_leaves_windows_unprocessed_for_the_next_run(runtime, hub, model):
    await chat(runtime)
    await chat(runtime, stream=BOB_STREAM, sender="u2")
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    model.fail_next(1)
    failed = await evidence.run_stage_a(now=T0 + 5000)
    assert failed["state"] == "error" and failed["created"] == [] and failed["waiting"] == 2
    model.garble_next(1)
    partly = await evidence.run_stage_a(now=T0 + 5000)
    assert len(partly["created"]) == 1 and len(partly["failures"]) == 1
    rest = await evidence.run_stage_a(now=T0 + 5000)
    assert len(rest["created"]) == 1
    assert (await hub.chat_log.counts())["unprocessed"] == 0


def tea_proposal(task):
    hit = find_message(task, "龙井")
    if not hit:
        return []
    return [
        {
            "op": "create",
            "title": "爱喝龙井",
            "content": "小明最喜欢龙井茶。",
            "memory_type": "preference",
            "message_ids": [hit[0]],
            "episode_ids": [hit[1]],
        }
    ]


async def test_stage_b_is_retried_after_a_failed_run_and_never_duplicates(runtime, hub, model):
    model.proposals = tea_proposal
    await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井", T0)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    model.fail_next(1)
    failed = await evidence.run_stage_b()
    assert failed["state"] == "error" and failed["created"] == []
    assert await hub.dream_store.marks(ALICE_STORE, f"qq:{ALICE_STREAM}") == (0, 0)
    model.garble_next(1)
    assert (await evidence.run_stage_b())["created"] == []
    retried = await evidence.run_stage_b()
    assert len(retried["created"]) == 1
    marks = await hub.dream_store.marks(ALICE_STORE, f"qq:{ALICE_STREAM}")
    assert marks[0] > 0 and marks[1] > 0
    again = await evidence.run_stage_b()
    assert again["created"] == [] and len(model.tasks(PROPOSAL_TASK_MARK)) == 3  # nothing left to read
    assert (await hub.dream_store.status_counts(store_keys=[ALICE_STORE]))["pending"] == 1


async def test_two_runs_never_both_commit_the_same_input(runtime, hub, model):
    model.proposals = tea_proposal
    await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井", T0)
    await EpisodeStage(runtime, hub).run(now=T0 + 5000)
    stage = ProposalStage(runtime, hub)
    owner = f"qq:{ALICE_STREAM}"
    episodes = await hub.chat_log.new_episodes(store_key=ALICE_STORE, owner_uid=owner, after_seq=0, limit=10)
    messages = await hub.chat_log.messages([i for e in episodes for i in e["entry_ids"]], store_keys=None)
    for episode in episodes:
        episode["messages"] = [messages[i] for i in episode["entry_ids"]]
    answer = await model.complete(proposal_messages(episodes, []), max_tokens=100, temperature=0)
    parsed = parse_proposal_answer(
        answer, message_ids=list(messages), episode_ids=[e["episode_id"] for e in episodes], memory_ids=[], limit=5
    )
    assert len((await stage.run()).created) == 1  # another run commits first...
    with pytest.raises(_Superseded):  # ...so this one, started from the old marks, writes nothing
        await stage._commit(
            ALICE_STORE, owner, parsed, episodes, (0, 0), (episodes[-1]["seq"], 1), model.model_id, "dream-b-late"
        )
    assert (await hub.dream_store.status_counts(store_keys=[ALICE_STORE]))["pending"] == 1


def test_invalid_proposals_are_dropped_with_a_reason():
    answer = """```json
    {"proposals": [
      {"op": "create", "content": "有效提案", "memory_type": "preference", "message_ids": ["chat-1"]},
      {"op": "create", "content": "引用了别人的消息", "message_ids": ["chat-999"]},
      {"op": "create", "content": "没有证据"},
      {"op": "update", "memory_id": "mem-unknown", "content": "改一条看不见的记忆", "message_ids": ["chat-1"]},
      {"op": "create", "content": "人物", "memory_type": "person", "message_ids": ["chat-1"]},
      {"op": "delete", "content": "删除", "message_ids": ["chat-1"]},
      {"op": "update", "memory_id": "mem-1", "content": "改一条看得见的记忆", "episode_ids": ["epi-1"]}
    ]}
    ```"""
    parsed = parse_proposal_answer(
        answer, message_ids=["chat-1"], episode_ids=["epi-1"], memory_ids=["mem-1"], limit=10
    )
    assert [(d.kind, d.fields["content"]) for d in parsed.drafts] == [
        ("create", "有效提案"),
        ("update", "改一条看得见的记忆"),
    ]
    assert parsed.drafts[1].target_memory_id == "mem-1"
    assert len(parsed.rejected) == 5 and any("chat-999" in reason for reason in parsed.rejected)


async def test_a_rejected_idea_is_not_proposed_again(runtime, hub, model):
    from booku_memory.services.evidence import ReviewService

    model.proposals = tea_proposal
    await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井", T0)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    [first] = (await evidence.run_stage_b())["created"]
    await ReviewService(runtime, human(ALICE_STORE)).reject(first, reason="不需要")
    await say(runtime, ALICE_STREAM, "再说一遍，我最喜欢的茶是龙井", T0 + 9000)
    await evidence.run_stage_a(now=T0 + 20000)
    second = await evidence.run_stage_b()
    assert second["created"] == [] and any("重复" in reason for reason in second["dropped"])


async def test_the_host_light_model_adapter_and_the_provider_choice(runtime, monkeypatch):
    prompts = []

    async def host_complete(messages):
        prompts.append(messages)
        return '{"topic": "出行", "summary": "小明说周末去杭州。"}'

    hub = attach_evidence(
        runtime,
        dreaming=dreaming_settings(runtime.config, enabled=True, episode_idle_seconds=600.0),
        host_chat_fn=host_complete,
    )
    assert isinstance(hub.chat_model, HostChatModel) and hub.chat_model.model_id == "host/utils_small"
    await chat(runtime, count=2)
    report = await EpisodeStage(runtime, hub).run(now=T0 + 5000)
    assert len(report.created) == 1 and prompts[0][0]["role"] == "system"

    async def broken(messages):
        raise RuntimeError("LLMAPIError: connection refused")

    failing = HostChatModel(broken)
    with pytest.raises(Exception, match="宿主轻量模型"):
        await failing.complete([{"role": "user", "content": "x"}], max_tokens=10, temperature=0)

    settings = dreaming_settings(runtime.config, chat_provider="host")
    assert build_chat_model(settings)[0] is None and "宿主没有提供" in build_chat_model(settings)[1]
    monkeypatch.setenv("BOOKU_DREAMING_API_KEY", "sk-test")
    model, reason = build_chat_model(dreaming_settings(runtime.config, chat_provider="openai"))
    assert isinstance(model, OpenAICompatibleChatModel) and reason == "" and model.model_id == "openai/gpt-4o-mini"


async def test_the_scheduler_runs_what_is_due(runtime, hub, model):
    model.proposals = tea_proposal
    await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井", T0)
    scheduler = DreamingScheduler(runtime, hub=hub)
    first = await scheduler.tick(now=T0 + 5000)
    assert len(first["stage_a"]["created"]) == 1 and len(first["stage_b"]["created"]) == 1
    second = await scheduler.tick(now=T0 + 5060)
    assert "stage_a" not in second and "stage_b" not in second and "vectors" in second
    later = await scheduler.tick(now=T0 + 5000 + hub.dreaming.stage_b_interval_seconds)
    assert later["stage_b"]["created"] == []


def test_a_partial_tag_triplet_becomes_plain_tags_so_the_approval_cannot_fail():
    answer = (
        '{"proposals": [{"content": "小明周末爬山", "core_tags": ["爬山"], "tags": ["运动"], '
        '"message_ids": ["chat-1"]}, {"content": "完整三元组", "core_tags": ["a"], "diffusion_tags": ["b"], '
        '"opposing_tags": ["c"], "message_ids": ["chat-1"]}]}'
    )
    parsed = parse_proposal_answer(answer, message_ids=["chat-1"], episode_ids=[], memory_ids=[], limit=5)
    partial, complete = (d.fields for d in parsed.drafts)
    assert partial["tags"] == ["运动", "爬山"] and "core_tags" not in partial
    assert (complete["core_tags"], complete["diffusion_tags"], complete["opposing_tags"]) == (["a"], ["b"], ["c"])

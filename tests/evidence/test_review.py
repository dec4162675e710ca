"""Human review: only a human decides; approve (as is or edited) writes a memory with provenance; reject keeps a
reason; a half-finished approval is finished, not repeated; flags after a retraction are resolved by a human."""

from __future__ import annotations

import pytest

from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.errors import NotFoundError, ValidationError
from booku_memory.services.evidence import EvidenceService, ReviewService, review_batch
from booku_memory.services.evidence.proposals import owner_scope

from .conftest import ALICE_STORE, ALICE_STREAM, BOB_STORE, T0, human
from .support import find_message, say

ALICE = f"qq:{ALICE_STREAM}"


def two_facts(task):
    proposals = []
    for needle, title, content in (
        ("龙井", "爱喝龙井", "小明最喜欢龙井茶。"),
        ("花生", "花生过敏", "小明对花生过敏。"),
    ):
        hit = find_message(task, needle)
        if hit:
            proposals.append(
                {
                    "op": "create",
                    "title": title,
                    "content": content,
                    "memory_type": "preference",
                    "tags": ["饮食"],
                    "message_ids": [hit[0]],
                    "episode_ids": [hit[1]],
                }
            )
    return proposals


async def propose(runtime, model) -> dict[str, str]:
    """Chat, stage A, stage B; returns ``{title: proposal id}``."""
    model.proposals = two_facts
    await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井", T0)
    await say(runtime, ALICE_STREAM, "我对花生过敏", T0 + 60)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    await evidence.run_stage_b()
    queue = await ReviewService(runtime, human(ALICE_STORE)).list_proposals()
    return {p["title"]: p["id"] for p in queue["items"]}


async def test_only_a_human_can_decide(runtime, hub, model):
    ids = await propose(runtime, model)
    bot = scope_for_chat(runtime.config.scope, platform="qq", chat_type="private", stream_id=ALICE_STREAM)
    for scope in (bot, bot.acting(authority="dreaming", actor="dream")):
        with pytest.raises(ValidationError, match="human"):
            await ReviewService(runtime, scope).approve(ids["爱喝龙井"])
        with pytest.raises(ValidationError, match="human"):
            await ReviewService(runtime, scope).reject(ids["爱喝龙井"], reason="x")
    assert (await ReviewService(runtime, human(ALICE_STORE)).list_proposals())["matched"] == 2


async def test_edit_then_approve_writes_the_edited_memory_and_keeps_the_original(runtime, hub, model):
    ids = await propose(runtime, model)
    review = ReviewService(runtime, human(ALICE_STORE))
    result = await review.approve(
        ids["爱喝龙井"],
        edits={"content": "小明最喜欢西湖龙井，其次是碧螺春。", "tags": "饮食, 茶"},
        note="补充了第二喜欢的茶",
    )
    assert result["edited"] and result["changed_fields"] == ["content", "tags"] and result["mode"] == "created"
    record = await runtime.records.get(result["memory_id"])
    assert record["content"] == "小明最喜欢西湖龙井，其次是碧螺春。" and record["tags"] == ["饮食", "茶"]
    assert record["authority"] == "human" and record["author"] == "admin"
    detail = (await review.get_proposal(ids["爱喝龙井"]))["proposal"]
    assert detail["status"] == "approved" and detail["content"] == "小明最喜欢龙井茶。"
    assert detail["final_fields"]["content"] == "小明最喜欢西湖龙井，其次是碧螺春。"
    assert detail["review_reason"] == "补充了第二喜欢的茶"
    assert await review.provenance([result["memory_id"]]) == {result["memory_id"]: [ids["爱喝龙井"]]}
    with pytest.raises(ValidationError, match="pending"):
        await review.approve(ids["爱喝龙井"])


async def test_reject_needs_a_reason_and_is_kept(runtime, hub, model):
    ids = await propose(runtime, model)
    review = ReviewService(runtime, human(ALICE_STORE))
    with pytest.raises(ValidationError, match="原因"):
        await review.reject(ids["花生过敏"], reason="  ")
    await review.reject(ids["花生过敏"], reason="不准确")
    kept = await review.list_proposals(status="rejected")
    assert [(p["id"], p["review_reason"], p["content"]) for p in kept["items"]] == [
        (ids["花生过敏"], "不准确", "小明对花生过敏。")
    ]
    with pytest.raises(ValidationError):
        await review.approve(ids["花生过敏"])
    batch = (await review.get_proposal(ids["爱喝龙井"]))["proposal"]["batch_id"]
    assert (await review.reject_batch(batch, reason="整批不要"))["rejected"] == [ids["爱喝龙井"]]


async def test_a_half_finished_approval_is_finished_not_repeated(runtime, hub, model):
    ids = await propose(runtime, model)
    pid = ids["爱喝龙井"]
    # the memory write of an earlier approval committed, then the process died before the proposal was marked
    writer = owner_scope(
        ALICE_STORE, ALICE, authority="human", actor="admin", cause=f"proposal:{pid}", batch_id=review_batch(pid)
    )
    written = await runtime.memory_service(writer).upsert_memory(
        "小明最喜欢龙井茶。", title="爱喝龙井", memory_type="preference"
    )
    result = await ReviewService(runtime, human(ALICE_STORE)).approve(pid)
    assert (result["mode"], result["memory_id"]) == ("recovered", written["id"])
    listing = await runtime.memory_service(human(ALICE_STORE)).list_memory_entries()
    assert listing["total"] == 1


async def test_an_update_proposal_changes_the_target_memory_and_can_be_undone(runtime, hub, model):
    service = runtime.memory_service(owner_scope(ALICE_STORE, ALICE, authority="agent", actor="agent"))
    target = await service.upsert_memory("小明喜欢喝咖啡。", title="饮品偏好", memory_type="preference")

    def change(task):
        hit = find_message(task, "戒咖啡")
        return (
            [
                {
                    "op": "update",
                    "memory_id": target["id"],
                    "title": "饮品偏好",
                    "content": "小明戒了咖啡，改喝茶。",
                    "memory_type": "preference",
                    "message_ids": [hit[0]],
                }
            ]
            if hit
            else []
        )

    model.proposals = change
    await say(runtime, ALICE_STREAM, "我已经戒咖啡了，现在只喝茶", T0)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    [pid] = (await evidence.run_stage_b())["created"]
    review = ReviewService(runtime, human(ALICE_STORE))
    detail = await review.get_proposal(pid)
    assert detail["proposal"]["kind"] == "update" and detail["target"]["content"] == "小明喜欢喝咖啡。"
    result = await review.approve(pid)
    assert (result["memory_id"], result["mode"]) == (target["id"], "updated")
    assert (await runtime.records.get(target["id"]))["content"] == "小明戒了咖啡，改喝茶。"
    undo = await runtime.memory_service(human(ALICE_STORE)).restore_batch(batch_id=result["batch_id"])
    assert target["id"] in undo["restored"]
    assert (await runtime.records.get(target["id"]))["content"] == "小明喜欢喝咖啡。"


async def test_other_stores_proposals_are_invisible(runtime, hub, model):
    ids = await propose(runtime, model)
    bob_admin = ReviewService(runtime, human(BOB_STORE))
    assert (await bob_admin.list_proposals())["matched"] == 0
    with pytest.raises(NotFoundError):
        await bob_admin.get_proposal(ids["爱喝龙井"])
    with pytest.raises(NotFoundError):
        await bob_admin.approve(ids["爱喝龙井"])


async def test_flags_after_a_retraction_are_kept_or_trashed_by_a_human(runtime, hub, model):
    ids = await propose(runtime, model)
    review = ReviewService(runtime, human(ALICE_STORE))
    tea = await review.approve(ids["爱喝龙井"])
    nuts = await review.approve(ids["花生过敏"])
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    messages = {m["text"]: m["id"] for m in (await evidence.list_messages())["items"]}
    await evidence.retract_message(messages["我最喜欢的茶是龙井"])
    await evidence.retract_message(messages["我对花生过敏"])
    # each memory rests on the message its proposal cited, not on the other message of the shared episode
    flags = (await review.list_flags())["items"]
    assert sorted((f["memory_id"], f["entry_id"]) for f in flags) == sorted(
        [(tea["memory_id"], messages["我最喜欢的茶是龙井"]), (nuts["memory_id"], messages["我对花生过敏"])]
    )
    record = await runtime.records.get(tea["memory_id"])
    assert [f["entry_id"] for f in record["extra"]["review_flags"]] == [messages["我最喜欢的茶是龙井"]]
    for flag in flags:
        resolution = "kept" if flag["memory_id"] == tea["memory_id"] else "deleted"
        await review.resolve_flag(flag["flag_id"], resolution=resolution, note="已核实")
    assert (await review.list_flags())["items"] == []
    kept = await runtime.records.get(tea["memory_id"])
    assert kept["extra"]["review_flags"] == [] and not kept["is_deleted"]
    assert (await runtime.records.get(nuts["memory_id"], include_deleted=True))["is_deleted"]
    with pytest.raises(ValidationError, match="resolution"):
        await review.resolve_flag(1, resolution="ignore")

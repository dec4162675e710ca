"""Unsure pairs (issue 28, item 4): where the local decision half agrees, the write is a new fact and the pair goes,
after the commit, to a model or to the review queue; accept and dismiss are audited and revertible.

The real local model embeds (whether two texts are near enough to compare is a question of meaning). The model
here is the host's adapter (``HostChatModel``), so a test can hold its answer back; the OpenAI-compatible HTTP path
(a real server on 127.0.0.1) is in ``tests/evidence/test_openai_server.py``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from booku_memory.services.chat_scope import admin_scope
from booku_memory.services.errors import ValidationError
from booku_memory.services.evidence import HostChatModel, attach_evidence
from booku_memory.services.evidence.unsure_pairs import (
    PAIR_TASK_MARK,
    UnsurePairs,
    resolve_unsure_pair,
)

from .memory_support import MEMORY_SERVICE, STORE, TRIPLET, open_store

# The same subject and slot, a different value, no word of change: an update or a second number? Unsure.
OLD_PHONE = "我的手机号是13800001111。"
NEW_PHONE = "我的手机号是13900002222。"
OLD_LESSON = "我每周二晚上上钢琴课。"
NEW_LESSON = "我每周四晚上上钢琴课。"


async def settle(runtime) -> None:
    """Wait for the unsure pairs' jobs (a pair is resolved after its write returned); the runtime's long-lived
    jobs, such as the vector index's watchdog, never end and are not waited for."""
    while pending := [task for task in runtime._background if task.get_name().startswith("booku-unsure-")]:
        await asyncio.gather(*pending, return_exceptions=True)


def reviewer():
    return admin_scope([STORE], write_store=STORE)


async def queued_pair(handle, old_text: str, new_text: str) -> tuple[dict, dict, UnsurePairs, dict]:
    """Write an unsure pair through the service, wait for its job; (old, new, the reviewer's queue, the pair)."""
    svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
    old = await svc.upsert_memory(old_text)
    new = await svc.upsert_memory(new_text)
    await settle(rt)
    pairs = UnsurePairs(rt, reviewer())
    [pair] = (await pairs.list_pairs())["items"]
    return old, new, pairs, pair


async def test_without_a_model_an_unsure_pair_waits_in_the_review_queue(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await svc.upsert_memory(OLD_PHONE)
        new = await svc.upsert_memory(NEW_PHONE)
        await settle(rt)
        assert new["mode"] == "created" and "superseded" not in new
        assert new["unsure"] == [{"id": old["id"], "kind": "maybe_update"}]
        queue = await UnsurePairs(rt, reviewer()).list_pairs()
        old_item = (await svc.get_memory_detail(memory_id=old["id"]))["item"]
        audit = await svc.list_audit_log(action="unsure_pair_queued")
    [pair] = queue["items"]
    assert (pair["old_memory_id"], pair["new_memory_id"], pair["kind_label"]) == (old["id"], new["id"], "可能是更新")
    assert pair["old"]["content"] == OLD_PHONE and pair["new"]["content"] == NEW_PHONE
    assert old_item["metadata"]["superseded_by"] == ""  # nothing decided yet: both are current
    assert [entry["memory_id"] for entry in audit["items"]] == [pair["pair_id"]]


async def test_accept_supersedes_with_human_authority_and_can_be_undone(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        old, new, pairs, pair = await queued_pair(handle, OLD_PHONE, NEW_PHONE)
        accepted = await pairs.accept(pair["pair_id"])
        superseded = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"]
        history = await svc.get_memory_history(memory_id=old["id"])
        audit = await svc.list_audit_log(action="unsure_pair_accepted")
        with pytest.raises(ValidationError, match="已确认"):
            await pairs.dismiss(pair["pair_id"])
        await svc.unsupersede_memory(memory_id=old["id"])
        after_undo = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"]
        assert (await pairs.list_pairs())["items"] == []
    assert accepted["pair"]["status"] == "accepted" and accepted["pair"]["decided_by"] == "human"
    assert superseded == new["id"] and after_undo == ""
    assert history["versions"][-1]["action"] == "supersede"
    assert [(e["authority"], e["memory_id"]) for e in audit["items"]] == [("human", pair["pair_id"])]


async def test_dismiss_keeps_both_and_the_pair_is_not_asked_again(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old, new, pairs, pair = await queued_pair(handle, OLD_LESSON, NEW_LESSON)
        dismissed = await pairs.dismiss(pair["pair_id"])

        again = await resolve_unsure_pair(rt, rt.default_scope, new["id"], old["id"], "maybe_update")
        items = {i: (await svc.get_memory_detail(memory_id=i))["item"] for i in (old["id"], new["id"])}
        with pytest.raises(ValidationError, match="human"):
            await UnsurePairs(rt, rt.default_scope).accept(pair["pair_id"])
    assert dismissed["pair"]["status"] == "dismissed" and dismissed["changed"] == []
    assert again is None  # recorded once: a dismissed pair is not queued again
    assert [items[i]["content"] for i in (old["id"], new["id"])] == [OLD_LESSON, NEW_LESSON]
    assert all(item["metadata"]["superseded_by"] == "" for item in items.values())


async def test_the_model_is_asked_after_the_write_committed_and_its_update_applies_as_dreaming(
    tmp_path: Path, e5
) -> None:
    """The write returns while the model still thinks: the question is never inside the write's transaction."""
    release = asyncio.Event()
    seen: dict[str, object] = {}

    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime

        async def host_model(messages: list[dict[str, str]]) -> str:
            assert PAIR_TASK_MARK in messages[0]["content"]
            new_id = seen["new"] = await rt.db.fetch_all(
                "SELECT memory_id FROM booku_memory_records WHERE content = ?", [NEW_PHONE]
            )
            seen["committed"] = bool(new_id)  # read on the reader connection: the write is already committed
            await release.wait()
            return "UPDATE"

        attach_evidence(rt, chat_model=HostChatModel(host_model))
        old = await svc.upsert_memory(OLD_PHONE)
        new = await asyncio.wait_for(svc.upsert_memory(NEW_PHONE), timeout=60)
        before = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"]
        release.set()
        await settle(rt)
        after = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"]
        audit = await svc.list_audit_log(memory_id=old["id"])
        decided = await svc.list_audit_log(action="unsure_pair_accepted")
    assert seen["committed"] is True
    assert before == "" and after == new["id"]
    assert ("supersede", "dreaming") in [(e["action"], e["authority"]) for e in audit["items"]]
    [event] = decided["items"]
    assert event["authority"] == "dreaming"


async def test_propose_leaves_the_model_answer_for_a_human(tmp_path: Path, e5) -> None:
    async def host_model(messages: list[dict[str, str]]) -> str:
        return "UPDATE"

    async with open_store(tmp_path, embedder=e5, config={"write_conflict": {"unsure_pairs": "propose"}}) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        attach_evidence(rt, chat_model=HostChatModel(host_model))
        old = await svc.upsert_memory(OLD_PHONE)
        await svc.upsert_memory(NEW_PHONE)
        await settle(rt)
        [pair] = (await UnsurePairs(rt, reviewer()).list_pairs())["items"]
        current = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"]
    assert current == "" and pair["status"] == "pending" and pair["model_answer"] == "UPDATE"


async def test_accepting_a_possible_restatement_merges_losslessly_and_restore_batch_undoes_it(tmp_path: Path) -> None:
    old_text, new_text = "我对花生过敏，吃了会起疹子。", "花生我碰不得，一吃就起红疹。"
    async with open_store(tmp_path) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await svc.create_memory(title="花生过敏", content=old_text, **TRIPLET)
        new = await svc.create_memory(title="不能吃花生", content=new_text, **TRIPLET)
        pair = await resolve_unsure_pair(rt, rt.default_scope, new["id"], old["id"], "maybe_duplicate")
        [listed] = (await UnsurePairs(rt, reviewer()).list_pairs())["items"]
        accepted = await UnsurePairs(rt, reviewer()).accept(pair["pair_id"])
        merged = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["content"]
        gone = await rt.records.get(new["id"])
        await svc.restore_batch(batch_id=f"unsure:{pair['pair_id']}")
        undone = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["content"]
        back = await rt.records.get(new["id"])
    assert listed["kind_label"] == "可能重复"
    assert sorted(accepted["changed"]) == sorted([old["id"], new["id"]])
    assert old_text in merged and "一吃就起红疹" in merged  # lossless: both texts' words are kept
    assert gone is None  # the restatement itself went to the trash, its words live on in the old memory
    assert undone == old_text and back is not None and back["content"] == new_text


@pytest.mark.parametrize(("reply", "status"), [("ADD", "dismissed"), ("我不确定", "pending")])
async def test_a_model_that_says_add_or_nothing_usable_changes_no_memory(tmp_path: Path, e5, reply, status) -> None:
    async def host_model(messages: list[dict[str, str]]) -> str:
        return reply

    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        attach_evidence(rt, chat_model=HostChatModel(host_model))
        old = await svc.upsert_memory(OLD_PHONE)
        await svc.upsert_memory(NEW_PHONE)
        await settle(rt)
        [pair] = (await UnsurePairs(rt, reviewer()).list_pairs(status=status))["items"]
        current = (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"]
    assert current == ""
    assert pair["decided_by"] == ("dreaming" if status == "dismissed" else "")

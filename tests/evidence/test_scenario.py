"""The whole story of issue 10, end to end on a real store.

A conversation is captured, stage A makes episodes, stage B proposes two memories, a human approves one and rejects
one, a source is retracted, and every step is visible in the audit log and in the dashboard.
"""

from __future__ import annotations

import httpx

from booku_memory.router import DashboardSettings, create_dashboard_app
from booku_memory.router.review import router as review_router
from booku_memory.services.evidence import EvidenceService, ReviewService
from booku_memory.services.scope import Scope

from .conftest import ALICE_STORE, ALICE_STREAM, BOB_STORE, BOB_STREAM, T0, human
from .support import db_bytes, find_message, say

API_KEY = "scenario-dashboard-key-0123456789"
SECRET = "订餐的时候帮我注意一下，暗号QZWPLUM"


def propose_allergy_and_tea(task):
    """The scripted stage B: one proposal per fact it finds in the chat, each citing its message and episode."""
    proposals = []
    allergy = find_message(task, "花生")
    if allergy:
        proposals.append(
            {
                "op": "create",
                "title": "小明花生过敏",
                "content": "小明对花生过敏，点餐时要避开花生。",
                "memory_type": "preference",
                "tags": ["饮食", "过敏"],
                "message_ids": [allergy[0]],
                "episode_ids": [allergy[1]],
                "reason": "用户明确说明的健康信息",
            }
        )
    tea = find_message(task, "龙井")
    if tea:
        proposals.append(
            {
                "op": "create",
                "title": "小明爱喝龙井",
                "content": "小明最喜欢的茶是龙井。",
                "memory_type": "preference",
                "message_ids": [tea[0]],
                "reason": "用户的饮品偏好",
            }
        )
    return proposals


async def test_capture_dream_review_retract_and_audit(runtime, hub, model):
    model.proposals = propose_allergy_and_tea
    # 1. a conversation is captured (both directions), plus another person's chat in another store
    ids = {
        "trip": await say(runtime, ALICE_STREAM, "我下周二要去杭州出差，住在西湖边。", T0),
        "reply": await say(
            runtime, ALICE_STREAM, "好的，祝出差顺利！", T0 + 30, sender="bot", name="Booku", direction="sent"
        ),
        "allergy": await say(runtime, ALICE_STREAM, f"对了，我对花生过敏，{SECRET}", T0 + 60),
        "tea": await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井。", T0 + 90),
    }
    await say(runtime, BOB_STREAM, "我养了一只叫豆豆的猫。", T0 + 10, sender="u2", name="小红")
    alice = EvidenceService(runtime, human(ALICE_STORE))
    listed = await alice.list_messages()
    assert {m["id"] for m in listed["items"]} == set(ids.values())  # Bob's chat is not in Alice's store

    # 2. stage A: one episode per channel, from the closed windows
    stage_a = await alice.run_stage_a(now=T0 + 3600)
    assert stage_a["state"] == "ok" and len(stage_a["created"]) == 2
    episodes = (await alice.list_episodes())["items"]
    assert len(episodes) == 1 and episodes[0]["message_ids"] == list(ids.values())
    assert "原始聊天消息才是权威" in episodes[0]["text"]

    # 3. stage B: two pending proposals with the dreaming authority and their evidence; no memory yet
    stage_b = await alice.run_stage_b()
    assert stage_b["state"] == "ok" and len(stage_b["created"]) == 2
    review = ReviewService(runtime, human(ALICE_STORE, BOB_STORE))
    queue = await review.list_proposals()
    assert queue["matched"] == 2 and {p["authority"] for p in queue["items"]} == {"dreaming"}
    by_title = {p["title"]: p for p in queue["items"]}
    allergy, tea = by_title["小明花生过敏"], by_title["小明爱喝龙井"]
    assert (
        await runtime.memory_service(
            Scope(owner_uid="x", readable_store_keys=(ALICE_STORE,), writable_store_key=ALICE_STORE)
        ).list_memory_entries()
    )["total"] == 0
    detail = await review.get_proposal(allergy["id"])
    assert [m["id"] for m in detail["messages"]] == [ids["allergy"]]
    assert SECRET in detail["messages"][0]["text"]
    assert [m["id"] for m in detail["episodes"][0]["messages"]] == list(ids.values())

    # 4. a human approves one and rejects the other
    approved = await review.approve(allergy["id"])
    rejected = await review.reject(tea["id"], reason="偏好会变，不必长期记住")
    assert rejected["status"] == "rejected"
    memory = await runtime.memory_service(human(ALICE_STORE)).get_memory_detail(memory_id=approved["memory_id"])
    meta = memory["item"]["metadata"]
    assert meta["authority"] == "human" and meta["source"] == "dreaming_proposal"
    record = await runtime.records.get(approved["memory_id"])
    assert record["owner_uid"] == f"qq:{ALICE_STREAM}" and record["store_key"] == ALICE_STORE
    assert record["extra"]["provenance"][0]["proposal_id"] == allergy["id"]
    assert ids["allergy"] in record["extra"]["provenance"][0]["message_ids"]
    assert (await review.get_proposal(tea["id"]))["proposal"]["review_reason"] == "偏好会变，不必长期记住"

    # 5. the source of the approved memory is retracted: bytes gone, episode gone, memory flagged for review
    assert SECRET.encode("utf-8") in await db_bytes(runtime)
    retraction = await alice.retract_message(ids["allergy"], reason="用户要求删除")
    assert retraction["episodes_removed"] == [episodes[0]["id"]]
    assert retraction["memories_flagged"] == [approved["memory_id"]]
    assert (await alice.get_message(ids["allergy"]))["item"]["text"] == ""
    on_disk = await db_bytes(runtime)
    assert SECRET.encode("utf-8") not in on_disk and b"qzwplum" not in on_disk
    recalled = await alice.search("花生过敏 暗号", sources=["chat", "episode"])
    assert ids["allergy"] not in {r["id"] for r in recalled["results"]}
    assert all("暗号" not in r["text"] for r in recalled["results"])
    flags = (await review.list_flags())["items"]
    assert [(f["memory_id"], f["entry_id"]) for f in flags] == [(approved["memory_id"], ids["allergy"])]
    # the other messages of the removed episode are summarised again, without the retracted one
    again = await alice.run_stage_a(now=T0 + 7200)
    assert len(again["created"]) == 1
    assert (await alice.list_episodes())["items"][0]["message_ids"] == [ids["trip"], ids["reply"], ids["tea"]]

    # 6. every step is in the audit log, with the right authority
    rows, _ = await runtime.audit.list(store_keys=[ALICE_STORE], limit=200)
    steps = [(row["action"], row["authority"]) for row in reversed(rows)]
    expected = [
        ("chat_captured", "mechanical"),
        ("episode_created", "dreaming"),
        ("proposal_created", "dreaming"),
        ("create", "human"),
        ("attach_provenance", "human"),
        ("proposal_approved", "human"),
        ("proposal_rejected", "human"),
        ("episode_removed", "mechanical"),
        ("flag_for_review", "mechanical"),
        ("review_flag_raised", "mechanical"),
        ("chat_retracted", "human"),
    ]
    for step in expected:
        assert step in steps, step
    assert (
        steps.index(("proposal_created", "dreaming"))
        < steps.index(("proposal_approved", "human"))
        < steps.index(("chat_retracted", "human"))
    )
    assert sum(1 for s in steps if s[0] == "chat_captured") == 4
    assert all(SECRET not in str(row["after"]) for row in rows)

    # ... and in the dashboard: the audit page, the queue and the proposal page beside its evidence
    app = create_dashboard_app(lambda: runtime, settings=DashboardSettings(api_key=API_KEY, page_size=100))
    app.include_router(review_router)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers={"X-API-Key": API_KEY}
    ) as client:
        audit_page = await client.get("/audit", params={"store": ALICE_STORE})
        assert audit_page.status_code == 200
        for action in ("proposal_approved", "proposal_rejected", "chat_retracted", "episode_created"):
            assert action in audit_page.text
        queue_page = await client.get("/review", params={"status": "approved"})
        assert queue_page.status_code == 200 and "小明花生过敏" in queue_page.text and "待复核的记忆" in queue_page.text
        proposal_page = await client.get(f"/review/proposals/{allergy['id']}")
        assert proposal_page.status_code == 200 and "已撤回" in proposal_page.text
        api_queue = await client.get("/api/review/proposals", params={"status": "all"})
        assert {p["status"] for p in api_queue.json()["items"]} == {"approved", "rejected"}

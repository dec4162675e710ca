"""The review queue in the dashboard: the real app (plus the review router) over a real store, through httpx."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from booku_memory.router import DashboardSettings, create_dashboard_app
from booku_memory.router.review import router as review_router
from booku_memory.services.evidence import EvidenceService

from .conftest import ALICE_STORE, ALICE_STREAM, BOB_STORE, BOB_STREAM, T0, human
from .support import find_message, say

API_KEY = "review-dashboard-key-0123456789"


def two_facts(task):
    proposals = []
    for needle, title in (("龙井", "爱喝龙井"), ("花生", "花生过敏")):
        hit = find_message(task, needle)
        if hit:
            proposals.append(
                {
                    "op": "create",
                    "title": title,
                    "content": f"小明{title}。",
                    "memory_type": "preference",
                    "tags": ["饮食"],
                    "message_ids": [hit[0]],
                    "episode_ids": [hit[1]],
                }
            )
    return proposals


@pytest.fixture
async def proposals(runtime, hub, model) -> dict[str, Any]:
    model.proposals = two_facts
    messages = {
        "tea": await say(runtime, ALICE_STREAM, "我最喜欢的茶是龙井", T0),
        "nuts": await say(runtime, ALICE_STREAM, "我对花生过敏", T0 + 60),
    }
    await say(runtime, BOB_STREAM, "鲍勃只是路过", T0, sender="u2")
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    await evidence.run_stage_b()
    queue = await evidence.hub.dream_store.list_proposals(store_keys=[ALICE_STORE], status="pending")
    return {"ids": {p["fields"]["title"]: p["proposal_id"] for p in queue[0]}, "messages": messages}


@pytest.fixture
def app(runtime):
    dashboard = create_dashboard_app(lambda: runtime, settings=DashboardSettings(api_key=API_KEY, page_size=50))
    dashboard.include_router(review_router)
    return dashboard


def client(app, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver", **kwargs)


@pytest.fixture
async def api(app) -> AsyncIterator[httpx.AsyncClient]:
    async with client(app, headers={"X-API-Key": API_KEY}) as c:
        yield c


@pytest.fixture
async def browser(app) -> AsyncIterator[httpx.AsyncClient]:
    """Logged in through the form; the session's CSRF token is in ``browser.csrf``."""
    async with client(app) as c:
        page = await c.get("/login")
        token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
        assert (await c.post("/login", data={"api_key": API_KEY, "csrf_token": token, "next": ""})).status_code == 303
        c.csrf = (await c.get("/api/session")).json()["csrf_token"]  # type: ignore[attr-defined]
        yield c


async def test_review_needs_credentials(app, proposals):
    async with client(app) as anon:
        assert (await anon.get("/api/review/proposals")).status_code == 401
        page = await anon.get("/review")
        assert page.status_code == 303 and "/login" in page.headers["location"]


async def test_json_api_queue_detail_approve_reject_and_retract(api, proposals, runtime):
    ids, messages = proposals["ids"], proposals["messages"]
    queue = (await api.get("/api/review/proposals")).json()
    assert queue["matched"] == 2 and queue["counts"]["pending"] == 2
    detail = (await api.get(f"/api/review/proposals/{ids['爱喝龙井']}")).json()
    assert [m["id"] for m in detail["messages"]] == [messages["tea"]] and detail["episodes"][0]["messages"]
    approved = await api.post(
        f"/api/review/proposals/{ids['爱喝龙井']}/approve",
        json={"edits": {"content": "小明最爱西湖龙井。"}, "note": "改得更准确"},
    )
    assert approved.status_code == 200 and approved.json()["changed_fields"] == ["content"]
    memory = await runtime.records.get(approved.json()["memory_id"])
    assert memory["content"] == "小明最爱西湖龙井。" and memory["authority"] == "human"
    assert (await api.post(f"/api/review/proposals/{ids['花生过敏']}/reject", json={"reason": ""})).status_code == 422
    rejected = await api.post(f"/api/review/proposals/{ids['花生过敏']}/reject", json={"reason": "重复"})
    assert rejected.json()["status"] == "rejected"
    again = await api.post(f"/api/review/proposals/{ids['花生过敏']}/approve", json={})
    assert again.status_code == 400 and "pending" in again.json()["detail"]
    retracted = await api.post(f"/api/review/messages/{messages['tea']}/retract", json={"reason": "用户要求"})
    assert retracted.status_code == 200 and retracted.json()["memories_flagged"] == [memory["memory_id"]]
    flags = (await api.get("/api/review/flags")).json()["items"]
    assert [f["memory_id"] for f in flags] == [memory["memory_id"]]
    resolved = await api.post(f"/api/review/flags/{flags[0]['flag_id']}/resolve", json={"resolution": "kept"})
    assert resolved.status_code == 200 and (await api.get("/api/review/flags")).json()["items"] == []
    listed = (await api.get("/api/review/messages", params={"store": ALICE_STORE})).json()
    assert {m["id"]: m["retracted"] for m in listed["items"]}[messages["tea"]] is True
    status = (await api.get("/api/review/status")).json()
    assert status["proposals"]["approved"] == 1 and status["dreaming"]["stage_b"]["state"] == "ok"


async def test_the_store_selection_limits_the_queue(api, proposals):
    only_bob = (await api.get("/api/review/proposals", params={"store": BOB_STORE})).json()
    assert only_bob["matched"] == 0
    missing = await api.get(f"/api/review/proposals/{proposals['ids']['爱喝龙井']}", params={"store": BOB_STORE})
    assert missing.status_code == 404


async def test_pages_show_evidence_side_by_side_and_take_decisions(browser, proposals, runtime):
    ids = proposals["ids"]
    queue = await browser.get("/review")
    assert queue.status_code == 200 and "爱喝龙井" in queue.text and "花生过敏" in queue.text
    page = await browser.get(f"/review/proposals/{ids['爱喝龙井']}")
    assert page.status_code == 200
    assert "我最喜欢的茶是龙井" in page.text and "修改后批准" in page.text and "驳回" in page.text
    forged = await browser.post(f"/review/proposals/{ids['爱喝龙井']}/approve", data={"mode": "as_is"})
    assert forged.status_code == 403
    edited = await browser.post(
        f"/review/proposals/{ids['爱喝龙井']}/approve",
        data={
            "csrf_token": browser.csrf,
            "mode": "edit",
            "title": "爱喝龙井",
            "content": "小明只喝明前龙井。",
            "memory_type": "preference",
            "tags": "饮食, 茶",
            "core_tags": "",
            "diffusion_tags": "",
            "opposing_tags": "",
        },
    )
    assert edited.status_code == 303 and "notice=approved" in edited.headers["location"]
    decided = (await browser.get(f"/review/proposals/{ids['爱喝龙井']}")).text
    assert "已批准" in decided and "小明只喝明前龙井。" in decided
    empty = await browser.post(
        f"/review/proposals/{ids['花生过敏']}/reject", data={"csrf_token": browser.csrf, "reason": " "}
    )
    assert empty.status_code == 400 and "原因" in empty.text
    rejected = await browser.post(
        f"/review/proposals/{ids['花生过敏']}/reject", data={"csrf_token": browser.csrf, "reason": "不需要记"}
    )
    assert rejected.status_code == 303
    assert "不需要记" in (await browser.get(f"/review/proposals/{ids['花生过敏']}")).text


async def test_retracting_from_the_evidence_page_asks_first(browser, proposals, runtime):
    entry = proposals["messages"]["nuts"]
    evidence_page = await browser.get("/review/evidence")
    assert (
        evidence_page.status_code == 200
        and "我对花生过敏" in evidence_page.text
        and "鲍勃只是路过" in evidence_page.text
    )
    ask = await browser.post(f"/review/evidence/{entry}/retract", data={"csrf_token": browser.csrf})
    assert ask.status_code == 200 and "确认撤回" in ask.text and "我对花生过敏" in ask.text
    assert (await EvidenceService(runtime, human(ALICE_STORE)).get_message(entry))["item"]["text"]
    done = await browser.post(
        f"/review/evidence/{entry}/retract", data={"csrf_token": browser.csrf, "confirmed": "yes", "reason": "用户要求"}
    )
    assert done.status_code == 303 and "notice=retracted" in done.headers["location"]
    after = await browser.get("/review/evidence", params={"channel": ALICE_STREAM})
    assert "我对花生过敏" not in after.text and "已撤回" in after.text
    queue = await browser.get("/review", params={"status": "withdrawn"})
    assert proposals["ids"]["花生过敏"] in queue.text

"""Leak test over the whole dashboard: with only Alice's store selected, no route returns or changes Bob's data.

Both owners wrote the same words, so a read that crossed stores would find Bob's memories. Every API route of the
router must have a case here (a new route without one fails the test), each case also checks that Alice's own data
IS there (so the test cannot pass by returning nothing), and afterwards Bob's audit log proves nothing of his was
changed.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.routing import APIRoute

from booku_memory.router import api as api_module
from booku_memory.router import pages as pages_module

from .conftest import ALICE_MARK, ALICE_STORE, BOB_MARK, TRIPLET, chat_scope

ALICE_ONLY = {"store": ALICE_STORE}
NEW_CONTENT = "管理员替 Alice 记下：她最近开始喝龙井"


def _route_keys(router) -> set[tuple[str, str]]:
    return {(method, route.path) for route in router.routes if isinstance(route, APIRoute) for method in route.methods}


def _bob_strings(bob: dict[str, Any]) -> list[str]:
    """Everything of Bob's that may never appear in an answer to Alice's selection."""
    return [BOB_MARK, *bob["memory_ids"], bob["document_id"], bob["memo_id"], bob["batch_id"]]


def _assert_no_bob(text: str, bob: dict[str, Any], where: str, sent: str = "") -> None:
    """No string of Bob's in ``text``, except ids the request itself sent (echoed back as ``missing`` or in a 404)."""
    for secret in _bob_strings(bob):
        if secret not in sent:
            assert secret not in text, f"{where} 泄露了 {secret}"


async def _bob_audit_rows(memory) -> int:
    service = memory.runtime.memory_service(chat_scope("2002"))
    return (await service.list_audit_log(limit=1))["matched"]


def _api_cases(alice: dict[str, Any], bob: dict[str, Any]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Per API route: the requests to make with Alice's store selected, and what must come back.

    ``status`` is the expected HTTP status; ``alice`` a string of Alice's that must be in the answer (proof the
    route really read the selected store).
    """
    bob_memory, bob_doc = bob["hobby"], bob["document_id"]
    return {
        ("GET", "/api/session"): [{"path": "/api/session", "status": 200}],
        ("GET", "/api/stores"): [{"path": "/api/stores", "status": 200, "alice": ALICE_STORE}],
        ("GET", "/api/status"): [{"path": "/api/status", "status": 200, "alice": alice["hobby"]}],
        ("GET", "/api/statistics"): [{"path": "/api/statistics", "status": 200}],
        ("GET", "/api/folders"): [{"path": "/api/folders", "status": 200, "alice": "爱好"}],
        ("GET", "/api/memories"): [
            {"path": "/api/memories", "status": 200, "alice": alice["hobby"]},
            {
                "path": "/api/memories",
                "params": {"keyword": "绿茶", "page_size": 100},
                "status": 200,
                "alice": alice["hobby"],
            },
        ],
        ("GET", "/api/trash"): [{"path": "/api/trash", "status": 200, "alice": alice["trashed"]}],
        ("GET", "/api/search"): [
            {
                "path": "/api/search",
                "params": {"q": "绿茶 西湖 散步", "top_k": 50, "include_archived": "true", "include_knowledge": "true"},
                "status": 200,
                "alice": alice["hobby"],
            },
            {
                "path": "/api/search",
                "params": {"q": "绿茶", "mode": "keyword", "top_k": 50},
                "status": 200,
                "alice": alice["hobby"],
            },
            {
                "path": "/api/search",
                "params": {"q": "绿茶", "core_tags": "绿茶", "diffusion_tags": "散步", "opposing_tags": "咖啡"},
                "status": 200,
                "alice": alice["hobby"],
            },
        ],
        ("POST", "/api/memories"): [
            {
                "path": "/api/memories",
                "json": {"title": "新记忆", "content": NEW_CONTENT, **TRIPLET},
                "status": 201,
                "alice": NEW_CONTENT,
            },
        ],
        ("POST", "/api/memories/bulk"): [
            {
                "path": "/api/memories/bulk",
                "json": {"action": action, "memory_ids": sorted(bob["memory_ids"]), **extra},
                "status": 200,
            }
            for action, extra in (
                ("delete", {}),
                ("restore", {}),
                ("archive", {}),
                ("move", {"to_folder_id": "x"}),
                ("purge", {"confirm": "永久删除"}),
            )
        ],
        ("GET", "/api/memories/{memory_id}"): [
            {"path": f"/api/memories/{bob_memory}", "status": 404},
            {"path": f"/api/memories/{alice['hobby']}", "status": 200, "alice": alice["hobby"]},
        ],
        ("GET", "/api/memories/{memory_id}/history"): [{"path": f"/api/memories/{bob_memory}/history", "status": 404}],
        ("PUT", "/api/memories/{memory_id}"): [
            {"path": f"/api/memories/{bob_memory}", "json": {"content": "篡改"}, "status": 404}
        ],
        ("PATCH", "/api/memories/{memory_id}"): [
            {"path": f"/api/memories/{bob_memory}", "json": {"title": "篡改"}, "status": 404}
        ],
        ("DELETE", "/api/memories/{memory_id}"): [{"path": f"/api/memories/{bob_memory}", "status": 404}],
        ("POST", "/api/memories/{memory_id}/hard-delete"): [
            {"path": f"/api/memories/{bob_memory}/hard-delete", "json": {"confirm": bob_memory}, "status": 404}
        ],
        ("POST", "/api/memories/{memory_id}/restore"): [
            {"path": f"/api/memories/{bob['trashed']}/restore", "status": 404}
        ],
        ("POST", "/api/memories/{memory_id}/archive"): [{"path": f"/api/memories/{bob_memory}/archive", "status": 404}],
        ("POST", "/api/memories/{memory_id}/revert"): [
            {"path": f"/api/memories/{bob_memory}/revert", "json": {"version": 1}, "status": 404}
        ],
        ("POST", "/api/memories/{memory_id}/supersede"): [
            {"path": f"/api/memories/{bob_memory}/supersede", "json": {"superseded_by": alice["hobby"]}, "status": 404},
            {"path": f"/api/memories/{alice['hobby']}/supersede", "json": {"superseded_by": bob_memory}, "status": 404},
        ],
        ("POST", "/api/memories/{memory_id}/unsupersede"): [
            {"path": f"/api/memories/{bob_memory}/unsupersede", "status": 404}
        ],
        ("GET", "/api/knowledge/documents"): [
            {"path": "/api/knowledge/documents", "status": 200, "alice": alice["document_id"]}
        ],
        ("POST", "/api/knowledge/documents"): [
            {"path": "/api/knowledge/documents", "json": {"title": "新文档", "content": "绿茶八十度"}, "status": 201}
        ],
        ("POST", "/api/knowledge/upload"): [
            {
                "path": "/api/knowledge/upload",
                "files": {"file": ("上传.md", "# 上传\n\n绿茶。".encode(), "text/markdown")},
                "status": 201,
            }
        ],
        ("GET", "/api/knowledge/documents/{document_id}"): [
            {"path": f"/api/knowledge/documents/{bob_doc}", "status": 404},
            {"path": f"/api/knowledge/documents/{alice['document_id']}", "status": 200, "alice": ALICE_MARK},
        ],
        ("DELETE", "/api/knowledge/documents/{document_id}"): [
            {"path": f"/api/knowledge/documents/{bob_doc}", "status": 404}
        ],
        ("GET", "/api/memos"): [{"path": "/api/memos", "status": 200, "alice": alice["memo_id"]}],
        ("DELETE", "/api/memos/{memo_id}"): [
            {"path": f"/api/memos/{bob['memo_id']}", "status": 200, "expect_json": {"cancelled": 0}}
        ],
        ("GET", "/api/audit"): [
            {"path": "/api/audit", "params": {"page_size": 200}, "status": 200, "alice": alice["hobby"]},
            {"path": "/api/audit", "params": {"memory_id": bob_memory}, "status": 200, "expect_json": {"matched": 0}},
            {
                "path": "/api/audit",
                "params": {"batch_id": bob["batch_id"]},
                "status": 200,
                "expect_json": {"matched": 0},
            },
        ],
        ("POST", "/api/audit/{audit_id}/restore"): [
            {"path": f"/api/audit/{audit_id}/restore", "status": 404} for audit_id in sorted(bob["audit_ids"])
        ],
        ("POST", "/api/audit/restore-batch"): [
            {"path": "/api/audit/restore-batch", "json": {"batch_id": bob["batch_id"]}, "status": 404}
        ],
        ("POST", "/api/v1/search/recall"): [
            {
                "path": "/api/v1/search/recall",
                "status": 200,
                "alice": ALICE_MARK,
                "json": {
                    "query": "绿茶 西湖 散步",
                    "min_score": -10.0,
                    "quotas": {"events": 10, "entities": 10, "preferences": 10, "experiences": 10},
                },
            },
            {
                "path": "/api/v1/search/recall",
                "status": 200,
                "alice": ALICE_MARK,
                "json": {"query": "绿茶", "min_score": -10.0, "render": False, "peer_scope": "all"},
            },
        ],
        # Index upkeep is about the whole data dir's derived data: it reports and rebuilds, never returns memories.
        ("GET", "/api/maintenance/index"): [{"path": "/api/maintenance/index", "status": 200}],
        ("POST", "/api/maintenance/reindex"): [{"path": "/api/maintenance/reindex", "status": 202}],
    }


async def test_no_api_route_returns_or_changes_the_other_owners_data(api, memory, two_owners):
    alice, bob = two_owners["alice"], two_owners["bob"]
    bob_rows_before = await _bob_audit_rows(memory)
    cases = _api_cases(alice, bob)
    assert set(cases) == _route_keys(api_module.router), "每个 API 路由都必须有泄漏用例"
    checked = 0
    for (method, _), requests in cases.items():
        for case in requests:
            response = await api.request(
                method,
                case["path"],
                params={**ALICE_ONLY, **case.get("params", {})},
                json=case.get("json"),
                files=case.get("files"),
            )
            where = f"{method} {case['path']} {case.get('params', '')}"
            assert response.status_code == case["status"], (where, response.status_code, response.text[:300])
            _assert_no_bob(response.text, bob, where, sent=f"{case['path']} {case.get('json')}")
            if "alice" in case:
                assert case["alice"] in response.text, f"{where} 没有返回 Alice 自己的数据"
            for key, value in case.get("expect_json", {}).items():
                assert response.json()[key] == value, where
            checked += 1
    assert checked > 40
    assert await _bob_audit_rows(memory) == bob_rows_before, "Bob 的记忆被改动了"


async def test_audit_rows_and_recall_roots_stay_inside_the_selection(api, two_owners):
    alice, bob = two_owners["alice"], two_owners["bob"]
    rows = (await api.get("/api/audit", params={**ALICE_ONLY, "page_size": 200})).json()["items"]
    assert {row["store_key"] for row in rows} == {ALICE_STORE}
    assert {row["audit_id"] for row in rows} == alice["audit_ids"]
    assert not {row["audit_id"] for row in rows} & bob["audit_ids"]
    recall = (
        await api.post("/api/v1/search/recall", params=ALICE_ONLY, json={"query": "绿茶", "min_score": -10.0})
    ).json()["result"]
    assert recall["stats"]["roots"] == [f"booku://{ALICE_STORE}/memories"]
    assert recall["entries"] and all(e["uri"].startswith(f"booku://{ALICE_STORE}/") for e in recall["entries"])


async def test_creations_with_one_store_selected_land_in_that_store(api, memory, two_owners):
    created = await api.post(
        "/api/memories",
        params=ALICE_ONLY,
        json={"title": "只给 Alice", "content": "Alice 的新记忆，关于龙井", **TRIPLET},
    )
    memory_id = created.json()["item"]["id"]
    alice_view = memory.runtime.memory_service(chat_scope("1001"))
    bob_view = memory.runtime.memory_service(chat_scope("2002"))
    assert (await alice_view.get_memory_detail(memory_id=memory_id))["found"] is True
    assert (await bob_view.get_memory_detail(memory_id=memory_id))["found"] is False
    document = await api.post(
        "/api/knowledge/documents", params=ALICE_ONLY, json={"title": "龙井", "content": "八十度"}
    )
    listed = await memory.runtime.knowledge_service(chat_scope("1001")).list_documents()
    assert document.json()["document_id"] in {d["document_id"] for d in listed["items"]}


async def test_all_stores_selected_shows_both_owners(api, two_owners):
    """The control: without narrowing, the same routes do return Bob's data, so the selection is what hides it."""
    listing = (await api.get("/api/memories", params={"page_size": 100})).json()["items"]
    ids = {item["id"] for item in listing}
    assert two_owners["alice"]["hobby"] in ids and two_owners["bob"]["hobby"] in ids
    memos = {memo["memo_id"] for memo in (await api.get("/api/memos")).json()["items"]}
    assert {two_owners["alice"]["memo_id"], two_owners["bob"]["memo_id"]} <= memos


def _page_cases(alice: dict[str, Any], bob: dict[str, Any]) -> dict[str, list[tuple[str, int]]]:
    """GET page route -> (concrete path, expected status) with Alice's store chosen in the selector."""
    return {
        "/": [("/", 303)],
        "/memories": [("/memories", 200), ("/memories?keyword=%E7%BB%BF%E8%8C%B6", 200)],
        "/memories/new": [("/memories/new", 200)],
        "/memories/{memory_id}": [(f"/memories/{bob['hobby']}", 404), (f"/memories/{alice['hobby']}", 200)],
        "/memories/{memory_id}/edit": [(f"/memories/{bob['hobby']}/edit", 404)],
        "/search": [("/search?q=%E7%BB%BF%E8%8C%B6", 200), ("/search?q=%E7%BB%BF%E8%8C%B6&mode=keyword", 200)],
        "/trash": [("/trash", 200)],
        "/knowledge": [("/knowledge", 200)],
        "/knowledge/{document_id}": [(f"/knowledge/{bob['document_id']}", 404)],
        "/memos": [("/memos", 200)],
        "/stats": [("/stats", 200)],
        "/audit": [("/audit", 200), (f"/audit?batch_id={bob['batch_id']}", 200)],
        "/recall": [
            (
                "/recall?query=%E7%BB%BF%E8%8C%B6&min_score=-10&render=true&quota_preferences=10"
                "&quota_events=10&quota_entities=10&quota_experiences=10",
                200,
            )
        ],
    }


async def test_no_page_shows_the_other_owners_data_once_the_selector_narrows(browser, two_owners):
    alice, bob = two_owners["alice"], two_owners["bob"]
    chosen = await browser.post(
        "/stores", data={"csrf_token": browser.csrf, "store": ALICE_STORE, "return_to": "/audit"}
    )
    assert chosen.status_code == 303 and chosen.headers["location"] == "/audit?notice=stores"
    cases = _page_cases(alice, bob)
    page_routes = {path for method, path in _route_keys(pages_module.router) if method == "GET"}
    assert set(cases) == page_routes, "每个页面都必须有泄漏用例"
    for requests in cases.values():
        for path, status in requests:
            response = await browser.get(path)
            assert response.status_code == status, (path, response.status_code)
            _assert_no_bob(response.text, bob, path, sent=path)
    memos = (await browser.get("/memos")).text
    assert alice["memo_id"] in memos
    audit = (await browser.get("/audit")).text
    assert alice["hobby"] in audit and re.search(r"记忆库：<strong>私聊 qq:1001</strong>", audit)

"""The audit view: JSON API and page, filters, pagination, diffs, single and batch restore with confirmation."""

from __future__ import annotations

import re

from .conftest import ALICE_STORE, BOB_STORE, TRIPLET, chat_scope, create_memory

XSS = "<script>alert(1)</script>"


async def _dreaming_run(memory, batch_id: str = "dream-7", user_id: str | None = None) -> list[str]:
    """One dreaming pass: two memories written as ``dreaming`` in one batch (shared store unless a user is given)."""
    base = chat_scope(user_id) if user_id else memory.runtime.default_scope
    scope = base.acting(authority="dreaming", actor="dream", batch_id=batch_id)
    service = memory.runtime.memory_service(scope)
    ids = []
    for title, content in (("梦境：喜欢安静", "用户似乎更喜欢安静的咖啡馆"), ("梦境：早起", "用户这个月常常早起跑步")):
        created = await service.create_memory(title=title, content=content, memory_type="experience", **TRIPLET)
        ids.append(created["id"])
    return ids


async def test_api_lists_rows_newest_first_with_who_when_and_a_diff(api):
    item = await create_memory(api, content="第一版")
    await api.put(f"/api/memories/{item['id']}", json={"content": "第二版"})
    result = (await api.get("/api/audit", params={"memory_id": item["id"]})).json()
    assert result["matched"] == 2 and result["has_more"] is False
    update, create = result["items"]
    assert (update["action"], create["action"]) == ("update", "create")
    assert update["audit_id"] > create["audit_id"]
    for row in (update, create):
        assert row["authority"] == "human" and row["actor"] == "dashboard" and row["store_key"] == "shared"
        assert row["at"] > 0
    assert create["before"] is None and create["after"]["content"] == "第一版"
    assert all(line["kind"] == "add" for line in create["diff"])
    assert {"kind": "remove", "text": "第一版"} in update["diff"]
    assert {"kind": "add", "text": "第二版"} in update["diff"]


async def test_api_filters_and_paginates(api, memory):
    first = await create_memory(api, title="甲", content="甲的内容")
    second = await create_memory(api, title="乙", content="乙的内容")
    await api.delete(f"/api/memories/{second['id']}")
    dreamt = await _dreaming_run(memory)

    everything = (await api.get("/api/audit")).json()
    assert everything["matched"] == 5
    page1 = (await api.get("/api/audit", params={"page_size": 2})).json()
    page3 = (await api.get("/api/audit", params={"page_size": 2, "page": 3})).json()
    assert (len(page1["items"]), page1["has_more"]) == (2, True)
    assert (len(page3["items"]), page3["has_more"]) == (1, False)
    assert page1["items"][0]["audit_id"] > page3["items"][0]["audit_id"]

    by_authority = (await api.get("/api/audit", params={"authority": "dreaming"})).json()["items"]
    assert sorted(row["memory_id"] for row in by_authority) == sorted(dreamt)
    by_action = (await api.get("/api/audit", params={"action": "delete"})).json()["items"]
    assert [row["memory_id"] for row in by_action] == [second["id"]]
    assert by_action[0]["diff"] and {"kind": "add", "text": "已删除: 是"} in by_action[0]["diff"]
    by_batch = (await api.get("/api/audit", params={"batch_id": "dream-7"})).json()
    assert by_batch["matched"] == 2 and all(row["batch_id"] == "dream-7" for row in by_batch["items"])
    by_memory = (await api.get("/api/audit", params={"memory_id": first["id"]})).json()["items"]
    assert [row["action"] for row in by_memory] == ["create"]

    bad = await api.get("/api/audit", params={"authority": "robot"})
    assert bad.status_code == 400 and "authority" in bad.json()["detail"]


async def test_api_restore_puts_the_record_back_and_is_audited_itself(api):
    item = await create_memory(api, content="正确的说法")
    await api.put(f"/api/memories/{item['id']}", json={"content": "被改错的说法"})
    update = (await api.get("/api/audit", params={"memory_id": item["id"], "action": "update"})).json()["items"][0]
    restored = await api.post(f"/api/audit/{update['audit_id']}/restore")
    assert restored.status_code == 200, restored.text
    assert restored.json()["restored"] == [item["id"]]
    assert (await api.get(f"/api/memories/{item['id']}")).json()["item"]["content"] == "正确的说法"
    newest = (await api.get("/api/audit", params={"memory_id": item["id"]})).json()["items"][0]
    assert newest["action"] == "undo" and newest["authority"] == "human" and newest["actor"] == "dashboard"
    assert newest["cause"] == f"audit:{update['audit_id']}"
    assert (await api.post("/api/audit/999999/restore")).status_code == 404
    assert (await api.post("/api/audit/not-a-number/restore")).status_code == 422


async def test_api_restoring_a_creation_moves_it_to_the_trash(api):
    item = await create_memory(api)
    create = (await api.get("/api/audit", params={"memory_id": item["id"]})).json()["items"][0]
    await api.post(f"/api/audit/{create['audit_id']}/restore")
    assert [i["id"] for i in (await api.get("/api/trash")).json()["items"]] == [item["id"]]


async def test_api_batch_restore_undoes_one_dreaming_run(api, memory):
    kept = await create_memory(api, title="人工写的", content="这条不属于批次")
    dreamt = await _dreaming_run(memory)
    result = await api.post("/api/audit/restore-batch", json={"batch_id": "dream-7"})
    assert result.status_code == 200, result.text
    body = result.json()
    assert body["changes"] == 2 and sorted(body["restored"]) == sorted(dreamt) and body["stores"] == ["shared"]
    listed = {i["id"] for i in (await api.get("/api/memories")).json()["items"]}
    assert listed == {kept["id"]}
    assert {i["id"] for i in (await api.get("/api/trash")).json()["items"]} == set(dreamt)
    assert (await api.post("/api/audit/restore-batch", json={"batch_id": "no-such-run"})).status_code == 404
    assert (await api.post("/api/audit/restore-batch", json={"batch_id": ""})).status_code == 422


async def test_batch_spanning_two_stores_is_undone_per_selected_store(api, memory):
    alice_ids = await _dreaming_run(memory, batch_id="dream-both", user_id="1001")
    bob_ids = await _dreaming_run(memory, batch_id="dream-both", user_id="2002")
    only_alice = await api.post(
        "/api/audit/restore-batch", params={"store": ALICE_STORE}, json={"batch_id": "dream-both"}
    )
    assert only_alice.json()["stores"] == [ALICE_STORE]
    assert sorted(only_alice.json()["restored"]) == sorted(alice_ids)
    bob_view = memory.runtime.memory_service(chat_scope("2002"))

    async def bob_deleted() -> list[bool]:
        return [(await bob_view.get_memory_detail(memory_id=i))["item"]["metadata"]["is_deleted"] for i in bob_ids]

    assert await bob_deleted() == [False, False]
    both = await api.post("/api/audit/restore-batch", json={"batch_id": "dream-both"})
    assert both.json()["stores"] == [ALICE_STORE, BOB_STORE]
    assert sorted(both.json()["restored"]) == sorted(bob_ids)
    assert await bob_deleted() == [True, True]


async def test_page_lists_changes_escaped_with_filters_and_restore_buttons(api, browser, memory):
    item = await create_memory(api, title=XSS, content=f"{XSS} 第一版")
    await api.put(f"/api/memories/{item['id']}", json={"content": "第二版"})
    await _dreaming_run(memory)
    html = (await browser.get("/audit")).text
    assert "审计日志" in html and "<script" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt; 第一版" in html
    assert html.count('class="card audit-row"') == 4
    assert html.count("恢复到此改动之前") == 4 and html.count("恢复整个批次") == 2
    assert "梦境整理" in html and "人工" in html and 'href="/audit?batch_id=dream-7"' in html
    filtered = (await browser.get("/audit", params={"memory_id": item["id"]})).text
    assert filtered.count('class="card audit-row"') == 2
    batch = (await browser.get("/audit", params={"batch_id": "dream-7"})).text
    assert '批次 <span class="mono">dream-7</span> 共 2 处改动' in batch


async def test_memory_detail_links_to_its_audit_trail(api, browser):
    item = await create_memory(api)
    html = (await browser.get(f"/memories/{item['id']}")).text
    assert f'href="/audit?memory_id={item["id"]}"' in html
    assert "共享库" in html


async def test_page_restore_asks_for_confirmation_first(api, browser):
    item = await create_memory(api, content="原文")
    await api.put(f"/api/memories/{item['id']}", json={"content": "改坏了"})
    audit_id = (await api.get("/api/audit", params={"action": "update"})).json()["items"][0]["audit_id"]
    return_to = f"/audit?memory_id={item['id']}"

    asked = await browser.post(f"/audit/{audit_id}/restore", data={"csrf_token": browser.csrf, "return_to": return_to})
    assert asked.status_code == 200 and "确认恢复" in asked.text
    assert '<div class="remove">原文</div>' in asked.text
    assert (await api.get(f"/api/memories/{item['id']}")).json()["item"]["content"] == "改坏了"

    refused = await browser.post(f"/audit/{audit_id}/restore", data={"confirmed": "yes", "return_to": return_to})
    assert refused.status_code == 403
    done = await browser.post(
        f"/audit/{audit_id}/restore", data={"csrf_token": browser.csrf, "confirmed": "yes", "return_to": return_to}
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"{return_to}&notice=audit_restored"
    assert (await api.get(f"/api/memories/{item['id']}")).json()["item"]["content"] == "原文"
    page = (await browser.get(done.headers["location"])).text
    assert "已恢复到该改动之前的状态" in page and "审计恢复" in page


async def test_page_batch_restore_lists_the_run_and_asks_first(api, browser, memory):
    dreamt = await _dreaming_run(memory)
    asked = await browser.post(
        "/audit/restore-batch", data={"csrf_token": browser.csrf, "batch_id": "dream-7", "return_to": "/audit"}
    )
    assert asked.status_code == 200 and "确认恢复整个批次" in asked.text
    assert "共有 <strong>2</strong> 处改动" in asked.text and "梦境：早起" in asked.text
    assert len((await api.get("/api/memories")).json()["items"]) == 2
    done = await browser.post(
        "/audit/restore-batch",
        data={
            "csrf_token": browser.csrf,
            "batch_id": "dream-7",
            "confirmed": "yes",
            "return_to": "https://evil.example/",
        },
    )
    assert done.headers["location"] == "/audit?notice=batch_restored"
    assert {i["id"] for i in (await api.get("/api/trash")).json()["items"]} == set(dreamt)
    missing = await browser.post("/audit/restore-batch", data={"csrf_token": browser.csrf, "batch_id": ""})
    assert missing.status_code == 400 and "batch_id" in missing.text


async def test_confirmation_page_names_a_creation_undo(api, browser):
    item = await create_memory(api)
    audit_id = (await api.get("/api/audit")).json()["items"][0]["audit_id"]
    asked = (await browser.post(f"/audit/{audit_id}/restore", data={"csrf_token": browser.csrf})).text
    assert "移入回收站" in asked and re.search(r'name="return_to" value="/audit"', asked)
    assert item["title"] in asked


async def test_supersessions_are_named_and_filterable_in_the_audit_log(api, browser):
    old = await create_memory(api, title="旧住址", content="我住在北京朝阳区的望京")
    new = await create_memory(api, title="新住址", content="我搬到上海浦东了")
    await api.post(f"/api/memories/{old['id']}/supersede", json={"superseded_by": new["id"]})
    await api.post(f"/api/memories/{old['id']}/unsupersede")
    page = (await browser.get("/audit", params={"action": "supersede"})).text
    assert page.count('class="card audit-row"') == 1 and "标记为过时（被新记忆取代）" in page
    assert '<option value="supersede" selected>' in page and '<option value="unsupersede">' in page
    undone = (await browser.get("/audit", params={"action": "unsupersede"})).text
    assert undone.count('class="card audit-row"') == 1 and "撤销取代" in undone

"""The store selector: which stores exist, what a selection reads, and where the dashboard writes."""

from __future__ import annotations

import base64

import pytest

from booku_memory.router.deps import (
    STORE_COOKIE,
    StoreSelection,
    decode_store_cookie,
    encode_store_cookie,
    resolve_selection,
)
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.errors import NotFoundError, ValidationError
from booku_memory.services.store_keys import OwnerMap
from booku_memory.services.store_locator import StoreLocator

from .conftest import ALICE_STORE, BOB_STORE, PER_CHAT, chat_scope, create_memory

AVAILABLE = ["shared", "group:qq:55", "private:qq:1001", "private:qq:2002"]


def test_selection_defaults_to_all_and_explicit_unknown_stores_are_refused():
    everything = resolve_selection(AVAILABLE, "shared", None, strict=True)
    assert everything.selected == tuple(AVAILABLE) and everything.is_all and everything.write_store == "shared"
    assert resolve_selection(AVAILABLE, "shared", ["all"], strict=True).is_all
    one = resolve_selection(AVAILABLE, "shared", [" private:qq:1001 "], strict=True)
    assert one.selected == ("private:qq:1001",) and one.write_store == "private:qq:1001" and not one.is_all
    with pytest.raises(ValidationError, match="store"):
        resolve_selection(AVAILABLE, "shared", ["private:qq:9999"], strict=True)
    remembered = resolve_selection(AVAILABLE, "shared", ["private:qq:9999", "group:qq:55"], strict=False)
    assert remembered.selected == ("group:qq:55",)
    stale = resolve_selection(AVAILABLE, "shared", ["private:qq:9999"], strict=False)
    assert stale.is_all


def test_write_store_is_the_single_selection_else_the_default_store():
    assert StoreSelection(tuple(AVAILABLE), ("shared", "group:qq:55")).write_store == "shared"
    assert StoreSelection(tuple(AVAILABLE), ("private:qq:2002", "group:qq:55")).write_store == "private:qq:2002"


def test_scope_is_human_dashboard_authority_and_never_widens_the_selection():
    selection = StoreSelection(tuple(AVAILABLE), ("private:qq:1001", "private:qq:2002"))
    scope = selection.scope("private:qq:2002")
    assert scope.authority == "human" and scope.actor == "dashboard"
    assert set(scope.readable_store_keys) == {"private:qq:1001", "private:qq:2002"}
    assert scope.writable_store_key == "private:qq:2002"
    with pytest.raises(NotFoundError):
        selection.scope("shared")


def test_store_cookie_round_trip_and_garbage():
    assert decode_store_cookie(encode_store_cookie(["private:qq:1001", "群"])) == ["private:qq:1001", "群"]
    assert decode_store_cookie(encode_store_cookie(None)) is None
    assert decode_store_cookie("!!not-base64!!") is None
    not_a_list = base64.urlsafe_b64encode(b'{"store": "shared"}').decode()
    assert decode_store_cookie(not_a_list) is None


def test_owner_map_mirrors_the_chat_scope_mapping():
    owners = OwnerMap(default_store="shared", default_owners=("default", "owner-x"))
    private = chat_scope("1001")
    group = scope_for_chat(PER_CHAT, platform="qq", chat_type="group", group_id="55")
    for scope in (private, group):
        assert owners.store_of(scope.owner_uid) == scope.writable_store_key
        assert owners.owners_of(scope.writable_store_key) == (scope.owner_uid,)
    assert owners.owners_of("shared") == ("default", "owner-x")
    assert owners.store_of("owner-x") == "shared"
    assert owners.owners_of("bot:qq") == ()


async def test_stores_in_use_come_from_records_audit_and_memos(memory, two_owners):
    runtime = memory.runtime
    owners = OwnerMap()
    assert await StoreLocator(runtime.db).stores_in_use(owners) == ["shared", ALICE_STORE, BOB_STORE]
    await runtime.memory_service(chat_scope("3003")).create_temporary_memo(content="只有便签", stream_id="s")
    assert "private:qq:3003" in await StoreLocator(runtime.db).stores_in_use(owners)


async def test_store_lookups_only_answer_inside_the_selection(memory, two_owners):
    stores, alice, bob = StoreLocator(memory.runtime.db), two_owners["alice"], two_owners["bob"]
    both = [alice["hobby"], bob["hobby"]]
    assert await stores.memory_stores(both, [ALICE_STORE, BOB_STORE]) == {
        alice["hobby"]: ALICE_STORE,
        bob["hobby"]: BOB_STORE,
    }
    assert await stores.memory_stores(both, [ALICE_STORE]) == {alice["hobby"]: ALICE_STORE}
    assert await stores.document_store(bob["document_id"], [ALICE_STORE]) is None
    assert await stores.document_store(bob["document_id"], [BOB_STORE]) == BOB_STORE
    bob_audit = min(bob["audit_ids"])
    assert await stores.audit_location(bob_audit, [ALICE_STORE]) is None
    assert (await stores.audit_location(bob_audit, [BOB_STORE]))[0] == BOB_STORE
    assert await stores.batch_stores(bob["batch_id"], [ALICE_STORE]) == []
    assert await stores.batch_stores(bob["batch_id"], [ALICE_STORE, BOB_STORE]) == [BOB_STORE]


async def test_api_lists_stores_and_rejects_unknown_ones(api, two_owners):
    listed = (await api.get("/api/stores")).json()
    assert listed == {
        "available": ["shared", ALICE_STORE, BOB_STORE],
        "selected": ["shared", ALICE_STORE, BOB_STORE],
        "all": True,
        "write_store": "shared",
    }
    narrowed = (await api.get("/api/stores", params={"store": [ALICE_STORE, BOB_STORE]})).json()
    assert narrowed["selected"] == [ALICE_STORE, BOB_STORE] and narrowed["write_store"] == ALICE_STORE
    refused = await api.get("/api/memories", params={"store": "private:qq:404"})
    assert refused.status_code == 400 and "store" in refused.json()["detail"]


async def test_edits_go_to_the_store_of_the_edited_record(api, memory, two_owners):
    """With every store selected the admin edits Bob's memory: it stays in Bob's store, audited as a human edit."""
    bob = two_owners["bob"]
    edited = await api.put(f"/api/memories/{bob['hobby']}", json={"content": "管理员修正：鲍勃更喜欢红茶"})
    assert edited.status_code == 200, edited.text
    bob_view = memory.runtime.memory_service(chat_scope("2002"))
    assert (await bob_view.get_memory_detail(memory_id=bob["hobby"]))["item"]["content"] == "管理员修正：鲍勃更喜欢红茶"
    row = (await bob_view.list_audit_log(memory_id=bob["hobby"], limit=1))["items"][0]
    assert (row["store_key"], row["authority"], row["actor"]) == (BOB_STORE, "human", "dashboard")

    both = [two_owners["alice"]["hobby"], bob["hobby"], "mem-unknown"]
    bulk = (await api.post("/api/memories/bulk", json={"action": "archive", "memory_ids": both})).json()["result"]
    assert bulk["archived"] == 2 and bulk["missing"] == ["mem-unknown"]
    reverted = await api.post(f"/api/memories/{bob['hobby']}/revert", json={"version": 1})
    assert reverted.status_code == 200 and "绿茶" in reverted.json()["item"]["content"]


async def test_a_hard_deleted_memory_can_be_reverted_into_its_own_store(api, memory, two_owners):
    alice = two_owners["alice"]
    purged = await api.post(f"/api/memories/{alice['hobby']}/hard-delete", json={"confirm": alice["hobby"]})
    assert purged.status_code == 200
    assert (await api.get(f"/api/memories/{alice['hobby']}")).status_code == 404
    back = await api.post(f"/api/memories/{alice['hobby']}/revert", json={"version": 1})
    assert back.status_code == 200, back.text
    alice_view = memory.runtime.memory_service(chat_scope("1001"))
    assert (await alice_view.get_memory_detail(memory_id=alice["hobby"]))["found"] is True


async def test_documents_are_deleted_from_their_own_store(api, memory, two_owners):
    bob = two_owners["bob"]
    assert (await api.delete(f"/api/knowledge/documents/{bob['document_id']}")).status_code == 200
    listed = await memory.runtime.knowledge_service(chat_scope("2002")).list_documents()
    assert bob["document_id"] not in {d["document_id"] for d in listed["items"]}


async def test_memos_follow_their_owner_store(api, two_owners):
    memos = (await api.get("/api/memos")).json()["items"]
    stores_by_memo = {memo["memo_id"]: memo["store_key"] for memo in memos}
    assert stores_by_memo[two_owners["alice"]["memo_id"]] == ALICE_STORE
    assert stores_by_memo[two_owners["bob"]["memo_id"]] == BOB_STORE
    cancelled = await api.delete(f"/api/memos/{two_owners['bob']['memo_id']}")
    assert cancelled.json()["cancelled"] == 1


async def test_single_store_install_shows_no_selector(api, browser):
    await create_memory(api)
    assert (await api.get("/api/stores")).json()["available"] == ["shared"]
    html = (await browser.get("/memories")).text
    assert "store-picker" not in html and "将写入记忆库" not in (await browser.get("/memories/new")).text


async def test_selector_remembers_the_choice_and_creations_follow_it(browser, api, memory, two_owners):
    html = (await browser.get("/memories?page=1&keyword=%E7%BB%BF%E8%8C%B6")).text
    assert 'class="store-picker"' in html and "全部（3 个）" in html
    assert f'value="{ALICE_STORE}"' in html and "私聊 qq:2002" in html
    assert 'name="return_to" value="/memories?keyword=%E7%BB%BF%E8%8C%B6"' in html

    chosen = await browser.post(
        "/stores", data={"csrf_token": browser.csrf, "store": ALICE_STORE, "return_to": "/memories/new"}
    )
    assert chosen.headers["location"] == "/memories/new?notice=stores"
    assert any(cookie.name == STORE_COOKIE for cookie in browser.cookies.jar)
    form = (await browser.get("/memories/new")).text
    assert "将写入记忆库：<strong>私聊 qq:1001</strong>" in form
    created = await browser.post(
        "/memories/new",
        data={
            "csrf_token": browser.csrf,
            "title": "管理员补记",
            "content": "Alice 下周要去杭州",
            "memory_type": "event",
            "status": "active",
            "core_tags": "杭州",
            "diffusion_tags": "出行",
            "opposing_tags": "加班",
        },
    )
    assert created.status_code == 303
    memory_id = created.headers["location"].split("/memories/")[1].split("?")[0]
    alice_view = memory.runtime.memory_service(chat_scope("1001"))
    assert (await alice_view.get_memory_detail(memory_id=memory_id))["found"] is True
    listing = (await browser.get("/memories")).text
    assert two_owners["bob"]["hobby"] not in listing and two_owners["alice"]["hobby"] in listing

    refused = await browser.post("/stores", data={"csrf_token": browser.csrf, "store": "private:qq:404"})
    assert refused.status_code == 400
    no_token = await browser.post("/stores", data={"store": BOB_STORE})
    assert no_token.status_code == 403
    reset = await browser.post("/stores", data={"csrf_token": browser.csrf, "store": "all", "return_to": "/memories"})
    assert reset.status_code == 303
    everything = (await browser.get("/api/memories", params={"page_size": 50})).json()["items"]
    assert two_owners["bob"]["hobby"] in {item["id"] for item in everything}


async def test_query_parameter_overrides_the_remembered_choice(browser, two_owners):
    await browser.post("/stores", data={"csrf_token": browser.csrf, "store": ALICE_STORE})
    html = (await browser.get("/trash", params={"store": BOB_STORE})).text
    assert two_owners["bob"]["trashed"] in html and two_owners["alice"]["trashed"] not in html


async def test_dashboard_creations_default_to_the_shared_store(api, memory, two_owners):
    item = await create_memory(api, title="共享的", content="所有人都能看到的共享记忆")
    shared_view = memory.runtime.memory_service(memory.runtime.default_scope)
    assert (await shared_view.get_memory_detail(memory_id=item["id"]))["found"] is True

"""Two owners with overlapping content: no read route of the service ever returns the other owner's data.

Runs in both retrieval modes: vectors available (hybrid) and vectors unavailable (keyword only).
"""

import pytest

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.deterministic import (
    DeterministicTestEmbedder,
    UnavailableEmbedder,
)

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "scope": {"mode": "per_chat"}}
SECTION = load_config(QUIET).scope
ALICE = scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="1001", stream_id="s-alice")
BOB = scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="2002", stream_id="s-bob")
SHARED_TEXT = "我最喜欢的饮料是绿茶，周末常去西湖边散步"


@pytest.fixture(params=["hybrid", "keyword_only"])
async def two_owners(request, tmp_path):
    embedder = DeterministicTestEmbedder() if request.param == "hybrid" else UnavailableEmbedder()
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=embedder) as memory:
        alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        bob = memory.get_service(booku_memory.MEMORY_SERVICE, scope=BOB)
        written = {}
        for name, service in (("alice", alice), ("bob", bob)):
            created = await service.create_memory(
                title=f"{name} 的爱好",
                content=f"{SHARED_TEXT}（{name}）",
                memory_type="preference",
                core_tags=["绿茶", name],
                diffusion_tags=["散步"],
                opposing_tags=["咖啡"],
                folder_id="爱好",
            )
            person = await service.upsert_memory(
                f"{name} 的朋友小王也喜欢绿茶", title="小王", memory_type="person", person_id="qq:3003"
            )
            await service.create_temporary_memo(content=f"{name} 明天要喝绿茶", stream_id=f"s-{name}")
            written[name] = {created["id"], person["id"]}
        yield memory, alice, bob, written


def ids_in(result) -> set[str]:
    found = set()
    for key in ("items", "results", "entries", "versions", "recent"):
        for item in result.get(key) or []:
            found.add(item.get("id") or item.get("memory_id") or item.get("snapshot", {}).get("memory_id"))
    found.update(result.get("folder_memory_ids") or [])
    found.discard(None)
    return found


async def test_every_service_read_stays_inside_its_owner(two_owners):
    memory, alice, bob, written = two_owners
    for me, my_name, mine, theirs in (
        (alice, "alice", written["alice"], written["bob"]),
        (bob, "bob", written["bob"], written["alice"]),
    ):
        reads = [
            await me.retrieve_memories("绿茶 西湖 散步", top_k=20, include_archived=True, include_knowledge=True),
            await me.search_memory_entries(query_text="绿茶", top_n=20, include_archived=True),
            await me.search_memory_entries(core_tags=["绿茶"], diffusion_tags=["散步"], opposing_tags=["咖啡"]),
            await me.search_memory_entries(top_n=20),
            await me.grep_memories(query="绿茶", search_fields=["title", "content", "tags", "metadata"], top_k=50),
            await me.grep_memories(query="绿.", search_fields=["content"], use_regex=True, top_k=50),
            await me.list_memory_entries(limit=100),
            await me.list_memory_entries(keyword="绿茶", person_id="qq:3003", limit=100),
            await me.list_memory_entries(include_deleted=True, limit=100),
            await me.read_full_content(memory_ids=sorted(theirs | mine)),
            await me.query_memory_status(folder_id="爱好"),
            await me.get_status(),
            await me.recall("绿茶", quotas={"preferences": 10, "entities": 10}, min_score=-10.0),
            await me.list_audit_log(limit=200),
        ]
        for result in reads:
            assert not ids_in(result) & theirs, result
        for memory_id in theirs:
            detail = await me.get_memory_detail(memory_id=memory_id)
            assert detail["found"] is False
            with pytest.raises(booku_memory.BookuError):
                await me.get_memory_history(memory_id=memory_id)
            with pytest.raises(booku_memory.BookuError):
                await me.update_activated(memory_id)
        mutations = [
            await me.update_memory_by_id(memory_id=sorted(theirs)[0], content="篡改"),
            await me.delete_memories(memory_ids=sorted(theirs)),
            await me.move_memories(memory_ids=sorted(theirs), to_folder_id="x"),
            await me.archive_memories(sorted(theirs)),
            await me.restore_memories(memory_ids=sorted(theirs)),
        ]
        for result in mutations:
            assert set(result.get("missing", [])) >= set(theirs) or result.get("updated") == 0, result
        memos = await me.list_temporary_memos()
        assert [m["content"] for m in memos["items"]] == [f"{my_name} 明天要喝绿茶"]
        statuses = await me.get_status()
        assert statuses["counts"]["metadata"]["memory"] == 2
    # the other owner's data is untouched
    for service, mine in ((alice, written["alice"]), (bob, written["bob"])):
        read = await service.read_full_content(memory_ids=sorted(mine))
        assert {i["id"] for i in read["items"]} == mine
        assert all("篡改" not in i["content"] for i in read["items"])


async def test_vector_route_alone_stays_inside_its_owner(tmp_path):
    """Vector-only mode: the partitions a scope may open never hold another owner's vectors."""
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        ids = {}
        for name, scope in (("alice", ALICE), ("bob", BOB)):
            service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=scope)
            ids[name] = (await service.upsert_memory(f"{SHARED_TEXT}（{name}）", title=name))["id"]
        runtime = memory.runtime
        query = (await runtime.embed_queries([SHARED_TEXT]))[0]
        for name, scope, other in (("alice", ALICE, "bob"), ("bob", BOB, "alice")):
            await runtime.settle_deferred_vectors()  # the partitions themselves, after the write-behind flush
            hits = await runtime.vectors.query(
                query, store_keys=scope.readable_store_keys, tiers=["live", "archive", "knowledge"], limit=50
            )
            found = {hit.memory_id for hit in hits}
            assert ids[name] in found and ids[other] not in found

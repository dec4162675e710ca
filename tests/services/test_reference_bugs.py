"""One test per defect of the original plugin (the reference implementation), named after it.

Each test exercises the behaviour a user of the reference would have hit and asserts the fixed outcome. Where a
bug lived in machinery the rewrite removed (legacy collections, vector deletes before re-adds), the test checks the
observable behaviour the bug used to break.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.epa import logic_depth

from .memory_support import (
    CAT,
    CAT_LONG,
    CAT_LONG_PLUS,
    COFFEE,
    HIKE,
    MEMORY_SERVICE,
    PROJECT,
    TRIPLET,
    Probe,
    SwitchableEmbedder,
    expected_vector,
    open_store,
    seed,
)


def ids_of(result: dict[str, Any]) -> list[str]:
    return [item["id"] for item in result.get("results", result.get("items", []))]


# ------------------------------------------------------------------------------------------------------ B1


async def test_b1_merge_keeps_both_texts_and_history(svc, probe: Probe) -> None:
    first = await svc.upsert_memory(
        CAT_LONG,
        title="小橘",
        tags=["宠物"],
        core_tags=["猫"],
        diffusion_tags=["宠物"],
        opposing_tags=["狗"],
        knowledge_type="concept",
    )
    second = await svc.upsert_memory(
        CAT_LONG_PLUS, title="小橘", tags=["体重"], core_tags=["小橘"], diffusion_tags=["健康"], opposing_tags=["狗"]
    )

    assert (first["mode"], second["mode"]) == ("created", "merged")
    assert second["id"] == first["id"] and second["novelty_energy"] < 0.1
    row = await probe.row(first["id"])
    assert CAT_LONG in row["content"] and "体重五公斤" in row["content"]
    assert row["knowledge_type"] == "concept"  # a field the new write did not state is not reset to the default
    tags = await probe.tags(first["id"])
    assert tags == {"tag": ["宠物", "体重"], "core": ["猫", "小橘"], "diffusion": ["宠物", "健康"], "opposing": ["狗"]}
    assert await probe.revisions(first["id"]) == [(1, "create"), (2, "merge")]
    np.testing.assert_allclose(await probe.vector(first["id"]), expected_vector("小橘", row["content"]), atol=1e-5)

    reverted = await svc.revert_memory(memory_id=first["id"], version=1)
    assert reverted["item"]["content"] == CAT_LONG
    assert (await probe.tags(first["id"]))["core"] == ["猫"]


async def test_b1_merge_of_related_but_different_facts_loses_neither(tmp_path: Path) -> None:
    """Loose merge settings make the merge fire for a text that drops one fact and adds another."""
    config = {"write_conflict": {"energy_cutoff": 0.2, "merge_min_similarity": 0.9}}
    without_bath = CAT_LONG.replace("很怕洗澡。", "体重五公斤。")
    async with open_store(tmp_path, config=config) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        first = await svc.upsert_memory(CAT_LONG, title="小橘")
        second = await svc.upsert_memory(without_bath, title="小橘")
        content = (await svc.read_full_content(memory_ids=[first["id"]]))["items"][0]["content"]
    assert second["mode"] == "merged" and second["id"] == first["id"]
    assert "很怕洗澡" in content and "体重五公斤" in content


async def test_b1_verbatim_restatement_merges_with_the_real_model(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        first = await svc.upsert_memory("用户喜欢喝美式咖啡，不加糖。")
        second = await svc.upsert_memory("用户喜欢喝美式咖啡，不加糖")
    assert second["mode"] == "merged" and second["id"] == first["id"]


async def test_b1_distinct_facts_stay_separate_with_the_real_model(tmp_path: Path, e5) -> None:
    pairs = [
        ("用户喜欢猫。", "用户喜欢狗。"),
        ("用户对花生过敏。", "用户对芒果过敏。"),
        ("用户住在北京。", "用户住在上海。"),
        ("明天三点开会。", "明天四点开会。"),
    ]
    modes = []
    for index, (first, second) in enumerate(pairs):
        async with open_store(tmp_path / str(index), embedder=e5) as handle:
            svc = handle.get_service(MEMORY_SERVICE)
            await svc.upsert_memory(first)
            modes.append((await svc.upsert_memory(second))["mode"])
    assert modes == ["created"] * len(pairs)


# ------------------------------------------------------------------------------------------------------ B2


async def test_b2_person_merge_leaves_no_orphan_vector(svc, probe: Probe) -> None:
    """The novelty check picks X, the person rule picks P: X must keep its vector, P must get exactly one."""
    text = "这个人是用户的大学室友，喜欢打篮球，毕业后去了深圳做程序员，每年春节都会一起吃饭。"
    person = await svc.upsert_memory(
        "张三在杭州工作，养了一只狗。", title="张三", memory_type="person", person_id="qq:1", folder_id="friends"
    )
    other = await svc.upsert_memory(text, title="室友", memory_type="person", person_id="qq:2")

    merged = await svc.upsert_memory(text, title="室友", memory_type="person", person_id="qq:1")

    assert merged["mode"] == "merged" and merged["id"] == person["id"]
    assert (await probe.row(other["id"]))["content"] == text
    assert await probe.tiers_of(other["id"]) == ["live"]
    assert await probe.tiers_of(person["id"]) == ["live"]
    assert (await probe.vector_counts())["live"] == await probe.count("booku_memory_records") == 2
    row = await probe.row(person["id"])
    assert "杭州" in row["content"] and "深圳" in row["content"] and row["folder_id"] == "friends"
    np.testing.assert_allclose(await probe.vector(person["id"]), expected_vector("张三", row["content"]), atol=1e-5)


async def test_b2_person_memories_of_different_people_never_merge(svc, probe: Probe) -> None:
    """Two people described with the same words are still two people."""
    text = "这个人是用户的大学室友，喜欢打篮球，毕业后去了深圳做程序员，每年春节都会一起吃饭。"
    first = await svc.upsert_memory(text, title="室友", memory_type="person", person_id="qq:2")
    second = await svc.upsert_memory(text, title="室友", memory_type="person", person_id="qq:3")

    assert second["mode"] == "created" and second["id"] != first["id"]
    assert (await probe.row(second["id"]))["person_id"] == "qq:3"
    assert (await probe.row(first["id"]))["person_id"] == "qq:2"
    assert (await svc.list_memory_entries(person_id="qq:3"))["total"] == 1


async def test_b2_new_person_fact_is_not_buried_in_an_archived_record(svc, probe: Probe) -> None:
    old = await svc.upsert_memory("张三以前住在杭州。", title="张三", memory_type="person", person_id="qq:1")
    await svc.archive_memories([old["id"]])

    new = await svc.upsert_memory("张三现在在深圳当老师。", title="张三", memory_type="person", person_id="qq:1")

    assert new["mode"] == "created" and new["collection"] == "live"
    assert ids_of(await svc.retrieve_memories("张三 深圳 老师", top_k=3)) == [new["id"]]
    assert (await probe.row(old["id"]))["content"] == "张三以前住在杭州。"
    again = await svc.upsert_memory("张三每周末去爬山。", title="张三", memory_type="person", person_id="qq:1")
    assert again["mode"] == "merged" and again["id"] == new["id"]


# ------------------------------------------------------------------------------------------------------ B3


async def test_b3_update_keeps_tags(svc, probe: Probe) -> None:
    memory_id = (
        await svc.upsert_memory(
            CAT[1], title=CAT[0], tags=["宠物", "橘猫"], core_tags=["猫"], diffusion_tags=["宠物"], opposing_tags=["狗"]
        )
    )["id"]
    original = await probe.tags(memory_id)

    await svc.update_memory_by_id(memory_id=memory_id, status="ARCHIVED")
    assert await probe.tags(memory_id) == original
    row = await probe.row(memory_id)
    assert row["status"] == "archived"  # stored lower-cased

    await svc.update_memory_by_id(memory_id=memory_id, content="小橘今年四岁了。", memory_type="Knowledge")
    assert await probe.tags(memory_id) == original
    assert (await probe.row(memory_id))["memory_type"] == "knowledge"

    with pytest.raises(ValidationError):
        await svc.update_memory_by_id(memory_id=memory_id, core_tags=["小橘"])
    assert await probe.tags(memory_id) == original

    await svc.update_memory_by_id(
        memory_id=memory_id, core_tags=["小橘"], diffusion_tags=["家庭"], opposing_tags=["野猫"]
    )
    assert await probe.tags(memory_id) == {
        "tag": ["宠物", "橘猫"],
        "core": ["小橘"],
        "diffusion": ["家庭"],
        "opposing": ["野猫"],
    }


# ------------------------------------------------------------------------------------------------------ B4


async def test_b4_include_archived_is_honoured(svc) -> None:
    cat, hike, coffee = await seed(svc, CAT, HIKE, COFFEE)
    await svc.archive_memories([cat])
    await svc.update_memory_by_id(memory_id=hike, status="expired")
    hidden = {cat, hike}

    assert not hidden & set(ids_of(await svc.retrieve_memories("小橘 香山 咖啡", top_k=10)))
    assert hidden <= set(ids_of(await svc.retrieve_memories("小橘 香山 咖啡", top_k=10, include_archived=True)))
    assert not hidden & set(ids_of(await svc.search_memory_entries(query_text="小橘 香山 咖啡")))
    assert hidden <= set(ids_of(await svc.search_memory_entries(query_text="小橘 香山 咖啡", include_archived=True)))
    assert not hidden & set(ids_of(await svc.search_memory_entries(**TRIPLET)))
    assert set(ids_of(await svc.list_memory_entries(include_archived=False))) == {coffee}
    assert set(ids_of(await svc.list_memory_entries())) == {cat, hike, coffee}
    grep = await svc.grep_memories(query="用户", search_fields=["content"])
    assert set(ids_of(grep)) == {coffee}


# ------------------------------------------------------------------------------------------------------ B5


async def test_b5_include_knowledge_only_hides_knowledge_base_chunks(svc) -> None:
    # Ordinary memories default to memory_type "knowledge"; the flag is about the knowledge *bucket*.
    (cat,) = await seed(svc, CAT, memory_type="knowledge")
    chunk = (
        await svc.upsert_memory("小橘这个名字来自一部关于橘猫的纪录片。", title="《猫》-片段1", bucket="knowledge")
    )["id"]

    retrieved = ids_of(await svc.retrieve_memories("小橘", top_k=10, include_knowledge=False))
    assert cat in retrieved and chunk not in retrieved
    searched = ids_of(await svc.search_memory_entries(query_text="小橘", include_knowledge=False))
    assert cat in searched and chunk not in searched
    listed = ids_of(await svc.search_memory_entries(include_knowledge=False))
    assert cat in listed and chunk not in listed
    assert chunk in ids_of(await svc.retrieve_memories("小橘", top_k=10, include_knowledge=True))


# ------------------------------------------------------------------------------------------------------ B6


async def test_b6_archive_and_promote_never_destroy_data(svc, probe: Probe) -> None:
    recalled, forgotten, old_archived = await seed(svc, CAT, HIKE, COFFEE)
    await svc.archive_memories([old_archived])
    vectors = {i: await probe.vector(i) for i in (recalled, forgotten, old_archived)}
    await probe.set_created_days_ago([recalled, forgotten, old_archived], 30)
    for _ in range(3):
        await svc.update_activated(recalled)

    result = await svc.promote_stale_emergent()

    assert (result["promoted"], result["discarded"]) == (1, 1)  # the already archived one is not touched
    assert await probe.count("booku_memory_records") == 3
    assert [(await probe.row(i))["status"] for i in (recalled, forgotten, old_archived)] == [
        "archived",
        "expired",
        "archived",
    ]
    for memory_id, vector in vectors.items():
        assert await probe.tiers_of(memory_id) == ["archive"]
        np.testing.assert_allclose(await probe.vector(memory_id), vector, atol=1e-6)
    again = await svc.promote_stale_emergent()
    assert (again["promoted"], again["discarded"]) == (0, 0)


# ------------------------------------------------------------------------------------------------------ B7


async def test_b7_move_across_partitions_keeps_the_vector(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    vector = await probe.vector(memory_id)

    await svc.move_memories(memory_ids=[memory_id], to_folder_id="pets", to_bucket="archived")
    assert await probe.tiers_of(memory_id) == ["archive"]
    np.testing.assert_allclose(await probe.vector(memory_id), vector, atol=1e-6)

    await svc.update_memory_by_id(memory_id=memory_id, status="active")
    await svc.move_memories(memory_ids=[memory_id], to_folder_id="default")
    assert await probe.tiers_of(memory_id) == ["live"]
    np.testing.assert_allclose(await probe.vector(memory_id), vector, atol=1e-6)
    assert ids_of(await svc.retrieve_memories("小橘 鱼干", top_k=1)) == [memory_id]


# ------------------------------------------------------------------------------------------------------ B8


async def test_b8_soft_deleted_memories_take_no_slot_and_are_not_merge_targets(svc, probe: Probe) -> None:
    first = await svc.upsert_memory(CAT_LONG, title="小橘")
    others = await seed(
        svc, ("小橘的玩具", "小橘最喜欢的玩具是逗猫棒和毛线球。"), ("小橘的医生", "小橘每年去宠物医院打一次疫苗。")
    )
    await svc.delete_memories(memory_ids=[first["id"]])

    result = await svc.retrieve_memories("小橘", top_k=2)
    assert set(ids_of(result)) == set(others) and result["total"] == 2

    again = await svc.upsert_memory(CAT_LONG, title="小橘")
    assert again["mode"] == "created" and again["id"] != first["id"]
    assert (await probe.row(first["id"]))["is_deleted"] == 1
    assert (await probe.row(first["id"]))["content"] == CAT_LONG


# ------------------------------------------------------------------------------------------------------ B9


async def test_b9_results_keep_relevance_order_and_drop_near_copies(svc) -> None:
    eats, diet, sun = await seed(
        svc,
        ("小橘", "小橘喜欢吃鱼干和猫罐头。"),
        ("小橘的饮食", "小橘喜欢吃鱼干，也吃猫粮。"),
        ("阳台", "小橘白天在阳台晒太阳。"),
    )
    # The same text in another folder is not merged (different folder) but is a near-copy in results.
    copy = (await svc.create_memory(title="小橘", content="小橘喜欢吃鱼干和猫罐头。", folder_id="backup", **TRIPLET))[
        "id"
    ]

    top2 = await svc.retrieve_memories("小橘喜欢吃什么", top_k=2)
    # Diversity-first selection would have taken the unrelated "sun" memory second.
    assert set(ids_of(top2)) == {eats, diet} or set(ids_of(top2)) == {copy, diet}

    top4 = await svc.retrieve_memories("小橘喜欢吃什么", top_k=4)
    found = ids_of(top4)
    assert len({eats, copy} & set(found)) == 1
    assert found[-1] == sun
    scores = [item["score"] for item in top4["results"]]
    assert scores == sorted(scores, reverse=True)


# ----------------------------------------------------------------------------------------------------- B10


async def test_b10_opposing_tags_push_the_opposed_memory_down(svc) -> None:
    basketball = (
        await svc.create_memory(
            title="周末打篮球",
            content="周末和朋友去体育馆打篮球，打了两个小时，很开心。",
            core_tags=["篮球"],
            diffusion_tags=["朋友"],
            opposing_tags=["工作"],
        )
    )["id"]
    football = (
        await svc.create_memory(
            title="周末踢球",
            content="周末和同事去公园踢足球。",
            core_tags=["足球"],
            diffusion_tags=["朋友"],
            opposing_tags=["工作"],
        )
    )["id"]
    plain = await svc.retrieve_memories("周末和朋友去体育馆", top_k=2)
    assert ids_of(plain) == [basketball, football]

    opposed = await svc.retrieve_memories(
        "周末和朋友去体育馆", top_k=2, core_tags=["运动"], diffusion_tags=["朋友"], opposing_tags=["篮球"]
    )
    scores = {item["id"]: item["score"] for item in opposed["results"]}
    assert scores[football] > scores[basketball]


async def test_b10_shared_opposing_tags_are_not_a_penalty(svc) -> None:
    """Both the memory and the query saying "not about work" is agreement, not opposition (the original penalised
    it)."""
    agreeing = (
        await svc.create_memory(
            title="周末打篮球",
            content="周末和朋友去体育馆打篮球，打了两个小时，很开心。",
            core_tags=["篮球"],
            diffusion_tags=["朋友"],
            opposing_tags=["工作"],
        )
    )["id"]
    neutral = (
        await svc.create_memory(
            title="周末踢球",
            content="周末和同事去公园踢足球。",
            core_tags=["足球"],
            diffusion_tags=["同事"],
            opposing_tags=["学习"],
        )
    )["id"]
    result = await svc.retrieve_memories(
        "周末和朋友去体育馆", top_k=2, core_tags=["运动"], diffusion_tags=["朋友"], opposing_tags=["工作"]
    )
    assert ids_of(result) == [agreeing, neutral]


# ----------------------------------------------------------------------------------------------------- B11


async def test_b11_untagged_query_is_not_matched_against_tag_groups(tmp_path: Path) -> None:
    """Without query tags, a memory's opposing tags must not move it: swapping them between two memories changes
    nothing.

    The reference substituted the query's whitespace tokens for every empty tag group, so the query "篮球" penalised
    the memory whose opposing tag was 篮球. (Core and diffusion tags are searchable keywords here, so only the
    opposing group is swapped.)
    """
    texts = [("打球", "周末和朋友去体育馆打篮球。"), ("看球", "晚上在家看篮球比赛直播，一直看到深夜。")]
    opposing = [["篮球"], ["工作"]]
    orders = []
    for index, assignment in enumerate((opposing, opposing[::-1])):
        async with open_store(tmp_path / str(index)) as handle:
            svc = handle.get_service(MEMORY_SERVICE)
            for (title, content), tags in zip(texts, assignment):
                await svc.create_memory(
                    title=title, content=content, core_tags=["运动"], diffusion_tags=["周末"], opposing_tags=tags
                )
            for query in ("篮球", "篮球 比赛", "打篮球"):
                result = await svc.retrieve_memories(query, top_k=2)
                orders.append((query, [(i["title"], i["score"]) for i in result["results"]]))
    assert orders[:3] == orders[3:]


# ----------------------------------------------------------------------------------------------------- B12


FOLDERS = ["工作 项目", "  Mixed Case  ", "x" * 300, "猫🐱/../etc", "a"]


async def test_b12_any_folder_name_gets_a_vector_and_is_retrievable(tmp_path: Path) -> None:
    async with open_store(tmp_path / "data") as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        probe = Probe(handle.runtime)
        ids = []
        for number, folder in enumerate(FOLDERS):
            content = f"文件夹测试记忆第{number}条：编号 code{number}x 的备忘。"
            ids.append(
                (await svc.create_memory(title=f"记忆{number}", content=content, folder_id=folder, **TRIPLET))["id"]
            )
        for number, memory_id in enumerate(ids):
            assert await probe.tiers_of(memory_id) == ["live"]
            assert ids_of(await svc.retrieve_memories(f"code{number}x", top_k=1)) == [memory_id]
        folders = (await svc.list_folder_ids())["items"]
        assert {"工作 项目", "mixed case", "x" * 300, "猫🐱/../etc", "a"} <= set(folders)
        assert await probe.pending() == 0

    # Collection names never contain user text (Chroma rejects CJK, spaces and long names).
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(
        path=str(tmp_path / "data" / "chroma"), settings=Settings(anonymized_telemetry=False)
    )
    names = [c.name if hasattr(c, "name") else str(c) for c in client.list_collections()]
    assert names and all(re.fullmatch(r"booku_(live|archive|knowledge)_[0-9a-f]{16}", n) for n in names)


# ----------------------------------------------------------------------------------------------------- B13


async def test_b13_sqlite_and_vectors_never_disagree_when_embedding_fails(tmp_path: Path) -> None:
    embedder = SwitchableEmbedder()
    async with open_store(tmp_path, embedder=embedder) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        rt = handle.runtime
        probe = Probe(rt)
        cat, hike = await seed(svc, CAT, HIKE)
        old_vector = await probe.vector(cat)

        embedder.down = True
        new_text = "小橘搬家后换了新的猫砂盆。"
        updated = await svc.update_memory_by_id(memory_id=cat, content=new_text)
        deleted = await svc.delete_memories(memory_ids=[hike])

        # SQLite has the change and a pending outbox row; the old vector is not thrown away before a new one exists.
        assert updated["updated"] == 1 and deleted["deleted"] == 1
        assert (await probe.row(cat))["content"] == new_text
        assert await probe.pending() == 1
        np.testing.assert_allclose(await probe.vector(cat), old_vector, atol=1e-6)
        # Removing a vector needs no model, so the deleted memory is already out of the index.
        assert await probe.tiers_of(hike) == []

        embedder.down = False
        report = await rt.sync_vectors()
        assert report.pending == 0 and await probe.pending() == 0
        np.testing.assert_allclose(await probe.vector(cat), expected_vector(CAT[0], new_text), atol=1e-5)
        assert ids_of(await svc.retrieve_memories("猫砂盆", top_k=1)) == [cat]


# ----------------------------------------------------------------------------------------------------- B14


async def test_b14_each_memory_appears_once_and_is_counted_once(svc, probe: Probe) -> None:
    ids = await seed(svc, CAT, HIKE, COFFEE, PROJECT)
    await svc.archive_memories(ids[:2])
    await svc.upsert_memory("用户常用的编程语言是 Python。", title="《手册》-片段1", bucket="knowledge")

    result = await svc.retrieve_memories("用户", top_k=20, include_archived=True, include_knowledge=True)
    found = ids_of(result)
    assert len(found) == len(set(found)) == result["total"] == 5

    status = await svc.get_status()
    assert status["counts"]["vector"]["memory"] == 4 and status["counts"]["vector"]["knowledge"] == 1
    assert await probe.vector_counts() == {"live": 2, "archive": 2, "knowledge": 1}


# ----------------------------------------------------------------------------------------------------- B15


async def test_b15_activation_counts_only_returned_memories(svc, probe: Probe) -> None:
    ids = await seed(svc, *[(f"小橘日记{n}", f"小橘第{n}天的日记：今天吃了{n}条鱼干。") for n in range(6)])
    chunk = (await svc.upsert_memory("小橘这个名字来自一部纪录片。", title="《猫》-片段1", bucket="knowledge"))["id"]

    result = await svc.retrieve_memories("小橘 鱼干", top_k=2)
    bumped = {i: (await probe.row(i))["activation_count"] for i in ids}
    assert sum(bumped.values()) == 2 and set(ids_of(result)) == {i for i, n in bumped.items() if n == 1}

    await svc.search_memory_entries(query_text="小橘 鱼干", top_n=1)
    assert sum([(await probe.row(i))["activation_count"] for i in ids]) == 3

    with_chunk = await svc.retrieve_memories("小橘 纪录片", top_k=10, include_knowledge=True)
    assert chunk in ids_of(with_chunk)
    assert (await probe.row(chunk))["activation_count"] == 0


# ----------------------------------------------------------------------------------------------------- B16
# B16 (flashback layer choice) lives in the flashback injector, not in the service or storage layer.


# ----------------------------------------------------------------------------------------------------- B17


async def test_b17_vector_counts_match_the_records_of_each_partition(svc, probe: Probe) -> None:
    cat, hike, coffee, project = await seed(svc, CAT, HIKE, COFFEE, PROJECT)
    await svc.archive_memories([cat])
    await svc.update_memory_by_id(memory_id=hike, status="expired")
    await svc.delete_memories(memory_ids=[coffee])
    await svc.upsert_memory("知识库片段正文。", title="《手册》-片段1", bucket="knowledge")

    counts = await probe.vector_counts()
    assert (
        counts
        == {
            "live": await probe.count(
                "booku_memory_records", "bucket = 'memory' AND status = 'active' AND is_deleted = 0"
            ),
            "archive": await probe.count(
                "booku_memory_records", "bucket = 'memory' AND status != 'active' AND is_deleted = 0"
            ),
            "knowledge": await probe.count("booku_memory_records", "bucket = 'knowledge' AND is_deleted = 0"),
        }
        == {"live": 1, "archive": 2, "knowledge": 1}
    )
    status = await svc.get_status()
    assert status["counts"]["vector"]["memory"] == 3 and status["counts"]["vector"]["knowledge"] == 1


# ----------------------------------------------------------------------------------------------------- B18


async def test_b18_empty_first_evidence_vector_does_not_force_logic_depth_zero() -> None:
    rng = np.random.default_rng(7)
    query = rng.normal(size=16)
    evidence = [rng.normal(size=16) for _ in range(3)]
    assert logic_depth(query, [[], *evidence]) == pytest.approx(logic_depth(query, evidence))
    assert logic_depth(query, np.stack(evidence)) > 0.0


async def test_b18_title_prefix_is_not_stripped_from_content(svc) -> None:
    body = "# AB 计划\nAB 计划的第一步是调研。"
    memory_id = (await svc.upsert_memory(body, title="A"))["id"]
    item = (await svc.read_full_content(memory_ids=[memory_id]))["items"][0]
    assert item["title"] == "A" and item["content"] == body


async def test_b18_top_k_zero_is_an_error_not_the_default(svc) -> None:
    await seed(svc, CAT)
    with pytest.raises(ValidationError, match="top_k"):
        await svc.retrieve_memories("小橘", top_k=0)
    with pytest.raises(ValidationError, match="top_n"):
        await svc.search_memory_entries(query_text="小橘", top_n=0)


async def test_b18_status_change_moves_the_vector_between_tiers(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    await svc.update_memory_by_id(memory_id=memory_id, status="archived")
    assert await probe.tiers_of(memory_id) == ["archive"]
    await svc.update_memory_by_id(memory_id=memory_id, status="active")
    assert await probe.tiers_of(memory_id) == ["live"]


async def test_b18_archive_leaves_knowledge_chunks_alone(svc, probe: Probe) -> None:
    chunk = (await svc.upsert_memory("知识库片段正文。", title="《手册》-片段1", bucket="knowledge"))["id"]
    result = await svc.archive_memories([chunk])
    assert result["archived"] == 0 and result["skipped"] == 1
    row = await probe.row(chunk)
    assert (row["bucket"], row["status"]) == ("knowledge", "active")
    assert await probe.tiers_of(chunk) == ["knowledge"]


async def test_b18_like_wildcards_match_literally(svc) -> None:
    percent, plain, underscore = await seed(
        svc,
        ("促销", "商场打折 50% 以上。"),
        ("价格", "这件衣服 50 元。"),
        ("变量", "变量名叫 user_id。"),
    )
    assert ids_of(await svc.grep_memories(query="50%", search_fields=["content"])) == [percent]
    assert ids_of(await svc.grep_memories(query="_", search_fields=["content"])) == [underscore]
    assert ids_of(await svc.list_memory_entries(keyword="%")) == [percent]
    assert ids_of(await svc.list_memory_entries(keyword="r_i")) == [underscore]
    assert plain in ids_of(await svc.list_memory_entries(keyword="50"))


async def test_b18_move_without_target_returns_every_key(svc) -> None:
    (memory_id,) = await seed(svc, CAT)
    result = await svc.move_memories(memory_ids=[memory_id])
    assert set(result) >= {"action", "moved", "items", "to_bucket", "to_folder_id"}
    assert result["moved"] == 0


async def test_b18_memo_refresh_never_shortens_expiry(svc, probe: Probe) -> None:
    """Refreshing the same memo with a shorter time used to cut its life short."""
    long = await svc.create_temporary_memo(content="周五前交报告", expire_hours=10, stream_id="s")
    short = await svc.create_temporary_memo(content="周五前交报告", expire_hours=1, stream_id="s")

    assert short["mode"] == "refreshed" and short["memo_id"] == long["memo_id"]
    assert short["expires_at"] == pytest.approx(long["expires_at"])
    row = await probe.rt.db.fetch_one(
        "SELECT expires_at FROM booku_temporary_memos WHERE memo_id = ?", [long["memo_id"]]
    )
    assert row["expires_at"] == pytest.approx(long["expires_at"])
    longer = await svc.create_temporary_memo(content="周五前交报告", expire_hours=20, stream_id="s")
    assert longer["expires_at"] > long["expires_at"]
    assert await probe.count("booku_temporary_memos") == 1


async def test_b15_activation_bump_skips_deleted_records_and_counts_the_rest(svc, probe: Probe) -> None:
    kept, deleted = await seed(svc, ("小橘", "小橘今天吃了三条鱼干。"), ("小黑", "小黑今天睡了一整天。"))
    await svc.delete_memories(memory_ids=[deleted])

    counted = await svc.runtime.records.bump_activation([kept, deleted, kept, "mem-does-not-exist"])

    assert counted == 1
    assert (await probe.row(kept))["activation_count"] == 1
    assert (await probe.row(deleted))["activation_count"] == 0

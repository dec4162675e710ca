"""Concurrent writers (issue 3, item 4).

The reference read neighbours, then wrote, with nothing in between: two similar writes at once could both create, or
both merge into the same id while Chroma kept the other writer's vector. Here a write holds the runtime's write lock
from the neighbour look-up to the vector upsert.
"""

from __future__ import annotations

import asyncio

import numpy as np

from .memory_support import CAT, CAT_LONG, CAT_LONG_PLUS, COFFEE, HIKE, PROJECT, TRIPLET, Probe, expected_vector


async def test_two_near_duplicates_at_once_end_as_one_record(svc, probe: Probe) -> None:
    results = await asyncio.gather(
        svc.upsert_memory(CAT_LONG, title="小橘", core_tags=["猫"], diffusion_tags=["宠物"], opposing_tags=["狗"]),
        svc.upsert_memory(
            CAT_LONG_PLUS, title="小橘", core_tags=["小橘"], diffusion_tags=["健康"], opposing_tags=["狗"]
        ),
    )

    assert sorted(r["mode"] for r in results) == ["created", "merged"]
    assert results[0]["id"] == results[1]["id"]
    memory_id = results[0]["id"]
    assert await probe.count("booku_memory_records") == 1
    assert await probe.vector_counts() == {"live": 1, "archive": 0, "knowledge": 0}
    row = await probe.row(memory_id)
    assert "体重五公斤" in row["content"] and CAT_LONG in row["content"]
    assert set((await probe.tags(memory_id))["core"]) == {"猫", "小橘"}
    # The indexed vector is that of the final (merged) text, not a leftover of either writer.
    np.testing.assert_allclose(await probe.vector(memory_id), expected_vector("小橘", row["content"]), atol=1e-5)
    assert [a for _, a in await probe.revisions(memory_id)] == ["create", "merge"]


async def test_identical_writes_from_many_coroutines_end_as_one_record(svc, probe: Probe) -> None:
    results = await asyncio.gather(*[svc.create_memory(title=CAT[0], content=CAT[1], **TRIPLET) for _ in range(5)])

    assert sorted(r["mode"] for r in results) == ["created"] + ["merged"] * 4
    assert len({r["id"] for r in results}) == 1
    assert await probe.count("booku_memory_records") == 1
    assert (await probe.row(results[0]["id"]))["content"] == CAT[1]
    assert (await probe.vector_counts())["live"] == 1


async def test_concurrent_distinct_writes_all_land(svc, probe: Probe) -> None:
    entries = [CAT, HIKE, COFFEE, PROJECT]
    results = await asyncio.gather(
        *[svc.create_memory(title=title, content=content, **TRIPLET) for title, content in entries]
    )

    assert [r["mode"] for r in results] == ["created"] * 4
    assert len({r["id"] for r in results}) == 4
    assert await probe.count("booku_memory_records") == 4
    assert (await probe.vector_counts())["live"] == 4
    for (title, content), result in zip(entries, results):
        np.testing.assert_allclose(await probe.vector(result["id"]), expected_vector(title, content), atol=1e-5)
    assert await probe.pending() == 0


async def test_concurrent_person_writes_merge_into_one_person(svc, probe: Probe) -> None:
    facts = ["张三喜欢打篮球。", "张三在深圳做程序员。", "张三养了一只叫旺财的狗。"]
    results = await asyncio.gather(
        *[svc.upsert_memory(fact, title="张三", memory_type="person", person_id="qq:10001") for fact in facts]
    )

    assert sorted(r["mode"] for r in results) == ["created", "merged", "merged"]
    assert await probe.count("booku_memory_records") == 1
    content = (await probe.row(results[0]["id"]))["content"]
    for fact in facts:
        assert fact in content


async def test_writes_racing_with_deletes_and_reads_stay_consistent(svc, probe: Probe) -> None:
    (cat,) = [r["id"] for r in [await svc.create_memory(title=CAT[0], content=CAT[1], **TRIPLET)]]

    await asyncio.gather(
        svc.delete_memories(memory_ids=[cat]),
        svc.create_memory(title=HIKE[0], content=HIKE[1], **TRIPLET),
        svc.retrieve_memories("小橘 香山", top_k=5),
        svc.update_memory_by_id(memory_id=cat, title="小橘（旧）"),
        svc.create_memory(title=COFFEE[0], content=COFFEE[1], **TRIPLET),
    )

    # Whatever the interleaving: every live record has exactly one vector, deleted ones none, nothing pending.
    assert await probe.pending() == 0
    rows = await probe.rt.db.fetch_all("SELECT memory_id, is_deleted FROM booku_memory_records")
    assert len(rows) == 3
    for row in rows:
        assert await probe.tiers_of(row["memory_id"]) == ([] if row["is_deleted"] else ["live"])


async def test_concurrent_identical_memos_end_as_one_memo(svc, probe: Probe) -> None:
    results = await asyncio.gather(
        *[svc.create_temporary_memo(content="五点前回复客户", expire_hours=hours, stream_id="s") for hours in (1, 2, 3)]
    )

    assert sorted(r["mode"] for r in results) == ["created", "refreshed", "refreshed"]
    assert len({r["memo_id"] for r in results}) == 1
    assert await probe.count("booku_temporary_memos") == 1
    # Whatever the order, the memo lives as long as the longest request asked for.
    row = await probe.rt.db.fetch_one("SELECT expires_at, created_at FROM booku_temporary_memos")
    assert row["expires_at"] - row["created_at"] >= 3 * 3600 - 60

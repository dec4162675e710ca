"""The in-memory vector copy (``storage.vector_copy``): queries that need the hits' vectors get the vectors Chroma
holds (to float32 rounding), whether they come from the copy or from Chroma, including a vector rewritten behind the
copy's back.

Real SQLite, real embedded Chroma; vectors from the small deterministic test embedder.
"""

import contextlib

import numpy as np

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.scope import DEFAULT_SCOPE
from booku_memory.services.storage.vector_index import collection_name

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
NO_COPY = {**QUIET, "retrieval": {"in_memory_vectors": False}}
TEXTS = [f"第{number}条：周末在西湖边喝绿茶，聊到{topic}" for number, topic in
         enumerate(["咖啡", "电影", "跑步", "音乐", "旅行", "画画", "猫", "雨天", "会议", "晚饭"] * 3)]
STORE = DEFAULT_SCOPE.writable_store_key


async def write_and_flush(memory) -> list[str]:
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    ids = [(await service.upsert_memory(text))["id"] for text in TEXTS]
    await memory.runtime.flush_vectors()
    return ids


@contextlib.asynccontextmanager
async def reopened_after_writing(path, embedder):
    """A runtime opened on a store that another runtime wrote (and flushed to Chroma) and closed: its copy is
    loaded at start-up, from the embedding cache."""
    async with booku_memory.open(path, QUIET, embedder=embedder) as memory:
        await write_and_flush(memory)
    async with booku_memory.open(path, QUIET, embedder=embedder) as memory:
        yield memory.runtime


async def query(runtime, vector):
    return await runtime.vectors.query(vector, store_keys=[STORE], tiers=["live"], limit=10, with_embeddings=True)


async def test_hits_carry_the_vectors_chroma_holds_with_or_without_the_copy(tmp_path) -> None:
    async with reopened_after_writing(tmp_path / "data", DeterministicTestEmbedder()) as runtime:
        assert await runtime.vector_copy_load == len(TEXTS)
        assert collection_name("live", STORE) in runtime.vectors.copy.loaded
        vectors = await runtime.embed_queries(["西湖 绿茶 咖啡", "跑步 音乐", "雨天的会议"])
        with_copy = [await query(runtime, vector) for vector in vectors]
        copy, runtime.vectors.copy = runtime.vectors.copy, None
        from_chroma = [await query(runtime, vector) for vector in vectors]
        runtime.vectors.copy = copy
    for mine, theirs in zip(with_copy, from_chroma):
        assert [hit.memory_id for hit in mine] == [hit.memory_id for hit in theirs]
        assert [hit.similarity for hit in mine] == [hit.similarity for hit in theirs]
        for hit, other in zip(mine, theirs):  # the copy holds the model's vectors, Chroma its float32 rounding
            assert np.allclose(hit.embedding, other.embedding, rtol=0, atol=1e-6)


async def test_a_vector_rewritten_behind_the_copys_back_is_read_from_chroma(tmp_path) -> None:
    """As another runtime or process would: the stored vector changes without this runtime's copy hearing of it.
    Its cosine with the query no longer matches Chroma's similarity, so the hit's vector is read from Chroma."""
    embedder = DeterministicTestEmbedder()
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=embedder) as memory:
        runtime = memory.runtime
        ids = await write_and_flush(memory)
        await runtime.vector_copy_load
        probe = (await runtime.embed_queries(["西湖 绿茶 咖啡"]))[0]
        target = (await query(runtime, probe))[0]
        rewritten = np.asarray((await runtime.embed_queries(["完全不同的一段文字：沙漠里的骆驼"]))[0], np.float32)

        def rewrite() -> None:  # straight to Chroma: the copy is not told
            collection = runtime.vectors._collection_sync("live", STORE, create=False)
            collection.upsert(ids=[target.memory_id], embeddings=rewritten.reshape(1, -1))
        await runtime.vectors._run_write(rewrite)
        hits = {hit.memory_id: hit for hit in await runtime.vectors.query(
            probe, store_keys=[STORE], tiers=["live"], limit=len(ids), with_embeddings=True)}
        assert np.allclose(hits[target.memory_id].embedding, rewritten, atol=1e-6)
        assert not np.allclose(hits[target.memory_id].embedding, target.embedding, atol=1e-3)
        assert np.allclose(runtime.vectors.copy.vector(target.memory_id), rewritten, atol=1e-6)  # refreshed


async def test_collections_not_loaded_yet_return_chroma_vectors_and_fill_the_copy(tmp_path) -> None:
    async with reopened_after_writing(tmp_path / "data", DeterministicTestEmbedder()) as runtime:
        await runtime.vector_copy_load
        runtime.vectors.copy.clear()
        runtime.vectors.copy.listed = None  # as before the load has listed anything
        probe = (await runtime.embed_queries(["跑步 音乐"]))[0]
        hits = await query(runtime, probe)
        assert hits and all(hit.embedding is not None for hit in hits)
        assert len(runtime.vectors.copy) == len(hits)
        for hit in hits:
            assert np.array_equal(runtime.vectors.copy.vector(hit.memory_id), hit.embedding)


async def test_retrieval_is_the_same_with_and_without_the_copy(tmp_path) -> None:
    embedder = DeterministicTestEmbedder()
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=embedder) as memory:
        await write_and_flush(memory)
    answers = []
    for config in (QUIET, NO_COPY):
        async with booku_memory.open(tmp_path / "data", config, embedder=embedder) as memory:
            assert (memory.runtime.vectors.copy is not None) is (config is QUIET)
            await memory.runtime.vector_copy_load
            service = memory.get_service(booku_memory.MEMORY_SERVICE)
            answers.append([
                [(item["id"], item["score"]) for item in (await service.retrieve_memories(
                    query, top_k=5, record_activation=False, **tags))["results"]]
                for query, tags in (("西湖 绿茶", {}), ("跑步", {"core_tags": ["跑步"]}), ("会议 雨天", {}))])
    assert answers[0] == answers[1]

"""The stored vectors held in memory (``storage.mirrors.stored_vectors``) are the vectors SQLite names for each
record, follow every change of them, and leave a retrieval's ranking exactly as reading them elsewhere does.

Real SQLite files and a real embedded Chroma; the deterministic test embedder stands in for the model.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import numpy as np

from booku_memory.services.storage.mirrors.stored_vectors import StoredVectors

from .memory_support import DAILY_CHAT, MEMORY_SERVICE, MINT_TURN, open_store, write_turns

CHAT = [*DAILY_CHAT, MINT_TURN]
QUERIES = ["用户在阳台种的薄荷怎么样了？", "周末爬山几点出发", "用户喝什么咖啡", "青岛的火车票"]
VECTORS_NOT_HELD = {"retrieval": {"in_memory_vectors": False}}


async def store_chat(path: Path) -> list[str]:
    """Write the chat and close the store (every vector flushed); the memory ids in order."""
    async with open_store(path) as handle:
        return await write_turns(handle.get_service(MEMORY_SERVICE), CHAT)


async def held(rt: Any, ids: list[str]) -> dict[str, np.ndarray]:
    """The vectors held of ``ids`` after a read that follows the journal (as a retrieval's candidate read does)."""
    await rt.records.candidates(ids, with_tags=False)
    answer = rt.records.memory_keywords.held_vectors(ids)
    assert answer is not None, "no vectors held"
    return answer[0]


async def from_sqlite(rt: Any, ids: list[str]) -> dict[str, np.ndarray]:
    return await rt.embedding_cache.indexed_vectors(ids, rt.vectors.model_id, rt.vectors.dimension)


def assert_same_vectors(left: dict[str, np.ndarray], right: dict[str, np.ndarray]) -> None:
    assert left.keys() == right.keys()
    for memory_id, vector in left.items():
        assert np.array_equal(vector, right[memory_id]), memory_id


async def test_the_held_vectors_are_those_sqlite_names_and_chroma_holds(tmp_path: Path) -> None:
    ids = await store_chat(tmp_path)
    async with open_store(tmp_path) as handle:
        rt = handle.runtime
        got = await held(rt, ids)
        assert_same_vectors(got, await from_sqlite(rt, ids))
        in_chroma = await rt.vectors.get_embeddings("shared", ids, tiers=["live"])
        assert all(np.allclose(got[memory_id], in_chroma[memory_id], atol=1e-6) for memory_id in ids)
        assert not got[ids[0]].flags.writeable  # shared by every retrieval: nobody may write into it


async def test_a_retrieval_reads_no_stored_vector_from_sqlite_or_chroma_and_ranks_the_same(tmp_path: Path) -> None:
    """With the vectors held, Chroma's query hands over no vectors, no stored vector is read by id from Chroma or
    SQLite, and every query ranks exactly as it does with them read from SQLite and Chroma. The vector search
    misses the mint memory (as HNSW may in a big store), so its vector is read by id for the keyword route's hit."""
    ids = await store_chat(tmp_path)
    rankings: dict[bool, list[list[tuple[str, float]]]] = {}
    for kept in (True, False):
        async with open_store(tmp_path, config=None if kept else VECTORS_NOT_HELD) as handle:
            rt = handle.runtime
            reads: list[str] = []
            asked_for_vectors: list[bool] = []
            indexed_vectors, get_embeddings, query_many = (
                rt.embedding_cache.indexed_vectors,
                rt.vectors.get_embeddings,
                rt.vectors.query_many,
            )

            async def from_cache(*args: Any, **kwargs: Any) -> Any:
                reads.append("sqlite")
                return await indexed_vectors(*args, **kwargs)

            async def by_id(*args: Any, **kwargs: Any) -> Any:
                reads.append("chroma")
                return await get_embeddings(*args, **kwargs)

            async def query(*args: Any, **kwargs: Any) -> Any:
                asked_for_vectors.append(bool(kwargs.get("with_embeddings")))
                return [[hit for hit in hits if hit.memory_id != ids[-1]] for hits in await query_many(*args, **kwargs)]

            rt.embedding_cache.indexed_vectors, rt.vectors.get_embeddings, rt.vectors.query_many = (
                from_cache,
                by_id,
                query,
            )
            svc = handle.get_service(MEMORY_SERVICE)
            rankings[kept] = []
            for text in QUERIES:
                for triplet in ({}, {"core_tags": ["生活"], "diffusion_tags": ["日常"]}):
                    result = await svc.retrieve_memories(text, top_k=5, min_score=0, **triplet)
                    rankings[kept].append([(item["id"], round(item["score"], 6)) for item in result["results"]])
            if kept:
                assert reads == [] and asked_for_vectors and not any(asked_for_vectors)
            else:
                assert "sqlite" in reads and all(asked_for_vectors)
    assert rankings[True] == rankings[False]
    assert all(rankings[True])


async def test_a_memory_not_flushed_yet_is_found_with_the_vector_it_was_staged_with(tmp_path: Path) -> None:
    ids = await store_chat(tmp_path)
    async with open_store(tmp_path) as handle:
        rt = handle.runtime
        svc = handle.get_service(MEMORY_SERVICE)
        assert rt.records.memory_keywords.holds_vectors()
        new_id = (await svc.upsert_memory("用户昨天买了一辆红色的自行车，打算骑车上班。"))["id"]
        assert new_id not in await held(rt, [*ids, new_id])  # staged: neither SQLite nor the copy has it yet
        result = await svc.retrieve_memories("用户买了什么颜色的自行车", top_k=3)
        assert result["results"][0]["id"] == new_id
        assert result["results"][0]["score_parts"]["cosine"] > 0


async def test_the_copy_follows_a_new_text_and_a_change_by_another_process(tmp_path: Path) -> None:
    ids = await store_chat(tmp_path)
    async with open_store(tmp_path) as handle:
        rt = handle.runtime
        svc = handle.get_service(MEMORY_SERVICE)
        before = (await held(rt, [ids[0]]))[ids[0]]
        # A new text: the drain indexes its vector and names it in SQLite; the copy follows.
        await svc.update_memory_by_id(memory_id=ids[0], content="用户说周末改去西山露营，晚上在山上看星星。")
        await rt.settle_deferred_vectors()
        after = await held(rt, [ids[0]])
        assert_same_vectors(after, await from_sqlite(rt, [ids[0]]))
        assert not np.array_equal(after[ids[0]], before)
        # Another process names another cached text as indexed for ids[1], then deletes ids[2]'s row outright.
        conn = sqlite3.connect(str(rt.db.path))
        try:
            with conn:
                conn.execute(
                    "UPDATE booku_memory_records SET embedded_text_hash = "
                    "(SELECT embedded_text_hash FROM booku_memory_records WHERE memory_id = ?) WHERE memory_id = ?",
                    [ids[3], ids[1]],
                )
                conn.execute("DELETE FROM booku_memory_records WHERE memory_id = ?", [ids[2]])
        finally:
            conn.close()
        now = await held(rt, ids)
        assert np.array_equal(now[ids[1]], now[ids[3]])
        assert ids[2] not in now
        assert_same_vectors({k: v for k, v in now.items()}, await from_sqlite(rt, [i for i in ids if i != ids[2]]))


async def test_a_model_bound_after_the_load_has_its_vectors_loaded_when_first_asked(tmp_path: Path) -> None:
    """A remote model learns its dimension from a first call, after the keyword index loaded without vectors:
    the first ask loads them in the background, and the SQL route answers meanwhile."""
    ids = await store_chat(tmp_path)
    async with open_store(tmp_path) as handle:
        rt = handle.runtime
        mirror = rt.records.memory_keywords
        assert mirror._loaded is not None
        mirror._loaded.vectors = None  # as loaded before the model was bound
        assert mirror.held_vectors(ids) is None  # asks for a load
        assert await mirror.wait_ready()
        assert_same_vectors(await held(rt, ids), await from_sqlite(rt, ids))


def test_stored_vectors_hold_unit_vectors_by_id_and_drop_them() -> None:
    vectors = StoredVectors("m", 3)
    vectors.set(None, "a", np.array([3.0, 0.0, 4.0], dtype=np.float32).tobytes())
    vectors.set(None, "b", np.array([1.0, 0.0], dtype=np.float32).tobytes())  # another dimension: not held
    found, missing = vectors.lookup(["a", "b", "a"])
    assert np.allclose(found["a"], [0.6, 0.0, 0.8]) and missing == ["b"]
    vectors.set("a", "c", None)  # the row of "a" now belongs to "c", which has no vector
    assert vectors.lookup(["a", "c"]) == ({}, ["a", "c"])
    assert vectors.holds("m", 3) and not vectors.holds("m", 4) and not vectors.holds(None, 3)

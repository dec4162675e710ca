"""A memory the keyword route finds but the approximate vector search missed still ranks by its meaning.

In a big store Chroma's HNSW search can miss a memory that is in fact the nearest by meaning (its graph does not
reach it); the keyword route still finds it by its words. Retrieval then reads that memory's stored vector and
scores it by exact cosine (``MemorySearch._score_by_meaning``) instead of leaving it at the vector route's floor.
The miss is simulated by dropping the memory from the vector index's answers, as an HNSW miss would.

The stored vector comes from the copy held in memory (``storage.mirrors.stored_vectors``), else from SQLite, else
from Chroma: the tests of the later sources switch the copy off (``retrieval.in_memory_vectors``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .memory_support import DAILY_CHAT, MEMORY_SERVICE, MINT_TURN, open_store, write_turns

QUERY = "用户在阳台种的薄荷怎么样了？"


def hide_from_vector_search(runtime: Any, memory_id: str) -> None:
    """Make the vector index's similarity search miss ``memory_id`` (its stored vector stays readable)."""
    query_many = runtime.vectors.query_many

    async def missing(*args: Any, **kwargs: Any) -> Any:
        found = await query_many(*args, **kwargs)
        return [[hit for hit in hits if hit.memory_id != memory_id] for hits in found]

    runtime.vectors.query_many = missing


async def store_chat_with_target(path: Path) -> str:
    """Write the chat, then the target memory, and close the store (so every vector is flushed); the target's id."""
    async with open_store(path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await write_turns(svc, DAILY_CHAT)
        return (await svc.upsert_memory(MINT_TURN))["id"]


VECTORS_NOT_HELD = {"retrieval": {"in_memory_vectors": False}}


async def retrieve_with_the_target_missed(handle: Any, target: str) -> tuple[dict[str, Any], list[list[str]]]:
    """The query's result while the vector search misses ``target``, and the reads of stored vectors from Chroma."""
    hide_from_vector_search(handle.runtime, target)
    reads = count_reads_by_id(handle.runtime)
    return await handle.get_service(MEMORY_SERVICE).retrieve_memories(QUERY, top_k=3), reads


async def test_a_keyword_hit_missed_by_the_vector_search_gets_its_cosine(tmp_path: Path) -> None:
    target = await store_chat_with_target(tmp_path)
    async with open_store(tmp_path) as handle:  # reopened: every vector is in the index, none still staged
        result, _ = await retrieve_with_the_target_missed(handle, target)
    top = result["results"][0]
    assert top["id"] == target
    # Its meaning counts: nearest to the query, it stands above the vector route's floor, and above every memory
    # the vector search did return.
    assert top["score_parts"]["cosine"] > max(item["score_parts"]["cosine"] for item in result["results"][1:])
    assert top["score_parts"]["vector"] > max(item["score_parts"]["vector"] for item in result["results"][1:])


def count_reads_by_id(runtime: Any) -> list[list[str]]:
    """Record every read of stored vectors by id from the vector index (``VectorIndex.get_embeddings``)."""
    calls: list[list[str]] = []
    get_embeddings = runtime.vectors.get_embeddings

    async def counted(store_key: str, ids: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(list(ids))
        return await get_embeddings(store_key, ids, *args, **kwargs)

    runtime.vectors.get_embeddings = counted
    return calls


async def test_the_missed_hit_is_scored_with_the_vector_the_index_holds_read_from_sqlite(tmp_path: Path) -> None:
    """The stored vector comes from SQLite (the passage vector of the text the drain indexed), the very vector
    Chroma holds, so retrieval asks Chroma for none by id."""
    target = await store_chat_with_target(tmp_path)
    async with open_store(tmp_path, config=VECTORS_NOT_HELD) as handle:
        rt = handle.runtime
        held = await rt.vectors.get_embeddings("shared", [target], tiers=["live"])
        from_sqlite = await rt.embedding_cache.indexed_vectors([target], rt.vectors.model_id, rt.vectors.dimension)
        assert np.allclose(from_sqlite[target], held[target], atol=1e-6)
        result, reads = await retrieve_with_the_target_missed(handle, target)
    assert result["results"][0]["id"] == target
    assert reads == []


async def test_without_its_cached_vector_the_missed_hit_is_read_from_the_index(tmp_path: Path) -> None:
    """A text whose cached vector is gone (retracted) is read from Chroma instead, and ranks the same."""
    target = await store_chat_with_target(tmp_path)
    async with open_store(tmp_path, config=VECTORS_NOT_HELD) as handle:
        rt = handle.runtime
        async with rt.db.transaction() as conn:
            await conn.execute(
                "DELETE FROM booku_embedding_cache WHERE text_hash = "
                "(SELECT embedded_text_hash FROM booku_memory_records WHERE memory_id = ?)",
                [target],
            )
        result, reads = await retrieve_with_the_target_missed(handle, target)
    assert result["results"][0]["id"] == target
    assert any(target in ids for ids in reads)


async def test_a_vector_not_flushed_yet_is_not_read_from_sqlite(tmp_path: Path) -> None:
    """Until the drain stores a memory's vector in the index, SQLite gives none for it either: both sources agree
    on what the index holds."""
    async with open_store(tmp_path) as handle:
        rt = handle.runtime
        svc = handle.get_service(MEMORY_SERVICE)
        await write_turns(svc, DAILY_CHAT)
        await rt.settle_deferred_vectors()
        first = (await rt.db.fetch_one("SELECT memory_id FROM booku_memory_records LIMIT 1"))["memory_id"]
        target = (await svc.upsert_memory(MINT_TURN))["id"]
        found = await rt.embedding_cache.indexed_vectors([first, target], rt.vectors.model_id, rt.vectors.dimension)
        assert first in found and target not in found


async def test_an_unreadable_embedding_cache_leaves_the_index_to_answer(tmp_path: Path) -> None:
    """The embedding cache is an optimisation: when its table cannot be read, the stored vectors come from Chroma
    and the retrieval ranks as before."""
    target = await store_chat_with_target(tmp_path)
    async with open_store(tmp_path, config=VECTORS_NOT_HELD) as handle:
        rt = handle.runtime
        async with rt.db.transaction() as conn:
            await conn.execute("ALTER TABLE booku_embedding_cache RENAME TO booku_embedding_cache_elsewhere")
        result, reads = await retrieve_with_the_target_missed(handle, target)
        async with rt.db.transaction() as conn:
            await conn.execute("ALTER TABLE booku_embedding_cache_elsewhere RENAME TO booku_embedding_cache")
    assert result["results"][0]["id"] == target
    assert any(target in ids for ids in reads)

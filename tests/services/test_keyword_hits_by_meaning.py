"""A memory the keyword route finds but the approximate vector search missed still ranks by its meaning.

In a big store Chroma's HNSW search can miss a memory that is in fact the nearest by meaning (its graph does not
reach it); the keyword route still finds it by its words. Retrieval then reads that memory's stored vector and
scores it by exact cosine (``MemorySearch._score_by_meaning``) instead of leaving it at the vector route's floor.
The miss is simulated by dropping the memory from the vector index's answers, as an HNSW miss would.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .memory_support import MEMORY_SERVICE, open_store, write_turns

CHAT = [
    "用户说周末去香山爬山，早上六点出发，带了两瓶水。",
    "用户每天早上喝一杯美式咖啡，不加糖也不加奶。",
    "用户的猫叫小橘，是一只橘色的公猫，最爱吃鱼干。",
    "用户在学吉他，已经会弹三个和弦了。",
    "用户说公司楼下新开了一家面馆，牛肉面很好吃。",
    "用户打算下个月去青岛看海，已经订好了火车票。",
]
TARGET = "用户上周在阳台种了一盆薄荷，每天给薄荷浇水。"
QUERY = "用户在阳台种的薄荷怎么样了？"


def hide_from_vector_search(runtime: Any, memory_id: str) -> None:
    """Make the vector index's similarity search miss ``memory_id`` (its stored vector stays readable)."""
    query_many = runtime.vectors.query_many

    async def missing(*args: Any, **kwargs: Any) -> Any:
        found = await query_many(*args, **kwargs)
        return [[hit for hit in hits if hit.memory_id != memory_id] for hits in found]

    runtime.vectors.query_many = missing


async def test_a_keyword_hit_missed_by_the_vector_search_gets_its_cosine(tmp_path: Path) -> None:
    async with open_store(tmp_path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await write_turns(svc, CHAT)
        target = (await svc.upsert_memory(TARGET))["id"]
    async with open_store(tmp_path) as handle:  # reopened: every vector is in the index, none still staged
        hide_from_vector_search(handle.runtime, target)
        result = await handle.get_service(MEMORY_SERVICE).retrieve_memories(QUERY, top_k=3)
    top = result["results"][0]
    assert top["id"] == target
    # Its meaning counts: nearest to the query, it stands above the vector route's floor, and above every memory
    # the vector search did return.
    assert top["score_parts"]["cosine"] > max(item["score_parts"]["cosine"] for item in result["results"][1:])
    assert top["score_parts"]["vector"] > max(item["score_parts"]["vector"] for item in result["results"][1:])

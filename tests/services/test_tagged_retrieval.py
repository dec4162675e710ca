"""Retrieval with query tags (the EPA route of ``services.memory_search``): pass 1, the query reshaped by the tags of
its hits, pass 2, then the tag bonus on every pass-2 hit, including hits that pass 2 alone found (their tags are read
after the second pass) and keyword candidates that pass 2 also found (read without tags before it).

The store is small and the candidate pool narrow (``candidate_pool = 5``, so nine hits per pass), so pass 2 does
find memories pass 1 did not: the ranking below is pinned as it was measured before the read path was reshaped for
speed (one thread hop per candidate read, tags built once per hit), and a change in which tags a hit gets, or when,
moves it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from .memory_support import MEMORY_SERVICE, open_store

# (content, core tags): Alice's and Bob's days; the query asks about weekends, and names nobody.
MEMORIES = [
    ("Alice went hiking in the hills on Saturday with her sister.", ["alice"]),
    ("Bob spent the weekend repairing his old bicycle in the garage.", ["bob"]),
    ("Alice baked bread on Sunday morning and shared it with neighbours.", ["alice"]),
    ("Bob watched a football match with friends on Saturday night.", ["bob"]),
    ("Alice is learning to play the cello, she practises every evening.", ["alice"]),
    ("Bob's daughter started school this autumn and loves her teacher.", ["bob"]),
    ("Alice visited the modern art museum last weekend and bought a poster.", ["alice"]),
    ("Bob cooked a curry for his parents on Sunday.", ["bob"]),
    ("Alice adopted a grey kitten from the shelter.", ["alice"]),
    ("Bob went fishing at the lake early on a weekend morning.", ["bob"]),
    ("Alice planted tomatoes and basil in her garden.", ["alice"]),
    ("Bob is training for a half marathon in the spring.", ["bob"]),
    ("Alice took a pottery class on a weekend afternoon.", ["alice"]),
    ("Bob fixed the leaking kitchen tap himself.", ["bob"]),
    ("Alice read three novels during her weekend at the beach.", ["alice"]),
    ("Bob played chess online until midnight on Friday.", ["bob"]),
    ("Alice volunteered at the food bank on Saturday.", ["alice"]),
    ("Bob bought a new tent for camping trips.", ["bob"]),
    ("Alice cycled along the river on a sunny weekend.", ["alice"]),
    ("Bob painted the fence of his house white.", ["bob"]),
]


async def _tagged_ranking(path: Path, query: str, **tags: Any) -> tuple[list[tuple[int, float | None]], int]:
    """(memory index, cosine part) of each result for ``query`` with ``tags``, and how many candidate reads with
    tags it took (two when pass 2 found memories whose tags pass 1 had not read)."""
    async with open_store(path, config={"retrieval": {"candidate_pool": 5}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = []
        for content, core in MEMORIES:
            result = await svc.upsert_memory(
                content, core_tags=core, diffusion_tags=["daily life"], opposing_tags=["work"]
            )
            ids.append(result["id"])
        records = handle.runtime.records
        reads = 0
        read_candidates = records.candidates

        async def counted(memory_ids: Any, *, with_tags: bool, **options: Any) -> Any:
            nonlocal reads
            reads += with_tags
            return await read_candidates(memory_ids, with_tags=with_tags, **options)

        records.candidates = counted
        response = await svc.retrieve_memories(query, top_k=3, **tags)
    index = {memory_id: position for position, memory_id in enumerate(ids)}
    return [(index[item["id"]], _rounded(item["score_parts"]["cosine"])) for item in response["results"]], reads


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


@pytest.mark.parametrize(
    ("query", "tags", "expected"),
    [
        # Memory 12 is a keyword candidate (read without tags) that pass 2 found too: it carries Alice's bonus.
        ("What did they do at the weekend?", {"core_tags": ["alice"]}, [(18, 1.2961), (14, 1.4973), (12, 1.0832)]),
        # Memory 11 (Bob) is found by pass 2 only: its tags were read after it.
        ("What did Alice do at the weekend?", {"core_tags": ["bob"]}, [(1, 1.5762), (9, 1.5522), (11, 1.1923)]),
        # Memories 3 and 7 (Bob) are found by pass 2 only; Alice's memories are pushed away.
        (
            "Alice's hobbies",
            {"core_tags": ["bob"], "opposing_tags": ["alice"]},
            [(5, 1.7675), (3, 0.9705), (7, 0.9696)],
        ),
    ],
)
async def test_tagged_ranking_is_pinned(
    tmp_path: Path, query: str, tags: dict[str, list[str]], expected: list[tuple[int, float | None]]
) -> None:
    ranking, reads = await _tagged_ranking(tmp_path, query, **tags)
    assert reads == 2  # the premise: pass 2 found memories whose tags had not been read
    assert ranking == expected

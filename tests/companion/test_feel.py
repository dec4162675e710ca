"""feel(query): semantic search among feelings only, the 0.65 similarity line, verbatim whole bodies without filler,
max_tokens dropping whole feelings, and the explicit keyword fallback when the model is unavailable."""

from __future__ import annotations

import booku_memory
import pytest
from booku_memory.services.companion.feel import FEEL_MIN_SIMILARITY
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.embedding.deterministic import (
    DeterministicTestEmbedder,
    UnavailableEmbedder,
)
from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.text import compose_embedding_text, extract_title

from .conftest import QUIET_CONFIG
from .support import ids

QUERY = "和妈妈吵架以后很难过"
CLOSE = "和妈妈吵架以后很难过，一整晚睡不着。"
LOOSE = "和妈妈一起包饺子，很开心。"


def similarity(query: str, content: str) -> float:
    """The cosine the fixture's embedder gives (the same framing the vector outbox uses)."""
    embedder = DeterministicTestEmbedder()
    passage = embedder.embed_sync([compose_embedding_text(extract_title(content), content)])[0]
    return float(embedder.embed_sync([query])[0] @ passage)


async def test_only_feelings_at_or_above_the_line_are_returned(companion) -> None:
    assert similarity(QUERY, CLOSE) >= FEEL_MIN_SIMILARITY > similarity(QUERY, LOOSE) > 0.2  # the fixture straddles
    close = await companion.hold(CLOSE, feel=True)
    await companion.hold(LOOSE, feel=True)
    await companion.hold(QUERY, importance=9)  # an ordinary memory saying exactly the query is not a feeling
    found = await companion.feel(QUERY)
    assert ids(found) == [close["id"]] and found["mode"] == "vector"
    assert found["items"][0]["relevance"] >= FEEL_MIN_SIMILARITY
    assert LOOSE not in found["text"]


async def test_hits_come_back_whole_and_verbatim_best_first(companion) -> None:
    exact = "  和妈妈吵架以后很难过。\n\n" + "和妈妈吵架以后很难过，一个人坐在阳台上。" * 30 + "\n"
    assert similarity(QUERY, exact) >= FEEL_MIN_SIMILARITY
    close = await companion.hold(CLOSE, feel=True)
    whole = await companion.hold(exact, feel=True)
    found = await companion.feel(QUERY)
    assert set(ids(found)) == {close["id"], whole["id"]}
    relevances = [item["relevance"] for item in found["items"]]
    assert relevances == sorted(relevances, reverse=True)
    assert next(i for i in found["items"] if i["id"] == whole["id"])["content"] == exact
    assert "和妈妈吵架以后很难过，一个人坐在阳台上。" * 30 in found["text"]


async def test_nothing_relevant_means_nothing_returned(companion) -> None:
    await companion.hold(LOOSE, feel=True)
    await companion.hold("下雨天一个人听歌，有点孤单。", feel=True)
    found = await companion.feel("工作上的升职")
    assert found["items"] == [] and found["total"] == 0
    assert "不拿低相关的凑数" in found["text"]


async def test_max_tokens_drops_whole_feelings_never_part_of_one(companion) -> None:
    long_one = "和妈妈吵架以后很难过，我反复想她说的话。" * 60
    assert similarity(QUERY, long_one) >= FEEL_MIN_SIMILARITY
    first = await companion.hold(CLOSE, feel=True)
    second = await companion.hold(long_one, feel=True)
    full = await companion.feel(QUERY)
    assert set(ids(full)) == {first["id"], second["id"]}
    tight = await companion.feel(QUERY, max_tokens=100)
    assert ids(tight) == [first["id"]] and tight["omitted"] == [second["id"]]
    assert "我反复想她说的话" not in tight["text"] and "整条省略" in tight["text"]
    with pytest.raises(ValidationError, match="max_tokens"):
        await companion.feel(QUERY, max_tokens=10)


async def test_a_query_is_required(companion) -> None:
    with pytest.raises(ValidationError, match="query"):
        await companion.feel("   ")


async def test_without_the_model_it_falls_back_to_literal_keywords_and_says_so(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "down", QUIET_CONFIG, embedder=UnavailableEmbedder()) as handle:
        service = BookuCompanionService(handle.runtime)
        close = await service.hold(CLOSE, feel=True)
        await service.hold(LOOSE, feel=True)
        await service.hold("和妈妈吵架", importance=9)
        found = await service.feel("和妈妈吵架")
        assert found["mode"] == "keyword" and "degraded" in found
        assert found["text"].startswith("⚠ 向量检索不可用") and "关键词字面匹配" in found["text"]
        assert ids(found) == [close["id"]]
        empty = await service.feel("升职")
        assert empty["items"] == [] and "degraded" in empty

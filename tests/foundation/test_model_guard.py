"""Changing the embedding model is refused with a clear message until `reindex` rebuilds the vectors."""

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ModelMismatchError
from booku_memory.services.portability import reindex

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


async def test_model_change_fails_until_reindex(tmp_path):
    data = tmp_path / "data"
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder(384)) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        for text in ("苹果是一种水果", "上海是一座城市", "篮球是一项运动"):
            await service.upsert_memory(text)

    with pytest.raises(ModelMismatchError, match="reindex"):
        async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder(256)):
            pass

    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder(256), check_model=False) as memory:
        report = await reindex(memory.runtime)
        assert report["vectors"] == 3 and report["pending"] == 0 and report["dimension"] == 256

    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder(256)) as memory:
        result = await memory.get_service(booku_memory.MEMORY_SERVICE).retrieve_memories("上海城市", top_k=1)
        assert result["results"][0]["content_snippet"] == "上海是一座城市"
        assert "degraded" not in result

"""HostEmbedder: the host's embedding function behind the common interface, in batches."""

from __future__ import annotations

import numpy as np
import pytest

from booku_memory.services.embedding import HostEmbedder
from booku_memory.services.errors import EmbeddingUnavailableError, ValidationError


class FakeHost:
    """Answers like llm_api's embedding request: one list of floats per input, recording each request."""

    def __init__(self, dimension: int = 3) -> None:
        self.dimension = dimension
        self.requests: list[list[str]] = []

    async def __call__(self, texts: list[str]) -> list[list[float]]:
        self.requests.append(list(texts))
        return [[float(len(text)), 1.0] + [0.0] * (self.dimension - 2) for text in texts]


async def test_batches_and_normalises_the_host_answer() -> None:
    host = FakeHost()
    embedder = HostEmbedder(host, "host/BAAI/bge-m3", batch_size=2)
    assert embedder.dimension == 0
    result = await embedder.embed_documents(["a", "bb", "ccc"])
    assert host.requests == [["a", "bb"], ["ccc"]]
    assert result.shape == (3, 3) and result.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(result, axis=1), 1.0, atol=1e-6)
    np.testing.assert_allclose(result[2], np.array([3.0, 1.0, 0.0]) / np.sqrt(10.0), atol=1e-6)
    assert embedder.dimension == 3


async def test_queries_use_the_same_request() -> None:
    host = FakeHost()
    embedder = HostEmbedder(host, "host/m")
    np.testing.assert_array_equal(await embedder.embed_queries(["问"]), await embedder.embed_documents(["问"]))


async def test_any_host_exception_becomes_unavailable_with_the_reason() -> None:
    class LLMAPIError(Exception):
        pass

    async def failing(texts: list[str]) -> list[list[float]]:
        raise LLMAPIError("所有模型均请求失败")

    with pytest.raises(EmbeddingUnavailableError, match="LLMAPIError: 所有模型均请求失败"):
        await HostEmbedder(failing, "host/m").embed_queries(["你好"])


async def test_wrong_vector_count_or_dimension_is_refused() -> None:
    async def short(texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]]

    with pytest.raises(EmbeddingUnavailableError, match="返回了 1 个向量，但请求了 2 条"):
        await HostEmbedder(short, "host/m").embed_documents(["a", "b"])
    with pytest.raises(EmbeddingUnavailableError, match="3 维.*1024 维"):
        await HostEmbedder(FakeHost(3), "host/m", dimension=1024).embed_documents(["a"])


def test_construction_is_validated() -> None:
    with pytest.raises(ValidationError, match="model_id"):
        HostEmbedder(FakeHost(), " ")
    with pytest.raises(ValidationError, match="request_fn"):
        HostEmbedder(None, "host/m")  # type: ignore[arg-type]

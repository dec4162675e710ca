"""The test-only embedders: stable, word-sensitive vectors, and an always-failing one."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from booku_memory.services.embedding import DeterministicTestEmbedder, UnavailableEmbedder
from booku_memory.services.errors import EmbeddingUnavailableError, ValidationError


async def test_shape_dtype_and_unit_rows() -> None:
    embedder = DeterministicTestEmbedder()
    result = await embedder.embed_documents(["用户喜欢爬山", "The user likes tea", "", "。。！"])
    assert embedder.dimension == 384 and embedder.model_id == "deterministic-test/hash-384"
    assert result.shape == (4, 384) and result.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(result, axis=1), 1.0, atol=1e-6)


async def test_texts_sharing_words_are_more_similar_than_unrelated_ones() -> None:
    embedder = DeterministicTestEmbedder()
    anchor, related, unrelated = await embedder.embed_documents(
        ["用户周末喜欢去黄山爬山", "用户喜欢爬山", "明天下午三点开项目会议"]
    )
    assert anchor @ related > 0.3
    assert anchor @ related > anchor @ unrelated + 0.2
    english = await embedder.embed_queries(["green tea in the morning", "drinks green tea", "quarterly tax report"])
    assert english[0] @ english[1] > english[0] @ english[2] + 0.2


async def test_same_text_same_vector_and_queries_equal_documents() -> None:
    embedder = DeterministicTestEmbedder(dimension=64)
    documents = await embedder.embed_documents(["重复的文本", "重复的文本"])
    queries = await embedder.embed_queries(["重复的文本"])
    np.testing.assert_array_equal(documents[0], documents[1])
    np.testing.assert_array_equal(documents[0], queries[0])


def test_vectors_are_identical_in_another_process() -> None:
    # hash() is salted per process; the embedder must not depend on it.
    script = (
        "from booku_memory.services.embedding import DeterministicTestEmbedder as E;"
        "import sys; sys.stdout.write(E(dimension=32).embed_sync(['跨进程稳定 stable']).tobytes().hex())"
    )
    other = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "123"},
    )
    here = DeterministicTestEmbedder(dimension=32).embed_sync(["跨进程稳定 stable"])
    np.testing.assert_array_equal(np.frombuffer(bytes.fromhex(other.stdout), dtype=np.float32).reshape(1, 32), here)


def test_dimension_must_be_reasonable() -> None:
    with pytest.raises(ValidationError, match="dimension"):
        DeterministicTestEmbedder(dimension=0)


async def test_unavailable_embedder_always_raises_its_reason() -> None:
    embedder = UnavailableEmbedder("嵌入服务维护中")
    with pytest.raises(EmbeddingUnavailableError, match="嵌入服务维护中"):
        await embedder.embed_documents(["a"])
    with pytest.raises(EmbeddingUnavailableError, match="嵌入服务维护中"):
        await embedder.embed_queries(["a"])
    assert embedder.calls == 2

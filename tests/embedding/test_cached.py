"""CachedEmbedder: only misses reach the provider, in one call; queries also hit an in-process LRU."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import pytest

from booku_memory.services.embedding import CachedEmbedder, DeterministicTestEmbedder, text_hash
from booku_memory.services.errors import EmbeddingUnavailableError


class DictStore:
    """In-memory stand-in for the SQLite cache table, counting its calls."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str, str], np.ndarray] = {}
        self.get_calls: list[tuple[str, str, list[str]]] = []
        self.put_calls: list[tuple[str, str, list[str]]] = []

    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        self.get_calls.append((model, mode, list(hashes)))
        return {h: self.rows[(model, mode, h)].copy() for h in hashes if (model, mode, h) in self.rows}

    async def put_many(self, model: str, mode: str, items: list[tuple[str, np.ndarray]]) -> None:
        self.put_calls.append((model, mode, [h for h, _ in items]))
        for digest, vector in items:
            self.rows[(model, mode, digest)] = np.array(vector, copy=True)


class BrokenStore:
    async def get_many(self, model: str, mode: str, hashes: Sequence[str]) -> dict[str, np.ndarray]:
        raise OSError("database is locked")

    async def put_many(self, model: str, mode: str, items: list[tuple[str, np.ndarray]]) -> None:
        raise OSError("disk full")


class CountingEmbedder:
    """Wraps an embedder and records every batch it is asked for."""

    def __init__(self, inner: DeterministicTestEmbedder) -> None:
        self.inner = inner
        self.model_id = inner.model_id
        self.dimension = inner.dimension
        self.calls: list[tuple[str, list[str]]] = []
        self.closed = False

    async def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(("passage", list(texts)))
        return await self.inner.embed_documents(texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(("query", list(texts)))
        return await self.inner.embed_queries(texts)

    async def aclose(self) -> None:
        self.closed = True


@pytest.fixture
def inner() -> CountingEmbedder:
    return CountingEmbedder(DeterministicTestEmbedder(dimension=64))


@pytest.fixture
def store() -> DictStore:
    return DictStore()


def test_text_hash_is_sha256_of_the_exact_utf8_text() -> None:
    assert text_hash("记忆") == hashlib.sha256("记忆".encode()).hexdigest()
    assert text_hash("记忆") != text_hash("记忆 ")


async def test_second_call_is_served_from_the_store_without_a_model_call(
    inner: CountingEmbedder, store: DictStore
) -> None:
    texts = ["用户喜欢爬山", "用户养了一只猫"]
    cached = CachedEmbedder(inner, store)
    first = await cached.embed_documents(texts)
    second = await cached.embed_documents(texts)
    assert inner.calls == [("passage", texts)]
    np.testing.assert_array_equal(first, second)
    np.testing.assert_allclose(first, await inner.inner.embed_documents(texts), atol=1e-6)
    assert store.put_calls == [(inner.model_id, "passage", [text_hash(t) for t in texts])]


async def test_a_fresh_wrapper_on_the_same_store_still_needs_no_model_call(
    inner: CountingEmbedder, store: DictStore
) -> None:
    await CachedEmbedder(inner, store).embed_documents(["重启前写入的记忆"])
    result = await CachedEmbedder(inner, store).embed_documents(["重启前写入的记忆"])
    assert len(inner.calls) == 1
    assert result.shape == (1, 64)


async def test_only_misses_go_to_the_model_in_one_call_and_order_is_kept(
    inner: CountingEmbedder, store: DictStore
) -> None:
    cached = CachedEmbedder(inner, store)
    await cached.embed_documents(["甲", "丙"])
    result = await cached.embed_documents(["甲", "乙", "丙", "丁", "乙"])
    assert inner.calls == [("passage", ["甲", "丙"]), ("passage", ["乙", "丁"])]
    expected = await inner.inner.embed_documents(["甲", "乙", "丙", "丁", "乙"])
    np.testing.assert_allclose(result, expected, atol=1e-6)


async def test_query_and_passage_vectors_are_cached_separately(inner: CountingEmbedder, store: DictStore) -> None:
    cached = CachedEmbedder(inner, store)
    await cached.embed_documents(["同一句话"])
    await cached.embed_queries(["同一句话"])
    assert [mode for mode, _ in inner.calls] == ["passage", "query"]
    assert {key[1] for key in store.rows} == {"passage", "query"}


async def test_another_model_never_sees_these_vectors(inner: CountingEmbedder, store: DictStore) -> None:
    await CachedEmbedder(inner, store).embed_documents(["换模型"])
    other = CountingEmbedder(DeterministicTestEmbedder(dimension=32))
    result = await CachedEmbedder(other, store).embed_documents(["换模型"])
    assert other.calls == [("passage", ["换模型"])]
    assert result.shape == (1, 32)


async def test_repeated_queries_are_answered_by_the_lru_without_touching_the_store(
    inner: CountingEmbedder, store: DictStore
) -> None:
    cached = CachedEmbedder(inner, store)
    first = await cached.embed_queries(["猫叫什么名字"])
    gets_after_first = len(store.get_calls)
    second = await cached.embed_queries(["猫叫什么名字"])
    assert len(store.get_calls) == gets_after_first
    assert len(inner.calls) == 1
    np.testing.assert_array_equal(first, second)


async def test_the_lru_is_bounded_and_evicts_the_least_recently_used(inner: CountingEmbedder, store: DictStore) -> None:
    cached = CachedEmbedder(inner, store, query_cache_size=2)
    await cached.embed_queries(["一"])
    await cached.embed_queries(["二"])
    await cached.embed_queries(["一"])  # refreshes "一"
    await cached.embed_queries(["三"])  # evicts "二"
    store.get_calls.clear()
    await cached.embed_queries(["一"])
    await cached.embed_queries(["三"])
    assert store.get_calls == []
    await cached.embed_queries(["二"])
    assert store.get_calls == [(inner.model_id, "query", [text_hash("二")])]


async def test_callers_mutating_a_result_cannot_corrupt_the_cache(inner: CountingEmbedder, store: DictStore) -> None:
    cached = CachedEmbedder(inner, store)
    first = await cached.embed_queries(["不要改我"])
    first[:] = 0.0
    again = await cached.embed_queries(["不要改我"])
    np.testing.assert_allclose(np.linalg.norm(again, axis=1), 1.0, atol=1e-6)


async def test_unusable_cached_rows_count_as_misses(inner: CountingEmbedder, store: DictStore) -> None:
    store.rows[(inner.model_id, "passage", text_hash("坏行"))] = np.full(64, np.nan, dtype=np.float32)
    store.rows[(inner.model_id, "passage", text_hash("短行"))] = np.ones(10, dtype=np.float32)
    result = await CachedEmbedder(inner, store).embed_documents(["坏行", "短行"])
    assert inner.calls == [("passage", ["坏行", "短行"])]
    assert np.all(np.isfinite(result)) and result.shape == (2, 64)


async def test_a_broken_store_costs_a_model_call_not_the_request(inner: CountingEmbedder) -> None:
    cached = CachedEmbedder(inner, BrokenStore())
    result = await cached.embed_documents(["缓存坏了也要能写入"])
    assert result.shape == (1, 64)
    assert len(inner.calls) == 1


async def test_provider_failures_pass_through_and_nothing_is_cached(store: DictStore) -> None:
    from booku_memory.services.embedding import UnavailableEmbedder

    cached = CachedEmbedder(UnavailableEmbedder("模型挂了"), store)
    with pytest.raises(EmbeddingUnavailableError, match="模型挂了"):
        await cached.embed_queries(["随便"])
    assert store.rows == {}


async def test_empty_input_touches_nothing(inner: CountingEmbedder, store: DictStore) -> None:
    result = await CachedEmbedder(inner, store).embed_documents([])
    assert result.shape == (0, 64)
    assert inner.calls == [] and store.get_calls == []


async def test_identity_and_close_are_delegated(inner: CountingEmbedder, store: DictStore) -> None:
    cached = CachedEmbedder(inner, store)
    assert cached.model_id == inner.model_id and cached.dimension == 64
    await cached.aclose()
    assert inner.closed

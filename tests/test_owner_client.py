"""A second ``booku_memory.open()`` on an owned data dir: proxies of the owner's services, or a clear refusal.

Owner and client live in one process here (the client still talks to the owner over loopback HTTP, exactly as
another process would); tests/test_one_owner_many_processes.py runs them as separate programs.
"""

from __future__ import annotations

import inspect
import json
import os
import stat

import httpx
import pytest

import booku_memory
from booku_memory.owner_client import OwnerCallError, RemoteMemoryHandle
from booku_memory.owner_rpc import CALL_PATH, MAX_BODY_BYTES
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import NotFoundError, ValidationError
from booku_memory.services.knowledge_service import BookuKnowledgeService
from booku_memory.services.memory_service import BookuMemoryService
from booku_memory.services.ownership import LOCK_FILE_NAME, DataDirBusy, read_owner
from booku_memory.standalone import MemoryHandle

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
TAGS = {"core_tags": ["书店"], "diffusion_tags": ["读书会"], "opposing_tags": ["菜市场"]}


@pytest.fixture
async def owner(tmp_path):
    async with booku_memory.open(
        tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder(), accept_clients=True
    ) as handle:
        yield handle


@pytest.fixture
async def client(owner):
    async with booku_memory.open(owner.data_dir, QUIET_CONFIG) as handle:
        yield handle


async def test_second_open_gets_proxies_with_the_real_signatures(owner, client) -> None:
    assert isinstance(owner, MemoryHandle) and isinstance(client, RemoteMemoryHandle)
    assert client.owner.pid == os.getpid() and client.owner.entry_point == "open"
    for signature, cls in (
        (booku_memory.MEMORY_SERVICE, BookuMemoryService),
        (booku_memory.KNOWLEDGE_SERVICE, BookuKnowledgeService),
    ):
        proxy, real = client.get_service(signature), owner.get_service(signature)
        names = [name for name, _ in inspect.getmembers(cls, inspect.iscoroutinefunction) if not name.startswith("_")]
        assert "retrieve_memories" in names or "ingest_document" in names
        for name in names:
            assert inspect.signature(getattr(proxy, name)) == inspect.signature(getattr(real, name)), name
    # The module-level look-up answers from the newest handle, the client, as it would in a client process.
    assert type(booku_memory.get_service(booku_memory.MEMORY_SERVICE)).__name__ == "RemoteBookuMemoryService"


async def test_a_client_write_is_found_by_the_owner_and_results_match(owner, client) -> None:
    remote = client.get_service(booku_memory.MEMORY_SERVICE)
    local = owner.get_service(booku_memory.MEMORY_SERVICE)
    created = await remote.create_memory(title="紫藤书店", content="周六下午在紫藤书店参加读书会", **TAGS)
    found = await local.retrieve_memories("紫藤书店 读书会", record_activation=False)
    assert found["results"][0]["id"] == created["id"]
    # Positional first argument, keyword rest: bound like the real method, answered like the owner's own call.
    assert await remote.retrieve_memories("紫藤书店 读书会", record_activation=False) == found
    assert await remote.list_memory_entries() == await local.list_memory_entries()
    assert await remote.get_memory_history(memory_id=created["id"]) == await local.get_memory_history(
        memory_id=created["id"]
    )


async def test_errors_keep_their_type_and_chinese_message_and_nothing_is_written(owner, client) -> None:
    remote = client.get_service(booku_memory.MEMORY_SERVICE)
    local = owner.get_service(booku_memory.MEMORY_SERVICE)
    with pytest.raises(ValidationError) as remote_error:
        await remote.create_memory(title="空", content="", **TAGS)
    with pytest.raises(ValidationError) as local_error:
        await local.create_memory(title="空", content="", **TAGS)
    assert str(remote_error.value) == str(local_error.value) and "content" in str(remote_error.value)
    with pytest.raises(NotFoundError):
        await remote.get_memory_history(memory_id="mem-0000")
    with pytest.raises(TypeError):  # a wrong call fails in the client, as it would on the real method
        await remote.create_memory("位置参数", content="x")
    assert (await local.memory_statistics())["total"] == 0


async def test_maintenance_reports_progress_through_the_owner(owner, client, tmp_path, monkeypatch) -> None:
    remote = client.get_service(booku_memory.MEMORY_SERVICE)
    for title, content in (
        ("紫藤书店", "周六下午在紫藤书店参加读书会"),
        ("南湖划船", "傍晚去南湖划船看晚霞"),
        ("老槐树", "外公每天在老槐树下和邻居下象棋"),
    ):
        assert (await remote.create_memory(title=title, content=content, **TAGS))["mode"] == "created"
    seen: list[tuple] = []
    result = await client.reindex(progress=lambda *args: seen.append(args))
    assert result["vectors"] == 3 and seen and seen[-1][0] == seen[-1][1] == 3

    # Paths are the caller's: relative to the client's working directory, not the owner's.
    monkeypatch.chdir(tmp_path)
    exported = await client.export_jsonl("backup.jsonl")
    assert exported["record"] == 3 and (tmp_path / "backup.jsonl").is_file()
    (tmp_path / "手册.md").write_text("# 部署\n\n先安装依赖，再启动服务。\n", encoding="utf-8")
    knowledge = client.get_service(booku_memory.KNOWLEDGE_SERVICE)
    ingested = await knowledge.ingest_document(title="", file_path="手册.md")
    assert ingested["chunk_count"] >= 1
    listed = await owner.get_service(booku_memory.KNOWLEDGE_SERVICE).list_documents()
    assert [doc["document_id"] for doc in listed["items"]] == [ingested["document_id"]]


async def test_memory_command_runs_in_the_owner(owner, client) -> None:
    answer = await client.run_memory_command(
        'create -title 青石巷 -content "青石巷的咖啡馆手冲很好喝" -triple_tags "咖啡|手冲|茶"'
    )
    assert answer["ok"], answer
    found = await owner.run_memory_command('search -q "青石巷 咖啡"')
    assert found["results"][0]["result"]["items"][0]["title"] == "青石巷"


async def test_the_endpoint_wants_the_token_and_a_bounded_body(owner) -> None:
    record = read_owner(owner.data_dir)
    mode = stat.S_IMODE(os.stat(owner.data_dir / LOCK_FILE_NAME).st_mode)
    assert mode == 0o600 and record.ready and record.address.startswith("http://127.0.0.1:")
    body = {"target": "memory", "method": "create_memory", "kwargs": {"title": "越权", "content": "不该写进去", **TAGS}}
    async with httpx.AsyncClient(base_url=record.address, trust_env=False) as http:
        assert (await http.post(CALL_PATH, json=body)).status_code == 401
        wrong = await http.post(CALL_PATH, json=body, headers={"Authorization": "Bearer " + "x" * len(record.token)})
        assert wrong.status_code == 401
        huge = await http.post(
            CALL_PATH,
            content=b"{" + b" " * (MAX_BODY_BYTES + 1) + b"}",
            headers={"Authorization": f"Bearer {record.token}"},
        )
        assert huge.status_code == 413
        private = await http.post(
            CALL_PATH, json={**body, "method": "_writer"}, headers={"Authorization": f"Bearer {record.token}"}
        )
        assert json.loads(private.text.strip().splitlines()[-1])["error"]["type"] == "ValidationError"
    assert (await owner.get_service(booku_memory.MEMORY_SERVICE).memory_statistics())["total"] == 0


async def test_an_owner_without_endpoint_is_named_in_the_refusal(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as owner:
        with pytest.raises(DataDirBusy) as refused:
            async with booku_memory.open(owner.data_dir, QUIET_CONFIG):
                pass
        message = str(refused.value)
        assert f"进程 {os.getpid()}" in message and "booku_memory.open()" in message
        assert "accept_clients=True" in message
    # Closed: the lock is free again, and the next open owns the data dir itself.
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as again:
        assert isinstance(again, MemoryHandle)


async def test_a_client_whose_owner_stopped_serving_gets_a_clear_error(owner, client) -> None:
    remote = client.get_service(booku_memory.MEMORY_SERVICE)
    await remote.list_folder_ids()
    await owner.endpoint.stop()  # what the owner's close does first
    with pytest.raises(OwnerCallError) as gone:
        await remote.list_folder_ids()
    assert f"进程 {os.getpid()}" in str(gone.value) and "重试" in str(gone.value)

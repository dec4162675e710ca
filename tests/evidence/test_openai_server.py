"""Dreaming against a real OpenAI-compatible HTTP server on 127.0.0.1 (the ``fakellm`` package's server).

``fakellm`` answers ``POST /v1/chat/completions`` from rules in a YAML file; it is not a language model, so the rules
give the answers a model would. What this checks is the real client: the HTTP request, the chat.completion answer
shape, error answers and timeouts, end to end through stage A, stage B and an approval. Skipped (with the reason)
when the package is not installed.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import booku_memory
from booku_memory.services.evidence import (
    EvidenceService,
    OpenAICompatibleChatModel,
    ReviewService,
    attach_evidence,
    dreaming_settings,
)
from booku_memory.services.evidence.chat_model import ChatModelUnavailableError
from booku_memory.services.evidence.prompts import EPISODE_TASK_MARK, PROPOSAL_TASK_MARK
from booku_memory.services.evidence.unsure_pairs import PAIR_TASK_MARK

from .conftest import ALICE_STORE, ALICE_STREAM, T0, human
from .support import say

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("fakellm") is None,
    reason="没有安装提供 OpenAI 兼容聊天接口的本地服务包 fakellm（pip install fakellm），跳过真实 HTTP 服务测试",
)
STARTUP_TRIES = 150


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(config: Path, port: int, log: Path) -> subprocess.Popen:
    """Start fakellm on loopback and wait (bounded) until it answers."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from fakellm.cli import main; main()",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--config",
            str(config),
        ],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
    )
    for _ in range(STARTUP_TRIES):
        if process.poll() is not None:
            raise RuntimeError(f"fakellm 启动失败：{log.read_text(errors='replace')[-500:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/_fakellm", timeout=1.0).status_code < 500:
                return process
        except httpx.HTTPError:
            time.sleep(0.1)
    process.terminate()
    raise RuntimeError("fakellm 没有在限定次数内就绪")


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


class FakeServer:
    """One fakellm process for the module; ``use(rules)`` swaps its rules (``POST /_fakellm/reload``)."""

    def __init__(self, config: Path, port: int) -> None:
        self.config = config
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}/v1"

    def use(self, rules: list[dict]) -> None:
        self.config.write_text(json.dumps({"rules": rules}, ensure_ascii=False), encoding="utf-8")  # JSON is YAML
        answer = httpx.post(f"http://127.0.0.1:{self.port}/_fakellm/reload", timeout=10)
        assert answer.status_code == 200 and answer.json()["rules"] == len(rules), answer.text


@pytest.fixture(scope="module")
def fake_server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fakellm")
    config = folder / "fakellm.yaml"
    config.write_text(json.dumps({"rules": []}), encoding="utf-8")
    port = free_port()
    process = start_server(config, port, folder / "fakellm.log")
    try:
        yield FakeServer(config, port)
    finally:
        stop_server(process)


async def test_stage_a_stage_b_and_approval_through_a_real_openai_compatible_server(runtime, fake_server):
    entry = await say(runtime, ALICE_STREAM, "下周三下午三点我要去看牙医", T0)
    fake_server.use(
        [
            {
                "name": "episode",
                "when": {"messages_contain": EPISODE_TASK_MARK},
                "respond": {
                    "content": json.dumps(
                        {"topic": "看牙医", "summary": "小明说下周三下午三点去看牙医。"}, ensure_ascii=False
                    )
                },
            },
            {
                "name": "proposals",
                "when": {"messages_contain": PROPOSAL_TASK_MARK},
                "respond": {
                    "content": "```json\n"
                    + json.dumps(
                        {
                            "proposals": [
                                {
                                    "op": "create",
                                    "title": "牙医预约",
                                    "content": "小明约了下周三下午三点看牙医。",
                                    "memory_type": "event",
                                    "message_ids": [entry],
                                    "reason": "用户的日程",
                                }
                            ]
                        },
                        ensure_ascii=False,
                    )
                    + "\n```"
                },
            },
        ]
    )
    hub = attach_evidence(
        runtime,
        dreaming=dreaming_settings(
            runtime.config,
            enabled=True,
            chat_provider="openai",
            openai_base_url=fake_server.base_url,
            openai_model="fake-small",
            episode_idle_seconds=600.0,
        ),
    )
    assert isinstance(hub.chat_model, OpenAICompatibleChatModel)
    try:
        evidence = EvidenceService(runtime, human(ALICE_STORE))
        stage_a = await evidence.run_stage_a(now=T0 + 5000)
        assert stage_a["state"] == "ok" and len(stage_a["created"]) == 1
        [episode] = (await evidence.list_episodes())["items"]
        assert (episode["topic"], episode["model_id"]) == ("看牙医", "openai/fake-small")
        stage_b = await evidence.run_stage_b()
        assert stage_b["state"] == "ok" and len(stage_b["created"]) == 1
        review = ReviewService(runtime, human(ALICE_STORE))
        approved = await review.approve(stage_b["created"][0])
        assert (await runtime.records.get(approved["memory_id"]))["content"] == "小明约了下周三下午三点看牙医。"
    finally:
        await hub.aclose()


async def test_error_answers_and_unreachable_servers_become_unavailable_errors(fake_server):
    fake_server.use(
        [
            {
                "name": "overloaded",
                "when": {"messages_contain": "过载"},
                "respond": {"status": 503, "error": "server overloaded (mock)"},
            },
            {"name": "empty", "when": {"messages_contain": "格式"}, "respond": {"content": ""}},
        ]
    )
    model = OpenAICompatibleChatModel(fake_server.base_url, "fake-small", api_key="sk-test", timeout=10)
    try:
        with pytest.raises(ChatModelUnavailableError, match="HTTP 503.*overloaded"):
            await model.complete([{"role": "user", "content": "过载了吗"}], max_tokens=20, temperature=0)
        assert await model.complete([{"role": "user", "content": "格式"}], max_tokens=20, temperature=0) == ""
    finally:
        await model.aclose()
    closed = OpenAICompatibleChatModel(f"http://127.0.0.1:{free_port()}/v1", "fake-small", timeout=5)
    with pytest.raises(ChatModelUnavailableError, match="无法连接"):
        await closed.complete([{"role": "user", "content": "在吗"}], max_tokens=20, temperature=0)
    await closed.aclose()


@pytest.mark.parametrize("writer", ["upsert_memory", "hold"])
async def test_an_unsure_update_decided_by_a_real_openai_compatible_server(tmp_path, fake_server, writer):
    """Same slot, another value, no word of change: the local decision is unsure, the server says UPDATE, and the
    older lesson time is superseded with the dreaming authority after the write returned; written by the memory
    service or by the companion tool hold alike."""
    from booku_memory.services.companion.service import BookuCompanionService
    from booku_memory.services.embedding.local import LocalE5Embedder

    fake_server.use([{"name": "pair", "when": {"messages_contain": PAIR_TASK_MARK}, "respond": {"content": "UPDATE"}}])
    config = {
        "dreaming": {"chat_provider": "openai", "openai_base_url": fake_server.base_url, "openai_model": "fake-small"},
        "maintenance": {"enabled": False},
    }
    async with booku_memory.open(tmp_path / "data", config, embedder=LocalE5Embedder()) as handle:
        svc, rt = handle.get_service("booku_memory:service:booku_memory"), handle.runtime
        write = svc.upsert_memory if writer == "upsert_memory" else BookuCompanionService(rt).hold
        old = await write("我每周二晚上上钢琴课。")
        new = await write("我每周四晚上上钢琴课。")
        assert new["unsure"] == [{"id": old["id"], "kind": "maybe_update"}]
        # The pair is resolved after the write returned (the runtime's other jobs, e.g. the watchdog, never end).
        while pending := [task for task in rt._background if task.get_name().startswith("booku-unsure-")]:
            await asyncio.gather(*pending, return_exceptions=True)
        old_item = (await svc.get_memory_detail(memory_id=old["id"]))["item"]
        now = (await svc.retrieve_memories("我现在每周几上钢琴课？", top_k=3))["results"]
        [event] = (await svc.list_audit_log(action="unsure_pair_accepted"))["items"]
    assert old_item["metadata"]["superseded_by"] == new["id"] and old_item["content"] == "我每周二晚上上钢琴课。"
    assert now[0]["id"] == new["id"]
    assert event["authority"] == "dreaming" and event["cause"] == "model:openai/fake-small"

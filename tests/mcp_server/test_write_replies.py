"""Over MCP a write says what it did (issue 28, item 6): the companion tools and ``memory_command`` tell the model
that an older memory was marked outdated, in the same sentence, and what they report is what was stored.

In-process SDK client on the real server object; the real local model embeds, because whether a new fact updates an
older one is a question of meaning.
"""

from __future__ import annotations

import json

import pytest
from mcp import Client

import booku_memory
from booku_memory.mcp_server import build_server, mcp_scope, runtime_tool_call
from booku_memory.mcp_server.settings import McpSettings
from booku_memory.services.embedding.local import LocalE5Embedder

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
SCOPE = mcp_scope(McpSettings(owner_uid="alice", store_key="private:mcp:alice"))
OUTDATED_TAIL = "标记为过时（已被新记录取代，原文保留，仍可回答“以前”的问题；判断错了可用 history 查看并 revert 回退）"


@pytest.fixture
async def runtime(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=LocalE5Embedder()) as memory:
        yield memory.runtime


def text(result) -> str:
    return result.content[0].text


async def test_hold_grow_and_memory_command_say_which_memory_became_outdated(runtime) -> None:
    async with Client(build_server(runtime.config, runtime_tool_call(runtime, SCOPE))) as client:
        home = text(await client.call_tool("hold", {"content": "我住在北京朝阳区，离公司不远。"}))
        home_id = home.split("[", 1)[1].split("]", 1)[0]
        moved = await client.call_tool("hold", {"content": "上个月我搬到上海浦东了，新家在世纪公园旁边。"})
        moved_id = text(moved).split("[", 1)[1].split("]", 1)[0]
        assert not moved.is_error
        assert f"并把旧记录 {home_id}《我住在北京朝阳区，离公司不远。》{OUTDATED_TAIL}" in text(moved)

        job = await client.call_tool("grow", {"items": ["我在腾讯做产品经理，负责微信支付。"]})
        job_id = text(job).split("[", 1)[1].split("]", 1)[0]
        new_job = await client.call_tool("grow", {"items": ["我跳槽到字节跳动了，现在做抖音电商的产品。"]})
        assert f"并把旧记录 {job_id}《我在腾讯做产品经理，负责微信支付。》{OUTDATED_TAIL}" in text(new_job)

        command = (
            'create -type event -title 搬到杭州 -triple_tags "住址|杭州|上海" '
            '-content "我又搬家了，上周搬到杭州西湖区，离公司更远了。"'
        )
        created = json.loads(text(await client.call_tool("memory_command", {"command": command})))
        result = created["results"][0]["result"]
        assert result["superseded"] == [moved_id] and result["message"].endswith(OUTDATED_TAIL)

    stored = await runtime.records.get_many([home_id, moved_id, job_id])
    assert stored[home_id]["superseded_by"] == moved_id and stored[moved_id]["superseded_by"] == result["id"]
    assert stored[job_id]["superseded_by"] != "" and stored[home_id]["content"] == "我住在北京朝阳区，离公司不远。"

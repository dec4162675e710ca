"""Over MCP, an overlong query or text that cannot be encoded comes back as a short Chinese tool error."""

from __future__ import annotations

import pytest
from mcp import Client

import booku_memory
from booku_memory.mcp_server import build_server, mcp_scope
from booku_memory.mcp_server.settings import McpSettings
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
SCOPE = mcp_scope(McpSettings(owner_uid="alice", store_key="private:mcp:alice"))


@pytest.fixture
async def runtime(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        yield memory.runtime


@pytest.mark.parametrize("name, arguments, says", [
    ("recall", {"query": "长" * 2001}, "最多 2000 个"),
    ("memory_command", {"command": "search -q " + "长" * 2001}, "最多 2000 个"),
    ("recall", {"query": "生日\ud800"}, "UTF-8"),
    ("hold", {"content": "今天\udfff很开心"}, "UTF-8"),
])
async def test_hostile_input_over_mcp_is_a_short_tool_error(runtime, name, arguments, says):
    async with Client(build_server(runtime, SCOPE)) as client:
        result = await client.call_tool(name, arguments)
        text = result.content[0].text
        assert says in text and len(text) < 400
        assert result.is_error
        fine = await client.call_tool("recall", {"query": "长" * 2000})
        assert not fine.is_error

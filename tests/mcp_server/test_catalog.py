"""The served tool list, argument checks, settings and token handling, in-process (no subprocess)."""

from __future__ import annotations

import json
import stat
from types import SimpleNamespace

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

import booku_memory
from booku_memory.cli import build_parser
from booku_memory.mcp_server import (
    build_server,
    build_tools,
    ensure_token,
    mcp_scope,
    mcp_settings,
    runtime_tool_call,
)
from booku_memory.mcp_server.settings import McpSettings
from booku_memory.services.companion.tool_table import COMPANION_TOOLS, json_schema
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ValidationError
from booku_memory.tools import (
    llm_tool_specs,
    memory_command_tool_schema,
    render_for_llm,
    run_host_tool,
    run_memory_command,
    run_temporary_memo,
    temporary_memo_tool_schema,
)

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
SCOPE = mcp_scope(McpSettings(owner_uid="alice", store_key="private:mcp:alice"))


@pytest.fixture
async def runtime(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        yield memory.runtime


def connect(runtime) -> Client:
    """An in-process SDK client on a server for ``SCOPE``; entered inside each test, because the SDK's task groups
    must be left in the task that entered them (an async fixture tears down in another one)."""
    return Client(build_server(runtime.config, runtime_tool_call(runtime, SCOPE)))


def text(result) -> str:
    return result.content[0].text


# ----- one source for names, descriptions and schemas --------------------------------------------------------------


def test_tools_are_served_exactly_as_the_shared_tables_describe_them() -> None:
    served = {tool.name: tool for tool in build_tools()}
    assert list(served) == [spec.name for spec in llm_tool_specs()] + ["memory_command", "temporary_memo"]
    assert {spec.name for spec in COMPANION_TOOLS} | {"recall"} == {spec.name for spec in llm_tool_specs()}
    for spec in llm_tool_specs():
        assert served[spec.name].description == spec.description
        schema = served[spec.name].input_schema
        assert {
            **schema,
            "properties": {
                name: {k: v for k, v in prop.items() if k != "enum"} for name, prop in schema["properties"].items()
            },
        } == json_schema(spec)
    assert served["recall"].input_schema["properties"]["peer_scope"]["enum"] == ["all", "actor"]
    command, memo = memory_command_tool_schema(), temporary_memo_tool_schema()
    assert served["memory_command"].description == command["description"]
    assert served["memory_command"].input_schema["properties"] == command["parameters"]
    assert served["temporary_memo"].description == memo["description"]
    assert served["temporary_memo"].input_schema["properties"] == memo["parameters"]


def test_no_tool_parameter_can_name_an_owner_a_store_or_an_authority() -> None:
    forbidden = {"owner", "owner_uid", "store", "store_key", "authority", "scope", "side", "actor", "stream_id"}
    for tool in build_tools():
        assert not forbidden & set(tool.input_schema["properties"]), tool.name
        assert tool.input_schema["additionalProperties"] is False, tool.name


# ----- results are the host tools' text ----------------------------------------------------------------------------


async def test_results_are_the_text_the_host_tools_give(runtime) -> None:
    async with connect(runtime) as client:
        service = runtime.memory_service(SCOPE)
        assert (
            await run_host_tool(service, "hold", {"content": "周末在河边骑车，看见一群白鹭。", "title": "河边白鹭"})
        )[0]
        for name, arguments in (
            ("breath", {}),
            ("pulse", {}),
            ("letter_read", {}),
            ("recall", {"query": "白鹭", "quotas": {"events": 3}}),
        ):
            ok, expected = await run_host_tool(service, name, arguments)
            served = await client.call_tool(name, arguments)
            assert (not served.is_error, text(served)) == (ok, expected), name
        recalled = json.loads(text(await client.call_tool("recall", {"query": "白鹭", "render": False})))
        assert recalled["items"][0]["title"] == "河边白鹭"

        status = await client.call_tool("memory_command", {"command": "status"})
        assert text(status) == render_for_llm(await run_memory_command(service, "status", stream_id="mcp"))
        memos = await client.call_tool("temporary_memo", {"action": "list"})
        assert text(memos) == render_for_llm(await run_temporary_memo(service, action="list", stream_id="mcp"))


async def test_writes_over_mcp_land_in_the_connection_scope(runtime) -> None:
    async with connect(runtime) as client:
        await client.call_tool("temporary_memo", {"content": "记得给小林回消息", "expire_hours": 1})
        listing = await runtime.memory_service(SCOPE).list_temporary_memos(stream_id="mcp")
        assert [memo["content"] for memo in listing["items"]] == ["记得给小林回消息"]
        held = await client.call_tool("hold", {"content": "alice 学会了做桂花糕。"})
        memory_id = text(held).split("[", 1)[1].split("]", 1)[0]
        record = await runtime.records.get(memory_id)
        stored = (record["owner_uid"], record["store_key"], record["authority"])
        assert stored == ("alice", "private:mcp:alice", "agent")


# ----- argument checks ---------------------------------------------------------------------------------------------


async def test_bad_arguments_come_back_as_chinese_tool_errors(runtime) -> None:
    async with connect(runtime) as client:
        missing = await client.call_tool("breath_search", {})
        assert missing.is_error and text(missing) == "缺少必填参数：query"
        wrong_type = await client.call_tool("hold", {"content": "x", "importance": "很重要"})
        assert wrong_type.is_error and "importance 必须是整数" in text(wrong_type)
        too_many = await client.call_tool("breath", {"max_results": 51})
        assert too_many.is_error and "max_results 不能大于 50" in text(too_many)
        refused = await client.call_tool("anchor", {"bucket_id": "mem-0000"})
        assert refused.is_error and "mem-0000" in text(refused)  # the service's own message, not a traceback


async def test_null_arguments_mean_not_given(runtime) -> None:
    async with connect(runtime) as client:
        result = await client.call_tool("breath_search", {"query": "白鹭", "domain": None, "max_results": None})
        assert not result.is_error, text(result)


async def test_an_unknown_tool_is_a_protocol_error(runtime) -> None:
    async with connect(runtime) as client:
        with pytest.raises(MCPError) as raised:
            await client.call_tool("forget_everything", {})
        assert "forget_everything" in raised.value.message


# ----- settings, scope, token, command line ------------------------------------------------------------------------


def test_settings_default_to_the_standalone_scope_and_follow_config_then_command_line() -> None:
    default = mcp_settings(None)
    assert (default.owner_uid, default.store_key, default.port) == ("default", "shared", 8766)
    config = SimpleNamespace(
        mcp=SimpleNamespace(owner_uid="bob", store_key="private:mcp:bob", port=9100, token="", token_env="MY_TOKEN")
    )
    from_config = mcp_settings(config)
    assert (from_config.owner_uid, from_config.store_key, from_config.port) == ("bob", "private:mcp:bob", 9100)
    overridden = mcp_settings(config, owner_uid="carol", store_key="private:mcp:carol", port=9200)
    assert (overridden.owner_uid, overridden.store_key, overridden.port) == ("carol", "private:mcp:carol", 9200)
    scope = mcp_scope(overridden)
    assert scope.readable_store_keys == ("private:mcp:carol",) and scope.writable_store_key == "private:mcp:carol"
    assert (scope.authority, scope.actor, scope.owner_uid) == ("agent", "mcp", "carol")


@pytest.mark.parametrize("overrides", [{"store_key": "two words"}, {"owner_uid": "   "}, {"port": 70000}])
def test_settings_reject_blank_or_spaced_keys_and_bad_ports(overrides) -> None:
    with pytest.raises(ValidationError):
        mcp_settings(None, **overrides)


def test_token_is_generated_private_and_reused_unless_configured(tmp_path, monkeypatch) -> None:
    monkeypatch.delenv("BOOKU_MCP_TOKEN", raising=False)
    first = ensure_token(tmp_path, McpSettings())
    path = tmp_path / "mcp_token"
    assert len(first) >= 32 and path.read_text(encoding="utf-8").strip() == first
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_token(tmp_path, McpSettings()) == first
    assert not (tmp_path / "dashboard_api_key").exists()  # a separate secret from the dashboard key
    monkeypatch.setenv("BOOKU_MCP_TOKEN", "from-env-0123456789abcdefgh")
    assert ensure_token(tmp_path, McpSettings()) == "from-env-0123456789abcdefgh"
    assert ensure_token(tmp_path, McpSettings(token="from-config-0123456789abcd")) == "from-config-0123456789abcd"


def test_a_short_configured_token_is_a_config_error(tmp_path, monkeypatch) -> None:
    from booku_memory.services.errors import ConfigError

    monkeypatch.setenv("BOOKU_MCP_TOKEN", "short")
    with pytest.raises(ConfigError, match="至少需要 24 个字符"):
        ensure_token(tmp_path, McpSettings())
    with pytest.raises(ConfigError, match="mcp.token"):
        ensure_token(tmp_path, McpSettings(token="x" * 23))


def test_command_line_maps_onto_the_server_options() -> None:
    args = build_parser().parse_args(["mcp", "--http", "--port", "9000", "--owner", "alice", "--store", "s1"])
    assert (args.action, args.http, args.port, args.owner, args.store) == ("mcp", True, 9000, "alice", "s1")
    stdio = build_parser().parse_args(["mcp"])
    assert (stdio.http, stdio.port, stdio.owner, stdio.store) == (False, None, None, None)


# ----- hostile input: overlong queries, unencodable text ------------------------------------------------------------


@pytest.mark.parametrize(
    "name, arguments, says",
    [
        ("recall", {"query": "长" * 2001}, "最多 2000 个"),
        ("memory_command", {"command": "search -q " + "长" * 2001}, "最多 2000 个"),
        ("recall", {"query": "生日\ud800"}, "UTF-8"),
        ("hold", {"content": "今天\udfff很开心"}, "UTF-8"),
    ],
)
async def test_hostile_input_over_mcp_is_a_short_tool_error(runtime, name, arguments, says):
    async with connect(runtime) as client:
        result = await client.call_tool(name, arguments)
        assert result.is_error and says in text(result) and len(text(result)) < 400
        fine = await client.call_tool("recall", {"query": "长" * 2000})
        assert not fine.is_error

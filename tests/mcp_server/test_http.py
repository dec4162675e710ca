"""The MCP server over streamable HTTP with a bearer token, started as a subprocess, driven by the SDK client."""

from __future__ import annotations

import stat

import httpx2
import pytest
from mcp.shared.exceptions import MCPError

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "booku-test", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


async def test_http_serves_the_tools_with_the_stored_token_and_never_logs_it(kit, workspace) -> None:
    async with kit.http_server(workspace, kit.free_port()) as server:
        token_file = workspace.data_dir / "mcp_token"
        assert token_file.read_text(encoding="utf-8").strip() == server.token  # generated and stored
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        banner = server.stdout_path.read_text(encoding="utf-8")
        assert server.token not in banner and str(token_file) in banner  # where it is, never what it is
        async with kit.http_session(server.url, server.token) as session:
            await kit.check_memory_round_trip(session)
    assert server.process.returncode == 0  # Ctrl+C stops it cleanly (runtime closed, no stuck worker thread)


async def test_http_refuses_a_wrong_or_missing_token(kit, workspace) -> None:
    async with kit.http_server(workspace, kit.free_port()) as server:
        with pytest.raises(BaseException) as refused:
            async with kit.http_session(server.url, server.token + "x") as session:
                await session.list_tools()
        assert any(isinstance(leaf, MCPError) for leaf in kit.leaf_exceptions(refused.value)), refused.value

        async with httpx2.AsyncClient(timeout=httpx2.Timeout(60)) as http:
            wrong = ({"Authorization": f"Bearer {server.token[:-1]}"}, {"Authorization": f"Token {server.token}"}, {})
            for headers in wrong:
                answer = await http.post(server.url, json=INITIALIZE, headers={**MCP_HEADERS, **headers})
                assert answer.status_code == 401
                assert answer.headers["www-authenticate"].startswith("Bearer")
            accepted = await http.post(
                server.url, json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {server.token}"}
            )
            assert accepted.status_code == 200  # the same request passes with the right token

        async with kit.http_session(server.url, server.token) as session:  # the server is still fine
            assert (await session.call_tool("breath")).is_error is False


async def test_http_writes_and_reads_a_letter_with_a_lock(kit, workspace) -> None:
    reason = kit.letters_missing_reason()
    if reason:
        pytest.skip(reason)
    async with kit.http_server(workspace, kit.free_port()) as server:
        async with kit.http_session(server.url, server.token) as session:
            await kit.check_letter_with_lock(session)

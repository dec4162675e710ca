"""Fixtures for the MCP server tests: a quiet config file, a data dir, and the real server as a subprocess.

This folder has no ``__init__.py`` on purpose: as a package it would be imported under the name ``mcp`` and shadow
the SDK. So the helpers reach the tests through the ``kit`` fixture instead of an import.

The subprocess runs ``python -m booku_memory mcp`` exactly as a client would start it, with the test-only
``BOOKU_TEST_EMBEDDER=deterministic`` so it does not load the local model. Its stdout/stderr go to files in the
test's temp dir (a pipe nobody reads could fill up and stall the server), which also keeps them for a failure.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from booku_memory.mcp_server.entry import TEST_EMBEDDER_ENV
from booku_memory.mcp_server.settings import TOKEN_ENV, TOKEN_FILE_NAME

QUIET_TOML = "[maintenance]\nenabled = false\n\n[startup_ingest]\nenabled = false\n"
QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
START_TIMEOUT = 90.0  # generous: a cold interpreter imports chromadb, jieba and the SDK
CALL_TIMEOUT = 60.0


@dataclass(frozen=True)
class Workspace:
    """A temp dir with the data dir the server uses and a quiet config file."""

    root: Path
    data_dir: Path
    config_path: Path

    def server_args(self, *extra: str) -> list[str]:
        return [
            "-m",
            "booku_memory",
            "mcp",
            "--data-dir",
            str(self.data_dir),
            "--config",
            str(self.config_path),
            *extra,
        ]


def make_workspace(tmp_path: Path) -> Workspace:
    config_path = tmp_path / "booku.toml"
    config_path.write_text(QUIET_TOML, encoding="utf-8")
    return Workspace(tmp_path, tmp_path / "data", config_path)


def server_env() -> dict[str, str]:
    """The environment of a server subprocess: the test embedder on, no MCP token from the developer's shell."""
    env = {key: value for key, value in os.environ.items() if key != TOKEN_ENV}
    env[TEST_EMBEDDER_ENV] = "deterministic"
    return env


@asynccontextmanager
async def stdio_session(space: Workspace, *extra: str) -> AsyncIterator[ClientSession]:
    """An initialised SDK client session with a fresh ``python -m booku_memory mcp`` subprocess over stdio."""
    params = StdioServerParameters(
        command=sys.executable, args=space.server_args(*extra), env=server_env(), cwd=str(space.root)
    )
    with open(space.root / "mcp-stdio.err", "a", encoding="utf-8") as errlog:
        async with stdio_client(params, errlog=errlog) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream, read_timeout_seconds=CALL_TIMEOUT) as session:
                await asyncio.wait_for(session.initialize(), START_TIMEOUT)
                yield session


def free_port() -> int:
    """A port nobody listens on right now (bound once on loopback and released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class HttpServer:
    """A running HTTP server subprocess: its endpoint, the token from the file it named, and its output files."""

    process: subprocess.Popen
    url: str
    token: str
    stdout_path: Path


async def _wait_for_banner(process: subprocess.Popen, stdout_path: Path, stderr_path: Path) -> str:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_TIMEOUT
    while loop.time() < deadline:
        text = stdout_path.read_text(encoding="utf-8")
        if "Authorization: Bearer" in text:
            return text
        if process.poll() is not None:
            break
        await asyncio.sleep(0.1)
    raise AssertionError(
        "MCP HTTP 服务没有启动：\n" + stdout_path.read_text(encoding="utf-8") + stderr_path.read_text(encoding="utf-8")
    )


def interrupt(process: subprocess.Popen, timeout: float = 60.0) -> None:
    """Stop a server subprocess the way a user does (Ctrl+C, i.e. SIGINT); kill it if it hangs on the way out."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@asynccontextmanager
async def http_server(space: Workspace, port: int, *extra: str) -> AsyncIterator[HttpServer]:
    """``python -m booku_memory mcp --http --port <port>`` as a subprocess, stopped with Ctrl+C (SIGINT) after."""
    stdout_path = space.root / f"mcp-http-{port}.out"
    stderr_path = space.root / f"mcp-http-{port}.err"
    with open(stdout_path, "w", encoding="utf-8") as out, open(stderr_path, "w", encoding="utf-8") as err:
        process = subprocess.Popen(
            [sys.executable, *space.server_args("--http", "--port", str(port), *extra)],
            stdout=out,
            stderr=err,
            env=server_env(),
            cwd=str(space.root),
        )
        try:
            banner = await _wait_for_banner(process, stdout_path, stderr_path)
            url = re.search(r"(http://127\.0\.0\.1:\d+/mcp)", banner).group(1)
            # The banner says where the token is kept, never the token: read it from there like an operator.
            token = (space.data_dir / TOKEN_FILE_NAME).read_text(encoding="utf-8").strip()
            yield HttpServer(process, url, token, stdout_path)
        finally:
            interrupt(process)


@asynccontextmanager
async def http_session(url: str, token: str) -> AsyncIterator[ClientSession]:
    """An initialised SDK client session over streamable HTTP, sending ``Authorization: Bearer <token>``."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(CALL_TIMEOUT)) as http:
        async with streamable_http_client(url, http_client=http) as (read_stream, write_stream):
            async with ClientSession(read_stream, write_stream, read_timeout_seconds=CALL_TIMEOUT) as session:
                await asyncio.wait_for(session.initialize(), START_TIMEOUT)
                yield session


def leaf_exceptions(error: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, as the SDK's task groups raise them."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaf_exceptions(inner)]
    return [error]


def text_of(result: Any) -> str:
    """The one text block a Booku tool result carries."""
    assert len(result.content) == 1 and result.content[0].type == "text", result
    return result.content[0].text


# ----- the checks both transports must pass --------------------------------------------------------------------------

EXTRA_TOOLS = ["recall", "memory_command", "temporary_memo"]
LETTER_TOOLS = ("letter_write", "letter_lock_update", "letter_read")
MEMORY_ID = re.compile(r"\[(mem-[0-9a-f]+)\]")


def letters_missing_reason() -> str:
    """Why the letter checks cannot run yet ("" when the letter tools are in the shared table)."""
    from booku_memory.services.companion.tool_table import COMPANION_TOOLS

    names = {spec.name for spec in COMPANION_TOOLS}
    missing = [name for name in LETTER_TOOLS if name not in names]
    if not missing:
        return ""
    return (
        f"信件工具 {'、'.join(missing)} 还不在 services/companion/tool_table.py 的 COMPANION_TOOLS 中"
        "（陪伴记忆第二部分尚未合入）；它们一进表就会被 MCP 自动提供，届时本检查自动运行"
    )


async def check_memory_round_trip(session: ClientSession) -> str:
    """List the tools, open the eyes with a zero-argument breath, hold a moment, find it with breath_search and see
    it surface in breath. Returns the held memory's id."""
    from booku_memory.services.companion.tool_table import COMPANION_TOOLS

    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert list(tools) == [spec.name for spec in COMPANION_TOOLS] + EXTRA_TOOLS
    assert tools["breath"].input_schema["required"] == []

    empty = await session.call_tool("breath")
    assert not empty.is_error, text_of(empty)

    body = "今天和小林去海边看了日落，风很大，她说明年还要再来。"
    held = await session.call_tool("hold", {"content": body, "title": "海边日落", "importance": 6})
    assert not held.is_error, text_of(held)
    memory_id = MEMORY_ID.search(text_of(held)).group(1)

    found = await session.call_tool("breath_search", {"query": "海边 日落"})
    assert not found.is_error, text_of(found)
    assert memory_id in text_of(found) and body in text_of(found)  # verbatim, not summarised

    surfaced = await session.call_tool("breath", {})
    assert body in text_of(surfaced) and body not in text_of(empty)
    return memory_id


async def check_letter_with_lock(session: ClientSession) -> None:
    """Write an open letter and read it back, then seal it for good: the body disappears from letter_read."""
    body = "写给以后的自己：记得那天的海风，记得你答应过要再去一次。"
    written = await session.call_tool("letter_write", {"author": "ai", "content": body, "title": "给以后的我"})
    assert not written.is_error, text_of(written)
    letter_id = re.search(r"\[([^\]\s]+)\]", text_of(written)).group(1)

    opened = await session.call_tool("letter_read", {})
    assert not opened.is_error and body in text_of(opened), text_of(opened)

    sealed = await session.call_tool("letter_lock_update", {"letter_id": letter_id, "lock_type": "permanent"})
    assert not sealed.is_error, text_of(sealed)
    after = text_of(await session.call_tool("letter_read", {}))
    assert letter_id in after and body not in after

    reopened = await session.call_tool("letter_lock_update", {"letter_id": letter_id, "lock_type": "none"})
    assert reopened.is_error  # a permanent seal is final, and the refusal reaches the client as a tool error
    assert body not in text_of(await session.call_tool("letter_read", {}))


class Kit:
    """The helpers above, handed to the tests by the ``kit`` fixture."""

    QUIET_CONFIG = QUIET_CONFIG
    MEMORY_ID = MEMORY_ID
    stdio_session = staticmethod(stdio_session)
    http_server = staticmethod(http_server)
    http_session = staticmethod(http_session)
    free_port = staticmethod(free_port)
    interrupt = staticmethod(interrupt)
    leaf_exceptions = staticmethod(leaf_exceptions)
    text_of = staticmethod(text_of)
    letters_missing_reason = staticmethod(letters_missing_reason)
    check_memory_round_trip = staticmethod(check_memory_round_trip)
    check_letter_with_lock = staticmethod(check_letter_with_lock)


@pytest.fixture
def kit() -> Kit:
    return Kit()


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    """A temp dir with an empty data dir and a quiet config (no maintenance loop, no startup ingest)."""
    return make_workspace(tmp_path)

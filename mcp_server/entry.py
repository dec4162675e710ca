"""``python -m booku_memory mcp``: open the standalone memory and serve it over stdio or streamable HTTP.

The server owns the data dir and accepts clients (the CLI, ``booku_memory.open()``, another MCP server), or, when
another process already owns it (say the dashboard), it becomes that owner's client: every tool call then runs in
the owner (``catalog.remote_tool_call``), so nothing is served from a second, stale copy of the stores.

The test-only switch ``BOOKU_TEST_EMBEDDER=deterministic`` (``embedding.deterministic.testing_embedder_from_env``)
lets the subprocess tests run the real server with the fast hashing embedder instead of loading the local model.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config import BookuConfig
from ..services.embedding.base import Embedder
from ..services.embedding.deterministic import TEST_EMBEDDER_ENV, testing_embedder_from_env
from ..services.scope import Scope
from ..standalone import MemoryHandle, open_memory
from .catalog import ToolCall, remote_tool_call, runtime_tool_call
from .http_transport import endpoint_url, http_app
from .server import build_server
from .settings import HTTP_HOST, McpSettings, mcp_scope, mcp_settings
from .token import configured_token, ensure_token, token_path

__all__ = ["TEST_EMBEDDER_ENV", "serve", "serve_http", "serve_stdio", "testing_embedder_from_env"]


def _tool_call(memory: Any, scope: Scope) -> ToolCall:
    """In-process calls when this process owns the data dir, calls to the owner otherwise."""
    if isinstance(memory, MemoryHandle):
        return runtime_tool_call(memory.runtime, scope)
    return remote_tool_call(memory, scope)


async def serve(
    data_dir: str | Path,
    config: BookuConfig,
    *,
    http: bool = False,
    port: int | None = None,
    owner_uid: str | None = None,
    store_key: str | None = None,
) -> None:
    """Serve until the client disconnects (stdio) or the process is interrupted (HTTP).

    ``port``, ``owner_uid`` and ``store_key`` are the operator's command-line overrides of ``[mcp]``.
    """
    settings = mcp_settings(config, owner_uid=owner_uid, store_key=store_key, port=port)
    embedder = testing_embedder_from_env()
    if http:
        await serve_http(data_dir, config, settings, embedder=embedder)
    else:
        await serve_stdio(data_dir, config, settings, embedder=embedder)


async def serve_stdio(
    data_dir: str | Path, config: BookuConfig, settings: McpSettings, *, embedder: Embedder | None = None
) -> None:
    """One MCP session over this process's stdin/stdout; returns when the client closes stdin.

    The SDK's ``stdio_server`` points fd 1 at stderr while it serves, so the transport is claimed before the
    runtime starts: nothing a library prints while loading can corrupt the JSON-RPC stream.
    """
    from mcp.server.stdio import stdio_server

    scope = mcp_scope(settings)
    async with stdio_server() as (read_stream, write_stream):
        async with open_memory(
            data_dir, config, embedder=embedder, scope=scope, entry_point="mcp", accept_clients=True
        ) as memory:
            _report(
                f"Booku Memory MCP（stdio）已启动：数据目录 {memory.data_dir}，"
                f"记忆主人 {scope.owner_uid}，记忆库 {scope.writable_store_key}",
                memory,
                stream=sys.stderr,
            )
            server = build_server(memory.config, _tool_call(memory, scope))
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(
    data_dir: str | Path, config: BookuConfig, settings: McpSettings, *, embedder: Embedder | None = None
) -> None:
    """The streamable HTTP transport on ``127.0.0.1:<port>/mcp`` with a bearer token, until interrupted."""
    import uvicorn

    scope = mcp_scope(settings)
    async with open_memory(
        data_dir, config, embedder=embedder, scope=scope, entry_point="mcp", accept_clients=True
    ) as memory:
        token = ensure_token(memory.data_dir, settings)
        app = http_app(build_server(memory.config, _tool_call(memory, scope)), token=token, port=settings.port)
        # Wrong tokens queued behind the guess throttle must not hold up a Ctrl+C.
        server = uvicorn.Server(
            uvicorn.Config(app, host=HTTP_HOST, port=settings.port, log_level="warning", timeout_graceful_shutdown=5)
        )
        lines = (
            f"Booku Memory MCP（streamable HTTP）已启动：{endpoint_url(settings.port)}\n"
            f"数据目录 {memory.data_dir}，记忆主人 {scope.owner_uid}，记忆库 {scope.writable_store_key}\n"
            f"请求头 Authorization: Bearer <令牌>，令牌{token_source(settings, memory.data_dir)}"
        )
        announcer = asyncio.create_task(_announce_when_started(server, lines, memory))
        try:
            with _stop_on_signals(server):
                await server.serve()
        finally:
            announcer.cancel()


def token_source(settings: McpSettings, data_dir: Path) -> str:
    """Where the operator finds the token; never the token itself (a start-up banner ends up in logs and
    terminal scrollback that other people and programs read)."""
    if settings.token:
        return "见配置 [mcp] token"
    if configured_token(settings):
        return f"见环境变量 {settings.token_env}"
    return f"保存在 {token_path(data_dir)}（仅本用户可读）"


@contextlib.contextmanager
def _stop_on_signals(server: Any) -> Iterator[None]:
    """Ctrl+C / SIGTERM ask uvicorn to stop, and nothing else.

    uvicorn re-raises the signal it caught once it has stopped, into whatever handler was there before. Under
    ``asyncio.run`` that is the runner's SIGINT handler, which cancels the main task, so the runtime's ``close()``
    would be cancelled half-way and a live SQLite worker thread would keep the process from exiting. With this
    handler in place the re-raised signal only repeats the stop request, and the runtime closes normally.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def request_stop(_signum: int, _frame: Any) -> None:
        server.should_exit = True

    previous = {sig: signal.signal(sig, request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


async def _announce_when_started(server: Any, text: str, memory: Any) -> None:
    # Printed only once the socket listens, so a script waiting for this line can connect right away.
    while not server.started:
        await asyncio.sleep(0.05)
    _report(text, memory, stream=sys.stdout)


def _report(text: str, memory: Any, *, stream: Any) -> None:
    if not isinstance(memory, MemoryHandle):
        print(f"{text}\n数据目录由{memory.owner.describe()}持有，本服务的每次调用都交给它执行", file=stream, flush=True)
        return
    reason = memory.runtime.degraded_reason()
    if reason:
        text += f"\n注意：嵌入模型不可用，检索退化为关键词模式：{reason}"
    print(text, file=stream, flush=True)

"""``python -m booku_memory mcp``: open the standalone memory and serve it over stdio or streamable HTTP.

The test-only switch ``BOOKU_TEST_EMBEDDER=deterministic`` is read here and nowhere else: it lets the subprocess
tests run the real server with the fast hashing embedder instead of loading the local model. Never set it for real
use: its vectors know nothing about meaning, and a store written with it opens with the real model only after a
``reindex``.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..config import BookuConfig
from ..services.embedding.base import Embedder
from ..services.errors import ConfigError
from ..standalone import open_memory
from .http_transport import endpoint_url, http_app
from .server import build_server
from .settings import HTTP_HOST, McpSettings, mcp_scope, mcp_settings
from .token import configured_token, ensure_token, masked_token, token_path

TEST_EMBEDDER_ENV = "BOOKU_TEST_EMBEDDER"


def testing_embedder_from_env() -> Embedder | None:
    """FOR TESTS ONLY: the deterministic hashing embedder when ``BOOKU_TEST_EMBEDDER=deterministic``, else None
    (the configured embedder is used)."""
    value = os.environ.get(TEST_EMBEDDER_ENV, "").strip()
    if not value:
        return None
    if value != "deterministic":
        raise ConfigError(f"环境变量 {TEST_EMBEDDER_ENV} 只能是 deterministic（仅供测试），当前为 {value!r}")
    from ..services.embedding.deterministic import DeterministicTestEmbedder

    return DeterministicTestEmbedder()


async def serve(data_dir: str | Path, config: BookuConfig, *, http: bool = False, port: int | None = None,
                owner_uid: str | None = None, store_key: str | None = None) -> None:
    """Serve until the client disconnects (stdio) or the process is interrupted (HTTP).

    ``port``, ``owner_uid`` and ``store_key`` are the operator's command-line overrides of ``[mcp]``.
    """
    settings = mcp_settings(config, owner_uid=owner_uid, store_key=store_key, port=port)
    embedder = testing_embedder_from_env()
    if http:
        await serve_http(data_dir, config, settings, embedder=embedder)
    else:
        await serve_stdio(data_dir, config, settings, embedder=embedder)


async def serve_stdio(data_dir: str | Path, config: BookuConfig, settings: McpSettings, *,
                      embedder: Embedder | None = None) -> None:
    """One MCP session over this process's stdin/stdout; returns when the client closes stdin.

    The SDK's ``stdio_server`` points fd 1 at stderr while it serves, so the transport is claimed before the
    runtime starts: nothing a library prints while loading can corrupt the JSON-RPC stream.
    """
    from mcp.server.stdio import stdio_server

    scope = mcp_scope(settings)
    async with stdio_server() as (read_stream, write_stream):
        async with open_memory(data_dir, config, embedder=embedder, scope=scope) as memory:
            _report(f"Booku Memory MCP（stdio）已启动：数据目录 {memory.runtime.data_dir}，"
                    f"记忆主人 {scope.owner_uid}，记忆库 {scope.writable_store_key}", memory.runtime, stream=sys.stderr)
            server = build_server(memory.runtime, scope)
            await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve_http(data_dir: str | Path, config: BookuConfig, settings: McpSettings, *,
                     embedder: Embedder | None = None) -> None:
    """The streamable HTTP transport on ``127.0.0.1:<port>/mcp`` with a bearer token, until interrupted."""
    import uvicorn

    scope = mcp_scope(settings)
    async with open_memory(data_dir, config, embedder=embedder, scope=scope) as memory:
        runtime = memory.runtime
        token = ensure_token(runtime.data_dir, settings)
        app = http_app(build_server(runtime, scope), token=token, port=settings.port)
        server = uvicorn.Server(uvicorn.Config(app, host=HTTP_HOST, port=settings.port, log_level="warning"))
        source = ("完整令牌见配置或环境变量" if configured_token(settings)
                  else f"完整令牌保存在 {token_path(runtime.data_dir)}")
        lines = (f"Booku Memory MCP（streamable HTTP）已启动：{endpoint_url(settings.port)}\n"
                 f"数据目录 {runtime.data_dir}，记忆主人 {scope.owner_uid}，记忆库 {scope.writable_store_key}\n"
                 f"请求头 Authorization: Bearer {masked_token(token)}  （{source}）")
        announcer = asyncio.create_task(_announce_when_started(server, lines, runtime))
        try:
            with _stop_on_signals(server):
                await server.serve()
        finally:
            announcer.cancel()


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


async def _announce_when_started(server: Any, text: str, runtime: Any) -> None:
    # Printed only once the socket listens, so a script waiting for this line can connect right away.
    while not server.started:
        await asyncio.sleep(0.05)
    _report(text, runtime, stream=sys.stdout)


def _report(text: str, runtime: Any, *, stream: Any) -> None:
    reason = runtime.degraded_reason()
    if reason:
        text += f"\n注意：嵌入模型不可用，检索退化为关键词模式：{reason}"
    print(text, file=stream, flush=True)

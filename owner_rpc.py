"""The owner's client endpoint: other processes call this process's runtime over loopback.

A long-running owner (serve, mcp, the host plugin, ``booku_memory.open(..., accept_clients=True)``) starts an
``OwnerEndpoint`` after its runtime; it listens on 127.0.0.1 on an ephemeral port and records the address and a
fresh random token in the data dir's lock file (``services.ownership``, mode 0600). ``owner_client`` is the other
side.

The protocol is plain JSON over HTTP: ``POST /call`` with ``{"target", "method", "kwargs", "scope", "progress"}``
and the header ``Authorization: Bearer <token>``. The answer is JSON lines: zero or more ``{"progress": [...]}``
(the arguments the call gave its progress callback, so the CLI's progress bar works through the owner), then one
``{"result": ...}`` or ``{"error": {"type", "message"}}``. Targets:

- ``memory`` / ``knowledge``: a public coroutine method of ``BookuMemoryService`` / ``BookuKnowledgeService`` in the
  caller's scope (the token holder is the same local user who could open the data dir, so it may name any scope);
- ``maintenance``: ``reindex``, ``export_jsonl``, ``import_jsonl`` on the runtime;
- ``command``: the LLM's ``memory_command`` (its answer dict), as the CLI's ``command`` runs it;
- ``mcp_tool``: one MCP tool call, checked and rendered exactly as the MCP server does in-process.

uvicorn runs in a thread of its own with its own event loop: a second uvicorn server in the owner's loop would
fight the dashboard's over the process's signal handlers. Each call hops to the owner's loop (the runtime's SQLite
connections and locks belong to it) and is never cancelled there: a write the client stopped waiting for still
completes or fails whole.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import logging
import secrets
import socket
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from .services import errors
from .services.errors import BookuError, ValidationError
from .services.knowledge_service import BookuKnowledgeService
from .services.memory_service import BookuMemoryService
from .services.scope import Scope
from .services.secret_files import secrets_equal

if TYPE_CHECKING:
    from .services.runtime import BookuRuntime

logger = logging.getLogger("booku_memory.owner")

LOOPBACK = "127.0.0.1"
CALL_PATH = "/call"
MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request accepted: a knowledge document sent as ``content`` is the biggest legitimate body."""
START_TIMEOUT_SECONDS = 30.0
SERVICE_CLASSES: dict[str, type] = {"memory": BookuMemoryService, "knowledge": BookuKnowledgeService}
MAINTENANCE = ("reindex", "export_jsonl", "import_jsonl")


def public_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The coroutine methods a client may call on a service: public names only, so no plumbing is reachable."""
    return {
        name: member
        for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction)
        if not name.startswith("_")
    }


# ----- wire format -------------------------------------------------------------------------------------------------


def scope_to_wire(scope: Scope | None) -> dict[str, Any] | None:
    return None if scope is None else dataclasses.asdict(scope)


def scope_from_wire(data: Any) -> Scope | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValidationError("scope 必须是对象")
    fields = dict(data)
    fields["readable_store_keys"] = tuple(fields.get("readable_store_keys") or ())
    try:
        return Scope(**fields)
    except TypeError as exc:
        raise ValidationError(f"scope 字段无效：{exc}") from exc


def wire_error_types() -> dict[str, type[Exception]]:
    """Exception classes that cross the wire by name: the ``BookuError`` family, ``ValueError`` and ``TypeError``."""
    known: dict[str, type[Exception]] = {"ValueError": ValueError, "TypeError": TypeError}
    known.update(
        {
            name: value
            for name, value in vars(errors).items()
            if isinstance(value, type) and issubclass(value, BookuError)
        }
    )
    return known


def error_to_wire(exc: BaseException) -> dict[str, str] | None:
    """``{"type", "message"}`` under the nearest class a client knows; ``None`` for an unexpected failure."""
    known = wire_error_types()
    for cls in type(exc).__mro__:
        if known.get(cls.__name__) is cls:
            return {"type": cls.__name__, "message": str(exc)}
    return None


def _line(message: dict[str, Any]) -> bytes:
    return (json.dumps(message, ensure_ascii=False) + "\n").encode("utf-8")


# ----- dispatch (runs on the owner's event loop) -------------------------------------------------------------------


class Dispatcher:
    """Turns one request into one call on the runtime."""

    def __init__(self, runtime: BookuRuntime) -> None:
        self.runtime = runtime
        self._methods = {target: public_methods(cls) for target, cls in SERVICE_CLASSES.items()}
        self._mcp_tools: dict[str, Any] | None = None

    async def answer(self, request: dict[str, Any], progress: Callable[..., None]) -> bytes:
        """The final JSON line: the call's result, or its error (a ``BookuError`` keeps its type and message)."""
        target, method = request.get("target"), request.get("method")
        try:
            result = await self._call(request, progress)
            return _line({"result": result})
        except Exception as exc:
            wire = error_to_wire(exc)
            if wire is None:
                logger.exception("所有者进程处理 %s.%s 出错", target, method)
                wire = {"type": "internal", "message": f"{type(exc).__name__}: {exc}"}
            return _line({"error": wire})

    async def _call(self, request: dict[str, Any], progress: Callable[..., None]) -> Any:
        target, method = request.get("target"), request.get("method")
        kwargs = request.get("kwargs") or {}
        if not isinstance(method, str) or not isinstance(kwargs, dict):
            raise ValidationError("method 必须是字符串，kwargs 必须是对象")
        scope = scope_from_wire(request.get("scope"))
        if request.get("progress"):
            kwargs["progress"] = progress
        if target in SERVICE_CLASSES:
            if method not in self._methods[target]:
                raise ValidationError(f"{target} 服务没有方法 {method!r}")
            service = (
                self.runtime.memory_service(scope) if target == "memory" else self.runtime.knowledge_service(scope)
            )
            return await getattr(service, method)(**kwargs)
        if target == "maintenance" and method in MAINTENANCE:
            from .services import portability

            return await getattr(portability, method)(self.runtime, **kwargs)
        if target == "command" and method == "memory_command":
            from .tools import run_memory_command

            return await run_memory_command(
                self.runtime.memory_service(scope), kwargs["text"], stream_id=kwargs.get("stream_id")
            )
        if target == "mcp_tool":
            return await self._mcp_tool(method, kwargs.get("arguments"), scope)
        raise ValidationError(f"未知的调用 {target!r}.{method!r}")

    async def _mcp_tool(self, name: str, arguments: Any, scope: Scope | None) -> dict[str, Any]:
        from .mcp_server.catalog import build_tools, runtime_tool_call

        if self._mcp_tools is None:
            self._mcp_tools = {tool.name: tool for tool in build_tools(self.runtime.config)}
        tool = self._mcp_tools.get(name)
        if tool is None:
            raise ValidationError(f"未知工具 {name!r}，可用：{'、'.join(self._mcp_tools)}")
        outcome = await runtime_tool_call(self.runtime, scope or self.runtime.default_scope)(tool, arguments)
        return {"text": outcome.text, "is_error": outcome.is_error}


# ----- HTTP (runs on the endpoint's own loop) ----------------------------------------------------------------------


async def _read_body(request: Request) -> bytes | None:
    """The body, or ``None`` once it grows past ``MAX_BODY_BYTES`` (nothing more is read)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body.extend(chunk)
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


def build_app(dispatcher: Dispatcher, owner_loop: asyncio.AbstractEventLoop, token: str) -> Starlette:
    """The endpoint's ASGI app: one authenticated route, loopback peers only."""
    expected = f"Bearer {token}"

    async def call(request: Request) -> Response:
        if request.client is None or request.client.host != LOOPBACK:
            return JSONResponse({"error": {"type": "forbidden", "message": "只接受本机回环地址的连接"}}, 403)
        if not secrets_equal(request.headers.get("authorization", ""), expected):
            return JSONResponse({"error": {"type": "unauthorized", "message": "令牌无效"}}, 401)
        body = await _read_body(request)
        if body is None:
            return JSONResponse({"error": {"type": "too_large", "message": f"请求超过 {MAX_BODY_BYTES} 字节"}}, 413)
        try:
            message = json.loads(body)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            return JSONResponse({"error": {"type": "bad_request", "message": "请求体必须是 JSON 对象"}}, 400)
        return StreamingResponse(_answer_stream(dispatcher, owner_loop, message), media_type="application/x-ndjson")

    return Starlette(routes=[Route(CALL_PATH, call, methods=["POST"])])


async def _answer_stream(dispatcher: Dispatcher, owner_loop: asyncio.AbstractEventLoop, message: dict[str, Any]):
    own_loop = asyncio.get_running_loop()
    events: asyncio.Queue[bytes | None] = asyncio.Queue()

    def progress(*args: Any) -> None:  # called on the owner's loop
        own_loop.call_soon_threadsafe(events.put_nowait, _line({"progress": list(args)}))

    future = asyncio.run_coroutine_threadsafe(dispatcher.answer(message, progress), owner_loop)
    # Queued after every progress line the call sent, so the result line comes last.
    future.add_done_callback(lambda _done: own_loop.call_soon_threadsafe(events.put_nowait, None))
    while (line := await events.get()) is not None:
        yield line
    yield future.result()


THREAD_NAME = "booku-owner-endpoint"


class _EndpointChatter(logging.Filter):
    """Drops the endpoint thread's info lines ("Uvicorn running on …", one access line per call) from uvicorn's
    process-wide loggers: a second "running on" line in serve's output would point users and scripts at the wrong
    port. Warnings and errors still pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.threadName != THREAD_NAME or record.levelno >= logging.WARNING


def _quiet_endpoint_logs() -> None:
    for name in ("uvicorn.error", "uvicorn.access"):
        target = logging.getLogger(name)
        if not any(isinstance(existing, _EndpointChatter) for existing in target.filters):
            target.addFilter(_EndpointChatter())


class OwnerEndpoint:
    """The running endpoint of one owner runtime: ``await start()`` after the runtime, ``await stop()`` before
    closing it."""

    def __init__(self, runtime: BookuRuntime) -> None:
        self.runtime = runtime
        self.address = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    async def start(self) -> str:
        """Listen on an ephemeral loopback port and publish the address and a new token in the owner record.
        Returns the address."""
        import uvicorn

        token = secrets.token_urlsafe(32)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((LOOPBACK, 0))
        app = build_app(Dispatcher(self.runtime), asyncio.get_running_loop(), token)
        # log_config/log_level None: uvicorn would otherwise reconfigure the process's "uvicorn" loggers, which the
        # dashboard's server (or the host's) configures; the filter keeps this server's chatter out of them.
        self._server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level=None, lifespan="off"))
        _quiet_endpoint_logs()
        self._thread = threading.Thread(
            target=lambda: asyncio.run(self._server.serve(sockets=[sock])), name=THREAD_NAME, daemon=True
        )
        self._thread.start()
        deadline = asyncio.get_running_loop().time() + START_TIMEOUT_SECONDS
        while not self._server.started:
            if not self._thread.is_alive() or asyncio.get_running_loop().time() > deadline:
                raise BookuError("本进程的客户端端点没有启动，其他进程将无法连接此数据目录")
            await asyncio.sleep(0.01)
        self.address = f"http://{LOOPBACK}:{sock.getsockname()[1]}"
        # start_endpoint's contract: the runtime is started, so it owns its data dir and holds the owner record.
        assert self.runtime.ownership is not None, "start_endpoint needs a started runtime"
        self.runtime.ownership.publish(self.address, token)
        return self.address

    async def stop(self) -> None:
        """Stop accepting calls; calls in flight finish first (uvicorn's graceful shutdown)."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is None or thread is None:
            return
        server.should_exit = True
        await asyncio.to_thread(thread.join)


async def start_endpoint(runtime: BookuRuntime) -> OwnerEndpoint:
    """Start an endpoint for ``runtime`` (which must own its data dir, i.e. be started)."""
    endpoint = OwnerEndpoint(runtime)
    await endpoint.start()
    return endpoint

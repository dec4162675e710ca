"""A process that finds its data dir owned by another one works through the owner (``owner_rpc``) instead.

``RemoteMemoryHandle`` offers what a local ``MemoryHandle`` offers: ``get_service`` returns proxies of
``BookuMemoryService`` / ``BookuKnowledgeService`` with the real methods' signatures (built from the classes, so a
new service method is proxied without a change here) whose calls run in the owner and return the same JSON-able
dicts; errors keep their type and Chinese message. The maintenance calls report progress through the owner.
Nothing here opens SQLite or Chroma: a client never holds a second, stale copy of the stores.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from .owner_rpc import CALL_PATH, SERVICE_CLASSES, public_methods, scope_to_wire, wire_error_types
from .services.errors import BookuError
from .services.ownership import OwnerRecord
from .services.scope import Scope

Progress = Callable[..., None]


class OwnerCallError(BookuError):
    """The owner could not be reached, or failed in a way that has no Booku error type."""


class OwnerConnection:
    """One HTTP client to the owner recorded in the data dir's lock file."""

    def __init__(self, owner: OwnerRecord) -> None:
        self.owner = owner
        # trust_env=False: a proxy configured for the user's browsing must never see loopback calls or the token.
        self._http = httpx.AsyncClient(
            base_url=owner.address,
            headers={"Authorization": f"Bearer {owner.token}"},
            timeout=httpx.Timeout(30.0, read=None),
            trust_env=False,
        )

    async def call(
        self,
        target: str,
        method: str,
        kwargs: dict[str, Any] | None = None,
        *,
        scope: Scope | None = None,
        progress: Progress | None = None,
    ) -> Any:
        """Run ``target.method(**kwargs)`` in the owner and return its result; ``progress`` receives the owner's
        progress reports as they come. Raises the owner's error under its own type."""
        body = {
            "target": target,
            "method": method,
            "kwargs": kwargs or {},
            "scope": scope_to_wire(scope),
            "progress": progress is not None,
        }
        try:
            async with self._http.stream("POST", CALL_PATH, json=body) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise OwnerCallError(
                        f"{self.owner.describe()}拒绝了请求（HTTP {response.status_code}）："
                        f"{_error_message(response.text)}"
                    )
                async for line in response.aiter_lines():
                    if not line.strip():
                        continue
                    message = json.loads(line)
                    if "progress" in message:
                        if progress is not None:
                            progress(*message["progress"])
                    elif "error" in message:
                        raise self._error(target, method, message["error"])
                    else:
                        return message["result"]
        except httpx.HTTPError as exc:
            raise OwnerCallError(
                f"无法连接数据目录的所有者{self.owner.describe()}（{type(exc).__name__}）；它可能正在关闭，请稍后重试"
            ) from exc
        raise OwnerCallError(f"{self.owner.describe()}在 {target}.{method} 返回结果前断开了连接，请重试")

    def _error(self, target: str, method: str, wire: dict[str, Any]) -> Exception:
        cls = wire_error_types().get(str(wire.get("type")))
        message = str(wire.get("message", ""))
        if cls is not None:
            return cls(message)
        return OwnerCallError(f"{self.owner.describe()}执行 {target}.{method} 时出错：{message}")

    async def aclose(self) -> None:
        await self._http.aclose()


def _error_message(text: str) -> str:
    try:
        return str(json.loads(text)["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return text[:200]


def _absolute_if_local(path: Any) -> Any:
    """A relative path that exists from this process's directory, made absolute: the owner runs elsewhere."""
    if path is None or str(path).strip() == "":
        return path
    candidate = Path(str(path)).expanduser()
    if not candidate.is_absolute() and candidate.exists():
        return str(candidate.resolve())
    return str(path)


# Arguments naming files the caller means relative to its own working directory.
_CLIENT_PATHS = {("knowledge", "ingest_document"): "file_path", ("knowledge", "ingest_path"): "path"}


class RemoteService:
    """Base of the generated proxies: the scope every call runs in, and the connection."""

    target = ""

    def __init__(self, connection: OwnerConnection, scope: Scope | None) -> None:
        self._connection = connection
        self.scope = scope

    @property
    def runtime(self) -> Any:
        raise BookuError(
            f"此服务连接的是数据目录的所有者{self._connection.owner.describe()}，本进程没有运行时；请只调用服务方法"
        )


def _proxy_method(target: str, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    signature = inspect.signature(original)
    path_argument = _CLIENT_PATHS.get((target, name))

    @functools.wraps(original)
    async def call(self: RemoteService, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(self, *args, **kwargs)  # a wrong call fails here exactly as on the real method
        arguments: dict[str, Any] = {}
        for param_name, value in list(bound.arguments.items())[1:]:
            if signature.parameters[param_name].kind is inspect.Parameter.VAR_KEYWORD:
                arguments.update(value)
            else:
                arguments[param_name] = value
        progress = arguments.pop("progress", None)
        if path_argument and path_argument in arguments:
            arguments[path_argument] = _absolute_if_local(arguments[path_argument])
        return await self._connection.call(target, name, arguments, scope=self.scope, progress=progress)

    return call


def _proxy_class(target: str, cls: type) -> type[RemoteService]:
    methods = {name: _proxy_method(target, name, member) for name, member in public_methods(cls).items()}
    return type(f"Remote{cls.__name__}", (RemoteService,), {"target": target, "__doc__": cls.__doc__, **methods})


REMOTE_SERVICE_CLASSES = {target: _proxy_class(target, cls) for target, cls in SERVICE_CLASSES.items()}


class RemoteMemoryHandle:
    """What ``booku_memory.open()`` returns when another process owns the data dir and accepts clients."""

    def __init__(self, connection: OwnerConnection, *, data_dir: Path, config: Any, scope: Scope) -> None:
        self.connection = connection
        self.data_dir = data_dir
        self.config = config
        self.default_scope = scope

    @property
    def owner(self) -> OwnerRecord:
        """The process doing the work."""
        return self.connection.owner

    @property
    def runtime(self) -> Any:
        raise BookuError(
            f"数据目录 {self.data_dir} 由{self.owner.describe()}持有，本进程是它的客户端，没有本地运行时；"
            "请通过 get_service(...) 的服务方法读写"
        )

    def get_service(self, signature: str, *, scope: Scope | None = None) -> Any:
        """A proxy of the service ``signature`` in ``scope`` (default: the scope given to ``open``)."""
        from .standalone import service_target

        target = service_target(signature)
        return REMOTE_SERVICE_CLASSES[target](self.connection, scope or self.default_scope)

    async def reindex(self, *, progress: Progress | None = None) -> dict[str, Any]:
        """``portability.reindex`` run by the owner."""
        return await self.connection.call("maintenance", "reindex", progress=progress)

    async def export_jsonl(self, path: str | Path, *, progress: Progress | None = None) -> dict[str, Any]:
        """``portability.export_jsonl`` run by the owner, writing ``path`` (relative to this process's directory)."""
        return await self.connection.call(
            "maintenance", "export_jsonl", {"path": str(Path(path).resolve())}, progress=progress
        )

    async def import_jsonl(self, path: str | Path, *, progress: Progress | None = None) -> dict[str, Any]:
        """``portability.import_jsonl`` run by the owner, reading ``path`` (relative to this process's directory)."""
        return await self.connection.call(
            "maintenance", "import_jsonl", {"path": str(Path(path).resolve())}, progress=progress
        )

    async def run_memory_command(
        self, text: str, *, stream_id: str | None = None, scope: Scope | None = None
    ) -> dict[str, Any]:
        """The LLM's ``memory_command`` run by the owner; its answer dict."""
        return await self.connection.call(
            "command", "memory_command", {"text": text, "stream_id": stream_id}, scope=scope or self.default_scope
        )

    async def call_mcp_tool(self, name: str, arguments: dict[str, Any] | None, *, scope: Scope) -> dict[str, Any]:
        """One MCP tool call run by the owner: ``{"text", "is_error"}`` as the MCP server renders it."""
        return await self.connection.call("mcp_tool", name, {"arguments": arguments}, scope=scope)

    async def aclose(self) -> None:
        await self.connection.aclose()

"""Booku without a host: ``async with booku_memory.open(data_dir) as memory``.

The handle exposes the same service signatures as the host (``memory.get_service("booku_memory:service:booku_memory")``)
and, while it is open, the module-level ``booku_memory.get_service(signature)`` answers from it too.

One process owns a data dir at a time (``services.ownership``). ``open`` either becomes that owner (a
``MemoryHandle`` on a local runtime) or, when a running owner accepts clients (serve, mcp, the host plugin, or
``open(..., accept_clients=True)``), returns a ``RemoteMemoryHandle`` whose services are proxies of the owner's, with
the same methods and results. Otherwise it refuses with a ``BookuError`` naming the owner.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from .config import BookuConfig
from .services.embedding.base import Embedder
from .services.errors import BookuError
from .services.ownership import DataDirBusy, busy_message
from .services.runtime import BookuRuntime
from .services.scope import DEFAULT_SCOPE, Scope

MEMORY_SERVICE = "booku_memory:service:booku_memory"
KNOWLEDGE_SERVICE = "booku_memory:service:booku_knowledge"
OWNER_START_WAIT_SECONDS = 120.0
"""How long ``open`` waits for an owner that will accept clients but is still starting (a large store's start-up
loads its indexes first)."""

_open_handles: list[Any] = []


def service_target(signature: str) -> str:
    """``memory`` or ``knowledge`` for a service signature; ``BookuError`` for anything else."""
    if signature == MEMORY_SERVICE:
        return "memory"
    if signature == KNOWLEDGE_SERVICE:
        return "knowledge"
    raise BookuError(f"未知的服务签名 {signature!r}，可用: {MEMORY_SERVICE}, {KNOWLEDGE_SERVICE}")


class MemoryHandle:
    """An open standalone memory owned by this process: the runtime plus service look-up by signature.

    The maintenance and tool methods mirror ``RemoteMemoryHandle``'s, so the CLI and the MCP server run the same
    code whether this process owns the data dir or works through its owner.
    """

    def __init__(self, runtime: BookuRuntime) -> None:
        self.runtime = runtime
        self.endpoint: Any = None  # the ``owner_rpc.OwnerEndpoint`` while this handle accepts clients
        self.config = runtime.config
        self.data_dir = runtime.data_dir
        self.default_scope = runtime.default_scope

    def get_service(self, signature: str, *, scope: Scope | None = None) -> Any:
        if service_target(signature) == "memory":
            return self.runtime.memory_service(scope)
        return self.runtime.knowledge_service(scope)

    async def reindex(self, *, progress: Callable[..., None] | None = None) -> dict[str, Any]:
        """Rebuild every vector and the keyword index with the current model (``portability.reindex``)."""
        from .services.portability import reindex

        return await reindex(self.runtime, **_progress(progress))

    async def export_jsonl(self, path: str | Path, *, progress: Callable[..., None] | None = None) -> dict[str, Any]:
        """Export every memory with its history as JSON Lines (``portability.export_jsonl``)."""
        from .services.portability import export_jsonl

        return await export_jsonl(self.runtime, path, **_progress(progress))

    async def import_jsonl(self, path: str | Path, *, progress: Callable[..., None] | None = None) -> dict[str, Any]:
        """Import an export file, idempotently (``portability.import_jsonl``)."""
        from .services.portability import import_jsonl

        return await import_jsonl(self.runtime, path, **_progress(progress))

    async def run_memory_command(
        self, text: str, *, stream_id: str | None = None, scope: Scope | None = None
    ) -> dict[str, Any]:
        """The LLM's ``memory_command``; its answer dict."""
        from .tools import run_memory_command

        return await run_memory_command(self.runtime.memory_service(scope), text, stream_id=stream_id)


def _progress(progress: Callable[..., None] | None) -> dict[str, Any]:
    return {} if progress is None else {"progress": progress}


@contextlib.asynccontextmanager
async def open_memory(
    data_dir: str | Path = "data",
    config: BookuConfig | dict | str | Path | None = None,
    *,
    embedder: Embedder | None = None,
    scope: Scope = DEFAULT_SCOPE,
    check_model: bool = True,
    accept_clients: bool = False,
    connect: bool = True,
    entry_point: str = "open",
) -> AsyncIterator[Any]:
    """Own ``data_dir`` (start SQLite + embedded Chroma + the configured embedder, close them after) or, when
    another process owns it and accepts clients, work through that process.

    ``accept_clients``: while this handle is open, other processes opening the data dir become its clients (start
    the owner endpoint, ``owner_rpc``). ``connect=False``: refuse instead of becoming a client (what needs the
    runtime itself, like the dashboard). ``entry_point`` names this process in the owner record (serve, mcp, host,
    open, cli). Yields a ``MemoryHandle`` or a ``RemoteMemoryHandle``; raises ``DataDirBusy`` (a ``BookuError``
    naming the owner and what to do) when neither is possible.
    """
    runtime = BookuRuntime(
        config,
        data_dir,
        embedder=embedder,
        default_scope=scope,
        entry_point=entry_point,
        accepts_clients=accept_clients,
    )
    deadline = asyncio.get_running_loop().time() + OWNER_START_WAIT_SECONDS
    remote_owner = None
    while True:
        try:
            await runtime.start(check_model=check_model)
            break
        except DataDirBusy as busy:
            await runtime.close()
            owner = busy.owner
            if not connect:
                raise DataDirBusy(
                    busy_message(
                        runtime.data_dir,
                        owner,
                        wanted=(
                            "本命令需要在拥有数据目录的进程里运行，请先停止它再启动；启动后命令行与 MCP "
                            "会自动通过本进程读写。"
                        ),
                    ),
                    owner,
                ) from None
            if owner is None or not owner.accepts_clients:
                raise
            if owner.ready:
                remote_owner = owner
                break
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)  # the owner is starting; its endpoint comes right after its stores
        except BaseException:
            await runtime.close()
            raise
    if remote_owner is not None:
        async with _remote(remote_owner, runtime, scope) as remote:
            yield remote
        return
    handle = MemoryHandle(runtime)
    endpoint = None
    try:
        if accept_clients:
            from .owner_rpc import start_endpoint

            endpoint = handle.endpoint = await start_endpoint(runtime)
        _open_handles.append(handle)
        try:
            yield handle
        finally:
            _open_handles.remove(handle)
    finally:
        try:
            if endpoint is not None:
                await endpoint.stop()
        finally:
            await runtime.close()


@contextlib.asynccontextmanager
async def _remote(owner: Any, runtime: BookuRuntime, scope: Scope) -> AsyncIterator[Any]:
    from .owner_client import OwnerConnection, RemoteMemoryHandle

    handle = RemoteMemoryHandle(OwnerConnection(owner), data_dir=runtime.data_dir, config=runtime.config, scope=scope)
    _open_handles.append(handle)
    try:
        yield handle
    finally:
        _open_handles.remove(handle)
        await handle.aclose()


def get_service(signature: str) -> Any:
    """Service of the most recently opened standalone memory (None when none is open, like the host)."""
    if not _open_handles:
        return None
    return _open_handles[-1].get_service(signature)

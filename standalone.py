"""Booku without a host: ``async with booku_memory.open(data_dir) as memory``.

The handle exposes the same service signatures as the host (``memory.get_service("booku_memory:service:booku_memory")``)
and, while it is open, the module-level ``booku_memory.get_service(signature)`` answers from it too.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, AsyncIterator

from .config import BookuConfig
from .services.embedding.base import Embedder
from .services.errors import BookuError
from .services.runtime import BookuRuntime
from .services.scope import DEFAULT_SCOPE, Scope

MEMORY_SERVICE = "booku_memory:service:booku_memory"
KNOWLEDGE_SERVICE = "booku_memory:service:booku_knowledge"

_open_handles: list["MemoryHandle"] = []


class MemoryHandle:
    """An open standalone memory: the runtime plus service look-up by signature."""

    def __init__(self, runtime: BookuRuntime) -> None:
        self.runtime = runtime

    def get_service(self, signature: str, *, scope: Scope | None = None) -> Any:
        if signature == MEMORY_SERVICE:
            return self.runtime.memory_service(scope)
        if signature == KNOWLEDGE_SERVICE:
            return self.runtime.knowledge_service(scope)
        raise BookuError(f"未知的服务签名 {signature!r}，可用: {MEMORY_SERVICE}, {KNOWLEDGE_SERVICE}")


@contextlib.asynccontextmanager
async def open_memory(
    data_dir: str | Path = "data",
    config: BookuConfig | dict | str | Path | None = None,
    *,
    embedder: Embedder | None = None,
    scope: Scope = DEFAULT_SCOPE,
    check_model: bool = True,
) -> AsyncIterator[MemoryHandle]:
    """Start a runtime on ``data_dir`` (SQLite + embedded Chroma + the configured embedder) and close it after."""
    runtime = BookuRuntime(config, data_dir, embedder=embedder, default_scope=scope)
    try:
        await runtime.start(check_model=check_model)
    except BaseException:
        await runtime.close()
        raise
    handle = MemoryHandle(runtime)
    _open_handles.append(handle)
    try:
        yield handle
    finally:
        _open_handles.remove(handle)
        await runtime.close()


def get_service(signature: str) -> Any:
    """Service of the most recently opened standalone memory (None when none is open, like the host)."""
    if not _open_handles:
        return None
    return _open_handles[-1].get_service(signature)

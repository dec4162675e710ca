"""The host services ``booku_memory`` / ``booku_knowledge``: our service classes on the plugin's running runtime.

The host builds a new service object on every ``get_service`` call, so they only look up the plugin's runtime.
"""

from typing import Any

from src.app.plugin_system.base import BaseService

from ..services.errors import BookuError
from ..services.knowledge_service import BookuKnowledgeService
from ..services.memory_service import BookuMemoryService
from ..services.runtime import BookuRuntime
from . import PLUGIN_VERSION


def running_runtime(plugin: Any) -> BookuRuntime:
    """The plugin's started runtime; raises ``BookuError`` with the start-up error when there is none."""
    runtime = getattr(plugin, "runtime", None)
    if runtime is None or not runtime.started:
        reason = getattr(plugin, "startup_error", "") or "插件尚未完成启动"
        raise BookuError(f"Booku 记忆服务不可用：{reason}")
    return runtime


class BookuMemoryHostService(BaseService, BookuMemoryService):
    """``booku_memory:service:booku_memory`` — the memory API of ``BookuMemoryService`` on the plugin's runtime."""

    service_name = "booku_memory"
    service_description = BookuMemoryService.service_description
    version = PLUGIN_VERSION

    def __init__(self, plugin: Any) -> None:
        BaseService.__init__(self, plugin)
        BookuMemoryService.__init__(self, running_runtime(plugin))


class BookuKnowledgeHostService(BaseService, BookuKnowledgeService):
    """``booku_memory:service:booku_knowledge`` — document ingest, listing and export on the plugin's runtime."""

    service_name = "booku_knowledge"
    service_description = "Booku 知识库服务：导入文档、切块入库、列出与导出资料"
    version = PLUGIN_VERSION

    def __init__(self, plugin: Any) -> None:
        BaseService.__init__(self, plugin)
        BookuKnowledgeService.__init__(self, running_runtime(plugin))

"""Neo-MoFox host adapter: the plugin class the host loads (``booku_memory.plugin``, the plugin folder being the
package: the host imports the entry file as ``<folder>.<entry stem>`` with the folder's parent on ``sys.path``).

It owns exactly one ``BookuRuntime`` per plugin instance and lists the host components built over it, each in
``host_adapter/``:

* ``config_bridge``: the host's pydantic config generated from ``BookuConfig`` and validated back into it;
* ``services``: ``booku_memory`` / ``booku_knowledge``, host ``BaseService`` + our service classes;
* ``tools``: ``memory_command`` / ``temporary_memo`` and one tool per companion operation and ``recall``;
* ``dashboard``: the ``memory_admin`` router mounting the dashboard at ``/booku-memory`` (its own key/session auth);
* ``events``: flashback, tool-usage warning, per-stream memo reminder, chat evidence, background startup ingest, and
  the latest self-knowledge entries at the start of each chat's session;
* ``models``: embeddings and the dreaming chat model through the host's model tasks.

What the handlers add to a prompt is rendered here from ``tools/`` (nothing here decides what a reminder *says*)
and the reminders are kept in the host's ``actor`` bucket; how memories are stored is the services' business.
"""

from collections.abc import Sequence
from typing import Any

from src.app.plugin_system.api import stream_api
from src.app.plugin_system.base import BasePlugin, register_plugin
from src.core.managers import get_router_manager
from src.core.prompt import (
    SystemReminderConsumeType,
    SystemReminderInsertType,
    get_system_reminder_store,
)

from .host_adapter import PLUGIN_NAME, PLUGIN_TOML, PLUGIN_VERSION, logger
from .host_adapter.config_bridge import BookuHostConfig, settings_from_host_config
from .host_adapter.dashboard import MemoryAdminRouter
from .host_adapter.events import EVENT_HANDLERS
from .host_adapter.models import host_chat_fn, host_embedder
from .host_adapter.services import (
    BookuKnowledgeHostService,
    BookuMemoryHostService,
    running_runtime,
)
from .host_adapter.tools import build_tool_classes
from .owner_rpc import OwnerEndpoint, start_endpoint
from .services.chat_scope import scope_for_chat
from .services.memory_service import BookuMemoryService
from .services.runtime import BookuRuntime
from .services.scope import Scope
from .tools import (
    ACTIVE_DIGEST_REMINDER_NAME,
    KNOWLEDGE_GUIDE_REMINDER_NAME,
    MANUAL_REMINDER_NAME,
    MEMO_REMINDER_NAME,
    REMINDER_NAMES,
    FlashbackPicker,
    ToolUsageTracker,
    active_memory_digest,
    candidate_filter,
    flashback_block,
    knowledge_guide,
    manual_reminder,
    session_self_entries,
    temporary_memo_block,
)

REMINDER_BUCKET = "actor"
DIGEST_CANDIDATES = 50
"""Rows the active-memory digest chooses from (it shows ``DIGEST_LIMIT`` of them: recent and frequently used)."""
CHAT_TYPE_LABELS = {"group": "群聊", "private": "私聊", "discuss": "讨论组"}


class _ActorReminders:
    """Set-or-delete access to this plugin's items in the host's ``actor`` reminder bucket."""

    def __init__(self) -> None:
        self._store = get_system_reminder_store()

    def put(self, name: str, content: str, *, dynamic: bool, once: bool = False) -> None:
        """Set ``name`` to ``content``; an empty ``content`` deletes the item (the store refuses empty text)."""
        if not content.strip():
            self._store.delete(REMINDER_BUCKET, name)
            return
        self._store.set(
            REMINDER_BUCKET,
            name,
            content,
            insert_type=SystemReminderInsertType.DYNAMIC if dynamic else SystemReminderInsertType.FIXED,
            consume=SystemReminderConsumeType.ONCE if once else SystemReminderConsumeType.FOREVER,
        )

    def clear(self) -> None:
        for name in REMINDER_NAMES:
            self._store.delete(REMINDER_BUCKET, name)


@register_plugin
class BookuMemoryPlugin(BasePlugin):
    """Booku Memory inside Neo-MoFox: one runtime per instance, components as thin views on it."""

    plugin_name = PLUGIN_NAME
    plugin_description = PLUGIN_TOML["description"]
    plugin_version = PLUGIN_VERSION
    configs = [BookuHostConfig]

    def __init__(self, config: Any = None) -> None:
        super().__init__(config)
        # Raises ConfigError naming the key: the host then refuses the plugin with that message.
        self.booku_config, self.data_dir = settings_from_host_config(config)
        self.runtime: BookuRuntime | None = None
        self.owner_endpoint: OwnerEndpoint | None = None
        self.startup_error = ""
        self.tool_usage = ToolUsageTracker(self.booku_config.plugin.memory_tool_miss_warning_threshold)
        self.flashback = FlashbackPicker(self.booku_config.flashback)
        self.reminders = _ActorReminders()
        self._components: list[type] | None = None
        self._started_sessions: set[str] = set()

    # ------------------------------------------------------------------------------------------------- components
    def get_components(self) -> list[type]:
        """Component classes (the same list on every call); ``[]`` when ``[plugin] enabled = false``."""
        if not self.booku_config.plugin.enabled:
            return []
        if self._components is None:
            self._components = [
                *build_tool_classes(self.booku_config),
                BookuMemoryHostService,
                BookuKnowledgeHostService,
                MemoryAdminRouter,
                *EVENT_HANDLERS,
            ]
        return list(self._components)

    def running_runtime(self) -> BookuRuntime | None:
        """The started runtime, or ``None`` before start-up / after a failed start or unload (dashboard: 503)."""
        runtime = self.runtime
        return runtime if runtime is not None and runtime.started else None

    def runtime_memory_service(self) -> BookuMemoryService:
        """A memory service view in the default scope; raises ``BookuError`` when the runtime is not running."""
        return running_runtime(self).memory_service()

    async def scope_for_stream(self, stream_id: str | None) -> Scope:
        """The scope of a chat stream, from the host's stream record only (never from message text).

        ``[scope] mode = "single"`` keeps one owner for everything; ``per_chat`` gives each private chat and each
        group its own store (docs/SCOPES.md). A stream the host does not know fails closed: it gets a private store
        of its own (keyed by the stream id), never the default or shared one every chat may read.
        """
        running_runtime(self)
        section = self.booku_config.scope
        stream_key = str(stream_id or "").strip()
        if section.mode == "single" or not stream_key:
            return Scope(owner_uid=section.default_owner, current_channel=stream_key, actor="llm")
        stream = await stream_api.get_stream(stream_key)
        if stream is None:
            logger.warning(f"未找到聊天流 {stream_key}，为它使用独立的私有存储")
            return scope_for_chat(section, platform="", chat_type=None, stream_id=stream_key, actor="llm")
        return scope_for_chat(
            section,
            platform=getattr(stream, "platform", ""),
            chat_type=getattr(stream, "chat_type", ""),
            stream_id=stream_key,
            actor="llm",
        )

    async def memory_service_for_stream(self, stream_id: str | None) -> BookuMemoryService:
        """A memory service acting for the LLM of ``stream_id`` (agent authority, that chat's scope)."""
        return running_runtime(self).memory_service(await self.scope_for_stream(stream_id))

    # -------------------------------------------------------------------------------------------------- lifecycle
    async def on_plugin_loaded(self) -> None:
        """Open the runtime (SQLite, vector index, embedder) and publish the reminders."""
        if not self.booku_config.plugin.enabled:
            return
        runtime = BookuRuntime(
            self.booku_config,
            self.data_dir,
            embedder=host_embedder(self.booku_config),
            host_chat_fn=host_chat_fn(self.booku_config),
            entry_point="host",
            accepts_clients=True,
        )
        try:
            await runtime.start()
            # The plugin owns the data dir: the CLI, MCP servers and scripts run on it through this endpoint.
            self.owner_endpoint = await start_endpoint(runtime)
        except Exception as exc:
            self.startup_error = f"{type(exc).__name__}: {exc}"
            logger.error(f"Booku 记忆启动失败，服务与工具不可用：{self.startup_error}")
            try:
                await runtime.close()
            except Exception as close_exc:  # a half-opened runtime may fail to close; the start error matters more
                logger.warning(f"关闭未启动完成的运行时出错：{close_exc}")
            return
        self.runtime = runtime
        runtime.add_change_listener(self._on_memory_changed)
        if runtime.degraded_reason():
            logger.warning(f"嵌入模型不可用，检索退化为关键词模式：{runtime.degraded_reason()}")
        await self.refresh_reminders()
        logger.info(f"Booku 记忆已启动，数据目录 {self.data_dir}")

    async def on_plugin_unloaded(self) -> None:
        """Remove the reminders and the dashboard mount, then close the runtime (connections, vector index)."""
        self.reminders.clear()
        try:
            await get_router_manager().unmount_plugin_routers(PLUGIN_NAME)
        except Exception as exc:  # the host does not unmount routers on unload; failing to do it must not block close
            logger.warning(f"卸载管理后台路由失败：{exc}")
        runtime, self.runtime = self.runtime, None
        endpoint, self.owner_endpoint = self.owner_endpoint, None
        try:
            if endpoint is not None:
                await endpoint.stop()
        finally:
            if runtime is not None:
                await runtime.close()
        logger.info("Booku 记忆已关闭")

    # -------------------------------------------------------------------------------------------------- reminders
    async def refresh_reminders(self, *, digest: bool = True, knowledge: bool = True) -> None:
        """Re-render the manual, the active-memory digest and the knowledge guide (or delete them when off)."""
        config = self.booku_config
        runtime = self.running_runtime()
        if runtime is None or not config.plugin.inject_system_prompt:
            self.reminders.clear()
            return
        self.reminders.put(MANUAL_REMINDER_NAME, manual_reminder(config), dynamic=False)
        if digest:
            listing = await runtime.memory_service().list_memory_entries(
                status="active", bucket="memory", limit=DIGEST_CANDIDATES
            )
            self.reminders.put(ACTIVE_DIGEST_REMINDER_NAME, active_memory_digest(listing["items"]), dynamic=True)
        if knowledge:
            titles = await runtime.knowledge_service().export_document_titles()
            self.reminders.put(KNOWLEDGE_GUIDE_REMINDER_NAME, knowledge_guide(titles), dynamic=False)

    async def _on_memory_changed(self, kind: str, memory_ids: Sequence[str]) -> None:
        """Runtime change listener: memory writes refresh the digest, knowledge writes the guide, memos nothing
        (the memo reminder is rebuilt per stream when that stream's prompt is built)."""
        if kind == "memo":
            return
        if kind == "knowledge_changed":
            await self.refresh_reminders(digest=False, knowledge=True)
        else:
            await self.refresh_reminders(digest=True, knowledge=False)

    async def sync_memo_reminder(self, *, stream_id: str, chat_type: Any = None, stream_name: Any = None) -> None:
        """Show exactly this stream's live memos in the ``临时备忘录`` reminder (deleted when it has none)."""
        runtime = self.running_runtime()
        if runtime is None or not self.booku_config.plugin.inject_system_prompt:
            self.reminders.put(MEMO_REMINDER_NAME, "", dynamic=True, once=True)
            return
        scoped = await self.memory_service_for_stream(stream_id)
        listing = await scoped.list_temporary_memos(stream_id=stream_id)
        if self.booku_config.scope.mode != "single":
            # Per-chat stores: the digest must show this chat's memories, so it is rebuilt with the memos.
            digest = await scoped.list_memory_entries(status="active", bucket="memory", limit=DIGEST_CANDIDATES)
            self.reminders.put(ACTIVE_DIGEST_REMINDER_NAME, active_memory_digest(digest["items"]), dynamic=True)
        kind = str(chat_type or "").strip()
        text = temporary_memo_block(
            listing["items"],
            stream_id=stream_id,
            stream_type=CHAT_TYPE_LABELS.get(kind.lower(), kind) or None,
            stream_name=str(stream_name or "").strip() or None,
        )
        self.reminders.put(MEMO_REMINDER_NAME, text, dynamic=True, once=True)

    # -------------------------------------------------------------------------------------------------- flashback
    async def flashback_text(self, stream_id: str) -> str:
        """One flashback block for ``stream_id``'s prompt, or ``""`` (off, not drawn this time, nothing eligible).

        ``FlashbackPicker`` draws the trigger and the layer (archived vs active memories), then picks among that
        layer's candidates with activation weighting and a per-stream cooldown; this method only fetches them.
        """
        runtime = self.running_runtime()
        if runtime is None:
            return ""
        layer = self.flashback.layer_for_prompt()
        if layer is None:
            return ""
        service = await self.memory_service_for_stream(stream_id)
        listing = await service.list_memory_entries(
            **candidate_filter(layer, self.booku_config.flashback.candidate_limit)
        )
        picked = self.flashback.choose(stream_id, listing["items"])
        if picked is None:
            return ""
        full = await service.read_full_content(memory_ids=[picked["id"]])
        return flashback_block(full["items"][0]) if full["items"] else ""

    # ------------------------------------------------------------------------------------------------ session start
    async def session_start_text(self, stream_id: str) -> str:
        """The latest self-knowledge entries for ``stream_id``'s first prompt since load, else ``""`` (every later
        prompt of that stream, no runtime, no entries). A failure is logged and costs only this block."""
        runtime = self.running_runtime()
        if runtime is None or stream_id in self._started_sessions:
            return ""
        self._started_sessions.add(stream_id)  # before the await: two builds at once must not both add the block
        try:
            return await session_self_entries(await self.memory_service_for_stream(stream_id or None))
        except Exception as exc:  # a prompt must still be built; the handler would otherwise be cut off by the bus
            logger.warning(f"读取会话开始的自我认知失败：{type(exc).__name__}: {exc}")
            return ""

    # ---------------------------------------------------------------------------------------------- startup ingest
    def start_startup_ingest(self) -> None:
        """Schedule the knowledge-folder ingest on the runtime (cancelled on close); refresh the guide afterwards."""
        runtime = self.running_runtime()
        if runtime is None:
            return
        if not self.booku_config.startup_ingest.enabled:
            runtime.spawn(self.refresh_reminders(digest=False, knowledge=True), name="booku_memory_knowledge_guide")
            return
        runtime.spawn(self._startup_ingest(runtime), name="booku_memory_startup_ingest")

    async def _startup_ingest(self, runtime: BookuRuntime) -> None:
        try:
            summary = await runtime.knowledge_service().ingest_folders()
            logger.info(f"知识库启动导入完成：{summary}")
        except Exception as exc:  # a broken file must not take the plugin down; the guide still reflects the store
            logger.error(f"知识库启动导入失败：{type(exc).__name__}: {exc}")
        await self.refresh_reminders(digest=False, knowledge=True)

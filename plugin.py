"""Neo-MoFox host adapter: the only module that imports the host framework (``src.*``).

The host imports this file as ``booku_memory.plugin`` (the plugin folder is the package, docs/HOST_CONTRACT.md). It
registers the plugin class, bridges the host's pydantic config to our ``BookuConfig``, owns exactly one
``BookuRuntime`` per plugin instance, and exposes it through host components:

* services ``booku_memory`` / ``booku_knowledge``: host ``BaseService`` + our service classes (the host builds a new
  service object on every ``get_service`` call, so they only look up the plugin's running runtime);
* tools ``memory_command`` / ``temporary_memo``: thin wrappers over ``tools/``, scoped to the caller's chat stream;
* one tool per companion operation (``breath`` with no required parameter, ``breath_search``, ``hold`` … ``pulse``,
  plus whatever else ``COMPANION_TOOLS`` lists) and ``recall``, generated from the table in ``tools/llm_tool_specs``;
* router ``memory_admin``: the dashboard app mounted at ``/booku-memory`` (its own key/session auth);
* event handlers: flashback, tool-usage warning, per-stream memo reminder, background startup ingest, and the
  latest self-knowledge entries at the start of each chat's session.

Nothing here decides what a reminder *says* (``tools/reminders.py`` does) or how memories are stored (services).
This module deliberately has no ``from __future__ import annotations``: the host builds tool schemas from the
``Annotated`` descriptions of ``execute``, and the tool classes below take those strings from the live config.
"""

import dataclasses
import inspect
import time
import tomllib
import typing
import uuid
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, Optional

import pydantic
from src.app.plugin_system.api import llm_api, log_api, stream_api
from src.app.plugin_system.base import (
    BaseConfig,
    BaseEventHandler,
    BasePlugin,
    BaseRouter,
    BaseService,
    BaseTool,
    Field,
    SectionBase,
    config_section,
    register_plugin,
)
from src.core.components.types import EventType
from src.core.managers import get_router_manager
from src.core.prompt import SystemReminderConsumeType, SystemReminderInsertType, get_system_reminder_store
from src.kernel.event import EventDecision

from .config import BookuConfig, config_from_mapping, load_config
from .config.example import SECTION_NOTES
from .manifest_tools import load_plugin_toml
from .owner_rpc import OwnerEndpoint, start_endpoint
from .router.app import create_dashboard_app
from .router.auth import API_KEY_FILE_NAME, configured_api_key, ensure_api_key
from .router.settings import DashboardSettings
from .services.embedding.base import Embedder
from .services.embedding.factory import build_embedder
from .services.errors import BookuError, ConfigError, EmbeddingUnavailableError
from .services.evidence.capture import record_host_message
from .services.knowledge_service import BookuKnowledgeService
from .services.memory_service import BookuMemoryService
from .services.runtime import BookuRuntime
from .services.scope import Scope
from .services.scoping import scope_for_chat
from .tools import (
    ACTIVE_DIGEST_REMINDER_NAME,
    KNOWLEDGE_GUIDE_REMINDER_NAME,
    MANUAL_REMINDER_NAME,
    MEMO_REMINDER_NAME,
    REMINDER_NAMES,
    FlashbackPicker,
    HostParameter,
    ToolUsageTracker,
    active_memory_digest,
    append_extra,
    candidate_filter,
    flashback_block,
    host_parameters,
    knowledge_guide,
    llm_tool_specs,
    manual_reminder,
    memory_command_tool_schema,
    render_for_llm,
    run_host_tool,
    run_memory_command,
    run_temporary_memo,
    session_self_entries,
    temporary_memo_block,
    temporary_memo_tool_schema,
)

logger = log_api.get_logger("booku_memory", display="Booku记忆")

_PLUGIN_TOML = load_plugin_toml(Path(__file__).resolve().with_name("plugin.toml"))["plugin"]
PLUGIN_NAME: str = _PLUGIN_TOML["name"]
PLUGIN_VERSION: str = _PLUGIN_TOML["version"]

USER_PROMPT_TEMPLATE = "default_chatter_user_prompt"
"""The default chatter's per-turn user prompt; its ``values`` carry ``extra``, ``stream_id``, ``chat_type``…"""
REMINDER_BUCKET = "actor"
ROUTE_PATH = "/booku-memory"
DIGEST_CANDIDATES = 50
"""Rows the active-memory digest chooses from (it shows ``DIGEST_LIMIT`` of them: recent and frequently used)."""
CHAT_TYPE_LABELS = {"group": "群聊", "private": "私聊", "discuss": "讨论组"}
HOST_DEFAULTS: dict[str, dict[str, Any]] = {"embedding": {"provider": "host"}}
"""Inside the host the embeddings come from the host's own embedding task unless the operator picks another."""


# ===================================================================================================================
# Config: the host's pydantic BaseConfig generated from our dataclasses
# ===================================================================================================================
#
# The host writes config/plugins/booku_memory/config.toml from this class, with comments. One model per section of
# ``BookuConfig`` is generated from the dataclass fields (defaults, ranges, choices), so a key added to the schema
# appears in the host file without touching this module. Validation stays ours: ``load`` first checks the raw file
# with ``config_from_mapping`` (the host would otherwise silently drop unknown keys and reset invalid values), and
# the plugin validates the merged result again before starting.


@config_section("host", title="宿主设置", tag="plugin")
class HostSection(SectionBase):
    """仅在 Neo-MoFox 宿主中生效的设置"""

    data_dir: str = Field(
        default="data/booku_memory",
        description="数据目录：SQLite 数据库、向量索引、管理后台密钥和知识库文件夹都放在这里；"
                    "相对路径以宿主的工作目录为基准",
        tag="file",
    )


def _field_description(field: dataclasses.Field) -> str:
    """The comment the host writes above a key: its doc, range and choices (empty when it has none)."""
    notes = []
    if field.metadata.get("doc"):
        notes.append(str(field.metadata["doc"]))
    if "range" in field.metadata:
        low, high = field.metadata["range"]
        notes.append(f"范围 {low}–{high}")
    if "choices" in field.metadata:
        notes.append("可选 " + " / ".join(field.metadata["choices"]))
    return "；".join(notes)


def _section_model(section_name: str, section_type: type) -> type[SectionBase]:
    """A host ``SectionBase`` mirroring one ``BookuConfig`` section dataclass (host-side defaults applied)."""
    hints = typing.get_type_hints(section_type)
    instance = section_type()
    overrides = HOST_DEFAULTS.get(section_name, {})
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(section_type):
        annotation: Any = hints[field.name]
        default = overrides.get(field.name, getattr(instance, field.name))
        extra: dict[str, Any] = {"description": _field_description(field)}
        if "range" in field.metadata:
            extra["ge"], extra["le"] = field.metadata["range"]
        if "choices" in field.metadata:
            annotation = Literal[tuple(field.metadata["choices"])]
            extra["choices"] = list(field.metadata["choices"])
        if isinstance(default, list):
            fields[field.name] = (annotation, Field(default_factory=lambda value=default: list(value), **extra))
        else:
            fields[field.name] = (annotation, Field(default=default, **extra))
    model = pydantic.create_model(
        f"Booku{section_type.__name__}",
        __base__=SectionBase,
        __doc__=SECTION_NOTES.get(section_name) or section_name,
        **fields,
    )
    return config_section(section_name)(model)


def _check_raw_config_file(path: Path) -> None:
    """Reject unknown sections/keys and invalid values before the host rewrites the file (naming the key)."""
    if not path.exists():
        return
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"插件配置 {path} 不是合法的 TOML：{exc}") from exc
    host = raw.pop("host", {})
    if not isinstance(host, dict):
        raise ConfigError(f"插件配置 {path} 的 [host] 必须是表")
    unknown = sorted(set(host) - set(HostSection.model_fields))
    if unknown:
        raise ConfigError(
            f"未知的配置项 host.{unknown[0]}，该段可用: {', '.join(sorted(HostSection.model_fields))}（文件 {path}）"
        )
    try:
        config_from_mapping(raw)
    except ConfigError as exc:
        raise ConfigError(f"{exc}（文件 {path}）") from exc


class _BookuHostConfigBase(BaseConfig):
    """Booku 记忆插件配置（未知键或越界值会让插件加载失败，并指出是哪一项）"""

    config_name: ClassVar[str] = "config"
    config_description: ClassVar[str] = "Booku 记忆插件配置"

    @classmethod
    def load(cls, path: str | Path, *, auto_update: bool = False) -> Any:
        """Check the raw file strictly, then let the host merge in new defaults and (re)write comments."""
        _check_raw_config_file(Path(path))
        return super().load(path, auto_update=auto_update)


def _host_config_class() -> type[BaseConfig]:
    section_types = typing.get_type_hints(BookuConfig)
    sections: dict[str, Any] = {"host": (HostSection, Field(default_factory=HostSection))}
    for section in dataclasses.fields(BookuConfig):
        model = _section_model(section.name, section_types[section.name])
        sections[section.name] = (model, Field(default_factory=model))
    return pydantic.create_model(
        "BookuHostConfig", __base__=_BookuHostConfigBase, __doc__=_BookuHostConfigBase.__doc__, **sections
    )


BookuHostConfig = _host_config_class()


def settings_from_host_config(config: Any) -> tuple[BookuConfig, Path]:
    """Our validated ``BookuConfig`` and the absolute data directory from the host's config object.

    ``None`` (no config file support) gives the host defaults. Raises ``ConfigError`` naming the offending key.
    """
    if config is None:
        config = BookuHostConfig()
    mapping = {
        section.name: getattr(config, section.name).model_dump()
        for section in dataclasses.fields(BookuConfig)
        if hasattr(config, section.name)
    }
    booku_config = load_config(mapping)
    host = getattr(config, "host", None) or HostSection()
    data_dir = Path(host.data_dir.replace("\\", "/")).expanduser()
    if not data_dir.is_absolute():
        data_dir = Path.cwd() / data_dir
    return booku_config, data_dir.resolve()


# ===================================================================================================================
# Embeddings through the host's embedding task
# ===================================================================================================================


def host_chat_fn(config: BookuConfig):
    """The dreaming stages' light chat model: the host's ``[dreaming] host_task`` model set (None for other providers).

    Returns an async ``messages -> text`` function; the evidence package wraps it in its ChatModel interface and
    reports "unavailable" (never silently skipping) when the host has no such task.
    """
    if config.dreaming.chat_provider != "host":
        return None
    from src.kernel.llm import ROLE, LLMPayload, Text

    task = config.dreaming.host_task

    async def complete(messages: list[dict[str, str]]) -> str:
        request = llm_api.create_llm_request(llm_api.get_model_set_by_task(task), request_name="booku_dreaming")
        for message in messages:
            role = ROLE.SYSTEM if message.get("role") == "system" else ROLE.USER
            request.add_payload(LLMPayload(role, Text(message.get("content", ""))))
        response = await request.send(stream=False)
        return str(await response or "")

    return complete


def host_embedder(config: BookuConfig) -> Embedder | None:
    """The ``host`` provider bound to the host's ``llm_api``; ``None`` for other providers (the runtime builds them).

    Only the FIRST model of the task is used: the host fails over between the models of a task, and vectors of two
    different models must never end up in one index. The model identifier keys the embedding cache and the index,
    so swapping the host's model is detected (and answered with the reindex hint) instead of mixing vectors.
    """
    section = config.embedding
    if section.provider != "host":
        return None
    task = section.host_task
    try:
        model_set = list(llm_api.get_model_set_by_task(task))[:1]
        if not model_set:
            raise ValueError("任务没有配置任何模型")
    except Exception as exc:  # the host raises ValueError/KeyError for a missing task; keep running on keywords
        reason = f"宿主 config/model.toml 中没有可用的嵌入任务 [model_tasks.{task}]：{exc}"

        async def unavailable(texts: list[str]) -> list[list[float]]:
            raise EmbeddingUnavailableError(reason)

        logger.warning(reason)
        return build_embedder(section, host_request_fn=unavailable, host_model_id=f"host/{task}")

    async def embed(texts: list[str]) -> list[list[float]]:
        request = llm_api.create_embedding_request(model_set, request_name="booku_memory", inputs=list(texts))
        response = await request.send()
        return response.embeddings

    identifier = str(model_set[0].get("model_identifier") or task)
    return build_embedder(section, host_request_fn=embed, host_model_id=f"host/{identifier}")


# ===================================================================================================================
# Services
# ===================================================================================================================


def _running_runtime(plugin: Any) -> BookuRuntime:
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
        BookuMemoryService.__init__(self, _running_runtime(plugin))


class BookuKnowledgeHostService(BaseService, BookuKnowledgeService):
    """``booku_memory:service:booku_knowledge`` — document ingest, listing and export on the plugin's runtime."""

    service_name = "booku_knowledge"
    service_description = "Booku 知识库服务：导入文档、切块入库、列出与导出资料"
    version = PLUGIN_VERSION

    def __init__(self, plugin: Any) -> None:
        BaseService.__init__(self, plugin)
        BookuKnowledgeService.__init__(self, _running_runtime(plugin))


# ===================================================================================================================
# Tools (classes built per plugin instance so their schema text follows the live config)
# ===================================================================================================================


def build_tool_classes(config: BookuConfig) -> list[type[BaseTool]]:
    """The ``memory_command`` and ``temporary_memo`` tool classes, their schema text taken from ``tools/`` for
    ``config`` (e.g. the memo's maximum expiry), so the host's generated schema says what the tools enforce, followed
    by one tool per companion operation and ``recall`` (``table_tool_classes``)."""
    command = memory_command_tool_schema(config)
    memo = temporary_memo_tool_schema(config)
    command_help = command["parameters"]["command"]["description"]
    memo_params = memo["parameters"]
    memo_actions = Literal[tuple(memo_params["action"]["enum"])]

    class MemoryCommandTool(BaseTool):
        """Runs one CLI-style memory command chain for the current chat stream."""

        tool_name = command["name"]
        tool_description = command["description"]

        async def execute(self, command: Annotated[str, command_help]) -> tuple[bool, str]:
            stream_id = self.get_current_stream_id() or None
            try:
                service = await self.plugin.memory_service_for_stream(stream_id)
            except BookuError as exc:
                return False, render_for_llm({"action": self.tool_name, "ok": False, "error": str(exc)})
            result = await run_memory_command(service, command, stream_id=stream_id)
            return bool(result.get("ok")), render_for_llm(result)

    class TemporaryMemoTool(BaseTool):
        """Creates, lists or cancels short-lived memos of the current chat stream."""

        tool_name = memo["name"]
        tool_description = memo["description"]

        async def execute(
            self,
            content: Annotated[str, memo_params["content"]["description"]] = memo_params["content"]["default"],
            expire_hours: Annotated[float, memo_params["expire_hours"]["description"]] = (
                memo_params["expire_hours"]["default"]
            ),
            action: Annotated[memo_actions, memo_params["action"]["description"]] = memo_params["action"]["default"],
            memo_id: Annotated[str, memo_params["memo_id"]["description"]] = memo_params["memo_id"]["default"],
            allow_shorten: Annotated[bool, memo_params["allow_shorten"]["description"]] = (
                memo_params["allow_shorten"]["default"]
            ),
        ) -> tuple[bool, str]:
            try:
                service = await self.plugin.memory_service_for_stream(self.get_current_stream_id() or None)
            except BookuError as exc:
                return False, render_for_llm({"action": self.tool_name, "ok": False, "error": str(exc)})
            result = await run_temporary_memo(
                service, content=content, expire_hours=expire_hours, action=action, memo_id=memo_id or None,
                allow_shorten=allow_shorten, stream_id=self.get_current_stream_id() or None,
            )
            return bool(result.get("ok")), render_for_llm(result)

    return [MemoryCommandTool, TemporaryMemoTool, *table_tool_classes()]


def _execute_signature(parameters: list[HostParameter]) -> inspect.Signature:
    """``execute(self, *, <name>: Annotated[type, description] = default, …)`` for the host's schema builder.

    Keyword-only, so a required parameter may follow optional ones; an optional parameter without a default is
    ``Optional[...] = None`` (the host leaves ``None`` defaults out of the schema and unwraps ``Optional``).
    """
    declared = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    for parameter in parameters:
        annotation = parameter.annotation
        if not parameter.required and parameter.default is None:
            annotation = Optional[annotation]  # noqa: UP045 (the annotation may be a string, which has no `|`)
        declared.append(inspect.Parameter(
            parameter.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if parameter.required else parameter.default,
            annotation=Annotated[annotation, parameter.description],
        ))
    return inspect.Signature(declared, return_annotation=tuple[bool, str])


def table_tool_class(name: str, description: str, parameters: list[HostParameter]) -> type[BaseTool]:
    """A host tool running the table tool ``name`` for the caller's chat stream (its scope, agent authority, the AI
    side). The host reads the schema from ``execute``'s signature, which is declared from ``parameters``; the body
    takes keyword arguments and leaves checking them to ``run_host_tool`` (unknown or missing ones are refused)."""

    async def run(self: BaseTool, **arguments: Any) -> tuple[bool, str]:
        try:
            service = await self.plugin.memory_service_for_stream(self.get_current_stream_id() or None)
        except BookuError as exc:
            return False, str(exc)
        return await run_host_tool(service, name, arguments)

    signature = _execute_signature(parameters)
    run.__signature__ = signature  # type: ignore[attr-defined]
    run.__annotations__ = {
        **{p.name: p.annotation for p in signature.parameters.values() if p.name != "self"},
        "return": signature.return_annotation,
    }

    class TableTool(BaseTool):
        __doc__ = f"``{name}``: {description}"
        tool_name = name
        tool_description = description
        execute = run

    TableTool.__name__ = TableTool.__qualname__ = f"Booku_{name}_Tool"
    return TableTool


def table_tool_classes() -> list[type[BaseTool]]:
    """One host tool per companion operation and ``recall``, in table order (``breath`` needs no argument)."""
    return [table_tool_class(spec.name, spec.description, host_parameters(spec)) for spec in llm_tool_specs()]


# ===================================================================================================================
# Router
# ===================================================================================================================


class MemoryAdminRouter(BaseRouter):
    """``memory_admin``: the dashboard (pages + JSON API) at ``/booku-memory`` on the host's HTTP server.

    The dashboard enforces its own authentication (``X-API-Key`` or a login session, CSRF on forms) because the
    host's routers are public by default; the key comes from ``[dashboard] api_key``, its environment variable, or
    ``<data_dir>/dashboard_api_key`` (generated once). CORS is the dashboard's job too, so the host adds none.
    """

    router_name = "memory_admin"
    router_description = "Booku 记忆管理后台与 JSON API"
    custom_route_path = ROUTE_PATH
    cors_origins = None

    def register_endpoints(self) -> None:
        plugin = self.plugin
        config: BookuConfig = plugin.booku_config
        settings = DashboardSettings.from_config(config, api_key=ensure_api_key(plugin.data_dir, config))
        key_source = "配置 [dashboard] api_key 或环境变量" if configured_api_key(config) else (
            f"文件 {Path(plugin.data_dir) / API_KEY_FILE_NAME}"
        )
        logger.info(f"管理后台挂载在宿主 HTTP 服务的 {ROUTE_PATH}，登录密钥见{key_source}")
        dashboard = create_dashboard_app(plugin.running_runtime, settings=settings)
        # The wrapper app's automatic /docs and /openapi.json would be served without authentication; the dashboard
        # disables its own, so drop the wrapper's too and leave only the mount.
        hidden = {self.app.docs_url, self.app.redoc_url, self.app.openapi_url, self.app.swagger_ui_oauth2_redirect_url}
        self.app.router.routes[:] = [r for r in self.app.router.routes if getattr(r, "path", None) not in hidden]
        self.app.mount("/", dashboard)


# ===================================================================================================================
# Event handlers
# ===================================================================================================================


def _user_prompt_values(params: dict[str, Any]) -> dict[str, Any] | None:
    """The mutable ``values`` of a default-chatter user prompt build, else ``None`` (other templates pass through)."""
    if params.get("name") != USER_PROMPT_TEMPLATE:
        return None
    values = params.get("values")
    return values if isinstance(values, dict) else None


class MemoryToolUsageWarningHandler(BaseEventHandler):
    """Counts actor rounds without ``memory_command`` per stream and adds a one-shot warning to the next prompt.

    The default chatter reports the names the LLM called, i.e. ``tool-memory_command``; ``ToolUsageTracker``
    normalises them (the reference compared the bare name and so never reset its counter).
    """

    handler_name = "memory_tool_usage_warning_handler"
    handler_description = "连续多轮未使用 memory_command 时，在下一次回复提示词中提醒模型"
    weight = 12
    init_subscribe = [EventType.AFTER_CHATTER_STEP, "on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        tracker: ToolUsageTracker = self.plugin.tool_usage
        if event_name == EventType.AFTER_CHATTER_STEP:
            stream_id = str(params.get("stream_id") or "").strip()
            if params.get("step_scope") == "actor_round" and stream_id:
                tracker.record_round(stream_id, params.get("used_tools") or [])
            return EventDecision.SUCCESS, params
        values = _user_prompt_values(params)
        if values is not None:
            warning = tracker.take_warning(str(values.get("stream_id") or "").strip())
            if warning:
                values["extra"] = append_extra(values.get("extra"), warning)
        return EventDecision.SUCCESS, params


class MemoryFlashbackInjector(BaseEventHandler):
    """Now and then appends one old memory to the user prompt (``[flashback]``; off by default)."""

    handler_name = "memory_flashback_injector"
    handler_description = "构建回复提示词时按概率闪回一条旧记忆"
    weight = 10
    init_subscribe = ["on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        values = _user_prompt_values(params)
        if values is not None:
            block = await self.plugin.flashback_text(str(values.get("stream_id") or "").strip())
            if block:
                values["extra"] = append_extra(values.get("extra"), block)
        return EventDecision.SUCCESS, params


class StreamMemoReminderHandler(BaseEventHandler):
    """Puts the memos of the stream whose prompt is being built into the ``临时备忘录`` reminder.

    The host's reminder store is global, not per stream, and the actor context injects it when the user prompt
    built here is added; refreshing it at this moment (lowest weight, so right before the prompt is used) is what
    keeps one chat's memos out of another chat's context.
    """

    handler_name = "booku_memory_stream_memos"
    handler_description = "构建回复提示词前，把当前聊天流的临时备忘录写入 system reminder"
    weight = -10
    init_subscribe = ["on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        values = _user_prompt_values(params)
        if values is not None:
            await self.plugin.sync_memo_reminder(
                stream_id=str(values.get("stream_id") or "").strip(),
                chat_type=values.get("chat_type"),
                stream_name=values.get("stream_name"),
            )
        return EventDecision.SUCCESS, params


class SessionSelfKnowledgeHandler(BaseEventHandler):
    """Starts each chat's session with the latest self-knowledge ("I") entries (docs/COMPANION.md).

    The host has no session event; the first default-chatter user prompt a stream builds after the plugin loaded is
    its session start here, so the entries are appended to that prompt's ``extra`` once per stream. Nothing happens
    while the companion service has no ``latest_self_entries`` or there is no formal entry yet.
    """

    handler_name = "booku_memory_session_self"
    handler_description = "每个聊天流本次会话的第一次回复提示词里，附上最近 3 条正式自我认知"
    weight = 14
    init_subscribe = ["on_prompt_build"]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        values = _user_prompt_values(params)
        if values is not None:
            block = await self.plugin.session_start_text(str(values.get("stream_id") or "").strip())
            if block:
                values["extra"] = append_extra(values.get("extra"), block)
        return EventDecision.SUCCESS, params


class ChatEvidenceHandler(BaseEventHandler):
    """Records received and sent chat messages into the immutable, scoped chat log (``[evidence]``).

    The text is stored as evidence for recall and dreaming, never as an instruction; vectors are computed in the
    background so the handler stays far inside the host's 5 s budget. It never changes the event parameters.
    """

    handler_name = "booku_memory_chat_evidence"
    handler_description = "把收到和发出的聊天消息记入不可修改的聊天证据日志"
    weight = 1
    init_subscribe = [EventType.ON_MESSAGE_RECEIVED, EventType.ON_MESSAGE_SENT]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        runtime = self.plugin.running_runtime()
        message = params.get("message")
        config = self.plugin.booku_config.evidence
        sent = str(event_name) == EventType.ON_MESSAGE_SENT.value or event_name == EventType.ON_MESSAGE_SENT
        if runtime is None or message is None or not config.enabled or (sent and not config.record_sent):
            return EventDecision.SUCCESS, params
        text = str(getattr(message, "processed_plain_text", "") or getattr(message, "content", "") or "")
        message_id = str(getattr(message, "message_id", "") or "") or f"sent-{uuid.uuid4().hex}"
        try:
            await record_host_message(
                runtime, message_id=message_id, stream_id=str(getattr(message, "stream_id", "") or ""),
                platform=str(getattr(message, "platform", "") or ""),
                chat_type=str(getattr(message, "chat_type", "") or ""),
                sender_id=str(getattr(message, "sender_id", "") or ""),
                sender_name=str(getattr(message, "sender_name", "") or ""), text=text,
                sent_at=float(getattr(message, "time", 0) or time.time()),
                direction="sent" if sent else "received",
            )
        except BookuError as exc:
            logger.warning(f"聊天证据未记录：{exc}")
        return EventDecision.SUCCESS, params


class StartupIngestHandler(BaseEventHandler):
    """On ``on_start`` runs the knowledge-folder ingest in the background (handlers time out after 5 s)."""

    handler_name = "booku_memory_startup_ingest"
    handler_description = "启动后在后台导入配置的知识库文件夹"
    weight = 5
    init_subscribe = [EventType.ON_START]

    async def execute(self, event_name: str, params: dict[str, Any]) -> tuple[EventDecision, dict[str, Any]]:
        self.plugin.start_startup_ingest()
        return EventDecision.SUCCESS, params


EVENT_HANDLERS: tuple[type[BaseEventHandler], ...] = (
    ChatEvidenceHandler,
    SessionSelfKnowledgeHandler,
    MemoryFlashbackInjector,
    MemoryToolUsageWarningHandler,
    StreamMemoReminderHandler,
    StartupIngestHandler,
)


# ===================================================================================================================
# Plugin
# ===================================================================================================================


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
    plugin_description = _PLUGIN_TOML["description"]
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
        return _running_runtime(self).memory_service()

    async def scope_for_stream(self, stream_id: str | None) -> Scope:
        """The scope of a chat stream, from the host's stream record only (never from message text).

        ``[scope] mode = "single"`` keeps one owner for everything; ``per_chat`` gives each private chat and each
        group its own store (docs/SCOPES.md). A stream the host does not know fails closed: it gets a private store
        of its own (keyed by the stream id), never the default or shared one every chat may read.
        """
        _running_runtime(self)
        section = self.booku_config.scope
        stream_key = str(stream_id or "").strip()
        if section.mode == "single" or not stream_key:
            return Scope(owner_uid=section.default_owner, current_channel=stream_key, actor="llm")
        stream = await stream_api.get_stream(stream_key)
        if stream is None:
            logger.warning(f"未找到聊天流 {stream_key}，为它使用独立的私有存储")
            return scope_for_chat(section, platform="", chat_type=None, stream_id=stream_key, actor="llm")
        return scope_for_chat(section, platform=getattr(stream, "platform", ""),
                              chat_type=getattr(stream, "chat_type", ""), stream_id=stream_key, actor="llm")

    async def memory_service_for_stream(self, stream_id: str | None) -> BookuMemoryService:
        """A memory service acting for the LLM of ``stream_id`` (agent authority, that chat's scope)."""
        return _running_runtime(self).memory_service(await self.scope_for_stream(stream_id))

    # -------------------------------------------------------------------------------------------------- lifecycle
    async def on_plugin_loaded(self) -> None:
        """Open the runtime (SQLite, vector index, embedder) and publish the reminders."""
        if not self.booku_config.plugin.enabled:
            return
        runtime = BookuRuntime(self.booku_config, self.data_dir, embedder=host_embedder(self.booku_config),
                               host_chat_fn=host_chat_fn(self.booku_config), entry_point="host", accepts_clients=True)
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

    async def _on_memory_changed(self, kind: str, memory_ids: list[str]) -> None:
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


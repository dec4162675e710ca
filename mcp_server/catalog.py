"""The MCP tool list: every table tool (the companion tools and recall), plus memory_command and temporary_memo.

Nothing here restates a manual or re-implements a tool. The table tools are ``tools.llm_tool_specs()``
(``services/companion/tool_table.COMPANION_TOOLS`` + recall), so a tool added to that table is served here without a
change, and they run through ``tools.run_host_tool``, the very function behind the host's tools: same scope rules,
same AI side for letters, same text (a companion result's ``text``; recall's JSON within the output budget).
``memory_command`` and ``temporary_memo`` use the host tools' schemas and runners, their answers rendered with
``render_for_llm`` as the host shows them.

No parameter of any tool names an owner, a store or an authority: those come from the connection's ``Scope``
(``settings.mcp_scope``), which no argument can change.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError

from ..services.companion.tool_table import ToolSpec, json_schema
from ..services.errors import BookuError
from ..services.memory_service import BookuMemoryService
from ..services.scope import Scope
from ..tools import (
    llm_tool_specs,
    memory_command_tool_schema,
    render_for_llm,
    run_host_tool,
    run_memory_command,
    run_temporary_memo,
    temporary_memo_tool_schema,
)
from ..tools.llm_tool_specs import param_choices

if TYPE_CHECKING:
    from ..services.runtime import BookuRuntime

logger = logging.getLogger("booku_memory.mcp")

INTERNAL_ERROR = "记忆服务内部出错，这次调用没有完成；请换个写法重试。"


@dataclass(frozen=True)
class ToolOutcome:
    """What one call returns to the client: the text the model reads, and whether the call failed."""

    text: str
    is_error: bool = False


@dataclass(frozen=True)
class McpTool:
    """One served tool: its name, description and JSON Schema, and the coroutine that runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    run: Callable[[ToolContext, dict[str, Any]], Awaitable[ToolOutcome]]


@dataclass(frozen=True)
class ToolContext:
    """The runtime and the connection's fixed scope; every call builds its (cheap) service view from these."""

    runtime: BookuRuntime
    scope: Scope

    def memory_service(self) -> BookuMemoryService:
        return self.runtime.memory_service(self.scope)


# ----- table tools (companion + recall) ----------------------------------------------------------------------------


def table_schema(spec: ToolSpec) -> dict[str, Any]:
    """``json_schema(spec)`` plus the allowed values of parameters the table restricts (recall's ``peer_scope``)."""
    schema = json_schema(spec)
    for param in spec.params:
        choices = param_choices(param)
        if choices:
            schema["properties"][param.name]["enum"] = list(choices)
    return schema


def _table_tool(spec: ToolSpec) -> McpTool:
    async def run(context: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
        ok, text = await run_host_tool(context.memory_service(), spec.name, arguments)
        return ToolOutcome(text, is_error=not ok)

    return McpTool(spec.name, spec.description, table_schema(spec), run)


# ----- memory_command / temporary_memo -----------------------------------------------------------------------------


def _host_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """The host tools' ``{"parameters", "required"}`` shape as a JSON Schema object."""
    return {
        "type": "object",
        "properties": dict(schema["parameters"]),
        "required": list(schema["required"]),
        "additionalProperties": False,
    }


async def _run_memory_command(context: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    service = context.memory_service()
    answer = await run_memory_command(service, arguments["command"], stream_id=context.scope.current_channel)
    return ToolOutcome(render_for_llm(answer), is_error=not answer.get("ok", False))


async def _run_temporary_memo(context: ToolContext, arguments: dict[str, Any]) -> ToolOutcome:
    service = context.memory_service()
    answer = await run_temporary_memo(service, stream_id=context.scope.current_channel, **arguments)
    return ToolOutcome(render_for_llm(answer), is_error=not answer.get("ok", False))


# ----- the list ----------------------------------------------------------------------------------------------------


def build_tools(config: Any = None) -> list[McpTool]:
    """Every served tool: the table tools in table order, then memory_command and temporary_memo. ``config`` sets
    the limits quoted in the temporary_memo schema (the same config the host tools are built with)."""
    tools = [_table_tool(spec) for spec in llm_tool_specs()]
    command = memory_command_tool_schema()
    tools.append(McpTool(command["name"], command["description"], _host_schema(command), _run_memory_command))
    memo = temporary_memo_tool_schema(config)
    tools.append(McpTool(memo["name"], memo["description"], _host_schema(memo), _run_temporary_memo))
    return tools


# ----- argument checks ---------------------------------------------------------------------------------------------

_JSON_TYPES = {
    "string": "字符串",
    "integer": "整数",
    "number": "数字",
    "boolean": "true 或 false",
    "array": "列表",
    "object": "对象",
    "null": "null",
}


def _type_words(kind: Any) -> str:
    kinds = kind if isinstance(kind, list) else [kind]
    return " 或 ".join(_JSON_TYPES.get(str(k), str(k)) for k in kinds)


def _schema_error_message(error: SchemaError, schema: Mapping[str, Any]) -> str:
    """One Chinese sentence naming the parameter and what it allows."""
    field = ".".join(str(part) for part in error.absolute_path) or "参数"
    rule = error.validator_value
    if error.validator == "required":
        missing = [name for name in rule if name not in (error.instance or {})]
        return f"缺少必填参数：{'、'.join(missing)}"
    if error.validator == "additionalProperties" and not error.absolute_path:
        allowed = "、".join(schema.get("properties", {})) or "（无）"
        unknown = sorted(set(error.instance) - set(schema.get("properties", {})))
        return f"不支持的参数：{'、'.join(unknown)}；可用参数：{allowed}"
    if error.validator == "type":
        return f"参数 {field} 必须是{_type_words(rule)}，收到 {error.instance!r}"
    if error.validator == "minimum":
        return f"参数 {field} 不能小于 {rule}，收到 {error.instance!r}"
    if error.validator == "maximum":
        return f"参数 {field} 不能大于 {rule}，收到 {error.instance!r}"
    if error.validator == "enum":
        return f"参数 {field} 只能是 {'、'.join(map(str, rule))}，收到 {error.instance!r}"
    return f"参数 {field} 不符合要求：{error.message}"


def checked_arguments(tool: McpTool, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """The call's arguments after the schema check; ``null`` values count as "not given" (many clients send them
    for every optional parameter). Raises ``ValueError`` with a Chinese sentence when the arguments do not fit."""
    given = {name: value for name, value in (arguments or {}).items() if value is not None}
    error = next(
        iter(
            sorted(
                Draft202012Validator(tool.input_schema).iter_errors(given),
                key=lambda e: (len(e.absolute_path), str(e.validator)),
            )
        ),
        None,
    )
    if error is not None:
        raise ValueError(_schema_error_message(error, tool.input_schema))
    return given


ToolCall = Callable[[McpTool, Mapping[str, Any] | None], Awaitable[ToolOutcome]]
"""How a server runs one checked-by-name tool call: in this process (``runtime_tool_call``) or in the data dir's
owner (``remote_tool_call``)."""


def runtime_tool_call(runtime: BookuRuntime, scope: Scope) -> ToolCall:
    """Calls run on ``runtime`` (this process owns the data dir) within ``scope``."""
    context = ToolContext(runtime, scope)

    async def run(tool: McpTool, arguments: Mapping[str, Any] | None) -> ToolOutcome:
        return await call_tool(tool, context, arguments)

    return run


def remote_tool_call(memory: Any, scope: Scope) -> ToolCall:
    """Calls run by the data dir's owner process (``memory`` is an ``owner_client.RemoteMemoryHandle``), checked
    and rendered there by ``call_tool``, so the client reads exactly what an in-process server would answer."""

    async def run(tool: McpTool, arguments: Mapping[str, Any] | None) -> ToolOutcome:
        try:
            answer = await memory.call_mcp_tool(tool.name, dict(arguments or {}), scope=scope)
        except BookuError as exc:  # the owner is gone or refused: tell the model, as for any refused call
            return ToolOutcome(str(exc), is_error=True)
        return ToolOutcome(str(answer["text"]), is_error=bool(answer["is_error"]))

    return run


async def call_tool(tool: McpTool, context: ToolContext, arguments: Mapping[str, Any] | None) -> ToolOutcome:
    """Check the arguments, run the tool, and turn every failure into an error outcome the model can read
    (a service's own Chinese message for bad input; a generic sentence, never a traceback, for anything else)."""
    try:
        checked = checked_arguments(tool, arguments)
    except ValueError as exc:
        return ToolOutcome(str(exc), is_error=True)
    try:
        return await tool.run(context, checked)
    except BookuError as exc:
        return ToolOutcome(str(exc), is_error=True)
    except Exception:  # the client must always get an answer, never a Python traceback
        logger.exception("MCP tool %s failed", tool.name)
        return ToolOutcome(INTERNAL_ERROR, is_error=True)

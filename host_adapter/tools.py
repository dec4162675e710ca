"""Host tool classes: ``memory_command``, ``temporary_memo`` and one per table tool (companion operations, recall).

This module deliberately has no ``from __future__ import annotations``: the host builds tool schemas from the
``Annotated`` descriptions of ``execute``, and the tool classes here take those strings from the live config.
"""

import inspect
from typing import Annotated, Any, Literal, Optional

from src.app.plugin_system.base import BaseTool

from ..config import BookuConfig
from ..services.errors import BookuError
from ..tools import (
    HostParameter,
    host_parameters,
    llm_tool_specs,
    memory_command_tool_schema,
    render_for_llm,
    run_host_tool,
    run_memory_command,
    run_temporary_memo,
    temporary_memo_tool_schema,
)


def build_tool_classes(config: BookuConfig) -> list[type[BaseTool]]:
    """The ``memory_command`` and ``temporary_memo`` tool classes, their schema text taken from ``tools/`` for
    ``config`` (e.g. the memo's maximum expiry), so the host's generated schema says what the tools enforce, followed
    by one tool per companion operation and ``recall`` (``table_tool_classes``)."""
    command = memory_command_tool_schema(config)
    memo = temporary_memo_tool_schema(config)
    command_help = command["parameters"]["command"]["description"]
    memo_params = memo["parameters"]
    # A Literal built from the schema at run time: the host turns it into the tool's enum (no static type exists).
    memo_actions = Literal[tuple(memo_params["action"]["enum"])]  # type: ignore[valid-type]

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
            action: Annotated[memo_actions, memo_params["action"]["description"]] = (  # type: ignore[valid-type]
                memo_params["action"]["default"]
            ),
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
                service,
                content=content,
                expire_hours=expire_hours,
                action=action,
                memo_id=memo_id or None,
                allow_shorten=allow_shorten,
                stream_id=self.get_current_stream_id() or None,
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
        declared.append(
            inspect.Parameter(
                parameter.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=inspect.Parameter.empty if parameter.required else parameter.default,
                annotation=Annotated[annotation, parameter.description],
            )
        )
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

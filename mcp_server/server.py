"""The MCP server object: the official SDK's low-level ``Server`` answering tools/list and tools/call.

The low-level server (not ``MCPServer``, the SDK's decorator front end) because our schemas already exist as data in
the shared tables; deriving them again from Python signatures would make a second, drifting copy.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from .catalog import McpTool, ToolCall, build_tools

SERVER_NAME = "booku-memory"
INSTRUCTIONS = (
    "Booku 长期记忆。每次对话开始先调用 breath（不带参数）睁眼看看自己记得什么；按话题找用 breath_search；"
    "对话中明确决定要长期记住的内容用 hold 逐字保存。"
)


def _package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("booku-memory")
    except PackageNotFoundError:
        return ""


def build_server(config: Any, call: ToolCall) -> Server[Any]:
    """A server listing the tools built with ``config`` and running each call through ``call``: on this process's
    runtime (``catalog.runtime_tool_call``) or in the data dir's owner (``catalog.remote_tool_call``), always
    within the connection's fixed owner and store.

    Unknown tool names are protocol errors (``INVALID_PARAMS``); bad arguments and refused operations are tool
    results with ``is_error`` set, so the model reads the Chinese message and can correct itself.
    """
    tools: dict[str, McpTool] = {tool.name: tool for tool in build_tools(config)}

    async def list_tools(
        _ctx: ServerRequestContext[Any],
        _params: types.PaginatedRequestParams | None,
    ) -> types.ListToolsResult:
        # A fresh result per request: the SDK stamps cache fields onto the object it is handed.
        return types.ListToolsResult(
            tools=[
                types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema)
                for tool in tools.values()
            ]
        )

    async def run_tool(_ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"未知工具 {params.name!r}，可用：{'、'.join(tools)}")
        outcome = await call(tool, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=outcome.text)], is_error=outcome.is_error)

    return Server(
        SERVER_NAME,
        version=_package_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=run_tool,
        get_tool_input_schema=lambda name: tools[name].input_schema if name in tools else None,
    )

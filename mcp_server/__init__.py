"""Booku Memory as an MCP server: the companion tools, recall, memory_command and temporary_memo for any MCP client.

``python -m booku_memory mcp`` serves over stdio; ``--http`` serves the streamable HTTP transport on 127.0.0.1 with a
bearer token. Every call runs in one scope fixed by the operator (``[mcp]`` owner and store, ``agent`` authority).
See docs/MCP.md.
"""

from .catalog import McpTool, ToolOutcome, build_tools, remote_tool_call, runtime_tool_call
from .entry import serve, serve_http, serve_stdio
from .server import build_server
from .settings import McpSettings, mcp_scope, mcp_settings
from .token import ensure_token

__all__ = [
    "McpSettings",
    "McpTool",
    "ToolOutcome",
    "build_server",
    "build_tools",
    "ensure_token",
    "mcp_scope",
    "mcp_settings",
    "remote_tool_call",
    "runtime_tool_call",
    "serve",
    "serve_http",
    "serve_stdio",
]

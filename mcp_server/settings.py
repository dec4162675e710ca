"""Who an MCP connection is: one configured owner and store, agent authority, nothing a client can change.

An MCP client is a program the operator started and pointed at this server, so the operator (config file, command
line), never the client, decides whose memory it sees. The ``[mcp]`` config section may not exist in the schema yet;
every key falls back to the constants below (the standalone default scope), so the server works with any config and
picks the keys up as soon as they exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..services.errors import ValidationError
from ..services.scope import DEFAULT_SCOPE, Scope

DEFAULT_PORT = 8766  # the dashboard uses 8765
HTTP_HOST = "127.0.0.1"  # loopback only: the bearer token is the only guard, and it travels unencrypted
HTTP_PATH = "/mcp"
TOKEN_ENV = "BOOKU_MCP_TOKEN"
TOKEN_FILE_NAME = "mcp_token"
MCP_CHANNEL = "mcp"  # the "chat stream" of every MCP call: temporary memos written over MCP belong to it
MCP_ACTOR = "mcp"  # recorded on every revision and audit row written over MCP
MAX_KEY_CHARS = 200


@dataclass(frozen=True)
class McpSettings:
    """``[mcp]`` config values after command-line overrides."""

    owner_uid: str = DEFAULT_SCOPE.owner_uid
    store_key: str = DEFAULT_SCOPE.writable_store_key
    token: str = ""
    token_env: str = TOKEN_ENV
    port: int = DEFAULT_PORT


def _section_value(config: Any, key: str, default: Any) -> Any:
    value = getattr(getattr(config, "mcp", None), key, None)
    return default if value is None else value


def _checked_key(name: str, value: Any) -> str:
    text = str(value or "").strip()
    if not text or len(text) > MAX_KEY_CHARS or any(ch.isspace() for ch in text):
        raise ValidationError(f"{name} 必须是 1~{MAX_KEY_CHARS} 个字符、不含空白的字符串，当前为 {value!r}")
    return text


def mcp_settings(
    config: Any, *, owner_uid: str | None = None, store_key: str | None = None, port: int | None = None
) -> McpSettings:
    """Settings from a ``BookuConfig`` (missing ``[mcp]`` keys use the defaults above); the keyword arguments are
    the operator's command-line overrides and win over the config.

    Raises ``ValidationError`` for an empty or blank owner/store or a port outside 1~65535.
    """
    base = McpSettings()
    chosen_port = port if port is not None else _section_value(config, "port", base.port)
    if isinstance(chosen_port, bool) or not isinstance(chosen_port, int) or not 1 <= chosen_port <= 65535:
        raise ValidationError(f"mcp.port 必须是 1~65535 的整数，当前为 {chosen_port!r}")
    return McpSettings(
        owner_uid=_checked_key("mcp.owner_uid", owner_uid or _section_value(config, "owner_uid", base.owner_uid)),
        store_key=_checked_key("mcp.store_key", store_key or _section_value(config, "store_key", base.store_key)),
        token=str(_section_value(config, "token", base.token) or "").strip(),
        token_env=str(_section_value(config, "token_env", base.token_env) or "").strip(),
        port=chosen_port,
    )


def mcp_scope(settings: McpSettings) -> Scope:
    """The one scope every call on an MCP connection runs in: the configured owner, reading and writing only the
    configured store, with the LLM tools' ``agent`` authority."""
    return Scope(
        owner_uid=settings.owner_uid,
        readable_store_keys=(settings.store_key,),
        writable_store_key=settings.store_key,
        current_channel=MCP_CHANNEL,
        actor=MCP_ACTOR,
        authority="agent",
    )

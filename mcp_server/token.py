"""The bearer token of the streamable HTTP transport, kept like the dashboard key but in its own file.

A separate secret on purpose: handing an MCP client its token must not also hand it the admin dashboard (which acts
with ``human`` authority over every store), and rotating one must not log the other out.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..services.secret_files import ensure_secret_file, secrets_equal
from .settings import TOKEN_FILE_NAME, McpSettings


def configured_token(settings: McpSettings) -> str:
    """The token from ``[mcp] token`` or, failing that, the environment variable named by ``token_env``; ``""``
    when neither is set (``ensure_token`` then generates one)."""
    if settings.token:
        return settings.token
    if settings.token_env:
        return os.environ.get(settings.token_env, "").strip()
    return ""


def masked_token(token: str) -> str:
    """The first four characters and an ellipsis: enough to tell tokens apart in a log, useless to an attacker."""
    return f"{token[:4]}…" if len(token) > 8 else "…"


def token_path(data_dir: str | Path) -> Path:
    """Where a generated token is kept: ``<data_dir>/mcp_token``."""
    return Path(data_dir) / TOKEN_FILE_NAME


def ensure_token(data_dir: str | Path, settings: McpSettings) -> str:
    """The HTTP bearer token: config, then environment, then ``<data_dir>/mcp_token`` (created if absent).

    A generated token is written to a file opened with mode 0600 before any byte of it is, so no other local user
    can read it even briefly; later starts reuse it so client configs keep working. Returns the token (never empty).
    """
    token = configured_token(settings)
    if token:
        return token
    return ensure_secret_file(token_path(data_dir))


def tokens_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets."""
    return secrets_equal(given, expected)

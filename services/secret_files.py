"""Generated secrets kept in the data directory (dashboard API key, MCP bearer token).

A generated secret is written to a file opened with mode 0600 before any byte of it is, so no other local user can
read it even briefly; later starts reuse it so bookmarks and client configs keep working.
"""

from __future__ import annotations

import hmac
import os
import secrets
from pathlib import Path

from .errors import ConfigError

MIN_SECRET_CHARS = 24
"""Shortest dashboard key / MCP token accepted: a generated one has 43 characters (256 random bits)."""


def ensure_secret_file(path: Path) -> str:
    """The secret stored at ``path``, generating and storing a new one when the file is missing or empty."""
    if path.exists():
        stored = path.read_text(encoding="utf-8").strip()
        if stored:
            os.chmod(path, 0o600)
            return stored
    path.parent.mkdir(parents=True, exist_ok=True)
    generated = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(generated + "\n")
    os.chmod(path, 0o600)  # O_CREAT's mode is ignored for an existing (empty) file
    return generated


def secrets_equal(given: str, expected: str) -> bool:
    """Constant-time comparison (a plain ``==`` leaks the length of the matching prefix through timing)."""
    return hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))


def require_long_secret(secret: str, what: str) -> str:
    """``secret`` if it has at least ``MIN_SECRET_CHARS`` characters, else ``ConfigError`` naming ``what``.

    A short secret is guessable despite the guess throttle (it slows, never stops, a patient attacker), and the
    throttle exists only for floods; so a short configured secret stops start-up instead of being used.
    """
    if len(secret) < MIN_SECRET_CHARS:
        raise ConfigError(
            f"{what} 太短：至少需要 {MIN_SECRET_CHARS} 个字符（当前 {len(secret)} 个）。请换一个更长的随机"
            '密钥（例如 python -c "import secrets; print(secrets.token_urlsafe(32))" 的输出），'
            "或删掉该配置让程序自动生成"
        )
    return secret

"""Authentication for the admin dashboard: API key, signed session cookie, CSRF token, login throttle.

The original admin router had no authentication and wildcard CORS with credentials (tools-router spec §8.1), so any
web page open in the operator's browser could read and delete every memory. Here every route except the login form
and the stylesheet needs either the ``X-API-Key`` header or a session cookie obtained by typing that key into the
login form. The cookie is stateless (an HMAC-signed payload, standard library only) and carries the per-session
CSRF token; cookie-authenticated state changes must echo that token, key-authenticated ones need not (a foreign web
page cannot read or set a custom header carrying the key).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from fastapi import HTTPException, Request

from ..services.secret_files import ensure_secret_file, secrets_equal
from .forms import read_form

if TYPE_CHECKING:
    from ..config.schema import BookuConfig

API_KEY_FILE_NAME = "dashboard_api_key"
SESSION_COOKIE = "booku_session"
LOGIN_CSRF_COOKIE = "booku_login_csrf"
CSRF_HEADER = "x-csrf-token"
CSRF_FORM_FIELD = "csrf_token"
API_KEY_HEADER = "x-api-key"
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def configured_api_key(config: BookuConfig) -> str:
    """The key from ``[dashboard] api_key`` or, failing that, the environment variable named by ``api_key_env``.

    Returns ``""`` when neither is set; the caller decides whether to generate one (``ensure_api_key``).
    """
    section = config.dashboard
    if section.api_key.strip():
        return section.api_key.strip()
    if section.api_key_env:
        return os.environ.get(section.api_key_env, "").strip()
    return ""


def ensure_api_key(data_dir: str | Path, config: BookuConfig) -> str:
    """The dashboard key: config, then environment, then ``<data_dir>/dashboard_api_key`` (created if absent).

    A generated key is written with mode 0600 before any byte of it is, so no other local user can read it even
    briefly; the file is reused on later starts so bookmarks and scripts keep working. Returns the key (never empty).
    """
    key = configured_api_key(config)
    if key:
        return key
    return ensure_secret_file(Path(data_dir) / API_KEY_FILE_NAME)


def keys_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets."""
    return secrets_equal(given, expected)


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Session:
    """A verified session cookie: when it expires and the CSRF token forms must echo."""

    csrf_token: str
    expires_at: float


class SessionSigner:
    """Signs and verifies session cookies with HMAC-SHA256.

    The signing secret is derived from the API key, so rotating the key logs every browser out without any
    server-side session table.
    """

    def __init__(self, api_key: str, session_hours: float) -> None:
        self._secret = hmac.new(api_key.encode("utf-8"), b"booku-memory dashboard session v1", hashlib.sha256).digest()
        self.max_age_seconds = int(session_hours * 3600)

    def issue(self, now: float | None = None) -> tuple[str, Session]:
        """A fresh cookie value and the session it encodes (new random CSRF token)."""
        issued = time.time() if now is None else now
        session = Session(csrf_token=secrets.token_urlsafe(24), expires_at=issued + self.max_age_seconds)
        payload = json.dumps({"csrf": session.csrf_token, "exp": session.expires_at}, separators=(",", ":"))
        body = _b64encode(payload.encode("utf-8"))
        return f"{body}.{self._sign(body)}", session

    def verify(self, cookie: str | None, now: float | None = None) -> Session | None:
        """The session in a cookie value, or ``None`` when it is missing, forged, malformed or expired."""
        if not cookie or cookie.count(".") != 1:
            return None
        body, signature = cookie.split(".")
        if not hmac.compare_digest(signature.encode("ascii", "replace"), self._sign(body).encode("ascii")):
            return None
        try:
            payload = json.loads(_b64decode(body))
            session = Session(csrf_token=str(payload["csrf"]), expires_at=float(payload["exp"]))
        except (ValueError, KeyError, TypeError):
            return None
        current = time.time() if now is None else now
        return session if session.expires_at > current else None

    def _sign(self, body: str) -> str:
        return _b64encode(hmac.new(self._secret, body.encode("ascii"), hashlib.sha256).digest())


class LoginThrottle:
    """Refuses further login attempts from one client after too many failures in a sliding window.

    Kept in memory on purpose: it only has to slow down key guessing against a local admin page, and a restart
    resetting it is harmless next to a 256-bit generated key.
    """

    def __init__(self, max_failures: int = 10, window_seconds: float = 300.0) -> None:
        self.max_failures = max_failures
        self.window_seconds = window_seconds
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, client: str) -> deque[float]:
        attempts = self._failures.get(client, deque())
        horizon = time.monotonic() - self.window_seconds
        while attempts and attempts[0] < horizon:
            attempts.popleft()
        if not attempts:
            self._failures.pop(client, None)  # forget quiet clients so the table cannot grow without bound
        return attempts

    def blocked(self, client: str) -> bool:
        """True when this client has used up its failed attempts for the current window."""
        return len(self._recent(client)) >= self.max_failures

    def record_failure(self, client: str) -> None:
        """Count one wrong key from this client."""
        attempts = self._recent(client)
        attempts.append(time.monotonic())
        self._failures[client] = attempts

    def reset(self, client: str) -> None:
        """Forget the failures of a client that just logged in."""
        self._failures.pop(client, None)


@dataclass(frozen=True)
class AuthContext:
    """Who a request is: by key (no CSRF needed) or by session cookie (CSRF token in ``session``)."""

    method: Literal["api_key", "session"]
    session: Session | None = None

    @property
    def csrf_token(self) -> str:
        """The token forms must echo back; empty for key-authenticated requests, which are exempt."""
        return self.session.csrf_token if self.session else ""


class LoginRequired(Exception):
    """Raised by page dependencies; the app turns it into a 303 redirect to the login form."""


class CsrfRejected(Exception):
    """Raised when a cookie-authenticated state change lacks the right CSRF token (403)."""


class DashboardAuth:
    """All authentication decisions of one dashboard app (one API key, one signer, one throttle)."""

    def __init__(self, api_key: str, session_hours: float) -> None:
        if not api_key:
            raise ValueError("dashboard.api_key 不能为空：请在配置、环境变量中设置，或用 ensure_api_key() 生成")
        self.api_key = api_key
        self.signer = SessionSigner(api_key, session_hours)
        self.throttle = LoginThrottle()

    def identify(self, request: Request) -> AuthContext | None:
        """Authenticate a request from its ``X-API-Key`` header or its session cookie; ``None`` if neither is valid.

        A request that sends a key header is judged by that header alone: a wrong key is never rescued by a cookie.
        """
        header_key = request.headers.get(API_KEY_HEADER)
        if header_key is not None:
            return AuthContext("api_key") if keys_equal(header_key, self.api_key) else None
        session = self.signer.verify(request.cookies.get(SESSION_COOKIE))
        return AuthContext("session", session) if session else None

    async def check_csrf(self, request: Request, context: AuthContext) -> None:
        """Require the session's CSRF token on every cookie-authenticated state change.

        The token may come in the ``X-CSRF-Token`` header (JSON clients) or the ``csrf_token`` form field (HTML
        forms). SameSite=Strict already keeps the cookie off cross-site requests; the token also covers browsers
        or proxies that ignore SameSite.
        """
        if request.method not in UNSAFE_METHODS or context.method == "api_key":
            return
        expected = context.csrf_token
        given = request.headers.get(CSRF_HEADER)
        if given is None and request.headers.get("content-type", "").startswith(_FORM_TYPES):
            form = await read_form(request)
            value = form.get(CSRF_FORM_FIELD)
            given = value if isinstance(value, str) else None
        if not given or not keys_equal(given, expected):
            raise CsrfRejected()

    async def require_api(self, request: Request) -> AuthContext:
        """FastAPI dependency for ``/api/*``: 401 JSON when unauthenticated, 403 when the CSRF token is missing."""
        context = self.identify(request)
        if context is None:
            raise HTTPException(
                status_code=401,
                detail="未登录：请在请求头 X-API-Key 中提供后台密钥，或先在登录页登录",
                headers={"WWW-Authenticate": "X-API-Key"},
            )
        await self.check_csrf(request, context)
        request.state.auth = context
        return context

    async def require_page(self, request: Request) -> AuthContext:
        """FastAPI dependency for HTML pages: redirect to the login form when unauthenticated."""
        context = self.identify(request)
        if context is None:
            raise LoginRequired()
        await self.check_csrf(request, context)
        request.state.auth = context
        return context


def client_address(request: Request) -> str:
    """The peer address used to key the login throttle (the socket peer; proxies are not trusted)."""
    return request.client.host if request.client else "unknown"

"""Authentication for the admin dashboard: API key, signed session cookie, CSRF token, key-guess throttle.

The original admin router had no authentication and wildcard CORS with credentials, so any
web page open in the operator's browser could read and delete every memory. Here every route except the login form
and the stylesheet needs either the ``X-API-Key`` header or a session cookie obtained by typing that key into the
login form. The cookie is stateless (an HMAC-signed payload, standard library only) and carries the per-session
CSRF token; cookie-authenticated state changes must echo that token, key-authenticated ones need not (a foreign web
page cannot read or set a custom header carrying the key). Each cookie names the session epoch it was issued in
(``services/storage/session_epoch.py``): logging out advances it, so a copied cookie dies with the logout.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from fastapi import HTTPException, Request

from ..services.secret_files import ensure_secret_file, require_long_secret, secrets_equal
from ..services.storage.session_epoch import advance_epoch, current_epoch
from .forms import read_form
from .throttle import GuessThrottle

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
    briefly; the file is reused on later starts so bookmarks and scripts keep working. Returns the key (never empty);
    raises ``ConfigError`` when the key in use is shorter than ``MIN_SECRET_CHARS``.
    """
    key = configured_api_key(config)
    if key:
        return require_long_secret(key, "dashboard.api_key（或其环境变量）")
    path = Path(data_dir) / API_KEY_FILE_NAME
    return require_long_secret(ensure_secret_file(path), f"密钥文件 {path}")


def keys_equal(given: str, expected: str) -> bool:
    """Constant-time comparison of two secrets."""
    return secrets_equal(given, expected)


def _b64encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _b64decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@dataclass(frozen=True)
class Session:
    """A verified session cookie: when it expires, the CSRF token forms must echo, the epoch it belongs to."""

    csrf_token: str
    expires_at: float
    epoch: int = 0


class SessionSigner:
    """Signs and verifies session cookies with HMAC-SHA256.

    The signing secret is derived from the API key, so rotating the key logs every browser out without any
    server-side session table.
    """

    def __init__(self, api_key: str, session_hours: float) -> None:
        self._secret = hmac.new(api_key.encode("utf-8"), b"booku-memory dashboard session v1", hashlib.sha256).digest()
        self.max_age_seconds = int(session_hours * 3600)

    def issue(self, now: float | None = None, *, epoch: int = 0) -> tuple[str, Session]:
        """A fresh cookie value and the session it encodes (new random CSRF token, the current ``epoch``)."""
        issued = time.time() if now is None else now
        session = Session(csrf_token=secrets.token_urlsafe(24), expires_at=issued + self.max_age_seconds, epoch=epoch)
        payload = json.dumps(
            {"csrf": session.csrf_token, "exp": session.expires_at, "ep": epoch}, separators=(",", ":")
        )
        body = _b64encode(payload.encode("utf-8"))
        return f"{body}.{self._sign(body)}", session

    def verify(self, cookie: str | None, now: float | None = None, *, epoch: int = 0) -> Session | None:
        """The session in a cookie value, or ``None`` when it is missing, forged, malformed, expired or from
        another epoch than ``epoch``.

        A cookie is whatever the client sends (non-ASCII bytes, stray separators, any length): anything but a
        well-formed signed value means "not logged in", never an error.
        """
        if not cookie or not cookie.isascii() or cookie.count(".") != 1:
            return None
        body, signature = cookie.split(".")
        if not hmac.compare_digest(signature.encode("ascii"), self._sign(body).encode("ascii")):
            return None
        try:
            payload = json.loads(_b64decode(body))
            session = Session(
                csrf_token=str(payload["csrf"]), expires_at=float(payload["exp"]), epoch=int(payload.get("ep", -1))
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None
        current = time.time() if now is None else now
        return session if session.expires_at > current and session.epoch == epoch else None

    def _sign(self, body: str) -> str:
        return _b64encode(hmac.new(self._secret, body.encode("ascii"), hashlib.sha256).digest())


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


UNAUTHENTICATED_MESSAGE = "未登录：请在请求头 X-API-Key 中提供后台密钥，或先在登录页登录"


def unauthenticated_error() -> HTTPException:
    """The 401 every unauthenticated API request gets (from the gate or, as a second line, a route dependency)."""
    return HTTPException(status_code=401, detail=UNAUTHENTICATED_MESSAGE, headers={"WWW-Authenticate": "X-API-Key"})


class DashboardAuth:
    """All authentication decisions of one dashboard app (one API key, one signer, one guess throttle).

    ``runtime_provider`` gives the running runtime whose database holds the session epoch; while there is none,
    no session cookie is accepted (the key header still is).
    """

    def __init__(self, api_key: str, session_hours: float, runtime_provider: Callable[[], Any] = lambda: None) -> None:
        if not api_key:
            raise ValueError("dashboard.api_key 不能为空：请在配置、环境变量中设置，或用 ensure_api_key() 生成")
        self.api_key = require_long_secret(api_key, "dashboard.api_key")
        self.signer = SessionSigner(api_key, session_hours)
        self.guesses = GuessThrottle()
        self._runtime_provider = runtime_provider

    async def session_epoch(self) -> int | None:
        """The epoch valid sessions carry, ``None`` while the runtime is not running."""
        runtime = self._runtime_provider()
        return None if runtime is None else await current_epoch(runtime.db)

    async def issue_session(self) -> str:
        """A cookie value for a fresh session in the current epoch."""
        cookie, _session = self.signer.issue(epoch=await self.session_epoch() or 0)
        return cookie

    async def end_sessions(self) -> None:
        """Log every browser out: cookies issued before stop working, replayed or not."""
        runtime = self._runtime_provider()
        if runtime is not None:
            await advance_epoch(runtime.db)

    async def check_key(self, given: str) -> bool:
        """Whether ``given`` is the key; a wrong guess returns only after the surface's throttle lets it."""
        if keys_equal(given, self.api_key):
            return True
        await self.guesses.penalise()
        return False

    async def identify(self, request: Request) -> AuthContext | None:
        """Authenticate a request from its ``X-API-Key`` header or its session cookie; ``None`` if neither is valid.

        A request that sends a key header is judged by that header alone: a wrong key is never rescued by a cookie
        (and counts as a guess).
        """
        header_key = request.headers.get(API_KEY_HEADER)
        if header_key is not None:
            return AuthContext("api_key") if await self.check_key(header_key) else None
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        epoch = await self.session_epoch()
        session = None if epoch is None else self.signer.verify(cookie, epoch=epoch)
        return AuthContext("session", session) if session else None

    async def _context(self, request: Request) -> AuthContext | None:
        # The gate middleware already identified the request (and counted a wrong key once): reuse its answer.
        known = getattr(request.state, "auth", None)
        return known if isinstance(known, AuthContext) else await self.identify(request)

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
        context = await self._context(request)
        if context is None:
            raise unauthenticated_error()
        await self.check_csrf(request, context)
        request.state.auth = context
        return context

    async def require_page(self, request: Request) -> AuthContext:
        """FastAPI dependency for HTML pages: redirect to the login form when unauthenticated."""
        context = await self._context(request)
        if context is None:
            raise LoginRequired()
        await self.check_csrf(request, context)
        request.state.auth = context
        return context

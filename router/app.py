"""The dashboard application: one FastAPI app, usable as the standalone root app and as the host's sub-app.

Every link and redirect is built from ``request.scope["root_path"]``, so the same app works at ``/`` (``serve``)
and mounted at ``/booku-memory`` inside the host. Docs/OpenAPI endpoints are off: they would load scripts from a
CDN and describe the API to anyone without a key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..services.errors import (
    BookuError,
    ConfigError,
    EmbeddingUnavailableError,
    ModelMismatchError,
    NotFoundError,
)
from .api import router as api_router
from .auth import CsrfRejected, DashboardAuth, LoginRequired, unauthenticated_error
from .companion_pages import router as companion_router
from .deps import DashboardRuntime
from .gate import BodyCaps, DashboardGate
from .pages import public_router
from .pages import router as pages_router
from .rendering import STATIC_DIR, build_environment, render, root_path
from .review import router as review_router
from .settings import DashboardSettings

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode("ascii")),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


class SecurityHeadersMiddleware:
    """Adds the security headers to every response, errors and static files included.

    Pages and API answers carry personal data, so they are also marked ``no-store``; only the stylesheet may be
    cached.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        is_static = _relative_path(scope).startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend(item for item in SECURITY_HEADERS if item[0] not in present)
                if not is_static and b"cache-control" not in present:
                    headers.append((b"cache-control", b"no-store"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _relative_path(scope: Scope) -> str:
    """The request path below the mount prefix (Starlette keeps the full path in ``scope["path"]``)."""
    path = str(scope.get("path", ""))
    prefix = str(scope.get("root_path", "")).rstrip("/")
    return path[len(prefix) :] if prefix and path.startswith(prefix) else path


def is_api_request(request: Request) -> bool:
    """True for ``/api/...`` requests, which get JSON errors instead of HTML pages."""
    relative = _relative_path(request.scope)
    return relative == "/api" or relative.startswith("/api/")


def is_v1_request(request: Request) -> bool:
    """True for the OpenViking-compatible ``/api/v1/...`` routes, whose errors use that API's envelope."""
    return _relative_path(request.scope).startswith("/api/v1/")


_ERROR_STATUS: tuple[tuple[type[BookuError], int], ...] = (
    (NotFoundError, 404),
    (EmbeddingUnavailableError, 503),
    (ModelMismatchError, 409),
    (ConfigError, 500),
)


def error_status(exc: BookuError) -> int:
    """HTTP status for a service error: bad input 400, unknown id 404, embedder down 503, index mismatch 409."""
    for error_type, status in _ERROR_STATUS:
        if isinstance(exc, error_type):
            return status
    return 400


def _error_response(
    request: Request, status_code: int, message: str, headers: Mapping[str, str] | None = None
) -> Response:
    if is_v1_request(request):
        return JSONResponse({"status": "error", "error": message}, status_code=status_code, headers=headers)
    if is_api_request(request):
        return JSONResponse({"detail": message}, status_code=status_code, headers=headers)
    return render(request, "error.html", {"status_code": status_code, "message": message}, status_code=status_code)


def login_redirect(request: Request) -> RedirectResponse:
    """303 to the login form, remembering where the user wanted to go (validated again after login)."""
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"{root_path(request)}/login?{urlencode({'next': target})}", status_code=303)


def unauthenticated_response(request: Request) -> Response:
    """What an unauthenticated request gets: the API's 401 (in its envelope), a page's redirect to the login form."""
    if is_api_request(request):
        error = unauthenticated_error()
        return _error_response(request, error.status_code, str(error.detail), headers=error.headers)
    return login_redirect(request)


def _install_error_handlers(app: FastAPI) -> None:
    async def on_login_required(request: Request, exc: Exception) -> Response:
        return login_redirect(request)

    async def on_csrf_rejected(request: Request, exc: Exception) -> Response:
        return _error_response(request, 403, "CSRF 校验失败：请求缺少有效的 csrf_token（请刷新页面后重试）")

    async def on_booku_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, BookuError)
        return _error_response(request, error_status(exc), str(exc))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else "请求失败"
        if exc.status_code == 404 and detail == "Not Found":
            detail = "页面不存在"
        return _error_response(request, exc.status_code, detail, headers=exc.headers)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        if is_v1_request(request):
            message = "请求参数不合法：" + "；".join(_describe(e) for e in exc.errors())
            return JSONResponse({"status": "error", "error": message}, status_code=400)
        if is_api_request(request):
            return JSONResponse({"detail": _plain_errors(exc.errors())}, status_code=422)
        return _error_response(request, 400, "提交的参数不合法：" + "；".join(_describe(e) for e in exc.errors()))

    app.add_exception_handler(LoginRequired, on_login_required)
    app.add_exception_handler(CsrfRejected, on_csrf_rejected)
    app.add_exception_handler(BookuError, on_booku_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)


def _describe(error: Any) -> str:
    location = ".".join(str(part) for part in error.get("loc", ())[1:]) or "参数"
    return f"{location}: {error.get('msg', '')}"


def _plain_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors without the raw input echo (which may contain a whole uploaded document)."""
    return [{"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")} for e in errors]


def create_dashboard_app(
    runtime_provider: Callable[[], DashboardRuntime | None],
    *,
    settings: DashboardSettings,
) -> FastAPI:
    """Build the dashboard app.

    ``runtime_provider`` is called per request and returns the running ``BookuRuntime`` (or ``None`` while it is
    not started, which answers 503). ``settings.api_key`` must have at least 24 characters; ``settings.allowed_origins``
    may not contain ``*``. Mount the returned app at any prefix: links follow ``root_path``.
    """
    if "*" in settings.allowed_origins:
        raise ConfigError(
            'dashboard.allowed_origins 不能包含 "*"：请列出允许访问后台的具体来源，如 http://127.0.0.1:8000'
        )
    app = FastAPI(
        title="Booku Memory 管理后台",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.runtime_provider = runtime_provider
    app.state.settings = settings
    app.state.auth = DashboardAuth(settings.api_key, settings.session_hours, runtime_provider)
    app.state.templates = build_environment()

    _install_error_handlers(app)
    app.include_router(public_router)
    app.include_router(api_router)
    app.include_router(pages_router)
    app.include_router(review_router)
    app.include_router(companion_router)
    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")
    # Innermost middleware: CORS answers preflights first, and every answer of the gate gets the security headers.
    app.add_middleware(
        DashboardGate,
        routes=app.router.routes,
        public_endpoints=[route.endpoint for route in public_router.routes if hasattr(route, "endpoint")],
        public_mounts=["static"],
        auth=app.state.auth,
        caps=BodyCaps(ordinary=settings.max_body_bytes, large=settings.max_upload_body_bytes),
        reject=_error_response,
        unauthenticated=unauthenticated_response,
    )

    if settings.allowed_origins:
        # Key-authenticated cross-origin clients only: cookies are SameSite=Strict, so credentials stay off.
        app.add_middleware(
            CORSMiddleware,
            allow_origins=list(settings.allowed_origins),
            allow_credentials=False,
            allow_methods=["GET", "POST", "PUT", "PATCH", "DELETE"],
            allow_headers=["X-API-Key", "Content-Type"],
        )
    app.add_middleware(SecurityHeadersMiddleware)
    return app

"""The dashboard's gate: a pure ASGI middleware that decides who is asking and how much they may send, before any
route (or FastAPI's body parsing, which runs before route dependencies) reads a byte of the body.

For every request it finds the route, then:
- outside the public routes (login form, stylesheet) an unauthenticated request is answered at once (401 / the
  login redirect) and its body is never read or spooled;
- a declared ``Content-Length`` over the route's cap is answered 413 at once; a body that streams past it is cut
  off at the cap (``body_limit``);
- a JSON body must be UTF-8 text without lone surrogates (``\\ud800``): such text cannot be stored, so it is refused
  here with a 400 for every route alike, instead of failing deep in a service.

Routes that take documents mark themselves with ``@large_body`` and get the larger upload cap.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Receive, Scope, Send

from .body_limit import call_with_body_limit, carries_body, declared_length, read_capped, replaying

LARGE_BODY_ATTR = "__booku_large_body__"
_FORM_TYPES = (b"application/x-www-form-urlencoded", b"multipart/form-data")
# A JSON escape of a UTF-16 surrogate: only then can the parsed text hold a lone one (raw ones are not valid UTF-8).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")

Responder = Callable[[Request], Response]


def flat_routes(routes: Iterable[BaseRoute]) -> list[BaseRoute]:
    """Every route of an app as one flat list of matchable routes with their full paths.

    FastAPI 0.16x keeps included routers as nested, lazily built entries (``iter_route_contexts`` flattens them);
    older FastAPI copied the routes of an included router into the app, which are flat already.
    """
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:
        return list(routes)
    return [context.route for context in iter_route_contexts(list(routes))]


def large_body(endpoint: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a route as taking documents: its body may be as large as the upload cap, not the ordinary one."""
    setattr(endpoint, LARGE_BODY_ATTR, True)
    return endpoint


@dataclass(frozen=True)
class BodyCaps:
    """Body caps in bytes: ``ordinary`` for every route, ``large`` for routes marked ``@large_body``."""

    ordinary: int
    large: int

    def for_route(self, route: BaseRoute | None) -> int:
        """The cap of the route a request goes to (unknown routes get the ordinary one)."""
        return self.large if getattr(getattr(route, "endpoint", None), LARGE_BODY_ATTR, False) else self.ordinary


def size_text(limit: int) -> str:
    """A byte count for people: ``1 MB``, ``256 KB``."""
    if limit >= 1024 * 1024 and limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MB"
    return f"{max(limit // 1024, 1)} KB"


def json_text_problem(body: bytes) -> str:
    """Why a JSON body's text cannot be used ("" when it can): not UTF-8, or a string with a lone surrogate."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return "请求体必须是 UTF-8 编码的 JSON"
    if not _SURROGATE_ESCAPE.search(body):
        return ""
    try:
        parsed = json.loads(body)
    except ValueError:
        return ""  # malformed JSON: the route answers that with its own validation error
    try:
        json.dumps(parsed, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "请求体含有无法存储的文本：JSON 字符串里不能有单独的代理码位（如 \\ud800），请只发送合法的 Unicode 文本"
    return ""


def _is_form(scope: Scope) -> bool:
    content_type = next((value for name, value in scope.get("headers", ()) if name.lower() == b"content-type"), b"")
    return content_type.lower().lstrip().startswith(_FORM_TYPES)


class DashboardGate:
    """See the module docstring. Built by ``create_dashboard_app``; ``reject(request, status, message)`` and
    ``unauthenticated(request)`` answer in the app's own error format (JSON, the ``/api/v1`` envelope, or a page)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        routes: Iterable[BaseRoute],
        public_endpoints: Iterable[Callable[..., Any]],
        public_mounts: Iterable[str],
        auth: Any,
        caps: BodyCaps,
        reject: Callable[[Request, int, str], Response],
        unauthenticated: Responder,
    ) -> None:
        self.app = app
        self._declared_routes = routes
        self._routes: list[BaseRoute] | None = None
        self.public_endpoints = set(public_endpoints)
        self.public_mounts = set(public_mounts)
        self.auth = auth
        self.caps = caps
        self.reject = reject
        self.unauthenticated = unauthenticated

    def _route(self, scope: Scope) -> BaseRoute | None:
        if self._routes is None:  # built on the first request, when every router has been included
            self._routes = flat_routes(self._declared_routes)
        partial = None
        for route in self._routes:
            match, _ = route.matches(scope)
            if match is Match.FULL:
                return route
            if match is Match.PARTIAL and partial is None:
                partial = route  # right path, other method: the app answers 405, the cap is still this route's
        return partial

    def _is_public(self, route: BaseRoute | None) -> bool:
        return (
            getattr(route, "endpoint", None) in self.public_endpoints
            or getattr(route, "name", None) in self.public_mounts
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)

        async def answer(response: Response) -> None:
            await response(scope, receive, send)

        route = self._route(scope)
        if not self._is_public(route):
            context = await self.auth.identify(request)
            if context is None:
                await answer(self.unauthenticated(request))
                return
            request.state.auth = context
        limit = self.caps.for_route(route)
        too_large = f"请求体过大：此接口最多接受 {size_text(limit)}"
        try:
            declared = declared_length(scope)
        except ValueError:
            await answer(self.reject(request, 400, "请求头 Content-Length 不合法"))
            return
        if declared is not None and declared > limit:
            await answer(self.reject(request, 413, too_large))
            return
        if not carries_body(scope) or _is_form(scope):
            await call_with_body_limit(
                self.app,
                scope,
                receive,
                send,
                limit=limit,
                too_large=lambda: answer(self.reject(request, 413, too_large)),
            )
            return
        body = await read_capped(receive, limit)
        if body is None:
            await answer(self.reject(request, 413, too_large))
            return
        problem = json_text_problem(body)
        if problem:
            await answer(self.reject(request, 400, problem))
            return
        await self.app(scope, replaying(body, receive), send)

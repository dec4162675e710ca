"""FastAPI dependencies shared by the JSON API and the pages: the services and the auth context.

Routes never touch a store: they get a service view from the runtime the app was built with. The runtime is looked
up per request through ``runtime_provider`` because in the host the router is created before the plugin's
runtime has started (and it may be restarted underneath a long-lived app).
"""

from __future__ import annotations

from typing import Any, Protocol

from fastapi import HTTPException, Request

from ..services.scope import Scope

DASHBOARD_ACTOR = "dashboard"


class DashboardRuntime(Protocol):
    """What the dashboard needs from a ``BookuRuntime``."""

    config: Any
    default_scope: Scope

    def memory_service(self, scope: Scope | None = None) -> Any: ...

    def knowledge_service(self, scope: Scope | None = None) -> Any: ...


def current_runtime(request: Request) -> DashboardRuntime:
    """The runtime behind this app, or 503 when it is not running (yet)."""
    runtime = request.app.state.runtime_provider()
    if runtime is None:
        raise HTTPException(status_code=503, detail="记忆服务尚未启动，请稍后再试")
    return runtime


def dashboard_scope(runtime: DashboardRuntime) -> Scope:
    """The runtime's stores, written with human authority as ``dashboard``.

    Every edit made here is then recorded in the history (and audit log) as a human curator's decision, not as
    something the bot wrote.
    """
    return runtime.default_scope.acting(authority="human", actor=DASHBOARD_ACTOR)


def memory_service(request: Request) -> Any:
    """A fresh ``BookuMemoryService`` view (services are cheap views on the runtime)."""
    runtime = current_runtime(request)
    return runtime.memory_service(dashboard_scope(runtime))


def knowledge_service(request: Request) -> Any:
    """A fresh ``BookuKnowledgeService`` view."""
    runtime = current_runtime(request)
    return runtime.knowledge_service(dashboard_scope(runtime))


async def api_auth(request: Request) -> Any:
    """Router dependency for ``/api/*``: 401 JSON when unauthenticated, CSRF enforced for cookie sessions."""
    return await request.app.state.auth.require_api(request)


async def page_auth(request: Request) -> Any:
    """Router dependency for HTML pages: redirect to login when unauthenticated, CSRF enforced on forms."""
    return await request.app.state.auth.require_page(request)

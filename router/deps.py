"""FastAPI dependencies shared by the JSON API and the pages: the store selection, the services and the auth context.

Routes never touch a store: they get a service view from the runtime the app was built with. The runtime is looked
up per request through ``runtime_provider`` because in the host the router is created before the plugin's
runtime has started (and it may be restarted underneath a long-lived app).

Every service view acts through ``admin_scope(selected stores)`` with human authority as ``dashboard``: reads see
exactly the stores the administrator selected, and a change is written to the store of the record it changes (the
service refuses records outside its writable store), so curating one chat's memories never spills into another.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass, replace
from typing import Any, Protocol

from fastapi import Depends, HTTPException, Request

from ..services.chat_scope import admin_scope
from ..services.errors import NotFoundError, ValidationError
from ..services.scope import SHARED_STORE, Scope
from ..services.store_keys import OwnerMap
from ..services.store_locator import StoreLocator

DASHBOARD_ACTOR = "dashboard"
STORE_PARAM = "store"
STORE_COOKIE = "booku_stores"
ALL_STORES = "all"
_SHOWN_IN_ERRORS = 12


class DashboardRuntime(Protocol):
    """What the dashboard needs from a ``BookuRuntime``."""

    config: Any
    db: Any
    default_scope: Scope

    def memory_service(self, scope: Scope | None = None) -> Any: ...

    def knowledge_service(self, scope: Scope | None = None) -> Any: ...


def current_runtime(request: Request) -> DashboardRuntime:
    """The runtime behind this app, or 503 when it is not running (yet)."""
    runtime = request.app.state.runtime_provider()
    if runtime is None:
        raise HTTPException(status_code=503, detail="记忆服务尚未启动，请稍后再试")
    return runtime


def owner_map(runtime: DashboardRuntime) -> OwnerMap:
    """Memo owners per store for this runtime (its default scope and the configured default owner)."""
    default = runtime.default_scope
    owners = (default.owner_uid, runtime.config.scope.default_owner)
    return OwnerMap(
        default_store=default.writable_store_key,
        default_owners=tuple(dict.fromkeys(owner for owner in owners if owner)),
    )


@dataclass(frozen=True)
class StoreSelection:
    """The stores in use and the ones the administrator chose to look at (all of them unless narrowed)."""

    available: tuple[str, ...]
    selected: tuple[str, ...]
    default_store: str = SHARED_STORE

    @property
    def is_all(self) -> bool:
        """True when every store in use is selected (the default)."""
        return set(self.selected) >= set(self.available)

    @property
    def write_store(self) -> str:
        """Where new memories and documents go: the one selected store, else the default store if selected."""
        if len(self.selected) == 1 or self.default_store not in self.selected:
            return self.selected[0]
        return self.default_store

    def scope(self, write_store: str | None = None) -> Scope:
        """``admin_scope`` over the selection, writing to ``write_store`` (which must be one of the selected)."""
        target = write_store or self.write_store
        if target not in self.selected:
            # admin_scope would add the write store to the readable ones: never widen the selection that way.
            raise NotFoundError(f"记忆库 {target} 不在当前选择的记忆库中")
        return admin_scope(self.selected, write_store=target, actor=DASHBOARD_ACTOR)

    def as_dict(self) -> dict[str, Any]:
        """JSON form for ``GET /api/stores``."""
        return {
            "available": list(self.available),
            "selected": list(self.selected),
            "all": self.is_all,
            "write_store": self.write_store,
        }


def encode_store_cookie(selected: list[str] | None) -> str:
    """Cookie value of a selection preference (``None`` = all stores, also those that appear later)."""
    payload = json.dumps(ALL_STORES if selected is None else selected, ensure_ascii=False, separators=(",", ":"))
    return base64.urlsafe_b64encode(payload.encode("utf-8")).decode("ascii").rstrip("=")


def decode_store_cookie(value: str | None) -> list[str] | None:
    """The stores remembered in the cookie, ``None`` for "all" or an unreadable cookie (a preference, not a secret)."""
    if not value:
        return None
    try:
        decoded = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, binascii.Error):
        return None
    if isinstance(decoded, list) and all(isinstance(item, str) for item in decoded):
        return decoded
    return None


def _unknown_store_error(unknown: list[str], available: tuple[str, ...]) -> ValidationError:
    shown = "、".join(available[:_SHOWN_IN_ERRORS]) + ("……" if len(available) > _SHOWN_IN_ERRORS else "")
    return ValidationError(f"store 取值 {', '.join(repr(key) for key in unknown)} 不是在用的记忆库，可选：all、{shown}")


def resolve_selection(
    available: list[str], default_store: str, requested: list[str] | None, *, strict: bool
) -> StoreSelection:
    """The selection from requested store keys (``None``/``all`` = every store).

    ``strict`` (an explicit ``?store=``) rejects unknown keys with a 400; a remembered cookie just drops stores that
    are no longer in use and falls back to all when none is left.
    """
    every = tuple(available)
    if requested is None or ALL_STORES in requested:
        return StoreSelection(every, every, default_store)
    wanted = [key for key in dict.fromkeys(key.strip() for key in requested) if key]
    unknown = [key for key in wanted if key not in every]
    if unknown and strict:
        raise _unknown_store_error(unknown, every)
    chosen = tuple(key for key in every if key in wanted)
    return StoreSelection(every, chosen or every, default_store)


async def store_selection(request: Request) -> StoreSelection:
    """The stores this request reads: ``?store=`` (repeatable, or ``all``), else the remembered preference, else all.

    Cached per request by FastAPI and kept on ``request.state`` so every page can draw the selector.
    """
    runtime = current_runtime(request)
    owners = owner_map(runtime)
    available = await StoreLocator(runtime.db).stores_in_use(owners)
    requested = [value for value in request.query_params.getlist(STORE_PARAM)]
    if requested:
        selection = resolve_selection(available, owners.default_store, requested, strict=True)
    else:
        remembered = decode_store_cookie(request.cookies.get(STORE_COOKIE))
        selection = resolve_selection(available, owners.default_store, remembered, strict=False)
    request.state.stores = selection
    return selection


class DashboardServices:
    """Service views for one request, each acting through ``admin_scope`` over the selected stores.

    ``memory``/``knowledge`` read the selection and create in ``selection.write_store``; the ``*_for`` helpers give
    a view whose writable store is the store of the thing being changed (404 when it is not in the selection).
    """

    def __init__(self, runtime: DashboardRuntime, selection: StoreSelection) -> None:
        self.runtime = runtime
        self.selection = selection
        self.locator = StoreLocator(runtime.db)

    @property
    def memory(self) -> Any:
        """Memory service over the selection."""
        return self.runtime.memory_service(self.selection.scope())

    @property
    def knowledge(self) -> Any:
        """Knowledge service over the selection."""
        return self.runtime.knowledge_service(self.selection.scope())

    def memory_in(self, store_key: str) -> Any:
        """Memory service over the selection that writes to ``store_key``."""
        return self.runtime.memory_service(self.selection.scope(store_key))

    async def memory_for(self, memory_id: str) -> Any:
        """A memory service that may change ``memory_id`` (its own store); 404 when it is not in the selection."""
        found = await self.locator.memory_stores([memory_id], self.selection.selected)
        if memory_id not in found:
            raise NotFoundError(f"未找到记忆: {memory_id}")
        return self.memory_in(found[memory_id])

    async def store_of_memory(self, memory_id: str) -> str | None:
        """The store a memory lives in, if it is one of the selected stores (shown on its detail page)."""
        return (await self.locator.memory_stores([memory_id], self.selection.selected)).get(memory_id)

    async def memory_groups(self, memory_ids: list[str]) -> list[tuple[Any, list[str]]]:
        """The ids grouped by store, each group with a service writing to that store.

        Ids outside the selection go with the default write store, whose service reports them as ``missing``.
        """
        found = await self.locator.memory_stores(memory_ids, self.selection.selected)
        groups: dict[str, list[str]] = {}
        for memory_id in memory_ids:
            groups.setdefault(found.get(memory_id, self.selection.write_store), []).append(memory_id)
        return [(self.memory_in(store_key), ids) for store_key, ids in groups.items()]

    async def knowledge_for(self, document_id: str) -> Any:
        """A knowledge service that may delete ``document_id``; 404 when it is not in the selection."""
        store_key = await self.locator.document_store(document_id, self.selection.selected)
        if store_key is None:
            raise NotFoundError(f"未找到文档: {document_id}")
        return self.runtime.knowledge_service(self.selection.scope(store_key))

    async def memory_for_audit(self, audit_id: int) -> tuple[Any, str]:
        """A memory service writing to the store of one audit row, and the row's memory id; 404 outside the
        selection."""
        location = await self.locator.audit_location(audit_id, self.selection.selected)
        if location is None:
            raise NotFoundError(f"审计记录 {audit_id} 不存在")
        store_key, memory_id = location
        return self.memory_in(store_key), memory_id

    async def memory_for_batch(self, batch_id: str) -> list[tuple[str, Any]]:
        """``(store, service)`` for every selected store holding rows of ``batch_id``; 404 when there are none."""
        found = await self.locator.batch_stores(batch_id, self.selection.selected)
        if not found:
            raise NotFoundError(f"批次 {batch_id} 没有可恢复的审计记录")
        return [(store_key, self.memory_in(store_key)) for store_key in found]

    def memo_services(self) -> list[tuple[str, Any]]:
        """``(store, service)`` per memo owner of the selected stores (memos are kept per owner, not per store)."""
        owners = owner_map(self.runtime)
        views: list[tuple[str, Any]] = []
        for store_key in self.selection.selected:
            for owner in owners.owners_of(store_key):
                scope = replace(self.selection.scope(store_key), owner_uid=owner)
                views.append((store_key, self.runtime.memory_service(scope)))
        return views


async def dashboard_services(
    request: Request, selection: StoreSelection = Depends(store_selection)
) -> DashboardServices:
    """The per-request service views (see ``DashboardServices``)."""
    return DashboardServices(current_runtime(request), selection)


def memory_service(services: DashboardServices = Depends(dashboard_services)) -> Any:
    """A fresh ``BookuMemoryService`` view over the selected stores (services are cheap views on the runtime)."""
    return services.memory


def knowledge_service(services: DashboardServices = Depends(dashboard_services)) -> Any:
    """A fresh ``BookuKnowledgeService`` view over the selected stores."""
    return services.knowledge


async def api_auth(request: Request) -> Any:
    """Router dependency for ``/api/*``: 401 JSON when unauthenticated, CSRF enforced for cookie sessions."""
    return await request.app.state.auth.require_api(request)


async def page_auth(request: Request) -> Any:
    """Router dependency for HTML pages: redirect to login when unauthenticated, CSRF enforced on forms."""
    return await request.app.state.auth.require_page(request)

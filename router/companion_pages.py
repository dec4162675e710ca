"""Companion pages of the dashboard (Chinese UI, no JavaScript): plans, letters and the self-knowledge "I".

Everything goes through ``BookuCompanionService`` built on the dashboard's ``admin_scope`` with ``side="user"``: the
dashboard speaks for the user, so letter locks are decided by the service exactly as they are for the user's side
(a locked body never reaches this module, let alone a template). Like the other pages, every change is a CSRF-checked
POST answered by a 303 with a fixed notice code; a refused change shows the service's own Chinese message on the page.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response

from ..services.companion import BookuCompanionService
from ..services.companion.letters import LOCK_LABELS, LOCK_TYPES, UNLOCK_FORMATS_HINT
from ..services.companion.plans import PLAN_STATUSES
from ..services.companion.rendering import ASPECT_LABELS
from ..services.companion.self_knowledge import WITNESS_DATES_REQUIRED
from ..services.errors import BookuError, NotFoundError, ValidationError
from .deps import DashboardServices, dashboard_services, page_auth, store_selection
from .rendering import render, root_path

# The dashboard is the user's own interface: it holds the user's letter keys, never the AI's.
DASHBOARD_SIDE = "user"
USER_AUTHOR = "user"
LETTER_PAGE_LIMIT = 50
SELF_PAGE_LIMIT = 100
PERMANENT_CONFIRM_FIELD = "confirm_permanent"

PLAN_STATUS_LABELS: dict[str, str] = {"active": "进行中", "resolved": "已完成", "abandoned": "已放弃"}
COMPANION_NOTICES: dict[str, str] = {
    "plan_status": "计划状态已更新（改动记入历史版本）",
    "letter_written": "信已写下，原文永久保存",
    "lock_changed": "信的锁已更新（只动了锁，标题、正文、署名和时间都没变）",
    "lock_unchanged": "锁本来就是这样，未改动",
}

# Authentication first: the store selection reads the database and must not run for anonymous requests.
router = APIRouter(prefix="/companion", dependencies=[Depends(page_auth), Depends(store_selection)])
Services = Annotated[DashboardServices, Depends(dashboard_services)]


def companion_service(services: DashboardServices, store_key: str | None = None) -> BookuCompanionService:
    """The companion service for the user's side over the selected stores, writing to ``store_key`` (default: the
    selection's write store)."""
    return BookuCompanionService(services.runtime, services.selection.scope(store_key), side=DASHBOARD_SIDE)


def _notice(request: Request) -> str:
    return COMPANION_NOTICES.get(request.query_params.get("notice", ""), "")


def _redirect(request: Request, path: str, notice: str) -> RedirectResponse:
    return RedirectResponse(f"{root_path(request)}/companion{path}?{urlencode({'notice': notice})}", status_code=303)


def _text(form: Mapping[str, Any], name: str) -> str:
    value = form.get(name)
    return value.strip() if isinstance(value, str) else ""


def _require_permanent_confirmation(form: Mapping[str, Any], lock_type: str) -> None:
    """Permanent sealing cannot be undone by anyone, so the form must say it was meant (a checkbox, no script)."""
    if lock_type == "permanent" and form.get(PERMANENT_CONFIRM_FIELD) != "1":
        raise ValidationError(
            "lock_type=permanent 是终态：封存后谁都读不到正文（包括你自己），锁也不能再改；"
            "确定要这样做请勾选「我明白永久封存无法撤销」"
        )


# ---------------------------------------------------------------------------------------------------------- plans


async def _plans(services: DashboardServices) -> list[dict[str, Any]]:
    """Every plan of the selected stores with its full text: active first, then heaviest first.

    pulse is the service read that lists plans in every state (dream shows only the active ones); it leaves bodies
    out, so they are read in one call through the memory service over the same selection.
    """
    listed = (await companion_service(services).pulse()).get("items") or []
    plans = [dict(item) for item in listed if item.get("kind") == "plan"]
    if plans:
        full = await services.memory.read_full_content(memory_ids=[plan["id"] for plan in plans])
        bodies = {str(item.get("id")): str(item.get("content") or "") for item in full.get("items") or []}
        for plan in plans:
            plan["content"] = bodies.get(plan["id"], plan.get("title") or "")
    order = {status: rank for rank, status in enumerate(PLAN_STATUSES)}
    plans.sort(
        key=lambda p: (
            order.get(p.get("plan_status", "active"), len(order)),
            -float(p.get("weight") or 0.0),
            float(p.get("created_at") or 0.0),
        )
    )
    return plans


async def _plans_page(
    request: Request, services: DashboardServices, wanted: str, *, error: str = "", status_code: int = 200
) -> Response:
    plans = await _plans(services)
    counts = {status: sum(1 for p in plans if p.get("plan_status") == status) for status in PLAN_STATUSES}
    shown = [p for p in plans if not wanted or p.get("plan_status") == wanted]
    return render(
        request,
        "companion_plans.html",
        {
            "nav": "companion_plans",
            "plans": shown,
            "counts": counts,
            "total": len(plans),
            "wanted": wanted,
            "statuses": PLAN_STATUSES,
            "status_labels": PLAN_STATUS_LABELS,
            "notice": _notice(request),
            "error": error,
        },
        status_code=status_code,
    )


@router.get("/plans")
async def plans_page(request: Request, services: Services, status: Annotated[str, Query()] = "") -> Response:
    """Plans in every state, filterable by state, each with a form to change its state."""
    wanted = status if status in PLAN_STATUSES else ""
    return await _plans_page(request, services, wanted)


@router.post("/plans/{plan_id}/status")
async def plan_status_submit(request: Request, plan_id: str, services: Services) -> Response:
    """Set a plan's state through ``trace(plan_id, status=...)`` in the plan's own store."""
    form = await request.form()
    found = await services.locator.memory_stores([plan_id], services.selection.selected)
    if plan_id not in found:
        raise NotFoundError(f"未找到计划: {plan_id}")
    try:
        await companion_service(services, found[plan_id]).trace(plan_id, status=_text(form, "status"))
    except BookuError as exc:
        if isinstance(exc, NotFoundError):
            raise
        return await _plans_page(request, services, "", error=str(exc), status_code=400)
    return _redirect(request, "/plans", "plan_status")


# -------------------------------------------------------------------------------------------------------- letters


def _blank_letter() -> dict[str, str]:
    return {"title": "", "content": "", "user_name": "", "lock_type": "none", "unlock_date": ""}


async def _letters_page(
    request: Request,
    services: DashboardServices,
    *,
    query: str = "",
    values: dict[str, str] | None = None,
    error: str = "",
    status_code: int = 200,
) -> Response:
    # Only the service decides what the user's side may read: locked items arrive without title and body.
    result = await companion_service(services).letter_read(query=query or None, limit=LETTER_PAGE_LIMIT)
    return render(
        request,
        "companion_letters.html",
        {
            "nav": "companion_letters",
            "letters": result.get("items") or [],
            "query": query,
            "degraded": result.get("degraded") or "",
            "values": values or _blank_letter(),
            "lock_types": LOCK_TYPES,
            "lock_labels": LOCK_LABELS,
            "unlock_hint": UNLOCK_FORMATS_HINT,
            "write_store": services.selection.write_store,
            "notice": _notice(request),
            "error": error,
        },
        status_code=status_code,
    )


@router.get("/letters")
async def letters_page(request: Request, services: Services, q: Annotated[str, Query()] = "") -> Response:
    """The newest letters (or those matching ``q`` among the readable ones), the write form and the lock forms."""
    return await _letters_page(request, services, query=q.strip())


@router.post("/letters/write")
async def letter_write_submit(request: Request, services: Services) -> Response:
    """Write a letter signed by the user into the selection's write store; on refusal show the form again."""
    form = await request.form()
    values = {**_blank_letter(), **{name: _text(form, name) for name in _blank_letter()}}
    content = form.get("content")
    values["content"] = content if isinstance(content, str) else ""
    lock_type = values["lock_type"] or "none"
    try:
        _require_permanent_confirmation(form, lock_type)
        await companion_service(services).letter_write(
            USER_AUTHOR,
            values["content"],
            title=values["title"] or None,
            user_name=values["user_name"] or None,
            lock_type=lock_type,
            unlock_date=values["unlock_date"] or None,
        )
    except BookuError as exc:
        return await _letters_page(request, services, values=values, error=str(exc), status_code=400)
    return _redirect(request, "/letters", "letter_written")


@router.post("/letters/{letter_id}/lock")
async def letter_lock_submit(request: Request, letter_id: str, services: Services) -> Response:
    """Change a letter's lock through ``letter_lock_update`` in whichever selected store holds it.

    Letter items do not name their store, so each selected store is asked in turn; the service only finds the
    letter in its writable store and refuses the other side's letters with a Chinese message shown on the page.
    """
    form = await request.form()
    lock_type = _text(form, "lock_type")
    unlock_date = _text(form, "unlock_date") or None
    try:
        _require_permanent_confirmation(form, lock_type)
        result: dict[str, Any] | None = None
        missing: NotFoundError | None = None
        for store_key in services.selection.selected:
            try:
                result = await companion_service(services, store_key).letter_lock_update(
                    letter_id, lock_type, unlock_date
                )
                break
            except NotFoundError as exc:
                missing = exc
        if result is None:
            raise missing or NotFoundError(f"未找到信件: {letter_id}")
    except BookuError as exc:
        return await _letters_page(
            request, services, error=str(exc), status_code=404 if isinstance(exc, NotFoundError) else 400
        )
    return _redirect(request, "/letters", "lock_changed" if result.get("changed") else "lock_unchanged")


# --------------------------------------------------------------------------------------------------- self ("I")


@router.get("/self")
async def self_page(request: Request, services: Services) -> Response:
    """Formal self-knowledge entries (current beliefs), candidates with their witness dates, and retired entries."""
    result = await companion_service(services).self_knowledge(read=True, limit=SELF_PAGE_LIMIT)
    return render(
        request,
        "companion_self.html",
        {
            "nav": "companion_self",
            "formal": result.get("formal") or [],
            "candidates": result.get("candidates") or [],
            "superseded": result.get("superseded") or [],
            "aspect_labels": ASPECT_LABELS,
            "witnesses_required": WITNESS_DATES_REQUIRED,
            "notice": _notice(request),
        },
    )

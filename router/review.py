"""The review queue of dreaming proposals and the chat evidence behind them: pages and a JSON API.

Pages (session cookie, CSRF token on every form, post/redirect/get like the other pages):

* ``GET /review``: pending proposals, memories flagged after a retraction, unsure pairs of memories ("可能是更新 /
  可能重复", with one-click accept or dismiss), dreaming status;
* ``GET /review/proposals/{id}``: one proposal beside its evidence (cited messages, episodes with their messages,
  the memory an update would change), with approve, edit-then-approve and reject (with reason) forms;
* ``GET /review/evidence``: the recorded chat of the selected stores, with a retract button per message (asks for
  confirmation on a page of its own first).

JSON API under ``/api/review`` (``X-API-Key`` or session + ``X-CSRF-Token``), same operations. Everything acts
through ``admin_scope(selected stores)``, i.e. with ``human`` authority as ``dashboard``; services do the work.
"""

from __future__ import annotations

from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import RedirectResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from ..services.errors import BookuError, ValidationError
from ..services.evidence import EvidenceService, ReviewService
from ..services.evidence.prompts import TAG_GROUPS
from ..services.evidence.review import EDITABLE_FIELDS, FLAG_RESOLUTIONS
from ..services.evidence.unsure_pairs import UnsurePairs
from ..services.memory_fields import MEMORY_TYPES
from .deps import DashboardServices, api_auth, dashboard_services, page_auth, store_selection
from .rendering import render, root_path

Services = Annotated[DashboardServices, Depends(dashboard_services)]

pages = APIRouter(dependencies=[Depends(page_auth), Depends(store_selection)])
api = APIRouter(prefix="/api/review", dependencies=[Depends(api_auth)])
router = APIRouter()

REVIEW_NOTICES: dict[str, str] = {
    "approved": "已批准：提案已成为记忆（人工权限写入，保留了提案来源）",
    "rejected": "已驳回：提案保留为已驳回状态，并记录了原因",
    "retracted": "已撤回该聊天消息：原文已删除，仅引用它的剧集与待审提案已一并清除，依据它的记忆已标记待复核",
    "flag_resolved": "复核标记已处理",
    "pair_accepted": "已确认：旧记忆已标记为被取代（或两条已无损合并），可在审计日志中撤销",
    "pair_dismissed": "已判定为不同的事实：两条记忆都保留，不会再次询问",
}
STATUS_LABELS: dict[str, str] = {"pending": "待审核", "approved": "已批准", "rejected": "已驳回", "withdrawn": "已撤下"}
KIND_LABELS: dict[str, str] = {"create": "新增记忆", "update": "修改记忆"}
STAGE_STATE_LABELS: dict[str, str] = {
    "ok": "正常",
    "unavailable": "不可用",
    "disabled": "已关闭",
    "error": "出错",
    "never": "尚未运行",
}
TAG_GROUP_LABELS: dict[str, str] = {
    "tags": "普通标签",
    "core_tags": "核心标签",
    "diffusion_tags": "扩散标签",
    "opposing_tags": "对立标签",
}
PAGE_SIZE_MAX = 200


def _review(services: DashboardServices) -> ReviewService:
    return ReviewService(services.runtime, services.selection.scope())


def _pairs(services: DashboardServices) -> UnsurePairs:
    return UnsurePairs(services.runtime, services.selection.scope())


def _evidence(services: DashboardServices) -> EvidenceService:
    return EvidenceService(services.runtime, services.selection.scope())


def _page_size(request: Request, page_size: int | None) -> int:
    return page_size or request.app.state.settings.page_size


def _redirect(request: Request, path: str, notice: str) -> RedirectResponse:
    return RedirectResponse(f"{root_path(request)}{path}?{urlencode({'notice': notice})}", status_code=303)


def _notice(request: Request) -> str:
    return REVIEW_NOTICES.get(request.query_params.get("notice", ""), "")


def _proposal_path(proposal_id: str) -> str:
    return f"/review/proposals/{quote(proposal_id, safe='')}"


def _labels() -> dict[str, Any]:
    return {
        "status_labels": STATUS_LABELS,
        "kind_labels": KIND_LABELS,
        "stage_labels": STAGE_STATE_LABELS,
        "memory_types": MEMORY_TYPES,
        "tag_groups": TAG_GROUPS,
        "tag_labels": TAG_GROUP_LABELS,
    }


def edits_from_form(form: Any, proposal: dict[str, Any]) -> dict[str, Any]:
    """The fields of the edit-then-approve form that differ from the proposal (tags comma-separated)."""
    edits: dict[str, Any] = {}
    fields = proposal.get("fields") or {}
    for name in EDITABLE_FIELDS:
        raw = form.get(name)
        if not isinstance(raw, str):
            continue
        if name in TAG_GROUPS:
            value: Any = [part.strip() for part in raw.replace("，", ",").split(",") if part.strip()]
            if value != (fields.get(name) or []):
                edits[name] = value
        elif raw.strip() != str(fields.get(name) or ""):
            edits[name] = raw.strip()
    return edits


# ------------------------------------------------------------------------------------------------------- JSON API


class ApproveRequest(BaseModel):
    """``POST /api/review/proposals/{id}/approve``: optional edits (edit-then-approve) and a note."""

    model_config = ConfigDict(extra="forbid")

    edits: dict[str, Any] | None = None
    note: str = Field(default="", max_length=500)


class RejectRequest(BaseModel):
    """``POST /api/review/proposals/{id}/reject``: the reason is required."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=500)


class RetractRequest(BaseModel):
    """``POST /api/review/messages/{entry_id}/retract``."""

    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=500)


class ResolveFlagRequest(BaseModel):
    """``POST /api/review/flags/{flag_id}/resolve``: ``kept`` or ``deleted``."""

    model_config = ConfigDict(extra="forbid")

    resolution: str
    note: str = Field(default="", max_length=500)


@api.get("/status")
async def api_status(services: Services) -> dict[str, Any]:
    """Evidence counts, proposal counts, the chat model and the last run of each dreaming stage."""
    return await _evidence(services).status()


@api.get("/proposals")
async def api_proposals(
    request: Request,
    services: Services,
    status: str = "pending",
    batch_id: str = "",
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int | None, Query(ge=1, le=PAGE_SIZE_MAX)] = None,
) -> dict[str, Any]:
    """Proposals of the selected stores with one status (``all`` for every status), one page."""
    size = _page_size(request, page_size)
    result = await _review(services).list_proposals(
        status=None if status == "all" else status, batch_id=batch_id or None, limit=size, offset=(page - 1) * size
    )
    return {**result, "page": page, "page_size": size, "has_more": page * size < result["matched"]}


@api.get("/proposals/{proposal_id}")
async def api_proposal(proposal_id: str, services: Services) -> dict[str, Any]:
    """One proposal with its evidence side by side (see ``ReviewService.get_proposal``)."""
    return await _review(services).get_proposal(proposal_id)


@api.post("/proposals/{proposal_id}/approve")
async def api_approve(proposal_id: str, payload: ApproveRequest, services: Services) -> dict[str, Any]:
    """Approve (with ``edits``: edit-then-approve); the proposal becomes a memory written with human authority."""
    return await _review(services).approve(proposal_id, edits=payload.edits, note=payload.note)


@api.post("/proposals/{proposal_id}/reject")
async def api_reject(proposal_id: str, payload: RejectRequest, services: Services) -> dict[str, Any]:
    """Reject with a reason; the proposal is kept as rejected."""
    return await _review(services).reject(proposal_id, reason=payload.reason)


@api.get("/pairs")
async def api_pairs(services: Services, status: str = "pending") -> dict[str, Any]:
    """Unsure pairs of memories ("可能是更新 / 可能重复") with one status, both memories beside each."""
    return await _pairs(services).list_pairs(status=status)


@api.post("/pairs/{pair_id}/accept")
async def api_accept_pair(pair_id: str, services: Services) -> dict[str, Any]:
    """Apply the pair (supersede, or merge losslessly) with human authority."""
    return await _pairs(services).accept(pair_id)


@api.post("/pairs/{pair_id}/dismiss")
async def api_dismiss_pair(pair_id: str, services: Services) -> dict[str, Any]:
    """Record that the two memories are distinct facts."""
    return await _pairs(services).dismiss(pair_id)


@api.get("/flags")
async def api_flags(services: Services, open_only: bool = True) -> dict[str, Any]:
    """Memories flagged for review because their evidence was retracted."""
    return await _review(services).list_flags(open_only=open_only)


@api.post("/flags/{flag_id}/resolve")
async def api_resolve_flag(flag_id: int, payload: ResolveFlagRequest, services: Services) -> dict[str, Any]:
    """Keep the flagged memory or move it to the trash; the flag is closed."""
    return await _review(services).resolve_flag(flag_id, resolution=payload.resolution, note=payload.note)


@api.get("/messages")
async def api_messages(
    request: Request,
    services: Services,
    channel: str = "",
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int | None, Query(ge=1, le=PAGE_SIZE_MAX)] = None,
) -> dict[str, Any]:
    """Recorded chat messages of the selected stores, newest first (retracted ones without text)."""
    size = _page_size(request, page_size)
    result = await _evidence(services).list_messages(channel=channel or None, limit=size, offset=(page - 1) * size)
    return {**result, "page": page, "page_size": size, "has_more": page * size < result["matched"]}


@api.post("/messages/{entry_id}/retract")
async def api_retract(entry_id: str, payload: RetractRequest, services: Services) -> dict[str, Any]:
    """Retract a message: its bytes and what only repeats them are removed; approved memories are flagged."""
    return await _evidence(services).retract_message(entry_id, reason=payload.reason)


@api.get("/episodes")
async def api_episodes(
    services: Services, channel: str = "", limit: Annotated[int, Query(ge=1, le=PAGE_SIZE_MAX)] = 50
) -> dict[str, Any]:
    """Episodes (dreaming stage A) of the selected stores, newest first."""
    return await _evidence(services).list_episodes(channel=channel or None, limit=limit)


# ---------------------------------------------------------------------------------------------------------- pages


@pages.get("/review")
async def review_page(
    request: Request, services: Services, status: str = "pending", page: Annotated[int, Query(ge=1)] = 1
) -> Response:
    """The queue: proposals of one status (pending first), open review flags and the dreaming status."""
    chosen = status if status in STATUS_LABELS else "pending"
    size = request.app.state.settings.page_size
    review = _review(services)
    listing = await review.list_proposals(status=chosen, limit=size, offset=(page - 1) * size)
    return render(
        request,
        "review.html",
        {
            "nav": "review",
            "listing": listing,
            "status": chosen,
            "page": page,
            "has_more": page * size < listing["matched"],
            "flags": (await review.list_flags())["items"],
            "pairs": (await _pairs(services).list_pairs())["items"],
            "evidence_status": await _evidence(services).status(),
            "notice": _notice(request),
            **_labels(),
        },
    )


@pages.get("/review/proposals/{proposal_id}")
async def proposal_page(request: Request, proposal_id: str, services: Services) -> Response:
    """One proposal beside its evidence, with the decision forms (when it is still pending)."""
    detail = await _review(services).get_proposal(proposal_id)
    return render(
        request,
        "review_proposal.html",
        {"nav": "review", "detail": detail, "error": "", "notice": _notice(request), **_labels()},
    )


@pages.post("/review/proposals/{proposal_id}/approve")
async def approve_submit(request: Request, proposal_id: str, services: Services) -> Response:
    """Approve as proposed, or with the edited fields of the form (edit-then-approve)."""
    form = await request.form()
    review = _review(services)
    detail = await review.get_proposal(proposal_id)
    edits = edits_from_form(form, detail["proposal"]) if form.get("mode") == "edit" else {}
    try:
        await review.approve(proposal_id, edits=edits, note=str(form.get("note") or ""))
    except BookuError as exc:
        return render(
            request,
            "review_proposal.html",
            {"nav": "review", "detail": detail, "error": str(exc), **_labels()},
            status_code=400,
        )
    return _redirect(request, _proposal_path(proposal_id), "approved")


@pages.post("/review/proposals/{proposal_id}/reject")
async def reject_submit(request: Request, proposal_id: str, services: Services) -> Response:
    """Reject with the reason typed into the form."""
    form = await request.form()
    review = _review(services)
    try:
        await review.reject(proposal_id, reason=str(form.get("reason") or ""))
    except ValidationError as exc:
        detail = await review.get_proposal(proposal_id)
        return render(
            request,
            "review_proposal.html",
            {"nav": "review", "detail": detail, "error": str(exc), **_labels()},
            status_code=400,
        )
    return _redirect(request, _proposal_path(proposal_id), "rejected")


@pages.post("/review/flags/{flag_id}/resolve")
async def resolve_flag_submit(request: Request, flag_id: int, services: Services) -> Response:
    """Keep or trash a memory whose evidence was retracted."""
    form = await request.form()
    resolution = str(form.get("resolution") or "")
    if resolution not in FLAG_RESOLUTIONS:
        raise ValidationError(f"resolution 取值 {resolution!r} 无效，可选：{'、'.join(FLAG_RESOLUTIONS)}")
    await _review(services).resolve_flag(flag_id, resolution=resolution, note=str(form.get("note") or ""))
    return _redirect(request, "/review", "flag_resolved")


@pages.post("/review/pairs/{pair_id}/{decision}")
async def pair_submit(request: Request, pair_id: str, decision: str, services: Services) -> Response:
    """One click on an unsure pair: accept (apply it) or dismiss (distinct facts)."""
    if decision not in ("accept", "dismiss"):
        raise ValidationError(f"decision 取值 {decision!r} 无效，可选：accept、dismiss")
    pairs = _pairs(services)
    await (pairs.accept(pair_id) if decision == "accept" else pairs.dismiss(pair_id))
    return _redirect(request, "/review", "pair_accepted" if decision == "accept" else "pair_dismissed")


@pages.get("/review/evidence")
async def evidence_page(
    request: Request, services: Services, channel: str = "", page: Annotated[int, Query(ge=1)] = 1
) -> Response:
    """The recorded chat of the selected stores (one channel or all), newest first, with retract buttons."""
    size = request.app.state.settings.page_size
    evidence = _evidence(services)
    listing = await evidence.list_messages(channel=channel or None, limit=size, offset=(page - 1) * size)
    return render(
        request,
        "review_evidence.html",
        {
            "nav": "review",
            "listing": listing,
            "channel": channel,
            "page": page,
            "has_more": page * size < listing["matched"],
            "channels": (await evidence.list_channels())["items"],
            "episodes": (await evidence.list_episodes(channel=channel or None, limit=size))["items"],
            "notice": _notice(request),
        },
    )


@pages.post("/review/evidence/{entry_id}/retract")
async def retract_submit(request: Request, entry_id: str, services: Services) -> Response:
    """Retract a message. Without ``confirmed=yes`` it first shows what will be removed and asks."""
    form = await request.form()
    evidence = _evidence(services)
    if form.get("confirmed") != "yes":
        message = (await evidence.get_message(entry_id))["item"]
        return render(
            request,
            "review_confirm.html",
            {"nav": "review", "message": message, "reason": str(form.get("reason") or "")},
        )
    await evidence.retract_message(entry_id, reason=str(form.get("reason") or ""))
    return _redirect(request, "/review/evidence", "retracted")


router.include_router(api)
router.include_router(pages)

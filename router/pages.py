"""Server-rendered pages (Chinese UI, no JavaScript): login, memories, search, history, trash, knowledge, memos,
stats, audit log and recall preview.

Every state change is a POST form carrying the session's CSRF token and answers with a 303 redirect (post/redirect/
get), so reloading a page never repeats an action. Success messages travel as a fixed ``notice`` code, never as
free text in the URL. Every page reads the stores picked in the store selector (remembered in a cookie); undoing
audited changes asks for confirmation on a page of its own, since the dashboard runs no script that could pop up a
dialog.
"""

from __future__ import annotations

import secrets
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile
from fastapi.responses import RedirectResponse, Response

from ..services.errors import BookuError, ValidationError
from ..services.knowledge_files import SUPPORTED_SUFFIXES
from ..services.scope import AUTHORITIES
from ..services.typed_recall import CATEGORIES, DEFAULT_QUOTAS, PEER_SCOPES
from . import operations
from .auth import CSRF_FORM_FIELD, LOGIN_CSRF_COOKIE, SESSION_COOKIE, keys_equal
from .deps import (
    STORE_COOKIE,
    STORE_PARAM,
    DashboardServices,
    StoreSelection,
    current_runtime,
    dashboard_services,
    encode_store_cookie,
    knowledge_service,
    memory_service,
    page_auth,
    resolve_selection,
    store_selection,
)
from .forms import read_form
from .gate import large_body
from .memory_form import PERSON_TYPES, memory_form_errors
from .operations import AuditFilters, MemoryFilters
from .payloads import (
    MEMORY_FIELDS,
    TIME_FIELDS,
    changed_memory_fields,
    current_memory_fields,
    memory_fields_from_form,
    read_upload,
    recall_form_arguments,
)
from .rendering import (
    AUDIT_ACTIONS,
    datetime_local_value,
    location_without,
    render,
    root_path,
)

public_router = APIRouter()
# Authentication first: the store selection reads the database and must not run for anonymous requests.
router = APIRouter(dependencies=[Depends(page_auth), Depends(store_selection)])

MemoryService = Annotated[Any, Depends(memory_service)]
KnowledgeService = Annotated[Any, Depends(knowledge_service)]
Services = Annotated[DashboardServices, Depends(dashboard_services)]
Selection = Annotated[StoreSelection, Depends(store_selection)]

NOTICES: dict[str, str] = {
    "created": "已创建记忆",
    "merged": "内容与已有记忆高度重复，已合并到该记忆（旧版本保留在历史中）",
    "saved": "已保存修改",
    "unchanged": "没有需要保存的修改",
    "deleted": "已移入回收站，可在回收站恢复",
    "restored": "已从回收站恢复",
    "archived": "已归档",
    "purged": "已永久删除",
    "reverted": "已回滚到所选版本（回滚本身也记录为一个新版本）",
    "unsuperseded": "已撤销取代：这条记忆重新算作当前事实（操作已记入审计）",
    "bulk": "批量操作已完成",
    "uploaded": "文档已入库",
    "reingested": "已有同名或同内容的文档，已按上传的文件重新入库（旧版本保留在文档历史中）",
    "upload_unchanged": "这份文档已经入库且内容没有变化，没有重复入库",
    "document_deleted": "文档及其全部片段已删除",
    "memo_cancelled": "临时便签已取消",
    "reindex_started": "已开始重建索引：完成前检索只走关键词路线，进度见下方",
    "logged_out": "已退出登录",
    "stores": "已切换要查看的记忆库",
    "audit_restored": "已恢复到该改动之前的状态（恢复本身也记入审计日志）",
    "batch_restored": "已撤销整个批次的改动（恢复本身也记入审计日志）",
}
SCORE_PART_LABELS: dict[str, str] = {
    "vector": "向量相似度",
    "semantic": "向量相似度",
    "keyword": "关键词",
    "fts": "关键词",
    "fusion": "融合",
    "rrf": "融合",
    "core_boost": "核心标签加成",
    "core": "核心标签加成",
    "diffusion_boost": "扩散标签加成",
    "diffusion": "扩散标签加成",
    "opposing_penalty": "对立标签惩罚",
    "opposing": "对立标签惩罚",
    "epa": "EPA 重塑",
    "recency": "时间",
    "activation": "激活",
    "time": "日期匹配",
    "neighbour": "相邻与问答加成",
    "shape": "文本形态",
    "lead": "关键词挑战领先",
    "speaker": "提问所指说话人加成",
    "cosine": "余弦相似度",
    "bm25": "BM25",
    "keyword_z": "关键词标准分",
    "keyword_weight": "关键词权重",
    "fused": "融合分",
}


def notice_text(request: Request) -> str:
    """The message for a ``?notice=`` code (unknown codes show nothing)."""
    return NOTICES.get(request.query_params.get("notice", ""), "")


def safe_return_path(request: Request, candidate: str | None, default: str = "/memories") -> str:
    """``candidate`` if it is a path inside this app, else the default page (no open redirects)."""
    root = root_path(request)
    if candidate and candidate.startswith(f"{root}/") and not candidate.startswith("//") and "\\" not in candidate:
        return candidate
    return f"{root}{default}"


def redirect_to(request: Request, path: str, notice: str = "") -> RedirectResponse:
    """303 to a page of this app (``path`` relative to the mount prefix), optionally with a notice code."""
    suffix = f"?{urlencode({'notice': notice})}" if notice else ""
    return RedirectResponse(f"{root_path(request)}{path}{suffix}", status_code=303)


def memory_path(memory_id: str) -> str:
    """The detail page path of a memory (the id quoted, whatever it contains)."""
    return f"/memories/{quote(memory_id, safe='')}"


def current_location(request: Request) -> str:
    """This page's path and query without a ``notice`` (where forms on it send the user back to)."""
    return location_without(request, ("notice",))


def _with_notice(target: str, notice: str) -> str:
    separator = "&" if "?" in target else "?"
    return f"{target}{separator}{urlencode({'notice': notice})}"


def _set_private_cookie(response: Response, request: Request, name: str, value: str, max_age: int) -> None:
    """A cookie only this app's pages get: HTTP-only, SameSite=Strict, scoped to the mount prefix, Secure on HTTPS."""
    response.set_cookie(
        name,
        value,
        max_age=max_age,
        path=root_path(request) or "/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def _forget_cookie(response: Response, request: Request, name: str) -> None:
    response.delete_cookie(name, path=root_path(request) or "/", httponly=True, samesite="strict")


# --------------------------------------------------------------------------------------------------- login

LOGIN_TOKEN_SECONDS = 3600


def _login_page(request: Request, next_path: str, *, error: str = "", status_code: int = 200) -> Response:
    """The login form with a fresh one-off token, also set as a cookie: a foreign site can post the form but
    cannot know the token, so it cannot log the browser into a session of its choosing."""
    token = secrets.token_urlsafe(24)
    response = render(
        request,
        "login.html",
        {"login_token": token, "next": next_path, "error": error, "notice": notice_text(request)},
        status_code=status_code,
    )
    _set_private_cookie(response, request, LOGIN_CSRF_COOKIE, token, LOGIN_TOKEN_SECONDS)
    return response


@public_router.get("/login")
async def login_form(request: Request, next: str = "") -> Response:
    """The login form (or straight on, when the browser already has a valid session)."""
    if await request.app.state.auth.identify(request) is not None:
        return RedirectResponse(safe_return_path(request, next), status_code=303)
    return _login_page(request, next)


@public_router.post("/login")
async def login_submit(
    request: Request,
    api_key: Annotated[str, Form()] = "",
    next: Annotated[str, Form()] = "",
    csrf_token: Annotated[str, Form(alias=CSRF_FORM_FIELD)] = "",
) -> Response:
    """Check the key; on success set the signed session cookie and go where the user was heading.

    Wrong keys are slowed down by the key's guess throttle (shared with the ``X-API-Key`` header: one secret, one
    budget); the right key is never refused, however many wrong guesses others sent from the same address.
    """
    auth = request.app.state.auth
    expected_token = request.cookies.get(LOGIN_CSRF_COOKIE, "")
    if not expected_token or not csrf_token or not keys_equal(csrf_token, expected_token):
        return _login_page(request, next, error="登录表单已失效，请重新输入密钥", status_code=403)
    if not await auth.check_key(api_key.strip()):
        return _login_page(request, next, error="密钥不正确", status_code=401)
    response = RedirectResponse(safe_return_path(request, next), status_code=303)
    _set_private_cookie(response, request, SESSION_COOKIE, await auth.issue_session(), auth.signer.max_age_seconds)
    _forget_cookie(response, request, LOGIN_CSRF_COOKIE)
    return response


STORE_COOKIE_SECONDS = 365 * 24 * 3600


@router.post("/stores")
async def choose_stores(request: Request, selection: Selection) -> Response:
    """Remember which stores this browser looks at (``store`` checkboxes; none or ``all`` = every store in use).

    The choice is a view preference, kept in its own cookie: it narrows what the pages show and where creations go,
    it never grants anything the session does not already have.
    """
    form = await request.form()
    chosen = [value for value in form.getlist(STORE_PARAM) if isinstance(value, str)]
    resolved = resolve_selection(list(selection.available), selection.default_store, chosen or None, strict=True)
    target = safe_return_path(request, str(form.get("return_to") or ""))
    response = RedirectResponse(_with_notice(target, "stores"), status_code=303)
    remembered = None if resolved.is_all else list(resolved.selected)
    _set_private_cookie(response, request, STORE_COOKIE, encode_store_cookie(remembered), STORE_COOKIE_SECONDS)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the sessions (server-side: a copy of the cookie stops working too) and forget the cookie here."""
    await request.app.state.auth.end_sessions()
    response = redirect_to(request, "/login", "logged_out")
    _forget_cookie(response, request, SESSION_COOKIE)
    return response


# ------------------------------------------------------------------------------------------------ memories


@router.get("/")
async def home(request: Request) -> Response:
    """The dashboard opens on the memory list."""
    return redirect_to(request, "/memories")


@router.get("/memories")
async def memories_page(
    request: Request,
    service: MemoryService,
    filters: Annotated[MemoryFilters, Depends()],
    page: Annotated[int, Query(ge=1)] = 1,
) -> Response:
    """The memory list with filters, pagination and bulk actions."""
    listing = await operations.list_memories(
        service, filters, page=page, page_size=request.app.state.settings.page_size
    )
    folders = (await service.list_folder_ids()).get("items") or []
    return render(
        request,
        "memories.html",
        {
            "nav": "memories",
            "listing": listing,
            "filters": filters,
            "folders": folders,
            "notice": notice_text(request),
            "return_to": current_location(request),
        },
    )


@router.post("/memories/bulk")
async def memories_bulk(request: Request, services: Services) -> Response:
    """Apply the chosen bulk action to the ticked memories (each in its own store), then go back to the list."""
    form = await request.form()
    ids = operations.clean_ids([value for value in form.getlist("memory_ids") if isinstance(value, str)])
    action = str(form.get("action") or "")
    await operations.run_bulk_action(
        await services.memory_groups(ids),
        action,
        to_folder_id=str(form.get("to_folder_id") or ""),
        confirm=str(form.get("confirm") or ""),
    )
    target = safe_return_path(request, str(form.get("return_to") or ""))
    return RedirectResponse(_with_notice(target, "bulk"), status_code=303)


def _form_values(fields: dict[str, Any]) -> dict[str, str]:
    """Stored fields as the strings the form shows (lists joined with commas, times as datetime-local)."""
    values: dict[str, str] = {}
    for name, value in fields.items():
        if isinstance(value, list):
            values[name] = ", ".join(value)
        elif name in TIME_FIELDS:
            values[name] = datetime_local_value(value)
        else:
            values[name] = str(value)
    return values


def _blank_form() -> dict[str, str]:
    values = {name: "" for name in MEMORY_FIELDS}
    values.update({"memory_type": "knowledge", "status": "active"})
    return values


async def _memory_form(
    request: Request,
    service: Any,
    *,
    values: dict[str, str],
    memory_id: str = "",
    write_store: str = "",
    errors: dict[str, str] | None = None,
    error: str = "",
    status_code: int = 200,
) -> Response:
    """The create (``memory_id`` blank) or edit form with the tags in use offered as suggestions."""
    return render(
        request,
        "memory_form.html",
        {
            "nav": "memories" if memory_id else "new",
            "values": values,
            "memory_id": memory_id,
            "write_store": write_store,
            "errors": errors or {},
            "error": error,
            "tag_suggestions": await service.suggest_tags(),
            "person_types": PERSON_TYPES,
        },
        status_code=status_code,
    )


def _submitted_values(form: Any) -> dict[str, str]:
    """What the person typed, to show again when the form has errors."""
    return {**_blank_form(), **{k: v for k, v in form.items() if isinstance(v, str) and k in MEMORY_FIELDS}}


def _error_summary(errors: dict[str, str], *, editing: bool) -> str:
    action = "保存修改" if editing else "创建记忆"
    return f"有 {len(errors)} 处需要修改才能{action}，请看下方标出的字段。"


@router.get("/memories/new")
async def new_memory_form(request: Request, service: MemoryService, selection: Selection) -> Response:
    """Empty create form (it names the store the memory will be written to)."""
    return await _memory_form(request, service, values=_blank_form(), write_store=selection.write_store)


@router.post("/memories/new")
@large_body  # the form carries the memory text: a long text must reach the field check
async def new_memory_submit(request: Request, service: MemoryService, selection: Selection) -> Response:
    """Create the memory, or show the form again with every error next to its field and what was typed."""
    form = await read_form(request)
    values = _submitted_values(form)
    errors = memory_form_errors(form, editing=False)
    if errors:
        return await _memory_form(
            request,
            service,
            values=values,
            write_store=selection.write_store,
            errors=errors,
            error=_error_summary(errors, editing=False),
            status_code=400,
        )
    try:
        result = await operations.create_memory(service, memory_fields_from_form(form))
    except BookuError as exc:
        return await _memory_form(
            request, service, values=values, write_store=selection.write_store, error=str(exc), status_code=400
        )
    created = (result.get("items") or [{}])[0]
    notice = "merged" if result.get("mode") == "merged" else "created"
    return redirect_to(request, memory_path(str(created.get("id", ""))), notice)


@router.get("/memories/{memory_id}")
async def memory_page(request: Request, memory_id: str, services: Services) -> Response:
    """One memory: all fields, its store, tags, its history with a diff per version and a revert button, and a link
    to its audit trail."""
    service = services.memory
    item = await operations.memory_detail(service, memory_id)
    history = await operations.memory_history(service, memory_id)
    return render(
        request,
        "memory_detail.html",
        {
            "nav": "memories",
            "item": item,
            "meta": item.get("metadata") or {},
            "history": history,
            "store_key": await services.store_of_memory(memory_id) or "",
            "notice": notice_text(request),
        },
    )


@router.get("/memories/{memory_id}/edit")
async def edit_memory_form(request: Request, memory_id: str, service: MemoryService) -> Response:
    """The edit form, filled with the stored values."""
    item = await operations.memory_detail(service, memory_id)
    return await _memory_form(request, service, values=_form_values(current_memory_fields(item)), memory_id=memory_id)


@router.post("/memories/{memory_id}/edit")
@large_body  # the form carries the memory text: a long text must reach the field check
async def edit_memory_submit(request: Request, memory_id: str, services: Services) -> Response:
    """Save only what changed (tags as a whole triplet), or show the form again with every error."""
    form = await read_form(request)
    service = await services.memory_for(memory_id)
    item = await operations.memory_detail(service, memory_id)
    values = _submitted_values(form)
    errors = memory_form_errors(form, editing=True)
    if errors:
        return await _memory_form(
            request,
            service,
            values=values,
            memory_id=memory_id,
            errors=errors,
            error=_error_summary(errors, editing=True),
            status_code=400,
        )
    try:
        changes = changed_memory_fields(current_memory_fields(item), memory_fields_from_form(form))
        if not changes:
            return redirect_to(request, memory_path(memory_id), "unchanged")
        await operations.update_memory(service, memory_id, changes)
    except BookuError as exc:
        return await _memory_form(
            request,
            service,
            values=values,
            memory_id=memory_id,
            error=str(exc).replace("创建记忆", "修改记忆"),
            status_code=400,
        )
    return redirect_to(request, memory_path(memory_id), "saved")


@router.post("/memories/{memory_id}/delete")
async def delete_memory(request: Request, memory_id: str, services: Services) -> Response:
    """Soft delete (to the trash)."""
    await operations.soft_delete(await services.memory_for(memory_id), memory_id)
    return redirect_to(request, memory_path(memory_id), "deleted")


@router.post("/memories/{memory_id}/restore")
async def restore_memory(request: Request, memory_id: str, services: Services) -> Response:
    """Take a memory out of the trash."""
    await operations.restore(await services.memory_for(memory_id), memory_id)
    return redirect_to(request, memory_path(memory_id), "restored")


@router.post("/memories/{memory_id}/archive")
async def archive_memory(request: Request, memory_id: str, services: Services) -> Response:
    """Archive a memory (kept and searchable with archived results)."""
    await operations.archive(await services.memory_for(memory_id), memory_id)
    return redirect_to(request, memory_path(memory_id), "archived")


@router.post("/memories/{memory_id}/purge")
async def purge_memory(
    request: Request, memory_id: str, services: Services, confirm: Annotated[str, Form()] = ""
) -> Response:
    """Permanent delete; the form must repeat the memory id."""
    service = await services.memory_for(memory_id)
    await operations.memory_detail(service, memory_id)
    await operations.hard_delete(service, [memory_id], confirm)
    return redirect_to(request, "/trash", "purged")


@router.post("/memories/{memory_id}/revert")
async def revert_memory(
    request: Request, memory_id: str, services: Services, version: Annotated[int, Form(ge=1)]
) -> Response:
    """One-click revert to an earlier version."""
    service = await services.memory_for(memory_id)
    await service.revert_memory(memory_id=memory_id, version=version)
    return redirect_to(request, memory_path(memory_id), "reverted")


@router.post("/memories/{memory_id}/unsupersede")
async def unsupersede_memory(request: Request, memory_id: str, services: Services) -> Response:
    """One-click "撤销取代": the memory counts as current again (audited)."""
    service = await services.memory_for(memory_id)
    await service.unsupersede_memory(memory_id=memory_id)
    return redirect_to(request, memory_path(memory_id), "unsuperseded")


# -------------------------------------------------------------------------------------------------- search


@router.get("/search")
async def search_page(
    request: Request,
    service: MemoryService,
    q: str = "",
    mode: str = "semantic",
    top_k: Annotated[int, Query(ge=1, le=100)] = 10,
    include_archived: bool = False,
    include_knowledge: bool = False,
    core_tags: str = "",
    diffusion_tags: str = "",
    opposing_tags: str = "",
) -> Response:
    """Keyword search, or "search like the bot does" with every score and its parts."""
    mode = mode if mode in ("semantic", "keyword") else "semantic"
    result: dict[str, Any] | None = None
    error = ""
    query = q.strip()
    if query:
        try:
            result = await operations.search_memories(
                service,
                query,
                mode=mode,
                top_k=top_k,
                include_archived=include_archived,
                include_knowledge=include_knowledge,
                core_tags=core_tags,
                diffusion_tags=diffusion_tags,
                opposing_tags=opposing_tags,
            )
        except BookuError as exc:
            error = str(exc)
    items = list((result or {}).get("results") or [])
    return render(
        request,
        "search.html",
        {
            "nav": "search",
            "q": query,
            "mode": mode,
            "top_k": top_k,
            "include_archived": include_archived,
            "include_knowledge": include_knowledge,
            "core_tags": core_tags,
            "diffusion_tags": diffusion_tags,
            "opposing_tags": opposing_tags,
            "result": result or {},
            "items": items,
            "max_score": max(
                (float(i["score"]) for i in items if isinstance(i.get("score"), (int, float))), default=0.0
            ),
            "searched": bool(query),
            "error": error,
            "part_labels": SCORE_PART_LABELS,
        },
    )


# --------------------------------------------------------------------------------------------------- trash


@router.get("/trash")
async def trash_page(request: Request, service: MemoryService, page: Annotated[int, Query(ge=1)] = 1) -> Response:
    """Soft-deleted memories with restore and permanent-delete actions."""
    listing = await operations.list_memories(
        service, MemoryFilters(), page=page, page_size=request.app.state.settings.page_size, deleted_only=True
    )
    return render(
        request,
        "trash.html",
        {
            "nav": "trash",
            "listing": listing,
            "notice": notice_text(request),
            "return_to": current_location(request),
        },
    )


# ----------------------------------------------------------------------------------------------- knowledge


async def _knowledge_page(
    request: Request,
    service: Any,
    selection: StoreSelection,
    *,
    page: int = 1,
    errors: dict[str, str] | None = None,
    title: str = "",
    status_code: int = 200,
) -> Response:
    page_size = request.app.state.settings.page_size
    result = await service.list_documents(limit=page_size, offset=(page - 1) * page_size)
    documents = result.get("items") or []
    total = int(result.get("total") or 0)
    listing = {"page": page, "has_more": page * page_size < total}
    return render(
        request,
        "knowledge.html",
        {
            "nav": "knowledge",
            "documents": documents,
            "total": total,
            "listing": listing,
            "write_store": selection.write_store,
            "notice": notice_text(request),
            "errors": errors or {},
            "title_value": title,
            "accepted_suffixes": ",".join(sorted(SUPPORTED_SUFFIXES)),
        },
        status_code=status_code,
    )


@router.get("/knowledge")
async def knowledge_page(
    request: Request, service: KnowledgeService, selection: Selection, page: Annotated[int, Query(ge=1)] = 1
) -> Response:
    """Knowledge documents (paged) and the upload form."""
    return await _knowledge_page(request, service, selection, page=page)


@router.post("/knowledge/upload")
@large_body
async def knowledge_upload(
    request: Request,
    service: KnowledgeService,
    selection: Selection,
    file: Annotated[UploadFile, File()],
    title: Annotated[str, Form()] = "",
) -> Response:
    """Ingest an uploaded file (the CLI's types and encodings), then show its document; a copy of an existing
    document re-ingests that one. A bad file shows the form again with the reason next to it."""
    try:
        data = await read_upload(request, file)
        result = await service.ingest_upload(file_name=file.filename or "", data=data, title=title)
    except ValidationError as exc:
        field = "title" if str(exc).startswith("title") else "file"
        message = str(exc).removeprefix("file ").removeprefix("title ")
        label = "标题" if field == "title" else f"文件 {file.filename or ''}".rstrip()
        return await _knowledge_page(
            request, service, selection, errors={field: f"{label}：{message}"}, title=title, status_code=400
        )
    notice = {"updated": "reingested", "unchanged": "upload_unchanged"}.get(str(result.get("mode")), "uploaded")
    return redirect_to(request, f"/knowledge/{quote(str(result['document_id']), safe='')}", notice)


@router.get("/knowledge/{document_id}")
async def document_page(request: Request, document_id: str, service: KnowledgeService) -> Response:
    """One document with all its chunks and its version history."""
    result = await service.get_document(document_id=document_id)
    return render(
        request,
        "knowledge_document.html",
        {
            "nav": "knowledge",
            "document": result,
            "chunks": result.get("chunks") or [],
            "history": result.get("history") or [],
            "notice": notice_text(request),
        },
    )


@router.post("/knowledge/{document_id}/delete")
async def document_delete(request: Request, document_id: str, services: Services) -> Response:
    """Delete a document and its chunks."""
    service = await services.knowledge_for(document_id)
    await service.delete_document(document_id=document_id)
    return redirect_to(request, "/knowledge", "document_deleted")


# --------------------------------------------------------------------------------------------------- memos


@router.get("/memos")
async def memos_page(request: Request, services: Services) -> Response:
    """Active temporary memos of all streams of the selected stores."""
    memos = (await operations.list_memos(services.memo_services())).get("items") or []
    return render(request, "memos.html", {"nav": "memos", "memos": memos, "notice": notice_text(request)})


@router.post("/memos/{memo_id}/cancel")
async def memo_cancel(request: Request, memo_id: str, services: Services) -> Response:
    """Cancel one temporary memo."""
    await operations.cancel_memo(services.memo_services(), memo_id)
    return redirect_to(request, "/memos", "memo_cancelled")


# --------------------------------------------------------------------------------------------------- stats


@router.get("/stats")
async def stats_page(request: Request, service: MemoryService) -> Response:
    """Counts and server-drawn SVG charts by type and by month."""
    data = await operations.memory_statistics(service)
    status = await service.get_status()
    return render(
        request,
        "stats.html",
        {
            "nav": "stats",
            **data,
            "status": status,
            "notice": notice_text(request),
            "index": operations.index_health(current_runtime(request)),
        },
    )


@router.post("/stats/reindex")
async def stats_reindex(request: Request) -> Response:
    """The statistics page's button: start the runtime's reindex job, back to the page that shows its progress."""
    operations.start_reindex(current_runtime(request))
    return redirect_to(request, "/stats", "reindex_started")


# --------------------------------------------------------------------------------------------------- audit

BATCH_PREVIEW_ROWS = 50


def _audit_return(request: Request, candidate: str) -> str:
    return safe_return_path(request, candidate, default="/audit")


@router.get("/audit")
async def audit_page(
    request: Request,
    service: MemoryService,
    filters: Annotated[AuditFilters, Depends()],
    page: Annotated[int, Query(ge=1)] = 1,
) -> Response:
    """The audit log of the selected stores: filters, pages, a diff per change, restore buttons per row and batch."""
    listing = await operations.list_audit(service, filters, page=page, page_size=request.app.state.settings.page_size)
    return render(
        request,
        "audit.html",
        {
            "nav": "audit",
            "listing": listing,
            "filters": filters,
            "authorities": AUTHORITIES,
            "actions": AUDIT_ACTIONS,
            "return_to": current_location(request),
            "notice": notice_text(request),
        },
    )


@router.post("/audit/{audit_id}/restore")
async def audit_restore(request: Request, audit_id: int, services: Services) -> Response:
    """Undo one audited change. Without ``confirmed=yes`` it shows what would be undone and asks first."""
    form = await request.form()
    target = _audit_return(request, str(form.get("return_to") or ""))
    service, memory_id = await services.memory_for_audit(audit_id)
    if form.get("confirmed") != "yes":
        entry = await operations.audit_entry(services.memory, audit_id, memory_id)
        return render(
            request,
            "audit_confirm.html",
            {
                "nav": "audit",
                "kind": "entry",
                "entry": entry or {},
                "audit_id": audit_id,
                "batch_id": "",
                "entries": [],
                "matched": 0,
                "batch_stores": [],
                "return_to": target,
            },
        )
    await service.restore_from_audit(audit_id=audit_id)
    return RedirectResponse(_with_notice(target, "audit_restored"), status_code=303)


@router.post("/audit/restore-batch")
async def audit_restore_batch(request: Request, services: Services) -> Response:
    """Undo every change of one batch in the selected stores. Without ``confirmed=yes`` it lists them and asks."""
    form = await request.form()
    target = _audit_return(request, str(form.get("return_to") or ""))
    batch_id = str(form.get("batch_id") or "").strip()
    if not batch_id:
        raise ValidationError("batch_id 不能为空：请选择要撤销的批次")
    views = await services.memory_for_batch(batch_id)
    if form.get("confirmed") != "yes":
        preview = await operations.list_audit(
            services.memory, AuditFilters(batch_id=batch_id), page=1, page_size=BATCH_PREVIEW_ROWS
        )
        return render(
            request,
            "audit_confirm.html",
            {
                "nav": "audit",
                "kind": "batch",
                "entry": {},
                "audit_id": 0,
                "batch_id": batch_id,
                "entries": preview.items,
                "matched": preview.matched,
                "batch_stores": [key for key, _ in views],
                "return_to": target,
            },
        )
    await operations.restore_batch(views, batch_id)
    return RedirectResponse(_with_notice(target, "batch_restored"), status_code=303)


# -------------------------------------------------------------------------------------------------- recall


@router.get("/recall")
async def recall_page(request: Request, service: MemoryService) -> Response:
    """Recall preview: what ``recall`` would inject for a query, the rendered block (escaped) and the entries."""
    params = dict(request.query_params)
    submitted = "query" in params
    values: dict[str, Any] = {
        "query": params.get("query", ""),
        "max_chars": params.get("max_chars", "6500"),
        "min_score": params.get("min_score", "0.1"),
        "peer_scope": params.get("peer_scope", "all"),
        "other_peer_penalty": params.get("other_peer_penalty", ""),
        "actor_peer_id": params.get("actor_peer_id", ""),
        "render": params.get("render") == "true" if submitted else True,
        "quotas": {
            category: params.get(f"quota_{category}", "") if submitted else str(DEFAULT_QUOTAS.get(category, ""))
            for category in CATEGORIES
        },
    }
    result: dict[str, Any] = {}
    error = ""
    if submitted and values["query"].strip():
        try:
            arguments = recall_form_arguments(params, CATEGORIES)
            result = await service.recall(arguments.pop("query"), **arguments)
        except BookuError as exc:
            error = str(exc)
    return render(
        request,
        "recall.html",
        {
            "nav": "recall",
            "values": values,
            "categories": CATEGORIES,
            "default_categories": tuple(DEFAULT_QUOTAS),
            "peer_scopes": PEER_SCOPES,
            "result": result,
            "searched": bool(result),
            "error": error,
        },
    )

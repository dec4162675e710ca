"""The JSON API under ``/api``: every route needs the API key header or a session cookie (+ CSRF token on writes).

Every route reads the stores chosen with ``?store=<key>`` (repeatable; ``all`` or absent = every store in use, or
the browser's remembered choice); changes go to the store of the record they change, creations to the one selected
store (the default store when several are selected). ``GET /api/stores`` lists the stores.

Errors come back as ``{"detail": "<中文说明>"}`` with 400 (bad input), 401 (not logged in), 403 (CSRF), 404
(unknown id), 409/503 (index or embedder trouble) or 422 (malformed JSON body). The OpenViking-compatible
``/api/v1/...`` routes answer ``{"status": "ok", "result": ...}`` and ``{"status": "error", "error": "<中文说明>"}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, File, Form, Query, Request, UploadFile

from ..services.errors import ValidationError
from . import operations
from .auth import AuthContext
from .deps import (
    DashboardServices,
    StoreSelection,
    api_auth,
    current_runtime,
    dashboard_services,
    knowledge_service,
    memory_service,
    store_selection,
)
from .gate import large_body
from .operations import AuditFilters, MemoryFilters
from .payloads import (
    MEMORY_FIELDS,
    BatchRestoreRequest,
    BulkAction,
    DocumentCreate,
    HardDeleteRequest,
    MemoryCreate,
    MemoryUpdate,
    RevertRequest,
    SupersedeRequest,
    clean_memory_fields,
    read_upload,
    recall_arguments,
)

router = APIRouter(prefix="/api", dependencies=[Depends(api_auth)])

MemoryService = Annotated[Any, Depends(memory_service)]
KnowledgeService = Annotated[Any, Depends(knowledge_service)]
Services = Annotated[DashboardServices, Depends(dashboard_services)]


def _page_size(request: Request, page_size: int | None) -> int:
    return page_size or request.app.state.settings.page_size


@router.get("/session")
async def session_info(context: Annotated[AuthContext, Depends(api_auth)]) -> dict[str, Any]:
    """How this request is authenticated and, for cookie sessions, the CSRF token to send on writes."""
    return {"method": context.method, "csrf_token": context.csrf_token}


@router.get("/stores")
async def list_stores(selection: Annotated[StoreSelection, Depends(store_selection)]) -> dict[str, Any]:
    """The stores in use (``shared``, ``private:…``, ``group:…``, ``bot:…``), the ones this request reads, and where
    creations go (``write_store``)."""
    return selection.as_dict()


@router.get("/status")
async def status(service: MemoryService) -> dict[str, Any]:
    """Global counts (vector and metadata, per bucket) and the newest records (``get_status``)."""
    return await service.get_status()


@router.get("/maintenance/index")
async def index_status(request: Request) -> dict[str, Any]:
    """The vector index's health (``ok`` | ``degraded`` | ``rebuilding``), the running or last rebuild job with
    its progress (``job.done`` / ``job.total``) and why retrieval is keyword-only right now, if it is."""
    return operations.index_health(current_runtime(request))


@router.post("/maintenance/reindex", status_code=202)
async def reindex(request: Request) -> dict[str, Any]:
    """Start rebuilding the keyword index and every vector in the background (the keyword route serves meanwhile);
    poll ``GET /api/maintenance/index`` for progress. 409 while a rebuild already runs."""
    return operations.start_reindex(current_runtime(request))


@router.get("/statistics")
async def statistics(service: MemoryService) -> dict[str, Any]:
    """Memory counts by type, by month of creation and by status (``memory_statistics``)."""
    return await service.memory_statistics()


@router.get("/folders")
async def folders(service: MemoryService) -> dict[str, Any]:
    """Folder ids in use, default first (``list_folder_ids``)."""
    return await service.list_folder_ids()


@router.get("/memories")
async def list_memories(
    request: Request,
    service: MemoryService,
    filters: Annotated[MemoryFilters, Depends()],
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int | None, Query(ge=1, le=200)] = None,
) -> dict[str, Any]:
    """One page of memories matching all given filters; ``has_more`` tells whether a next page exists."""
    result = await operations.list_memories(service, filters, page=page, page_size=_page_size(request, page_size))
    return result.as_dict()


@router.get("/trash")
async def list_trash(
    request: Request,
    service: MemoryService,
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int | None, Query(ge=1, le=200)] = None,
) -> dict[str, Any]:
    """One page of soft-deleted memories (restorable)."""
    result = await operations.list_memories(
        service, MemoryFilters(), page=page, page_size=_page_size(request, page_size), deleted_only=True
    )
    return result.as_dict()


@router.get("/search")
async def search(
    service: MemoryService,
    q: Annotated[str, Query(min_length=1, max_length=2000)],
    mode: Literal["semantic", "keyword"] = "semantic",
    top_k: Annotated[int, Query(ge=1, le=100)] = 10,
    include_archived: bool = False,
    include_knowledge: bool = False,
    include_superseded: bool = True,
    core_tags: str = "",
    diffusion_tags: str = "",
    opposing_tags: str = "",
) -> dict[str, Any]:
    """Search like the bot does (``semantic``: ``retrieve_memories`` with scores and ``score_parts``) or by keyword.

    Tag groups are comma-separated; give all three or none. ``include_superseded=false`` leaves out memories a
    later one replaced (each result carries ``metadata.superseded_by``).
    """
    return await operations.search_memories(
        service,
        q,
        mode=mode,
        top_k=top_k,
        include_archived=include_archived,
        include_knowledge=include_knowledge,
        include_superseded=include_superseded,
        core_tags=core_tags,
        diffusion_tags=diffusion_tags,
        opposing_tags=opposing_tags,
    )


@router.post("/memories", status_code=201)
async def create_memory(payload: MemoryCreate, service: MemoryService) -> dict[str, Any]:
    """Create a memory (three tag groups required). ``mode`` is ``merged`` when it was folded into an existing one."""
    fields = clean_memory_fields(payload.model_dump(), MEMORY_FIELDS)
    result = await operations.create_memory(service, fields)
    created = (result.get("items") or [{}])[0]
    item = await operations.memory_detail(service, str(created.get("id", "")))
    return {"action": "create_memory", "mode": result.get("mode", "created"), "item": item}


@router.post("/memories/bulk")
async def bulk_action(payload: BulkAction, services: Services) -> dict[str, Any]:
    """Apply one action (delete/restore/archive/move/purge) to many memories, each in its own store."""
    groups = await services.memory_groups(operations.clean_ids(payload.memory_ids))
    result = await operations.run_bulk_action(
        groups, payload.action, to_folder_id=payload.to_folder_id, confirm=payload.confirm
    )
    return {"action": payload.action, "result": result}


@router.get("/memories/{memory_id}")
async def memory_detail(memory_id: str, service: MemoryService) -> dict[str, Any]:
    """Full memory (soft-deleted included) with its revision history, newest first, each with a diff."""
    item = await operations.memory_detail(service, memory_id)
    history = await operations.memory_history(service, memory_id)
    return {"action": "get_memory_detail", "found": True, "item": item, "history": operations.history_as_json(history)}


@router.get("/memories/{memory_id}/history")
async def memory_history(memory_id: str, service: MemoryService) -> dict[str, Any]:
    """Revisions of one memory, newest first, each with ``diff`` lines against the previous revision."""
    await operations.memory_detail(service, memory_id)
    history = await operations.memory_history(service, memory_id)
    return {"memory_id": memory_id, "versions": operations.history_as_json(history)}


async def _update(memory_id: str, payload: MemoryUpdate, services: DashboardServices) -> dict[str, Any]:
    fields = clean_memory_fields(payload.model_dump(exclude_unset=True), MEMORY_FIELDS)
    item = await operations.update_memory(await services.memory_for(memory_id), memory_id, fields)
    return {"action": "update_memory_by_id", "item": item}


@router.put("/memories/{memory_id}")
async def replace_memory(memory_id: str, payload: MemoryUpdate, services: Services) -> dict[str, Any]:
    """Update the given fields (absent = keep; tags only as a full triplet; ``folder_id`` moves the memory)."""
    return await _update(memory_id, payload, services)


@router.patch("/memories/{memory_id}")
async def patch_memory(memory_id: str, payload: MemoryUpdate, services: Services) -> dict[str, Any]:
    """Same as ``PUT``: both only touch the fields that are present."""
    return await _update(memory_id, payload, services)


@router.delete("/memories/{memory_id}")
async def soft_delete_memory(memory_id: str, services: Services) -> dict[str, Any]:
    """Move a memory to the trash (restorable). Permanent deletion is ``POST .../hard-delete``."""
    return await operations.soft_delete(await services.memory_for(memory_id), memory_id)


@router.post("/memories/{memory_id}/hard-delete")
async def hard_delete_memory(memory_id: str, payload: HardDeleteRequest, services: Services) -> dict[str, Any]:
    """Delete permanently; the body must be ``{"confirm": "<memory_id>"}``."""
    service = await services.memory_for(memory_id)
    await operations.memory_detail(service, memory_id)
    return await operations.hard_delete(service, [memory_id], payload.confirm)


@router.post("/memories/{memory_id}/restore")
async def restore_memory(memory_id: str, services: Services) -> dict[str, Any]:
    """Take a memory out of the trash."""
    return await operations.restore(await services.memory_for(memory_id), memory_id)


@router.post("/memories/{memory_id}/archive")
async def archive_memory(memory_id: str, services: Services) -> dict[str, Any]:
    """Set a memory's status to archived (still searchable with ``include_archived``)."""
    return await operations.archive(await services.memory_for(memory_id), memory_id)


@router.post("/memories/{memory_id}/revert")
async def revert_memory(memory_id: str, payload: RevertRequest, services: Services) -> dict[str, Any]:
    """Restore the memory's content and fields as of ``version`` (recorded as a new revision)."""
    service = await services.memory_for(memory_id)
    await service.revert_memory(memory_id=memory_id, version=payload.version)
    return {"action": "revert_memory", "item": await operations.memory_detail(service, memory_id)}


@router.post("/memories/{memory_id}/supersede")
async def supersede_memory(memory_id: str, payload: SupersedeRequest, services: Services) -> dict[str, Any]:
    """Mark the memory superseded by the later memory ``superseded_by`` (audited; checked: no self, no loop)."""
    service = await services.memory_for(memory_id)
    return await service.supersede_memory(memory_id=memory_id, superseded_by=payload.superseded_by)


@router.post("/memories/{memory_id}/unsupersede")
async def unsupersede_memory(memory_id: str, services: Services) -> dict[str, Any]:
    """ "撤销取代": the memory counts as current again (audited)."""
    return await (await services.memory_for(memory_id)).unsupersede_memory(memory_id=memory_id)


@router.get("/knowledge/documents")
async def list_documents(
    service: KnowledgeService,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> dict[str, Any]:
    """Knowledge documents, most recently changed first, with chunk counts; ``total`` counts all documents."""
    return await service.list_documents(limit=limit, offset=offset)


@router.post("/knowledge/documents", status_code=201)
@large_body
async def create_document(payload: DocumentCreate, service: KnowledgeService) -> dict[str, Any]:
    """Ingest a document given as JSON ``{"title", "content"}``."""
    return await service.ingest_document(title=payload.title.strip(), content=payload.content, source="dashboard")


@router.post("/knowledge/upload", status_code=201)
@large_body
async def upload_document(
    request: Request,
    service: KnowledgeService,
    file: Annotated[UploadFile, File()],
    title: Annotated[str, Form()] = "",
) -> dict[str, Any]:
    """Ingest an uploaded file (multipart field ``file``, optional ``title``) of any type the CLI ingests; a copy
    of an existing document re-ingests it (``mode`` updated or unchanged)."""
    data = await read_upload(request, file)
    return await service.ingest_upload(file_name=file.filename or "", data=data, title=title)


@router.get("/knowledge/documents/{document_id}")
async def document_detail(document_id: str, service: KnowledgeService) -> dict[str, Any]:
    """One document with its chunks in order and its version history."""
    return await service.get_document(document_id=document_id)


@router.delete("/knowledge/documents/{document_id}")
async def delete_document(document_id: str, services: Services) -> dict[str, Any]:
    """Delete a document with all its chunks and vectors."""
    service = await services.knowledge_for(document_id)
    return await service.delete_document(document_id=document_id)


@router.get("/memos")
async def list_memos(services: Services) -> dict[str, Any]:
    """Active temporary memos of every stream of the selected stores' owners, each with its ``store_key``."""
    return await operations.list_memos(services.memo_services())


@router.delete("/memos/{memo_id}")
async def cancel_memo(memo_id: str, services: Services) -> dict[str, Any]:
    """Cancel (delete) one temporary memo."""
    return await operations.cancel_memo(services.memo_services(), memo_id)


@router.get("/audit")
async def audit_log(
    request: Request,
    service: MemoryService,
    filters: Annotated[AuditFilters, Depends()],
    page: Annotated[int, Query(ge=1)] = 1,
    page_size: Annotated[int | None, Query(ge=1, le=200)] = None,
) -> dict[str, Any]:
    """The append-only audit log of the selected stores, newest first: who (authority, actor), when, why (cause),
    batch, and the before/after state with its ``diff`` lines. All filters are exact matches."""
    result = await operations.list_audit(service, filters, page=page, page_size=_page_size(request, page_size))
    return result.as_dict()


@router.post("/audit/{audit_id}/restore")
async def restore_from_audit(audit_id: int, services: Services) -> dict[str, Any]:
    """Put one record back to its state before the audited change (the undo is audited too)."""
    service, _memory_id = await services.memory_for_audit(audit_id)
    return await service.restore_from_audit(audit_id=audit_id)


@router.post("/audit/restore-batch")
async def restore_batch(payload: BatchRestoreRequest, services: Services) -> dict[str, Any]:
    """Undo every change of one batch (e.g. one dreaming run) in the selected stores, newest first."""
    batch_id = payload.batch_id.strip()
    return await operations.restore_batch(await services.memory_for_batch(batch_id), batch_id)


@router.post("/v1/search/recall")
async def search_recall(request: Request, service: MemoryService) -> dict[str, Any]:
    """Typed recall (OpenViking's ``POST /api/v1/search/recall``) over the selected stores.

    Body ``{"query", "quotas"?, "max_chars"?, "min_score"?, "peer_scope"?, "other_peer_penalty"?, "render"?}``;
    answers ``{"status": "ok", "result": {"entries", "rendered", "stats"}}``, bad input a 400
    ``{"status": "error", "error": "<中文说明>"}``. There is no current speaker here, so ``peer_scope="actor"`` is
    refused with that explanation.
    """
    try:
        body = await request.json()
    except ValueError as exc:
        raise ValidationError("请求体必须是合法的 JSON 对象") from exc
    arguments = recall_arguments(body)
    result = await service.recall(arguments.pop("query"), **arguments)
    return {"status": "ok", "result": result}

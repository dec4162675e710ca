"""Dashboard operations shared by the JSON API and the HTML pages.

Each function takes a service view and plain arguments, calls the service, and returns plain dicts. The API
serialises them, the pages render them; neither repeats the orchestration (update-then-move, bulk dispatch, the
hard-delete confirmation rule, history diffs, statistics series).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from fastapi import HTTPException

from ..services.errors import NotFoundError, ValidationError
from .charts import horizontal_bars, month_series, vertical_bars
from .diffs import diff_snapshots
from .payloads import BULK_PURGE_PHRASE, split_list
from .rendering import MEMORY_TYPE_LABELS, STATUS_LABELS


@dataclass(frozen=True)
class Filters:
    """Optional text filters of a listing (blank means "any"), stripped of surrounding spaces.

    The subclasses double as FastAPI dependencies (``Annotated[MemoryFilters, Depends()]``): their fields are the
    query parameters, so the JSON API and the pages accept exactly the same filters.
    """

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            object.__setattr__(self, name, str(value).strip())

    def as_query(self) -> dict[str, str]:
        """The non-empty filters, for links that keep them (pagination, "back to list", return after a restore)."""
        return {key: value for key, value in asdict(self).items() if value}

    def service_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of the service's listing call (blank filters left out)."""
        return self.as_query()


@dataclass(frozen=True)
class MemoryFilters(Filters):
    """The list filters a curator can combine (``list_memory_entries``)."""

    keyword: str = ""
    memory_type: str = ""
    status: str = ""
    folder_id: str = ""
    tag: str = ""
    person_id: str = ""


@dataclass
class MemoryPage:
    """One page of a listing; ``has_more`` comes from the service's ``matched`` count of all matching rows."""

    items: list[dict[str, Any]]
    page: int
    page_size: int
    has_more: bool
    filters: MemoryFilters = field(default_factory=MemoryFilters)
    matched: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": "list_memory_entries",
            "total": len(self.items),
            "items": self.items,
            "page": self.page,
            "page_size": self.page_size,
            "has_more": self.has_more,
            "matched": self.matched,
        }


async def _entries_in_slices(service: Any, *, limit: int, offset: int, **kwargs: Any) -> tuple[list[dict], int]:
    """``limit`` entries from ``offset`` on, and how many match in all.

    The service answers at most ``retrieval.max_top_k`` entries per call (a bound meant for the LLM), while a
    dashboard page may be larger (up to 200): a page is read in as many slices as it takes.
    """
    step = max(1, int(service.runtime.config.retrieval.max_top_k))
    items: list[dict] = []
    matched = 0
    while len(items) < limit:
        take = min(step, limit - len(items))
        result = await service.list_memory_entries(limit=take, offset=offset + len(items), **kwargs)
        batch = list(result.get("items") or [])
        items.extend(batch)
        matched = int(result.get("matched") or 0)
        if len(batch) < take:
            break
    return items, matched


async def list_memories(
    service: Any, filters: MemoryFilters, *, page: int, page_size: int, deleted_only: bool = False
) -> MemoryPage:
    """A page of memories (memory bucket only; knowledge chunks have their own document view).

    ``deleted_only`` lists the trash: soft-deleted memories only, in the service's listing order.
    """
    page = max(page, 1)
    kwargs = filters.service_kwargs()
    if deleted_only:
        kwargs["only_deleted"] = True
    offset = (page - 1) * page_size
    items, matched = await _entries_in_slices(
        service,
        limit=page_size,
        offset=offset,
        bucket="memory",
        include_archived=True,
        include_deleted=deleted_only,
        **kwargs,
    )
    return MemoryPage(
        items=items,
        page=page,
        page_size=page_size,
        has_more=offset + len(items) < matched,
        filters=filters,
        matched=matched,
    )


async def memory_detail(service: Any, memory_id: str) -> dict[str, Any]:
    """The full item of one memory, soft-deleted ones included (the trash links here); 404 when unknown."""
    result = await service.get_memory_detail(memory_id=memory_id, include_deleted=True)
    item = result.get("item") if result.get("found", True) else None
    if not item:
        raise NotFoundError(f"未找到记忆: {memory_id}")
    return item


async def create_memory(service: Any, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Create a memory in the memory bucket, marked ``source="dashboard"``; returns the service result
    (``items[0]`` is the new memory, or the existing one it was merged into when ``mode == "merged"``).

    A form posted without a title or content (a hand-made request: the page's form always has both) is bad input,
    not a missing argument deep in the service."""
    missing = [name for name in ("title", "content") if name not in fields]
    if missing:
        raise ValidationError(f"新建记忆的表单缺少字段 {'、'.join(missing)}")
    return await service.create_memory(bucket="memory", source="dashboard", **fields)


async def update_memory(service: Any, memory_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """Apply the given fields (folder included) in one service update, i.e. one history revision.

    Returns the fresh detail item. An unknown id is a 404 and a soft-deleted one a 400, never a silent 200.
    """
    current = await memory_detail(service, memory_id)
    if (current.get("metadata") or {}).get("is_deleted"):
        raise ValidationError(f"记忆 {memory_id} 在回收站中，请先恢复再修改")
    if fields:
        result = await service.update_memory_by_id(memory_id=memory_id, **fields)
        if memory_id in (result.get("missing") or []):
            raise NotFoundError(f"未找到记忆: {memory_id}")
    return await memory_detail(service, memory_id)


async def soft_delete(service: Any, memory_id: str) -> dict[str, Any]:
    """Move one memory to the trash (404 when unknown). Returns the ``delete_memories`` result."""
    await memory_detail(service, memory_id)
    return await service.delete_memories(memory_ids=[memory_id], hard=False)


async def restore(service: Any, memory_id: str) -> dict[str, Any]:
    """Take one memory out of the trash; a 400 when it is unknown or not in the trash (never a silent no-op)."""
    result = await service.restore_memories(memory_ids=[memory_id])
    if not result.get("restored"):
        raise ValidationError(f"无法恢复 {memory_id}：记忆不存在或不在回收站中")
    return result


async def archive(service: Any, memory_id: str) -> dict[str, Any]:
    """Archive one memory (404 when unknown). Returns the ``archive_memories`` result."""
    await memory_detail(service, memory_id)
    return await service.archive_memories([memory_id])


def require_hard_delete_confirmation(memory_ids: Sequence[str], confirm: str) -> None:
    """Permanent deletion needs an explicit echo: the id for one memory, ``永久删除`` for several."""
    expected = memory_ids[0] if len(memory_ids) == 1 else BULK_PURGE_PHRASE
    if confirm.strip() != expected:
        if len(memory_ids) == 1:
            raise ValidationError(f"永久删除无法撤销：confirm 必须填写该记忆的 ID「{expected}」")
        raise ValidationError(f"永久删除无法撤销：confirm 必须填写「{BULK_PURGE_PHRASE}」")


async def hard_delete(service: Any, memory_ids: Sequence[str], confirm: str) -> dict[str, Any]:
    """Permanently delete after the confirmation check; returns the service result."""
    require_hard_delete_confirmation(memory_ids, confirm)
    return await service.delete_memories(memory_ids=list(memory_ids), hard=True)


BULK_ACTIONS = ("delete", "restore", "archive", "move", "purge")


async def _bulk_one(service: Any, action: str, ids: list[str], folder: str) -> dict[str, Any]:
    if action == "delete":
        return await service.delete_memories(memory_ids=ids, hard=False)
    if action == "restore":
        return await service.restore_memories(memory_ids=ids)
    if action == "archive":
        return await service.archive_memories(ids)
    if action == "move":
        return await service.move_memories(memory_ids=ids, to_folder_id=folder)
    return await service.delete_memories(memory_ids=ids, hard=True)


def merge_results(results: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One answer from the per-store answers of one action: counts added, id lists joined, the rest from the first."""
    merged: dict[str, Any] = {}
    for result in results:
        for key, value in result.items():
            if key not in merged:
                merged[key] = list(value) if isinstance(value, list) else value
            elif isinstance(value, int) and not isinstance(value, bool) and isinstance(merged[key], int):
                merged[key] += value
            elif isinstance(value, list) and isinstance(merged[key], list):
                merged[key].extend(value)
    return merged


async def run_bulk_action(
    groups: Sequence[tuple[Any, Sequence[str]]], action: str, *, to_folder_id: str | None = None, confirm: str = ""
) -> dict[str, Any]:
    """One action over many memories: ``delete`` (soft), ``restore``, ``archive``, ``move`` or ``purge``.

    ``groups`` pairs each store's service with the ids living in that store (``DashboardServices.memory_groups``):
    the service only changes records of its own store. Everything is checked before the first group is touched,
    and the permanent-delete confirmation is judged on the whole selection, not per store.
    """
    ids = [memory_id for _, group in groups for memory_id in group]
    if not ids:
        raise ValidationError("memory_ids 不能为空：请至少选择一条记忆")
    if action not in BULK_ACTIONS:
        raise ValidationError(f"action 只能是 delete / restore / archive / move / purge，收到: {action!r}")
    folder = (to_folder_id or "").strip()
    if action == "move" and not folder:
        raise ValidationError("to_folder_id 不能为空：移动需要目标文件夹")
    if action == "purge":
        require_hard_delete_confirmation(ids, confirm)
    results = [await _bulk_one(service, action, list(group), folder) for service, group in groups if group]
    return merge_results(results)


def clean_ids(memory_ids: Sequence[str]) -> list[str]:
    """Trimmed, non-empty, de-duplicated ids in their order (checkbox lists may repeat or carry blanks)."""
    return list(dict.fromkeys(memory_id.strip() for memory_id in memory_ids if memory_id.strip()))


KEYWORD_SEARCH_FIELDS = ["title", "content", "tags"]


async def search_memories(
    service: Any,
    query: str,
    *,
    mode: str,
    top_k: int,
    include_archived: bool,
    include_knowledge: bool,
    include_superseded: bool = True,
    core_tags: str = "",
    diffusion_tags: str = "",
    opposing_tags: str = "",
) -> dict[str, Any]:
    """``semantic``: the bot's own ``retrieve_memories`` (scores, ``score_parts``); ``keyword``: literal grep.

    Always returns the service dict with the hits under ``results`` (the grep answer's ``items`` are copied there),
    so callers read one key. Tag groups are comma-separated strings; the service wants all three or none.
    ``include_superseded=False`` leaves out the memories a later one replaced, in both modes.
    """
    if mode == "keyword":
        result = await service.grep_memories(
            query=query, search_fields=KEYWORD_SEARCH_FIELDS, include_archived=include_archived, top_k=top_k
        )
        hits = [
            item
            for item in result.get("items") or []
            if include_superseded or not item["metadata"].get("superseded_by")
        ]
        return {**result, "results": hits}
    groups = {"core_tags": core_tags, "diffusion_tags": diffusion_tags, "opposing_tags": opposing_tags}
    tags = {name: split_list(value) for name, value in groups.items() if split_list(value)}
    # An administrator looking is not the bot recalling: leave the activation counters alone.
    return await service.retrieve_memories(
        query,
        top_k=top_k,
        include_archived=include_archived,
        include_knowledge=include_knowledge,
        record_activation=False,
        include_superseded=include_superseded,
        **tags,
    )


async def memory_history(service: Any, memory_id: str) -> list[dict[str, Any]]:
    """All revisions, newest first, each with its diff against the previous revision.

    Returns ``[{"version", "action", "created_at", "snapshot", "diff": [DiffLine...], "is_current"}]``.
    """
    result = await service.get_memory_history(memory_id=memory_id)
    versions = sorted(result.get("versions") or [], key=lambda entry: int(entry.get("version", 0)))
    entries: list[dict[str, Any]] = []
    previous: Mapping[str, Any] | None = None
    for entry in versions:
        snapshot = entry.get("snapshot") or {}
        entries.append({**entry, "diff": diff_snapshots(previous, snapshot), "is_current": False})
        previous = snapshot
    if entries:
        entries[-1]["is_current"] = True
    return list(reversed(entries))


def history_as_json(entries: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """History entries with their diff lines as ``{"kind", "text"}`` dicts (JSON-serialisable)."""
    return [{**entry, "diff": [asdict(line) for line in entry["diff"]]} for entry in entries]


async def memory_statistics(service: Any) -> dict[str, Any]:
    """The service's counts plus chart geometry: by type (horizontal bars) and by month (columns)."""
    stats = await service.memory_statistics()
    by_type: Mapping[str, int] = stats.get("by_type") or {}
    ordered_types = [key for key in MEMORY_TYPE_LABELS if key in by_type] + sorted(
        key for key in by_type if key not in MEMORY_TYPE_LABELS
    )
    type_entries = [(MEMORY_TYPE_LABELS.get(key, key), int(by_type[key])) for key in ordered_types]
    by_status: Mapping[str, int] = stats.get("by_status") or {}
    return {
        "stats": stats,
        "type_chart": horizontal_bars(type_entries),
        "month_chart": vertical_bars(month_series(stats.get("by_month") or {})),
        "status_rows": [(STATUS_LABELS.get(key, key), int(value)) for key, value in by_status.items()],
    }


# ------------------------------------------------------------------------------------------------------- memos


async def list_memos(views: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    """Live memos of every owner behind the selected stores, newest first, each with its ``store_key``."""
    items: list[dict[str, Any]] = []
    for store_key, service in views:
        for memo in (await service.list_temporary_memos()).get("items") or []:
            items.append({**memo, "store_key": store_key})
    items.sort(key=lambda memo: (float(memo.get("updated_at") or 0), float(memo.get("created_at") or 0)), reverse=True)
    return {"action": "list_temporary_memos", "total": len(items), "items": items}


async def cancel_memo(views: Sequence[tuple[str, Any]], memo_id: str) -> dict[str, Any]:
    """Cancel one memo of one of the selected stores' owners; ``cancelled`` is 0 when none of them has it."""
    cancelled = 0
    for _, service in views:
        cancelled += int((await service.cancel_temporary_memo(memo_id=memo_id)).get("cancelled") or 0)
        if cancelled:
            break
    return {"action": "cancel_temporary_memo", "cancelled": cancelled}


# ------------------------------------------------------------------------------------------------------- audit


@dataclass(frozen=True)
class AuditFilters(Filters):
    """The audit log filters (``list_audit_log``)."""

    memory_id: str = ""
    authority: str = ""
    action: str = ""
    batch_id: str = ""


@dataclass
class AuditPage:
    """One page of audit rows, newest first, each with its before→after ``diff``."""

    items: list[dict[str, Any]]
    page: int
    page_size: int
    matched: int
    filters: AuditFilters = field(default_factory=AuditFilters)

    @property
    def has_more(self) -> bool:
        return self.page * self.page_size < self.matched

    def as_dict(self) -> dict[str, Any]:
        return {
            "action": "list_audit_log",
            "total": len(self.items),
            "matched": self.matched,
            "page": self.page,
            "page_size": self.page_size,
            "has_more": self.has_more,
            "items": [{**item, "diff": [asdict(line) for line in item["diff"]]} for item in self.items],
        }


async def list_audit(service: Any, filters: AuditFilters, *, page: int, page_size: int) -> AuditPage:
    """A page of the selected stores' audit log matching all filters (``list_audit_log`` validates them)."""
    page = max(page, 1)
    result = await service.list_audit_log(**filters.service_kwargs(), limit=page_size, offset=(page - 1) * page_size)
    items = [{**row, "diff": diff_snapshots(row.get("before"), row.get("after"))} for row in result.get("items") or []]
    return AuditPage(
        items=items, page=page, page_size=page_size, matched=int(result.get("matched") or 0), filters=filters
    )


async def audit_entry(service: Any, audit_id: int, memory_id: str) -> dict[str, Any] | None:
    """One audit row (with its diff) for the restore confirmation, found through the memory's own audit trail."""
    offset = 0
    while True:
        result = await service.list_audit_log(memory_id=memory_id, limit=500, offset=offset)
        rows = result.get("items") or []
        for row in rows:
            if int(row.get("audit_id", -1)) == audit_id:
                return {**row, "diff": diff_snapshots(row.get("before"), row.get("after"))}
        offset += len(rows)
        if not rows or offset >= int(result.get("matched") or 0):
            return None


async def restore_batch(views: Sequence[tuple[str, Any]], batch_id: str) -> dict[str, Any]:
    """Undo one batch in every selected store it touched; ``stores`` lists them, counts are added up."""
    results = [await service.restore_batch(batch_id=batch_id) for _, service in views]
    return {**merge_results(results), "stores": [store_key for store_key, _ in views]}


# ------------------------------------------------------------------------------------------------ index upkeep


def index_health(runtime: Any) -> dict[str, Any]:
    """The vector index's state and its rebuild job (``IndexRecovery.snapshot``) plus why answers are keyword-only
    right now (``degraded_reason``: empty when the vector route works)."""
    return {**runtime.index_recovery.snapshot(), "degraded_reason": runtime.degraded_reason()}


def start_reindex(runtime: Any) -> dict[str, Any]:
    """Start the runtime's reindex job; 409 while a rebuild runs (one at a time)."""
    job = runtime.index_recovery.job
    if job is not None and job.running:
        raise HTTPException(status_code=409, detail=f"已有索引重建任务在运行（{job.done}/{job.total}），请等它完成")
    runtime.index_recovery.start_reindex()
    return index_health(runtime)

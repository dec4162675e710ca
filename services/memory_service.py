"""BookuMemoryService: the public async API other plugins call (``booku_memory:service:booku_memory``).

Signatures, defaults and return keys follow the Booku developer guide exactly; ``retrieve_memories`` and
``upsert_memory`` also take their first argument positionally. The service is a cheap view on the runtime: the
host creates one per ``get_service`` call. Writes live in ``memory_writes``, reads in ``memory_search``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import NotFoundError, ValidationError, VectorIndexUnavailableError
from .logic.tags import triplet_from_lists
from .logic.text import normalise_folder_id
from .memory_fields import (
    DISPOSITION_STATUSES,
    KNOWLEDGE_TYPES,
    MEMORY_TYPES,
    PROCEDURE_TYPES,
    STATUSES,
    build_draft,
    checked_content,
    checked_event_range,
    checked_ids,
    checked_limit,
    checked_min_score,
    checked_person_id,
    checked_title,
    choose,
    clean_text_list,
    finite_timestamp,
    normalise_bucket,
    record_item,
)
from .memory_search import MemorySearch
from .memory_writes import MemoryWriter
from .scope import AUTHORITIES, Scope
from .storage.record_filter import RecordFilter
from .text_input import guarded_text_inputs

if TYPE_CHECKING:
    from .runtime import BookuRuntime


@guarded_text_inputs
class BookuMemoryService:
    """Memory CRUD, hybrid retrieval, lifecycle and history. All methods are async."""

    service_name = "booku_memory"
    service_description = "Booku 长期记忆核心服务：记忆增删改查、EPA 混合检索、生命周期与历史版本"
    version = "2.0.0"

    def __init__(self, runtime: BookuRuntime | None = None, *, scope: Scope | None = None, plugin: Any = None) -> None:
        self._runtime = runtime
        self._scope = scope
        if plugin is not None and runtime is None:
            self._runtime = getattr(plugin, "runtime", None)

    # ------------------------------------------------------------ plumbing
    @property
    def runtime(self) -> BookuRuntime:
        if self._runtime is None:
            raise RuntimeError("Booku 运行时尚未启动")
        return self._runtime

    @property
    def scope(self) -> Scope:
        return self._scope or self.runtime.default_scope

    def _writer(self) -> MemoryWriter:
        return MemoryWriter(self.runtime, self.scope)

    def _search(self) -> MemorySearch:
        return MemorySearch(self.runtime, self.scope)

    def _folder(self, folder_id: Any) -> str:
        return normalise_folder_id(folder_id, self.runtime.config.storage.default_folder_id)

    def _draft(self, fields: dict[str, Any], *, require_triplet: bool):
        """Validate a write request given as the keyword arguments of upsert_memory / create_memory."""
        return build_draft(
            default_folder=self.runtime.config.storage.default_folder_id, require_triplet=require_triplet, **fields
        )

    def _top(self, name: str, value: Any, default: int) -> int:
        return checked_limit(name, value, default=default, maximum=self.runtime.config.retrieval.max_top_k)

    # -------------------------------------------------------------- writes
    async def upsert_memory(
        self,
        content: str,
        *,
        title: str | None = None,
        bucket: str = "memory",
        folder_id: str | None = None,
        tags: list[str] | None = None,
        core_tags: list[str] | None = None,
        diffusion_tags: list[str] | None = None,
        opposing_tags: list[str] | None = None,
        memory_type: str = "knowledge",
        status: str = "active",
        person_id: str | None = None,
        relation_memory_ids: list[str] | None = None,
        relation_aliases: list[str] | None = None,
        event_start_at: float = 0.0,
        event_end_at: float = 0.0,
        related_people: list[str] | None = None,
        knowledge_type: str = "",
        address_or_coord: str = "",
        place_type: str = "",
        asset_type: str = "",
        disposition_status: str = "",
        procedure_type: str = "",
        source: str = "agent",
    ) -> dict:
        """Write a memory, merging it into a near-identical one of the same folder and type.

        Returns ``{"mode": "created"|"merged", "id", "collection", "novelty_energy", "item"}`` (+ ``superseded``:
        ``[{"id", "title"}]`` when the new memory updates an older one, which is then marked superseded, never
        merged or deleted; + ``unsure``: ``[{"id", "kind": "maybe_update"|"maybe_duplicate"}]`` when it may update
        or restate an older one, which a model or a reviewer decides after the write; + ``degraded``). A merge keeps
        both texts and the previous version stays in the history.
        """
        fields = dict(locals())  # exactly the documented keywords, passed on unchanged
        del fields["self"]
        return await self._writer().upsert(self._draft(fields, require_triplet=False))

    async def create_memory(
        self,
        *,
        title: str,
        content: str,
        folder_id: str | None = None,
        bucket: str = "emergent",
        core_tags: list[str] | None = None,
        diffusion_tags: list[str] | None = None,
        opposing_tags: list[str] | None = None,
        memory_type: str = "knowledge",
        status: str = "active",
        person_id: str | None = None,
        relation_memory_ids: list[str] | None = None,
        relation_aliases: list[str] | None = None,
        event_start_at: float = 0.0,
        event_end_at: float = 0.0,
        related_people: list[str] | None = None,
        knowledge_type: str = "",
        address_or_coord: str = "",
        place_type: str = "",
        asset_type: str = "",
        disposition_status: str = "",
        procedure_type: str = "",
        tags: list[str] | None = None,
        source: str = "agent",
    ) -> dict:
        """Create a memory (new records start in the emergent layer). All three tag groups are required.

        Returns ``{"action": "create_memory", "mode", "total": 1, "items": [item], "id"}`` (+ ``superseded`` and
        ``unsure`` as ``upsert_memory`` gives them). Like the reference it goes through the merge check, so ``mode`` may
        be ``merged`` for a restatement of an existing memory.
        """
        fields = dict(locals())
        del fields["self"]
        result = await self._writer().upsert(self._draft(fields, require_triplet=True))
        response = {
            "action": "create_memory",
            "mode": result["mode"],
            "total": 1,
            "id": result["id"],
            "items": [result["item"]],
        }
        for key in ("superseded", "unsure", "degraded"):
            if key in result:
                response[key] = result[key]
        return response

    async def create_temporary_memo(
        self, *, content: str, expire_hours: float = 2.0, stream_id: str | None = None, allow_shorten: bool = False
    ) -> dict:
        """Create or refresh a short-lived memo for a chat stream; a refresh never shortens a later expiry.

        Returns ``{"action", "mode": "created"|"refreshed", "memo_id", "expires_at", "active_memo_count", "item"}``.
        """
        return await self._writer().create_memo(content, expire_hours, stream_id, allow_shorten)

    async def list_temporary_memos(self, *, stream_id: str | None = None) -> dict:
        """Live memos of one stream (all streams when None). Returns ``{"action", "total", "items"}``."""
        items = await self.runtime.memos.list_active(
            owner_uid=self.scope.owner_uid, stream_id=None if stream_id is None else str(stream_id).strip()
        )
        public = [
            {k: m[k] for k in ("memo_id", "stream_id", "content", "expires_at", "created_at", "updated_at")}
            for m in items
        ]
        return {"action": "list_temporary_memos", "total": len(public), "items": public}

    async def cancel_temporary_memo(
        self, *, memo_id: str | None = None, content: str | None = None, stream_id: str | None = None
    ) -> dict:
        """Cancel memos by id or by content (within a stream when given). Returns ``{"action", "cancelled"}``."""
        if not (memo_id or content):
            raise ValidationError("取消临时备忘录需要 memo_id 或 content")
        cancelled = await self.runtime.memos.cancel(
            owner_uid=self.scope.owner_uid,
            stream_id=stream_id,
            memo_id=memo_id,
            content=(content or "").strip() or None,
        )
        await self.runtime.notify_changed("memo", [])
        return {"action": "cancel_temporary_memo", "cancelled": cancelled}

    # ------------------------------------------------------------- retrieval
    async def retrieve_memories(
        self,
        query_text: str,
        *,
        top_k: int | None = None,
        include_archived: bool | None = None,
        include_knowledge: bool | None = None,
        core_tags: list[str] | None = None,
        diffusion_tags: list[str] | None = None,
        opposing_tags: list[str] | None = None,
        record_activation: bool = True,
        include_superseded: bool = True,
        min_score: float | None = None,
    ) -> dict:
        """Hybrid EPA retrieval. Returns ``{"query", "logic_depth", "resonance", "beta", "total", "results"}``;
        each result is an item plus ``score``, ``score_parts`` and ``collection``; ``degraded`` when keyword-only.
        ``record_activation=False`` (an administrator looking) leaves the recall counters alone. A memory a later
        one replaced carries ``metadata.superseded_by`` and ranks below its successor (above it for a question
        about the past), and every result the reverse link ``metadata.supersedes`` (the ids it replaced);
        ``include_superseded=False`` leaves superseded memories out. ``min_score``: the relevance
        floor, how far (in cosine) a result must score above the query's score against small talk unless it holds
        most of the query's words, matches its date or answers such a result (``logic.relevance``); fewer than
        ``top_k`` results then come back. ``None`` = ``retrieval.min_score``, 0 = off.
        """
        text = str(query_text or "").strip()
        if not text:
            raise ValidationError("query_text 不能为空")
        cfg = self.runtime.config.retrieval
        triplet = triplet_from_lists(core_tags, diffusion_tags, opposing_tags, required=False, allow_partial=True)
        found = await self._search().retrieve(
            text,
            top_k=self._top("top_k", top_k, cfg.default_top_k),
            include_archived=cfg.include_archived_default if include_archived is None else bool(include_archived),
            include_knowledge=cfg.include_knowledge_default if include_knowledge is None else bool(include_knowledge),
            triplet=triplet,
            record_activation=bool(record_activation),
            include_superseded=bool(include_superseded),
            min_score=checked_min_score(min_score),
        )
        await self._with_supersedes(found["results"])
        return found

    async def search_memory_entries(
        self,
        *,
        top_n: int = 10,
        query_text: str | None = None,
        memory_type: str | None = None,
        status: str | None = None,
        person_id: str | None = None,
        relation_of: str | None = None,
        include_archived: bool = False,
        include_knowledge: bool = True,
        include_related: bool = False,
        core_tags: list[str] | None = None,
        diffusion_tags: list[str] | None = None,
        opposing_tags: list[str] | None = None,
        include_superseded: bool = True,
    ) -> dict:
        """Filtered search (the tool's ``search``). Returns ``{"action", "total", "items"}``, items ranked; a memory
        a later one replaced carries ``metadata.superseded_by``, and ``include_superseded=False`` leaves it out."""
        triplet = triplet_from_lists(core_tags, diffusion_tags, opposing_tags, required=False)
        top = self._top("top_n", top_n, 10)
        found = await self._search().search_entries(
            top_n=top if include_superseded else top * 2,
            query_text=query_text,
            memory_type=choose("memory_type", memory_type, MEMORY_TYPES) if memory_type else None,
            status=choose("status", status, STATUSES) if status else None,
            person_id=(person_id or "").strip() or None,
            relation_of=(relation_of or "").strip() or None,
            include_archived=bool(include_archived),
            include_knowledge=bool(include_knowledge),
            include_related=bool(include_related),
            triplet=triplet,
        )
        if not include_superseded:
            # Ranked twice as deep above, so leaving out superseded memories does not leave the list short.
            found["items"] = [item for item in found["items"] if not item["metadata"].get("superseded_by")][:top]
            found["total"] = len(found["items"])
        return found

    async def grep_memories(
        self,
        *,
        query: str,
        search_fields: list[str],
        folder_id: str | None = None,
        include_archived: bool = False,
        top_k: int = 10,
        use_regex: bool = False,
    ) -> dict:
        """Literal or regex match in chosen fields (title/summary/content/tags/metadata), newest first.

        Returns ``{"action": "grep_memories", "query", "total", "items"}``.
        """
        return await self._search().grep(
            query=query,
            search_fields=search_fields,
            folder_id=self._folder(folder_id) if folder_id else None,
            include_archived=bool(include_archived),
            top_k=self._top("top_k", top_k, 10),
            use_regex=bool(use_regex),
        )

    # ----------------------------------------------------------------- reads
    async def read_full_content(self, *, memory_ids: list[str]) -> dict:
        """Full text of the given memories in request order. Returns ``{"action", "requested", "total", "items",
        "missing"}``; unknown, deleted or invisible ids are listed in ``missing``."""
        ids = checked_ids(memory_ids)
        records = await self._writer().visible(ids, include_deleted=False)
        items = await self._with_supersedes([record_item(records[i], full=True) for i in ids if i in records])
        return {
            "action": "read",
            "requested": len(ids),
            "total": len(items),
            "items": items,
            "missing": [i for i in ids if i not in records],
        }

    async def _with_supersedes(self, items: list[dict]) -> list[dict]:
        """``items`` with ``metadata.supersedes``: the ids of the memories each one replaced (the reverse of
        ``superseded_by``, read through migration 0014's index), oldest first."""
        replaced = await self.runtime.records.superseded_of([item["id"] for item in items])
        for item in items:
            item["metadata"]["supersedes"] = replaced.get(item["id"], [])
        return items

    async def get_memory_detail(self, *, memory_id: str, include_deleted: bool = True) -> dict:
        """One memory in full. Returns ``{"action": "get_memory_detail", "found", "item"}``."""
        ids = checked_ids([memory_id], "memory_id")
        record = (await self._writer().visible(ids, include_deleted=bool(include_deleted))).get(ids[0])
        item = (await self._with_supersedes([record_item(record, full=True)]))[0] if record else None
        return {"action": "get_memory_detail", "found": record is not None, "item": item}

    async def list_memory_entries(
        self,
        *,
        keyword: str | None = None,
        memory_type: str | None = None,
        status: str | None = None,
        person_id: str | None = None,
        folder_id: str | None = None,
        bucket: str | None = None,
        include_archived: bool = True,
        include_deleted: bool = False,
        limit: int = 50,
        offset: int = 0,
        tag: str | None = None,
        only_deleted: bool = False,
    ) -> dict:
        """Structured listing for admins and client plugins, newest first.

        Returns ``{"action": "list_memory_entries", "total", "items", "matched", "offset"}``; ``matched`` counts
        every row the filters match (for pagination).
        """
        statuses = None
        if status:
            statuses = (choose("status", status, STATUSES),)
        elif not include_archived:
            statuses = ("active",)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValidationError("offset 必须是非负整数")
        flt = RecordFilter(
            store_keys=self.scope.readable_store_keys,
            buckets=(normalise_bucket(bucket),) if bucket else ("memory",),
            statuses=statuses,
            memory_types=(choose("memory_type", memory_type, MEMORY_TYPES),) if memory_type else None,
            person_id=(person_id or "").strip() or None,
            folder_id=self._folder(folder_id) if folder_id and str(folder_id).strip() else None,
            tag=(tag or "").strip() or None,
            include_deleted=bool(include_deleted) or bool(only_deleted),
            only_deleted=bool(only_deleted),
        )
        size = self._top("limit", limit, 50)
        word = (keyword or "").strip() or None
        records = await self.runtime.records.list_records(flt, keyword=word, limit=size, offset=offset)
        matched = await self.runtime.records.count_records(flt, keyword=word)
        items = [record_item(r, snippet_chars=self.runtime.config.retrieval.snippet_chars) for r in records]
        return {
            "action": "list_memory_entries",
            "total": len(items),
            "items": items,
            "matched": matched,
            "offset": offset,
        }

    async def query_memory_status(
        self, *, folder_id: str | None = None, include_archived: bool = True, recent_limit: int = 8
    ) -> dict:
        """Counts per layer, recent memories and ids of one folder (``folder_id=None``: the default folder).

        Returns ``{"folder_id", "vector_counts", "metadata_counts", "recent", "folder_memory_ids"}``.
        """
        folder = self._folder(folder_id)
        limit = checked_limit("recent_limit", recent_limit, default=8, maximum=200)
        return await self._status(folder, include_archived=bool(include_archived), recent_limit=limit)

    async def _status(self, folder: str | None, *, include_archived: bool, recent_limit: int) -> dict:
        stores = self.scope.readable_store_keys
        try:
            vector_counts = await self.runtime.vectors.count(store_keys=stores)
            counted = True
        except VectorIndexUnavailableError:  # broken or being rebuilt: ``index`` below says which
            vector_counts, counted = {"live": 0, "archive": 0, "knowledge": 0}, False
        flt = RecordFilter(store_keys=stores, folder_id=folder, statuses=None if include_archived else ("active",))
        recent = await self.runtime.records.list_records(flt, limit=recent_limit)
        ids = (
            [] if folder is None else [r["memory_id"] for r in await self.runtime.records.list_records(flt, limit=200)]
        )
        return {
            "action": "query_memory_status",
            "folder_id": folder or "all",
            "vector_counts": {
                "memory": vector_counts["live"] + vector_counts["archive"],
                "knowledge": vector_counts["knowledge"],
                **vector_counts,
            }
            if counted
            else {},
            "metadata_counts": await self.runtime.records.bucket_counts(store_keys=stores, folder_id=folder),
            "recent": [record_item(r) for r in recent],
            "folder_memory_ids": ids,
            "vector_pending": await self.runtime.vector_sync.pending_count(),
            "embedding": {
                "available": self.runtime.embedding_available(),
                "model": self.runtime.vectors.model_id,
                "degraded_reason": self.runtime.degraded_reason(),
            },
            "index": self.runtime.index_recovery.snapshot(),
        }

    async def get_status(self, folder_id: str | None = None) -> dict:
        """Simplified status: ``{"folder_id", "counts": {"vector", "metadata"}, "recent", "folder_memory_ids",
        "vector_pending", "embedding", "time_zone": {"name", "source", "label"}}``; without a folder it covers every
        folder (``folder_id == "all"``). ``time_zone``: the zone a query's dates are read in, and where it came from
        (``config`` | ``TZ`` | ``system``)."""
        folder = self._folder(folder_id) if folder_id else None
        status = await self._status(folder, include_archived=True, recent_limit=8)
        return {
            "folder_id": status["folder_id"],
            "counts": {"vector": status["vector_counts"], "metadata": status["metadata_counts"]},
            "recent": status["recent"],
            "folder_memory_ids": status["folder_memory_ids"],
            "vector_pending": status["vector_pending"],
            "embedding": status["embedding"],
            "index": status["index"],
            "time_zone": self.runtime.time_zone.describe(),
        }

    async def list_folder_ids(self) -> dict:
        """Folders in use, default first. Returns ``{"action": "list_folder_ids", "total", "items"}``."""
        default = self.runtime.config.storage.default_folder_id.strip().lower() or "default"
        folders = await self.runtime.records.distinct_folders(store_keys=self.scope.readable_store_keys)
        items = [default] + [f for f in folders if f != default]
        return {"action": "list_folder_ids", "total": len(items), "items": items}

    async def suggest_tags(self, *, limit: int = 50) -> dict:
        """Tags already in use, for a form to offer (the dashboard's datalists).

        Returns ``{"action": "suggest_tags", "core_tags": [...], "diffusion_tags": [...], "opposing_tags": [...]}``,
        each the group's ``limit`` most used tags among the readable live memories, most used first.
        """
        limit = checked_limit("limit", limit, default=50, maximum=500)
        groups = await self.runtime.records.frequent_tags(store_keys=self.scope.readable_store_keys, limit=limit)
        return {"action": "suggest_tags", **{f"{group}_tags": tags for group, tags in groups.items()}}

    async def memory_statistics(self) -> dict:
        """Counts by type, status and creation month for the dashboard."""
        flt = RecordFilter(store_keys=self.scope.readable_store_keys)
        by_type = await self.runtime.records.grouped_counts("memory_type", flt)
        return {
            "action": "memory_statistics",
            "total": sum(by_type.values()),
            "by_type": by_type,
            "by_status": await self.runtime.records.grouped_counts("status", flt),
            "by_month": await self.runtime.records.grouped_counts("month", flt),
            "deleted": await self.runtime.records.count_records(
                RecordFilter(store_keys=self.scope.readable_store_keys, only_deleted=True)
            ),
        }

    # -------------------------------------------------------------- mutations
    async def update_memory_by_id(
        self,
        *,
        memory_id: str,
        title: str | None = None,
        content: str | None = None,
        core_tags: list[str] | None = None,
        diffusion_tags: list[str] | None = None,
        opposing_tags: list[str] | None = None,
        memory_type: str | None = None,
        status: str | None = None,
        person_id: str | None = None,
        relation_memory_ids: list[str] | None = None,
        relation_aliases: list[str] | None = None,
        event_start_at: float | None = None,
        event_end_at: float | None = None,
        related_people: list[str] | None = None,
        knowledge_type: str | None = None,
        address_or_coord: str | None = None,
        place_type: str | None = None,
        asset_type: str | None = None,
        disposition_status: str | None = None,
        procedure_type: str | None = None,
        tags: list[str] | None = None,
        folder_id: str | None = None,
    ) -> dict:
        """Update given fields in place (None = keep). Tags: the three groups together, or none (kept).

        Returns ``{"action": "update_memory_by_id", "updated": 0|1, "items", "missing", "changed_fields"}``.
        Only title/content changes re-embed.
        """
        memory_id = checked_ids([memory_id], "memory_id")[0]
        current = (await self._writer().writable([memory_id], include_deleted=False)).get(memory_id)
        if current is None:
            return {
                "action": "update_memory_by_id",
                "updated": 0,
                "items": [],
                "missing": [memory_id],
                "changed_fields": [],
            }
        changes: dict[str, Any] = {}
        if content is not None:
            changes["content"] = checked_content(content)
        if title is not None:
            changes["title"] = checked_title(title, changes.get("content", current["content"]))
        if any(group is not None for group in (core_tags, diffusion_tags, opposing_tags)):
            triplet = triplet_from_lists(core_tags, diffusion_tags, opposing_tags, required=True)
            changes.update(core_tags=triplet.core, diffusion_tags=triplet.diffusion, opposing_tags=triplet.opposing)
        if tags is not None:
            changes["tags"] = clean_text_list("tags", tags)
        if memory_type is not None:
            changes["memory_type"] = choose("memory_type", memory_type, MEMORY_TYPES)
        if status is not None:
            changes["status"] = choose("status", status, STATUSES)
        kind = changes.get("memory_type", current["memory_type"])
        if person_id is not None or kind == "person":
            changes["person_id"] = checked_person_id(kind, current.get("person_id") if person_id is None else person_id)
        for name, values in (
            ("relation_memory_ids", relation_memory_ids),
            ("relation_aliases", relation_aliases),
            ("related_people", related_people),
        ):
            if values is not None:
                changes[name] = clean_text_list(name, values)
        start = (
            finite_timestamp("event_start_at", event_start_at)
            if event_start_at is not None
            else current["event_start_at"]
        )
        end = finite_timestamp("event_end_at", event_end_at) if event_end_at is not None else current["event_end_at"]
        checked_event_range(start, end)
        if event_start_at is not None:
            changes["event_start_at"] = start
        if event_end_at is not None:
            changes["event_end_at"] = end
        if event_start_at is not None or event_end_at is not None:
            changes["time_zone"] = self.runtime.time_zone.name  # the new times were meant in this deployment's zone
        for name, value, options in (
            ("knowledge_type", knowledge_type, KNOWLEDGE_TYPES),
            ("procedure_type", procedure_type, PROCEDURE_TYPES),
            ("disposition_status", disposition_status, DISPOSITION_STATUSES),
        ):
            if value is not None:
                changes[name] = choose(name, value, options)
        for name, value in (
            ("address_or_coord", address_or_coord),
            ("place_type", place_type),
            ("asset_type", asset_type),
        ):
            if value is not None:
                changes[name] = str(value).strip() if name == "address_or_coord" else str(value).strip().lower()
        if folder_id is not None:
            changes["folder_id"] = self._folder(folder_id)
        return await self._writer().update(memory_id, changes)

    async def delete_memories(self, *, memory_ids: list[str], hard: bool = False) -> dict:
        """Soft delete (default, restorable) or hard delete (the last version stays in the history).

        Returns ``{"action": "delete_memories", "mode": "soft"|"hard", "deleted", "requested", "missing"}``.
        """
        ids = checked_ids(memory_ids)
        return await (self._writer().hard_delete(ids) if hard else self._writer().soft_delete(ids))

    async def restore_memories(self, *, memory_ids: list[str]) -> dict:
        """Undo soft deletes. Returns ``{"action": "restore_memories", "restored", "missing", "items"}``."""
        return await self._writer().restore(checked_ids(memory_ids))

    async def move_memories(
        self, *, memory_ids: list[str], to_bucket: str | None = None, to_folder_id: str | None = None
    ) -> dict:
        """Move memories to another folder and/or bucket.

        Returns ``{"action": "move_memories", "moved", "items", "to_bucket", "to_folder_id", "missing"}``.
        """
        ids = checked_ids(memory_ids)
        changes: dict[str, Any] = {}
        if to_bucket is not None:
            changes["bucket"] = normalise_bucket(to_bucket)
            if str(to_bucket).strip().lower() == "archived":
                changes["status"] = "archived"
        if to_folder_id is not None:
            changes["folder_id"] = self._folder(to_folder_id)
        if not changes:
            return {
                "action": "move_memories",
                "moved": 0,
                "items": [],
                "to_bucket": None,
                "to_folder_id": None,
                "missing": [],
            }
        moved, _, missing = await self._writer().change_many(ids, changes, action="move")
        return {
            "action": "move_memories",
            "moved": len(moved),
            "items": [record_item(r) for r in moved],
            "to_bucket": changes.get("bucket"),
            "to_folder_id": changes.get("folder_id"),
            "missing": missing,
        }

    async def archive_memories(self, memory_ids: list[str], *, folder_id: str | None = None) -> dict:
        """Move active (emergent) memories to the archive layer; the vector follows, nothing is lost.

        Returns ``{"action": "archive_memories", "archived", "skipped", "missing"}``.
        """
        ids = checked_ids(memory_ids)
        folder = self._folder(folder_id) if folder_id else None
        archived, skipped, missing = await self._writer().change_many(
            ids,
            {"status": "archived"},
            action="archive",
            only_if=lambda r: (
                r["bucket"] == "memory" and r["status"] != "archived" and (folder is None or r["folder_id"] == folder)
            ),
        )
        return {
            "action": "archive_memories",
            "archived": len(archived),
            "skipped": len(skipped) + len(missing),
            "missing": missing,
            "ids": [r["memory_id"] for r in archived],
        }

    async def update_activated(self, memory_id: str) -> None:
        """Count one activation (recall) of a memory; unknown ids raise NotFoundError."""
        ids = checked_ids([memory_id], "memory_id")
        if not await self._writer().visible(ids, include_deleted=False):
            raise NotFoundError(f"记忆 {ids[0]} 不存在")
        await self.runtime.records.bump_activation(ids)

    async def promote_stale_emergent(self, folder_id: str | None = None) -> dict:
        """Close the emergent window: promote recalled memories to the archive, expire the rest (recoverable).

        Returns ``{"action", "promoted", "discarded", "folder_id", "promoted_ids", "expired_ids"}``.
        """
        return await self._writer().promote_stale_emergent(self._folder(folder_id) if folder_id else None)

    # --------------------------------------------------------------- history
    async def get_memory_history(self, *, memory_id: str) -> dict:
        """Every version of a memory, oldest first: ``{"action", "memory_id", "versions": [{"version", "action",
        "actor", "note", "created_at", "snapshot"}]}``."""
        ids = checked_ids([memory_id], "memory_id")
        versions = await self.runtime.records.history(ids[0])
        readable = set(self.scope.readable_store_keys)
        versions = [v for v in versions if v["snapshot"].get("store_key") in readable]
        if not versions:
            raise NotFoundError(f"记忆 {ids[0]} 不存在或没有历史版本")
        return {"action": "get_memory_history", "memory_id": ids[0], "versions": versions}

    async def revert_memory(self, *, memory_id: str, version: int) -> dict:
        """Restore any earlier version (as a new version; nothing is overwritten).

        Returns ``{"action": "revert_memory", "memory_id", "reverted_to", "version", "item"}``.
        """
        ids = checked_ids([memory_id], "memory_id")
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise ValidationError("version 必须是正整数（见 get_memory_history 的 versions）")
        return await self._writer().revert(ids[0], version)

    # ----------------------------------------------------------------- audit
    async def supersede_memory(self, *, memory_id: str, superseded_by: str) -> dict:
        """Mark a memory superseded by a newer one by hand (what the write path does when it recognises an update;
        audited, undone by ``unsupersede_memory``). Returns ``{"action": "supersede_memory", "memory_id",
        "superseded_by", "version", "item"}``."""
        old = checked_ids([memory_id], "memory_id")[0]
        new = checked_ids([superseded_by], "superseded_by")[0]
        return await self._writer().supersede(old, new)

    async def unsupersede_memory(self, *, memory_id: str) -> dict:
        """Undo a supersession ("撤销取代"): the memory counts as current again (audited; ``revert_memory`` to the
        version before the ``supersede`` revision does the same). Returns ``{"action": "unsupersede_memory",
        "memory_id", "was_superseded_by", "version", "item"}``."""
        ids = checked_ids([memory_id], "memory_id")
        return await self._writer().unsupersede(ids[0])

    async def list_audit_log(
        self,
        *,
        memory_id: str | None = None,
        authority: str | None = None,
        action: str | None = None,
        batch_id: str | None = None,
        limit: int = 50,
        offset: int = 0,
    ) -> dict:
        """Append-only audit rows of this scope's stores, newest first: who (authority, actor), when, why (cause),
        and the before/after state. Returns ``{"action", "total", "matched", "items"}``."""
        if authority is not None:
            choose("authority", authority, AUTHORITIES)
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValidationError("offset 必须是非负整数")
        items, matched = await self.runtime.audit.list(
            store_keys=self.scope.readable_store_keys,
            memory_id=memory_id or None,
            authority=authority,
            action=action or None,
            batch_id=batch_id or None,
            limit=checked_limit("limit", limit, default=50, maximum=500),
            offset=offset,
        )
        return {"action": "list_audit_log", "total": len(items), "matched": matched, "items": items}

    async def restore_from_audit(self, *, audit_id: int) -> dict:
        """Undo one audited change: the record goes back to its state before it (itself audited).

        Returns ``{"action": "restore_from_audit", "audit_id", "restored": [ids]}``.
        """
        if isinstance(audit_id, bool) or not isinstance(audit_id, int):
            raise ValidationError("audit_id 必须是整数")
        entry = await self.runtime.audit.get(audit_id, store_keys=[self.scope.writable_store_key])
        if entry is None:
            raise NotFoundError(f"审计记录 {audit_id} 不存在")
        restored = await self._writer().restore_audit_entries([entry], cause=f"audit:{audit_id}")
        return {"action": "restore_from_audit", "audit_id": audit_id, "restored": restored}

    async def restore_batch(self, *, batch_id: str) -> dict:
        """Undo every change of one batch (e.g. one dreaming run), newest first.

        Returns ``{"action": "restore_batch", "batch_id", "changes", "restored": [ids]}``.
        """
        text = str(batch_id or "").strip()
        if not text:
            raise ValidationError("batch_id 不能为空")
        entries = await self.runtime.audit.batch(text, store_keys=[self.scope.writable_store_key])
        if not entries:
            raise NotFoundError(f"批次 {text} 没有可恢复的审计记录")
        restored = await self._writer().restore_audit_entries(entries, cause=f"batch:{text}")
        return {"action": "restore_batch", "batch_id": text, "changes": len(entries), "restored": restored}

    # ---------------------------------------------------------------- recall
    async def recall(
        self,
        query: str,
        quotas: dict | None = None,
        max_chars: int = 6500,
        min_score: float = 0.1,
        peer_scope: str = "all",
        other_peer_penalty: float | dict | None = None,
        render: bool = True,
        *,
        actor_peer_id: str | None = None,
    ) -> dict:
        """Typed recall (OpenViking style): per-category retrieval with quotas, rendered within ``max_chars``.

        Returns ``{"entries": [{uri, score, type, mode, rank, origin, content|summary, abstract}], "rendered",
        "stats"}``. ``actor_peer_id`` (the current speaker, ``platform:id``) comes from trusted host data; it
        defaults to the scope's ``extra["actor_peer_id"]``.
        """
        from .typed_recall import TypedRecall

        peer = actor_peer_id or self.scope.extra.get("actor_peer_id")
        return await TypedRecall(self.runtime, self.scope).recall(
            query,
            quotas=quotas,
            max_chars=max_chars,
            min_score=min_score,
            peer_scope=peer_scope,
            other_peer_penalty=other_peer_penalty,
            render=bool(render),
            actor_peer_id=peer,
        )

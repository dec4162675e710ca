"""Human review of dreaming proposals and of memories whose evidence was retracted.

Nothing is promoted without a human: every decision here requires a scope with ``human`` authority (the dashboard's
``admin_scope``), and an approval writes the memory through ``BookuMemoryService`` as ``human``, in the proposal's
own store and on behalf of its owner, with the proposal's provenance kept three ways: the
``booku_memory_provenance`` row, a ``provenance`` entry in the memory's ``extra`` (an audited revision), and the
audit trail (the memory's own rows carry batch ``review:<proposal id>`` and cause ``proposal:<proposal id>``).

An approval is two commits (the memory service writes the memory, then the proposal is marked approved). If the
process dies in between, the next approval of the same proposal finds the memory through the audit rows of its
``review:<proposal id>`` batch and only finishes the bookkeeping: the memory is not written twice. Undoing an
approval is ``restore_batch("review:<proposal id>")`` on the memory service.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..memory_fields import MAX_CONTENT_CHARS, checked_limit, record_item
from ..scope import Scope, WriteContext
from .audit_events import flag_subject, write_event
from .dream_store import PROPOSAL_STATUSES
from .hub import EvidenceHub, evidence_hub
from .prompts import TAG_GROUPS
from .proposals import owner_scope

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

EDITABLE_FIELDS = ("title", "content", "memory_type", *TAG_GROUPS)
MAX_REASON_CHARS = 500
FLAG_RESOLUTIONS = ("kept", "deleted")
PROPOSAL_SOURCE = "dreaming_proposal"


def review_batch(proposal_id: str) -> str:
    """The batch id of the writes an approval makes (undo with ``restore_batch``)."""
    return f"review:{proposal_id}"


def public_proposal(proposal: dict[str, Any]) -> dict[str, Any]:
    """The proposal as services and pages show it (fields flattened, status and provenance explicit)."""
    fields = proposal["fields"] or {}
    return {
        "id": proposal["proposal_id"],
        "kind": proposal["kind"],
        "status": proposal["status"],
        "authority": proposal["authority"],
        "store_key": proposal["store_key"],
        "owner_uid": proposal["owner_uid"],
        "title": fields.get("title", ""),
        "content": fields.get("content", ""),
        "memory_type": fields.get("memory_type", ""),
        "fields": fields,
        "reason": proposal["reason"],
        "target_memory_id": proposal["target_memory_id"],
        "batch_id": proposal["batch_id"],
        "model_id": proposal["model_id"],
        "created_at": proposal["created_at"],
        "reviewed_at": proposal["reviewed_at"],
        "reviewer": proposal["reviewer"],
        "review_reason": proposal["review_reason"],
        "final_fields": proposal["final_fields"],
        "memory_id": proposal["memory_id"],
        "redacted": bool(proposal["redacted_at"]),
    }


def public_message(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": message["entry_id"],
        "stream_id": message["stream_id"],
        "store_key": message["store_key"],
        "sender": message["sender_name"] or message["sender_id"],
        "sender_id": message["sender_id"],
        "direction": message["direction"],
        "sent_at": message["sent_at"],
        "text": message["text"],
        "retracted": bool(message["retracted_at"]),
        "retraction": message["retraction"],
        "retracted_at": message["retracted_at"],
        "message_id": message["message_id"],
    }


def _clean_list(name: str, value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [part for part in value.replace("，", ",").split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{name} 必须是字符串列表")
    return [v.strip() for v in value if v.strip()]


def checked_edits(edits: Any) -> dict[str, Any]:
    """The fields a reviewer may change before approving, validated (content/title limits as the service's)."""
    if edits is None:
        return {}
    if not isinstance(edits, dict):
        raise ValidationError(f"edits 必须是对象，可改字段：{'、'.join(EDITABLE_FIELDS)}")
    unknown = [k for k in edits if k not in EDITABLE_FIELDS]
    if unknown:
        raise ValidationError(f"edits 中的字段 {', '.join(unknown)} 不可修改，可改字段：{'、'.join(EDITABLE_FIELDS)}")
    clean: dict[str, Any] = {}
    for name, value in edits.items():
        if name in TAG_GROUPS:
            clean[name] = _clean_list(name, value)
        elif value is not None:
            if not isinstance(value, str):
                raise ValidationError(f"{name} 必须是字符串")
            clean[name] = value.strip()
    if "content" in clean and not clean["content"]:
        raise ValidationError("content 不能为空")
    if len(clean.get("content", "")) > MAX_CONTENT_CHARS:
        raise ValidationError(f"content 最多 {MAX_CONTENT_CHARS} 个字符")
    return clean


class ReviewService:
    """The review queue: list, look at the evidence, approve (optionally edited), reject, resolve flags."""

    def __init__(self, runtime: Any, scope: Scope | None = None, *, hub: EvidenceHub | None = None) -> None:
        self.rt: BookuRuntime = runtime
        self.scope = scope or runtime.default_scope
        self.hub = hub or evidence_hub(runtime)

    def _require_human(self, what: str) -> None:
        if self.scope.authority != "human":
            raise ValidationError(f"{what}需要人工（human）权限，当前为 {self.scope.authority}：提案只能由人来决定")

    @property
    def _stores(self) -> list[str]:
        return list(self.scope.readable_store_keys)

    async def _proposal(self, proposal_id: Any) -> dict[str, Any]:
        pid = str(proposal_id or "").strip()
        if not pid:
            raise ValidationError("proposal_id 不能为空")
        found = (await self.hub.dream_store.proposals([pid], store_keys=self._stores)).get(pid)
        if found is None:
            raise NotFoundError(f"提案 {pid} 不存在或不在当前可见的记忆库中")
        return found

    # --------------------------------------------------------------- reading
    async def list_proposals(
        self, *, status: str | None = "pending", batch_id: str | None = None, limit: int = 50, offset: int = 0
    ) -> dict[str, Any]:
        """Proposals of the visible stores (pending: oldest first). Returns ``{"action", "total", "matched",
        "items", "counts"}``."""
        if status is not None and status not in PROPOSAL_STATUSES:
            raise ValidationError(f"status 取值 {status!r} 无效，可选：{'、'.join(PROPOSAL_STATUSES)}")
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValidationError("offset 必须是非负整数")
        size = checked_limit("limit", limit, default=50, maximum=500)
        items, matched = await self.hub.dream_store.list_proposals(
            store_keys=self._stores, status=status, batch_id=batch_id or None, limit=size, offset=offset
        )
        return {
            "action": "list_proposals",
            "total": len(items),
            "matched": matched,
            "items": [public_proposal(p) for p in items],
            "counts": await self.hub.dream_store.status_counts(store_keys=self._stores),
        }

    async def get_proposal(self, proposal_id: str) -> dict[str, Any]:
        """One proposal with its evidence side by side: ``{"action", "proposal", "messages": [cited messages],
        "episodes": [cited episodes, each with its "messages"], messages oldest first, "target": the memory an update
        changes (or None), "audit": [audit rows about the proposal]}``. Retracted messages show ``retracted`` and no
        text; removed episodes show ``removed``."""
        proposal = await self._proposal(proposal_id)
        pid = proposal["proposal_id"]
        evidence = (await self.hub.dream_store.evidence([pid]))[pid]
        direct = [e["ref_id"] for e in evidence if e["kind"] == "message"]
        episode_ids = [e["ref_id"] for e in evidence if e["kind"] == "episode"]
        via: dict[str, list[str]] = {}
        for e in evidence:
            if e["kind"] == "episode_message":
                via.setdefault(e["via"], []).append(e["ref_id"])
        all_ids = list(dict.fromkeys([*direct, *(i for ids in via.values() for i in ids)]))
        messages = await self.hub.chat_log.messages(all_ids, store_keys=[proposal["store_key"]])
        episodes = await self.hub.chat_log.episodes(episode_ids, store_keys=[proposal["store_key"]])

        def shown(entry_id: str) -> dict[str, Any]:
            message = messages.get(entry_id)
            return (
                public_message(message) if message else {"id": entry_id, "missing": True, "retracted": True, "text": ""}
            )

        episode_views = []
        for episode_id in episode_ids:
            episode = episodes.get(episode_id)
            covered = sorted(via.get(episode_id, []), key=lambda i: (messages.get(i) or {}).get("sent_at", 0))
            episode_views.append(
                {
                    "id": episode_id,
                    "removed": episode is None,
                    "topic": episode["topic"] if episode else "",
                    "summary": episode["summary"] if episode else "",
                    "start_at": episode["start_at"] if episode else 0.0,
                    "end_at": episode["end_at"] if episode else 0.0,
                    "messages": [shown(i) for i in covered],
                }
            )
        target = None
        if proposal["target_memory_id"]:
            record = (await self.rt.records.get_many([proposal["target_memory_id"]], include_deleted=True)).get(
                proposal["target_memory_id"]
            )
            if record is not None and record["store_key"] == proposal["store_key"]:
                target = record_item(record, full=True)
        audit, _ = await self.rt.audit.list(store_keys=[proposal["store_key"]], memory_id=pid, limit=50)
        direct.sort(key=lambda i: ((messages.get(i) or {}).get("sent_at", 0), i))
        return {
            "action": "get_proposal",
            "proposal": public_proposal(proposal),
            "messages": [shown(i) for i in direct],
            "episodes": episode_views,
            "target": target,
            "audit": audit,
        }

    # ------------------------------------------------------------- decisions
    async def _prior_write(self, proposal: dict[str, Any]) -> str | None:
        """The memory a half-finished earlier approval of this proposal already wrote (from its audit batch)."""
        return await self.rt.db.fetch_value(
            "SELECT memory_id FROM booku_audit_log WHERE batch_id = ? AND store_key = ? "
            "AND action IN ('create', 'merge', 'update') ORDER BY audit_id DESC LIMIT 1",
            [review_batch(proposal["proposal_id"]), proposal["store_key"]],
            None,
        )

    async def approve(self, proposal_id: str, *, edits: dict[str, Any] | None = None, note: str = "") -> dict[str, Any]:
        """Approve a pending proposal (with ``edits``: edit-then-approve). It becomes a memory written with
        ``human`` authority; the proposal is kept as approved with what was approved.

        Returns ``{"action": "approve_proposal", "proposal_id", "memory_id", "mode": "created"|"merged"|
        "updated"|"unchanged"|"recovered", "edited", "changed_fields", "batch_id"}``.
        """
        self._require_human("批准提案")
        changes = checked_edits(edits)
        async with self.hub.review_lock:
            proposal = await self._proposal(proposal_id)
            pid = proposal["proposal_id"]
            if proposal["status"] != "pending":
                raise ValidationError(f"提案 {pid} 已是 {proposal['status']} 状态，只能处理待审核（pending）的提案")
            final = {**proposal["fields"], **changes}
            changed = sorted(k for k, v in changes.items() if proposal["fields"].get(k) != v)
            batch = review_batch(pid)
            writer_scope = owner_scope(
                proposal["store_key"],
                proposal["owner_uid"],
                authority="human",
                actor=self.scope.actor,
                cause=f"proposal:{pid}",
                batch_id=batch,
            )
            memory_id = await self._prior_write(proposal)
            if memory_id:
                mode = "recovered"
            else:
                memory_id, mode = await self._write_memory(proposal, final, writer_scope)
            now = time.time()
            ctx = writer_scope.context
            async with self.rt.db.transaction() as conn:
                if not await self.hub.dream_store.decide(
                    conn,
                    pid,
                    status="approved",
                    reviewer=self.scope.actor,
                    review_reason=str(note or "").strip()[:MAX_REASON_CHARS],
                    final_fields=final,
                    memory_id=memory_id,
                    now=now,
                ):
                    raise ValidationError(f"提案 {pid} 已被处理")
                await self.hub.dream_store.add_provenance(
                    conn,
                    memory_id=memory_id,
                    proposal_id=pid,
                    store_key=proposal["store_key"],
                    approved_by=self.scope.actor,
                    now=now,
                )
                await self._attach_provenance(conn, memory_id, proposal, ctx, now)
                await write_event(
                    conn,
                    action="proposal_approved",
                    subject_id=pid,
                    owner_uid=proposal["owner_uid"],
                    store_key=proposal["store_key"],
                    ctx=ctx,
                    now=now,
                    details={
                        "from": "pending",
                        "to": "approved",
                        "memory_id": memory_id,
                        "mode": mode,
                        "edited": bool(changed),
                        "changed_fields": changed,
                        "proposed_by": "dreaming",
                        "proposal_batch_id": proposal["batch_id"],
                    },
                )
        await self.rt.notify_changed("proposal_approved", [memory_id])
        return {
            "action": "approve_proposal",
            "proposal_id": pid,
            "memory_id": memory_id,
            "mode": mode,
            "edited": bool(changed),
            "changed_fields": changed,
            "batch_id": batch,
        }

    async def _write_memory(self, proposal: dict[str, Any], final: dict[str, Any], scope: Scope) -> tuple[str, str]:
        service = self.rt.memory_service(scope)
        groups = {g: final[g] for g in TAG_GROUPS if final.get(g)}
        if proposal["kind"] == "create":
            result = await service.upsert_memory(
                final["content"],
                title=final.get("title") or None,
                memory_type=final.get("memory_type") or "knowledge",
                source=PROPOSAL_SOURCE,
                **groups,
            )
            return result["id"], result["mode"]
        target = proposal["target_memory_id"]
        triplet = {g: groups[g] for g in ("core_tags", "diffusion_tags", "opposing_tags") if g in groups}
        result = await service.update_memory_by_id(
            memory_id=target,
            title=final.get("title") or None,
            content=final["content"],
            memory_type=final.get("memory_type") or None,
            tags=groups.get("tags"),
            **(triplet if len(triplet) == 3 else {}),
        )
        if result["missing"]:
            raise NotFoundError(f"提案要修改的记忆 {target} 已不存在，请驳回该提案")
        return target, "updated" if result["updated"] else "unchanged"

    async def _attach_provenance(
        self, conn: Any, memory_id: str, proposal: dict[str, Any], ctx: WriteContext, now: float
    ) -> None:
        record = await self.rt.records.get(memory_id, include_deleted=True, conn=conn)
        if record is None:
            return
        extra = dict(record.get("extra") or {})
        evidence = (await self.hub.dream_store.evidence([proposal["proposal_id"]], conn=conn))[proposal["proposal_id"]]
        entries = [p for p in extra.get("provenance", []) if isinstance(p, dict)]
        entries.append(
            {
                "proposal_id": proposal["proposal_id"],
                "proposed_by": "dreaming",
                "proposal_batch_id": proposal["batch_id"],
                "model_id": proposal["model_id"],
                "approved_by": self.scope.actor,
                "approved_at": now,
                "message_ids": [e["ref_id"] for e in evidence if e["kind"] in ("message", "episode_message")],
                "episode_ids": [e["ref_id"] for e in evidence if e["kind"] == "episode"],
            }
        )
        extra["provenance"] = entries
        await self.rt.records.update(
            conn,
            memory_id,
            {"extra": extra},
            action="attach_provenance",
            actor=ctx,
            note=f"来自梦境提案 {proposal['proposal_id']}",
            touch=False,
        )

    async def reject(self, proposal_id: str, *, reason: str) -> dict[str, Any]:
        """Reject a pending proposal; it is kept as rejected with the reason (and is not proposed again).

        Returns ``{"action": "reject_proposal", "proposal_id", "status": "rejected"}``.
        """
        self._require_human("驳回提案")
        why = str(reason or "").strip()
        if not why:
            raise ValidationError("驳回提案必须填写原因（reason）")
        if len(why) > MAX_REASON_CHARS:
            raise ValidationError(f"reason 最多 {MAX_REASON_CHARS} 个字符")
        async with self.hub.review_lock:
            proposal = await self._proposal(proposal_id)
            pid = proposal["proposal_id"]
            ctx = WriteContext(authority="human", actor=self.scope.actor, cause=why, batch_id=review_batch(pid))
            async with self.rt.db.transaction() as conn:
                if not await self.hub.dream_store.decide(
                    conn, pid, status="rejected", reviewer=self.scope.actor, review_reason=why
                ):
                    raise ValidationError(f"提案 {pid} 已是 {proposal['status']} 状态，只能处理待审核（pending）的提案")
                await write_event(
                    conn,
                    action="proposal_rejected",
                    subject_id=pid,
                    owner_uid=proposal["owner_uid"],
                    store_key=proposal["store_key"],
                    ctx=ctx,
                    details={"from": "pending", "to": "rejected", "reason": why},
                )
        return {"action": "reject_proposal", "proposal_id": pid, "status": "rejected"}

    async def reject_batch(self, batch_id: str, *, reason: str) -> dict[str, Any]:
        """Reject every pending proposal of one dreaming run (visible stores only).

        Returns ``{"action": "reject_batch", "batch_id", "rejected": [ids]}``.
        """
        text = str(batch_id or "").strip()
        if not text:
            raise ValidationError("batch_id 不能为空")
        pending, _ = await self.hub.dream_store.list_proposals(
            store_keys=self._stores, status="pending", batch_id=text, limit=1000
        )
        rejected = []
        for proposal in pending:
            await self.reject(proposal["proposal_id"], reason=reason)
            rejected.append(proposal["proposal_id"])
        return {"action": "reject_batch", "batch_id": text, "rejected": rejected}

    # ------------------------------------------------------------------ flags
    async def list_flags(self, *, open_only: bool = True, limit: int = 100) -> dict[str, Any]:
        """Memories waiting for review because evidence behind them was retracted: ``{"action", "total", "items":
        [{flag_id, memory_id, store_key, proposal_id, entry_id, reason, created_at, ..., "memory": item|None}]}``."""
        flags = await self.hub.dream_store.flags(
            store_keys=self._stores, open_only=open_only, limit=checked_limit("limit", limit, default=100, maximum=500)
        )
        records = await self.rt.records.get_many([f["memory_id"] for f in flags], include_deleted=True)
        items = [
            {
                **flag,
                "memory": record_item(records[flag["memory_id"]], full=True) if flag["memory_id"] in records else None,
            }
            for flag in flags
        ]
        return {"action": "list_flags", "total": len(items), "items": items}

    async def resolve_flag(self, flag_id: int, *, resolution: str, note: str = "") -> dict[str, Any]:
        """Keep the memory (``kept``) or soft-delete it (``deleted``, restorable from the trash); the flag is closed.

        Returns ``{"action": "resolve_flag", "flag_id", "memory_id", "resolution"}``.
        """
        self._require_human("处理复核标记")
        if resolution not in FLAG_RESOLUTIONS:
            raise ValidationError(f"resolution 取值 {resolution!r} 无效，可选：{'、'.join(FLAG_RESOLUTIONS)}")
        if isinstance(flag_id, bool) or not isinstance(flag_id, int):
            raise ValidationError("flag_id 必须是整数")
        async with self.hub.review_lock:
            flags = await self.hub.dream_store.flags(store_keys=self._stores, open_only=True, flag_ids=[flag_id])
            if not flags:
                raise NotFoundError(f"复核标记 {flag_id} 不存在、已处理或不在当前可见的记忆库中")
            flag = flags[0]
            record = await self.rt.records.get(flag["memory_id"], include_deleted=True)
            owner = record["owner_uid"] if record else self.scope.owner_uid
            scope = owner_scope(
                flag["store_key"],
                owner,
                authority="human",
                actor=self.scope.actor,
                cause=f"review_flag:{flag_id}",
                batch_id=f"review-flag:{flag_id}",
            )
            if resolution == "deleted" and record is not None and not record["is_deleted"]:
                await self.rt.memory_service(scope).delete_memories(memory_ids=[flag["memory_id"]])
            now = time.time()
            why = str(note or "").strip()[:MAX_REASON_CHARS]
            async with self.rt.db.transaction() as conn:
                if not await self.hub.dream_store.resolve_flag(
                    conn, flag_id, resolution=resolution, resolved_by=self.scope.actor, note=why, now=now
                ):
                    raise ValidationError(f"复核标记 {flag_id} 已被处理")
                current = await self.rt.records.get(flag["memory_id"], include_deleted=True, conn=conn)
                if current is not None:
                    extra = dict(current.get("extra") or {})
                    extra["review_flags"] = [
                        f for f in extra.get("review_flags", []) if isinstance(f, dict) and f.get("flag_id") != flag_id
                    ]
                    await self.rt.records.update(
                        conn,
                        flag["memory_id"],
                        {"extra": extra},
                        action="resolve_review_flag",
                        actor=scope.context,
                        note=f"复核结论：{resolution}",
                        touch=False,
                    )
                await write_event(
                    conn,
                    action="review_flag_resolved",
                    subject_id=flag_subject(flag_id),
                    owner_uid=owner,
                    store_key=flag["store_key"],
                    ctx=scope.context,
                    now=now,
                    details={"flag_id": flag_id, "memory_id": flag["memory_id"], "resolution": resolution, "note": why},
                )
        return {"action": "resolve_flag", "flag_id": flag_id, "memory_id": flag["memory_id"], "resolution": resolution}

    async def provenance(self, memory_ids: Sequence[str]) -> dict[str, list[str]]:
        """Which approved proposals each memory came from (visible stores only)."""
        return await self.hub.dream_store.provenance_of(list(memory_ids), store_keys=self._stores)

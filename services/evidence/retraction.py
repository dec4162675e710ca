"""Retracting a chat message (a person's decision) and expiring old ones (the retention policy).

Retraction removes the message's bytes and everything that only repeats them, in one transaction:

* the text (the one update the table's trigger allows), its keyword row, its cached embedding and (through the
  vector outbox) its vector;
* every episode covering it: an episode citing only this message is simply removed; an episode that also covers
  other messages is removed too, because its summary may repeat the retracted words, and its other messages become
  unprocessed again, so stage A summarises them anew without the retracted one;
* every pending proposal whose every cited message is now retracted: withdrawn, and its text removed; a rejected or
  withdrawn one with no live evidence left has its text removed as well;
* every approved memory whose proposal cited the message: flagged for human review (a flag row, plus a mechanical,
  audited note in the memory's ``extra``), never silently kept pointing at bytes that are gone.

"Cited" means the messages a proposal names itself; only a proposal that names no message, just episodes, rests on
the messages of those episodes (``cited_messages``). A message that was merely context in a cited episode does not
make a proposal depend on it.

Deleted rows are overwritten (``secure_delete``), the keyword indexes are merged so deleted tokens are rewritten, and
the WAL is checkpointed after the commit. Audit rows never contain message text, so the append-only log keeps no copy.

Expiry (``evidence.retention_days``) removes old messages' bytes the same way, and removes an episode once every
message it covers is gone; proposals and approved memories are left alone, because expiry is housekeeping, not a
statement that the evidence was wrong.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import aiosqlite

from ..embedding.cached import text_hash
from ..errors import NotFoundError, ValidationError
from ..scope import Scope, WriteContext
from .audit_events import flag_subject, write_event
from .hub import EvidenceHub
from .vectors import CHAT_TIER, EPISODE_TIER, episode_text

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

RETRACTION_ACTOR = "booku-retraction"
RETENTION_ACTOR = "booku-retention"
MAX_REASON_CHARS = 500
RETENTION_BATCH = 500


def cited_messages(evidence: list[dict[str, str]]) -> list[str]:
    """The messages a proposal rests on: those it cites directly, else those of the episodes it cites."""
    direct = [e["ref_id"] for e in evidence if e["kind"] == "message"]
    return direct or list(dict.fromkeys(e["ref_id"] for e in evidence if e["kind"] == "episode_message"))


class Retraction:
    def __init__(self, runtime: BookuRuntime, hub: EvidenceHub) -> None:
        self.rt = runtime
        self.hub = hub

    # ------------------------------------------------------------- shared steps
    async def _forget_embedding(self, conn: aiosqlite.Connection, text: str) -> None:
        await conn.execute(
            "DELETE FROM booku_embedding_cache WHERE mode = 'passage' AND text_hash = ?", [text_hash(text)]
        )

    async def _clear(self, conn: aiosqlite.Connection, message: dict[str, Any], kind: str, now: float) -> None:
        await self.hub.chat_log.clear_message(conn, message, kind=kind, now=now)
        await self._forget_embedding(conn, message["text"])
        await self.hub.vectors.enqueue(conn, CHAT_TIER, message["entry_id"], message["store_key"], op="delete")

    async def _remove_episode(
        self,
        conn: aiosqlite.Connection,
        episode: dict[str, Any],
        *,
        ctx: WriteContext,
        cause: str,
        released: list[str],
        now: float,
    ) -> None:
        await self.hub.chat_log.delete_episode(conn, episode)
        await self._forget_embedding(conn, episode_text(episode))
        await self.hub.vectors.enqueue(conn, EPISODE_TIER, episode["episode_id"], episode["store_key"], op="delete")
        await write_event(
            conn,
            action="episode_removed",
            subject_id=episode["episode_id"],
            owner_uid=episode["owner_uid"],
            store_key=episode["store_key"],
            ctx=ctx,
            now=now,
            details={"cause": cause, "released_message_ids": released},
        )

    async def _secure(self, conn: aiosqlite.Connection) -> int:
        async with conn.execute("PRAGMA secure_delete") as cur:
            row = await cur.fetchone()
        assert row is not None  # a PRAGMA read always answers one row
        previous = int(row[0])
        await conn.execute("PRAGMA secure_delete = ON")
        return previous

    async def _checkpoint(self) -> str:
        """Copy the WAL into the database and truncate it, so old page images of the removed text go too."""
        try:
            async with self.rt.db.reader.execute("PRAGMA wal_checkpoint(TRUNCATE)") as cur:
                row = await cur.fetchone()
        except Exception as exc:  # the commit already happened; a busy checkpoint is retried by SQLite later
            logger.warning("撤回后的 WAL 检查点未完成：%s", exc)
            return "failed"
        return "busy" if row and int(row[0]) else "complete"

    # ---------------------------------------------------------------- retract
    async def retract(
        self,
        scope: Scope,
        *,
        entry_id: str | None = None,
        stream_id: str | None = None,
        message_id: str | None = None,
        reason: str = "",
    ) -> dict[str, Any]:
        """Retract one message visible to ``scope`` (by ``entry_id``, or by the host's stream and message id).

        Only ``human`` (dashboard) and ``mechanical`` (e.g. the host reported a recalled message; needs a cause)
        authorities may retract: the LLM must not be able to erase evidence. Returns ``{"action":
        "retract_message", "entry_id", "retracted", "episodes_removed", "proposals_withdrawn",
        "proposals_redacted", "memories_flagged", "wal_checkpoint"}``.
        """
        if scope.authority not in ("human", "mechanical"):
            raise ValidationError(f"撤回聊天消息需要 human 或 mechanical 权限，当前为 {scope.authority}")
        why = str(reason or "").strip()[:MAX_REASON_CHARS]
        stores = list(scope.readable_store_keys)
        if entry_id:
            message = (await self.hub.chat_log.messages([str(entry_id).strip()], store_keys=stores)).get(
                str(entry_id).strip()
            )
        elif stream_id and message_id:
            message = await self.hub.chat_log.message_by_host_id(
                str(stream_id).strip(), str(message_id).strip(), store_keys=stores
            )
        else:
            raise ValidationError("撤回需要 entry_id，或同时提供 stream_id 和 message_id")
        if message is None:
            raise NotFoundError(f"聊天消息 {entry_id or message_id} 不存在或不在当前可见的记忆库中")
        result = {
            "action": "retract_message",
            "entry_id": message["entry_id"],
            "retracted": False,
            "episodes_removed": [],
            "proposals_withdrawn": [],
            "proposals_redacted": [],
            "memories_flagged": [],
            "wal_checkpoint": "",
        }
        if message["retracted_at"]:
            result["already"] = message["retraction"]
            return result
        ctx = WriteContext(
            authority=scope.authority,
            actor=scope.actor,
            cause=why or scope.cause or "retracted",
            batch_id=scope.batch_id,
        )
        mechanical = WriteContext(
            authority="mechanical",
            actor=RETRACTION_ACTOR,
            cause=f"source_retracted:{message['entry_id']}",
            batch_id=scope.batch_id,
        )
        now = time.time()
        async with self.rt.db.transaction() as conn:
            previous = await self._secure(conn)
            await self._clear(conn, message, "retracted", now)
            for episode in await self.hub.chat_log.episodes_covering(conn, [message["entry_id"]]):
                others = [i for i in episode["entry_ids"] if i != message["entry_id"]]
                await self._remove_episode(
                    conn,
                    episode,
                    ctx=mechanical,
                    released=others,
                    now=now,
                    cause="source_retracted" if others else "only_source_retracted",
                )
                result["episodes_removed"].append(episode["episode_id"])
            await self._cascade_proposals(conn, message, mechanical, result, now)
            await write_event(
                conn,
                action="chat_retracted",
                subject_id=message["entry_id"],
                owner_uid=message["owner_uid"],
                store_key=message["store_key"],
                ctx=ctx,
                now=now,
                details={
                    "stream_id": message["stream_id"],
                    "reason": why,
                    "episodes_removed": result["episodes_removed"],
                    "proposals_withdrawn": result["proposals_withdrawn"],
                    "memories_flagged": result["memories_flagged"],
                },
            )
            await self.hub.chat_log.optimise_keyword_index(conn)
            await conn.execute(f"PRAGMA secure_delete = {previous}")
        result["retracted"] = True
        result["wal_checkpoint"] = await self._checkpoint()
        self.hub.schedule_vector_drain()
        return result

    async def _cascade_proposals(
        self, conn: aiosqlite.Connection, message: dict[str, Any], ctx: WriteContext, result: dict[str, Any], now: float
    ) -> None:
        store = self.hub.dream_store
        proposal_ids = await store.proposals_citing(conn, [message["entry_id"]])
        if not proposal_ids:
            return
        proposals = await store.proposals(proposal_ids, store_keys=None, conn=conn)
        evidence = await store.evidence(proposal_ids, conn=conn)
        cited = {pid: cited_messages(rows) for pid, rows in evidence.items()}
        messages = await self.hub.chat_log.messages(
            {i for ids in cited.values() for i in ids}, store_keys=None, conn=conn
        )
        for proposal_id in proposal_ids:
            proposal = proposals[proposal_id]
            if message["entry_id"] not in cited.get(proposal_id, []):
                continue  # the message was only context (in a cited episode), not the evidence itself
            live = [i for i in cited.get(proposal_id, []) if i in messages and not messages[i]["retracted_at"]]
            status = proposal["status"]
            if status == "pending" and not live:
                await store.withdraw_and_redact(conn, proposal_id, reason="全部证据已被撤回", now=now)
                await write_event(
                    conn,
                    action="proposal_withdrawn",
                    subject_id=proposal_id,
                    owner_uid=proposal["owner_uid"],
                    store_key=proposal["store_key"],
                    ctx=ctx,
                    now=now,
                    details={"from": "pending", "to": "withdrawn", "entry_id": message["entry_id"]},
                )
                result["proposals_withdrawn"].append(proposal_id)
            elif status in ("rejected", "withdrawn") and not live and not proposal["redacted_at"]:
                await store.redact(conn, proposal_id, now=now)
                await write_event(
                    conn,
                    action="proposal_redacted",
                    subject_id=proposal_id,
                    owner_uid=proposal["owner_uid"],
                    store_key=proposal["store_key"],
                    ctx=ctx,
                    now=now,
                    details={"status": status, "entry_id": message["entry_id"]},
                )
                result["proposals_redacted"].append(proposal_id)
            elif status == "approved" and proposal["memory_id"]:
                if await self._flag_memory(conn, proposal, message, ctx, now):
                    result["memories_flagged"].append(proposal["memory_id"])

    async def _flag_memory(
        self,
        conn: aiosqlite.Connection,
        proposal: dict[str, Any],
        message: dict[str, Any],
        ctx: WriteContext,
        now: float,
    ) -> bool:
        memory_id = proposal["memory_id"]
        record = await self.rt.records.get(memory_id, include_deleted=True, conn=conn)
        if record is None:
            return False
        reason = "该记忆所依据的聊天消息已被撤回，请确认是否保留"
        flag_id = await self.hub.dream_store.add_flag(
            conn,
            memory_id=memory_id,
            store_key=record["store_key"],
            proposal_id=proposal["proposal_id"],
            entry_id=message["entry_id"],
            reason=reason,
            now=now,
        )
        extra = dict(record.get("extra") or {})
        flags = [f for f in extra.get("review_flags", []) if isinstance(f, dict)]
        flags.append(
            {
                "flag_id": flag_id,
                "entry_id": message["entry_id"],
                "proposal_id": proposal["proposal_id"],
                "reason": "source_retracted",
                "at": now,
            }
        )
        extra["review_flags"] = flags
        await self.rt.records.update(
            conn, memory_id, {"extra": extra}, action="flag_for_review", actor=ctx, note=reason, touch=False
        )
        await write_event(
            conn,
            action="review_flag_raised",
            subject_id=flag_subject(flag_id),
            owner_uid=record["owner_uid"],
            store_key=record["store_key"],
            ctx=ctx,
            now=now,
            details={
                "flag_id": flag_id,
                "memory_id": memory_id,
                "proposal_id": proposal["proposal_id"],
                "entry_id": message["entry_id"],
            },
        )
        return True

    # --------------------------------------------------------------- retention
    async def purge_expired(self, *, now: float | None = None) -> dict[str, Any]:
        """Remove the text of messages older than ``evidence.retention_days`` (0 = keep forever).

        Returns ``{"action": "purge_expired", "expired", "episodes_removed", "wal_checkpoint"}``.
        """
        days = self.hub.evidence.retention_days
        result: dict[str, Any] = {"action": "purge_expired", "expired": 0, "episodes_removed": 0, "wal_checkpoint": ""}
        if days <= 0:
            return result
        moment = time.time() if now is None else now
        expired = await self.hub.chat_log.expired_messages(cutoff=moment - days * 86400.0, limit=RETENTION_BATCH)
        if not expired:
            return result
        ctx = WriteContext(authority="mechanical", actor=RETENTION_ACTOR, cause=f"retention_days={days:g}")
        ids = {m["entry_id"] for m in expired}
        async with self.rt.db.transaction() as conn:
            previous = await self._secure(conn)
            for message in expired:
                await self._clear(conn, message, "expired", moment)
                await write_event(
                    conn,
                    action="chat_expired",
                    subject_id=message["entry_id"],
                    owner_uid=message["owner_uid"],
                    store_key=message["store_key"],
                    ctx=ctx,
                    now=moment,
                    details={"stream_id": message["stream_id"], "sent_at": message["sent_at"]},
                )
            covering = await self.hub.chat_log.episodes_covering(conn, list(ids))
            remaining = await self.hub.chat_log.messages(
                {i for e in covering for i in e["entry_ids"]}, store_keys=None, conn=conn
            )
            for episode in covering:
                if all(remaining.get(i, {}).get("retracted_at") for i in episode["entry_ids"]):
                    await self._remove_episode(conn, episode, ctx=ctx, cause="sources_expired", released=[], now=moment)
                    result["episodes_removed"] += 1
            await self.hub.chat_log.optimise_keyword_index(conn)
            await conn.execute(f"PRAGMA secure_delete = {previous}")
        result["expired"] = len(expired)
        result["wal_checkpoint"] = await self._checkpoint()
        self.hub.schedule_vector_drain()
        await self.hub.set_status("retention", "ok", expired=len(expired), episodes_removed=result["episodes_removed"])
        return result

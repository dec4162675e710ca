"""Dreaming stage B: per owner, the model proposes new or changed memories, with evidence, as pending proposals.

For each owner whose episodes moved past its high-water mark, the stage reads the new episodes with their raw
messages and the owner's related memories, asks the model (outside any transaction), validates every proposal
(known evidence ids, known target memories, field limits), drops duplicates of earlier proposals (a rejected idea is
not proposed again), and then commits in ONE transaction: the proposals, their evidence rows, their audit rows and
both high-water marks (episode and message). The marks move only if they still hold the values the run started
from, so two runs never both commit the same input. A run interrupted before that commit (model down, bad answer,
crash) leaves the marks where they were and its input is read again next time: retried, not skipped, and not
duplicated.

Proposals carry the ``dreaming`` authority and are never facts: only ``ReviewService.approve`` (a human) turns one
into a memory.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from ..logic.tags import TagTriplet
from ..memory_search import MemorySearch
from ..scope import Scope, WriteContext
from .audit_events import write_event
from .chat_model import ChatModelUnavailableError
from .dream_store import proposal_digest
from .episodes import DREAMING_ACTOR, StageReport
from .hub import EvidenceHub
from .prompts import ModelAnswerError, ParsedProposals, parse_proposal_answer, proposal_messages

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

MAX_CONTEXT_QUERY_CHARS = 1500


class _Superseded(Exception):
    """Another run moved the marks first; this run's transaction is rolled back."""


def owner_scope(
    store_key: str, owner_uid: str, *, authority: str, actor: str, cause: str = "", batch_id: str = ""
) -> Scope:
    """A scope over exactly one owner's store (what stage B may read, and what an approval writes to)."""
    return Scope(
        owner_uid=owner_uid,
        readable_store_keys=(store_key,),
        writable_store_key=store_key,
        authority=authority,
        actor=actor,
        cause=cause,
        batch_id=batch_id,
    )


class ProposalStage:
    def __init__(self, runtime: BookuRuntime, hub: EvidenceHub) -> None:
        self.rt = runtime
        self.hub = hub

    async def run(self) -> StageReport:
        """One pass over every owner with new episodes. Never raises for model trouble."""
        settings = self.hub.dreaming
        if not settings.enabled:
            await self.hub.set_status("stage_b", "disabled", "dreaming.enabled = false")
            return StageReport("stage_b", "disabled", "dreaming.enabled = false")
        async with self.hub.stage_b_lock:
            owners = await self.hub.chat_log.owners_with_new_episodes()
            model = self.hub.chat_model
            if model is None:
                reason = await self.hub.report_unavailable("stage_b", "阶段 B ", len(owners), "个主体有新剧集等待整理")
                return StageReport("stage_b", "unavailable", reason, waiting=len(owners))
            report = StageReport("stage_b", "ok", batch_id=f"dream-b-{uuid.uuid4().hex[:16]}")
            dropped: list[str] = []
            for owner in owners:
                try:
                    created, rejected = await self._run_owner(
                        owner["store_key"], owner["owner_uid"], model, report.batch_id
                    )
                except (ChatModelUnavailableError, ModelAnswerError) as exc:
                    report.failures.append(f"{owner['store_key']}: {exc}")
                    logger.warning("记忆提案生成失败（%s），高水位不动，下次重试：%s", owner["store_key"], exc)
                    if isinstance(exc, ChatModelUnavailableError):
                        break
                    continue
                except _Superseded:
                    logger.info("%s 的提案已由另一次运行提交，本次结果丢弃", owner["store_key"])
                    continue
                report.created.extend(created)
                dropped.extend(rejected)
            report.waiting = len(report.failures)
            report.details["dropped"] = dropped
            if report.failures and not report.created:
                report.state, report.reason = "error", report.failures[0]
            await self.hub.set_status(
                "stage_b",
                report.state,
                report.reason,
                created=len(report.created),
                owners=len(owners),
                dropped=len(dropped),
                batch_id=report.batch_id,
            )
        return report

    async def _context_memories(
        self, store_key: str, owner_uid: str, episodes: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        limit = self.hub.dreaming.stage_b_context_memories
        if limit <= 0 or not episodes:
            return []
        query = " ".join(f"{e['topic']} {e['summary']}" for e in episodes)[:MAX_CONTEXT_QUERY_CHARS]
        scope = owner_scope(store_key, owner_uid, authority="dreaming", actor=DREAMING_ACTOR)
        ranking = await MemorySearch(self.rt, scope).rank(
            query, limit=limit, include_archived=False, include_knowledge=False, triplet=TagTriplet()
        )
        return [
            {
                "id": hit.memory_id,
                "title": ranking.records[hit.memory_id]["title"],
                "content": ranking.records[hit.memory_id]["content"],
            }
            for hit in ranking.hits
        ]

    async def _run_owner(
        self, store_key: str, owner_uid: str, model: Any, batch_id: str
    ) -> tuple[list[str], list[str]]:
        settings = self.hub.dreaming
        expected = await self.hub.dream_store.marks(store_key, owner_uid)
        episodes = await self.hub.chat_log.new_episodes(
            store_key=store_key, owner_uid=owner_uid, after_seq=expected[0], limit=settings.stage_b_max_episodes
        )
        if not episodes:
            return [], []
        messages = await self.hub.chat_log.messages(
            [i for e in episodes for i in e["entry_ids"]], store_keys=[store_key]
        )
        for episode in episodes:
            episode["messages"] = [
                messages[i] for i in episode["entry_ids"] if i in messages and not messages[i]["retracted_at"]
            ]
        memories = await self._context_memories(store_key, owner_uid, episodes)
        answer = await model.complete(
            proposal_messages(episodes, memories),
            max_tokens=settings.max_output_tokens,
            temperature=settings.temperature,
        )
        parsed = parse_proposal_answer(
            answer,
            message_ids=[m["entry_id"] for e in episodes for m in e["messages"]],
            episode_ids=[e["episode_id"] for e in episodes],
            memory_ids=[m["id"] for m in memories],
            limit=settings.stage_b_max_proposals,
        )
        marks = (
            max(e["seq"] for e in episodes),
            max((messages[i]["seq"] for e in episodes for i in e["entry_ids"] if i in messages), default=0),
        )
        created = await self._commit(store_key, owner_uid, parsed, episodes, expected, marks, model.model_id, batch_id)
        return created, parsed.rejected

    async def _commit(
        self,
        store_key: str,
        owner_uid: str,
        parsed: ParsedProposals,
        episodes: list[dict[str, Any]],
        expected: tuple[int, int],
        marks: tuple[int, int],
        model_id: str,
        batch_id: str,
    ) -> list[str]:
        ctx = WriteContext(authority="dreaming", actor=DREAMING_ACTOR, batch_id=batch_id, cause="dreaming_stage_b")
        covered = {e["episode_id"]: e["entry_ids"] for e in episodes}
        created: list[str] = []
        now = time.time()
        async with self.rt.db.transaction() as conn:
            if not await self.hub.dream_store.advance_marks(
                conn, store_key, owner_uid, expected=expected, episode_seq=marks[0], message_seq=marks[1]
            ):
                raise _Superseded()
            digests = [proposal_digest(d.kind, d.target_memory_id, d.fields) for d in parsed.drafts]
            known = await self.hub.dream_store.known_digests(store_key, digests, conn=conn)
            for draft, digest in zip(parsed.drafts, digests):
                if digest in known:
                    parsed.rejected.append(
                        f"与已有提案重复：{draft.fields.get('title') or draft.fields['content'][:20]}"
                    )
                    continue
                known.add(digest)
                proposal_id = f"prop-{uuid.uuid4().hex[:20]}"
                evidence = [("message", m, "") for m in draft.message_ids]
                evidence += [("episode", e, "") for e in draft.episode_ids]
                evidence += [("episode_message", m, e) for e in draft.episode_ids for m in covered.get(e, [])]
                await self.hub.dream_store.insert_proposal(
                    conn,
                    {
                        "proposal_id": proposal_id,
                        "store_key": store_key,
                        "owner_uid": owner_uid,
                        "kind": draft.kind,
                        "target_memory_id": draft.target_memory_id,
                        "fields": draft.fields,
                        "reason": draft.reason,
                        "content_sha256": digest,
                        "batch_id": batch_id,
                        "model_id": model_id,
                        "created_at": now,
                    },
                    evidence,
                )
                await write_event(
                    conn,
                    action="proposal_created",
                    subject_id=proposal_id,
                    owner_uid=owner_uid,
                    store_key=store_key,
                    ctx=ctx,
                    now=now,
                    details={
                        "kind": draft.kind,
                        "target_memory_id": draft.target_memory_id,
                        "message_ids": draft.message_ids,
                        "episode_ids": draft.episode_ids,
                        "model_id": model_id,
                        "status": "pending",
                    },
                )
                created.append(proposal_id)
        return created

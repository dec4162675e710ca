"""Every companion write: hold, grow, trace, anchor and release.

All writes go through ``RecordRepository`` inside one database transaction each (so every change has its revision
and audit row with the caller's authority), then the vector outbox is applied. Input is validated completely before
anything is written. Hold and grow make the decision ``upsert_memory`` makes (``write_decision.judge_write``) among
the memories of the same kind: a new fact that updates an older one marks it superseded in the same transaction, an
unsure pair goes to the model or the review queue after the commit, and a grow item that restates a memory folds
into it. Hold never merges: a held moment stays its own memory, and holding the very same text twice returns the
existing memory instead of a copy. Replies say what the write did in ``memory_command``'s words
(``logic.write_report``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from ..errors import EmbeddingUnavailableError, NotFoundError, ValidationError
from ..logic.blas import single_threaded_blas
from ..logic.merge import merge_texts
from ..logic.text import compose_embedding_text, extract_title, normalise_folder_id
from ..logic.write_report import outdated_mark, write_outcome_sentence
from ..memory_writes import merged_list
from ..scope import Scope
from ..storage.fact_cue_store import cue_book_plan
from ..storage.write_plans import run_plan
from ..write_decision import NewFact, WriteJudgement, judge_write, supersession_mark
from . import fields as f
from .decay_engine import record_score
from .extensions import GrowSplitter, MemoryTagger, TagSuggestion, write_observers
from .kinds import COMPANION_SOURCE, FEEL_DOMAIN, KIND_KEY, KINDS, kind_of, spec_of
from .rendering import display_name, memory_item
from .settings import ANCHOR_LIMIT, GROW_MAX_ITEMS, GROW_SHORT_CHARS, CompanionSettings
from .splitting import GrowPiece, split_for_grow
from .store import CompanionStore

if TYPE_CHECKING:
    from ..runtime import BookuRuntime
    from ..storage.rows import RecordRow

NEUTRAL_IMPORTANCE = 5
NEUTRAL_VALENCE = 0.5
NEUTRAL_AROUSAL = 0.3
NEUTRAL_LABELS = {
    "title": "标题取正文首行",
    "domains": "不分主题域",
    "importance": f"重要度 {NEUTRAL_IMPORTANCE}",
    "valence": f"valence {NEUTRAL_VALENCE}",
    "arousal": f"arousal {NEUTRAL_AROUSAL}",
}
GROW_ITEM_KEYS = (
    "title",
    "content",
    "tags",
    "importance",
    "domain",
    "valence",
    "arousal",
    "why_remembered",
    "source_ranges",
    "quotes",
)


@dataclass
class MomentDraft:
    """A validated memory about to be written by hold or grow."""

    content: str
    title: str
    kind: str
    domains: list[str]
    tags: list[str]
    importance: int
    valence: float
    arousal: float
    pinned: bool = False
    why_remembered: str = ""
    quotes: list[dict[str, str]] = field(default_factory=list)
    ranges: list[list[int]] = field(default_factory=list)
    source_bucket: str = ""

    def record(self, scope: Scope, folder_id: str) -> dict[str, Any]:
        extra: dict[str, Any] = {KIND_KEY: self.kind}
        if self.quotes:
            extra["quotes"] = self.quotes
        if self.source_bucket:
            extra["source_bucket"] = self.source_bucket
        return {
            "memory_id": f"mem-{uuid.uuid4().hex}",
            "owner_uid": scope.owner_uid,
            "store_key": scope.writable_store_key,
            "title": self.title,
            "content": self.content,
            "bucket": "memory",
            "folder_id": folder_id,
            "source": COMPANION_SOURCE,
            "memory_type": KINDS[self.kind].memory_type,
            "status": "active",
            "importance": self.importance,
            "valence": self.valence,
            "arousal": self.arousal,
            "domains": self.domains,
            "pinned": self.pinned,
            "why_remembered": self.why_remembered,
            "tags": self.tags,
            "extra": extra,
            "relation_memory_ids": [self.source_bucket] if self.source_bucket else [],
        }


def _row(record: RecordRow) -> dict[str, Any]:
    """A stored row as the repository types it (``RecordRow``), seen as the plain dict the write helpers take."""
    return cast("dict[str, Any]", record)


@dataclass
class WriteOutcome:
    """What one companion write did: ``mode`` created | merged | duplicate, the record written or merged into, the
    older memory it marked superseded (its new version), and the pair left for a model or a reviewer."""

    mode: str
    record: dict[str, Any]
    superseded: dict[str, Any] | None = None
    unsure: tuple[str, str] | None = None

    def links(self) -> dict[str, list[dict[str, str]]]:
        """``superseded`` ``[{"id", "title"}]`` and ``unsure`` ``[{"id", "kind"}]``, the keys ``upsert_memory``
        answers with, present only when not empty."""
        found: dict[str, list[dict[str, str]]] = {}
        if self.superseded is not None:
            found["superseded"] = [{"id": self.superseded["memory_id"], "title": self.superseded.get("title") or ""}]
        if self.unsure is not None:
            found["unsure"] = [{"id": self.unsure[0], "kind": self.unsure[1]}]
        return found

    def sentence(self, title: str) -> str:
        """What this write did, in the words ``memory_command create`` uses (``logic.write_report``)."""
        links = self.links()
        return write_outcome_sentence(
            self.record["memory_id"],
            title,
            merged=self.mode == "merged",
            superseded=links.get("superseded", []),
            unsure=links.get("unsure", []),
            created="已保存记忆",
        )

    @property
    def noteworthy(self) -> bool:
        """Whether the write did more than add a memory (merged, superseded, or left a pair to decide)."""
        return self.mode == "merged" or self.superseded is not None or self.unsure is not None


def merge_changes(target: dict[str, Any], draft: MomentDraft, novelty: float, now: float) -> dict[str, Any]:
    """Fold a grow item into its near-identical memory: nothing either said is lost, earlier choices are kept.

    The text is merged without compression, tags and domains are united, importance takes the higher value, and
    why_remembered / quotes only fill what was empty (a merge never overwrites a reason or a quote someone chose).
    Being said again is activity: the activation count and time move on.
    """
    changes: dict[str, Any] = {
        "content": merge_texts(target["content"], draft.content),
        "tags": merged_list(target.get("tags") or [], draft.tags),
        "domains": merged_list(target.get("domains") or [], draft.domains),
        "importance": max(int(target.get("importance") or 0), draft.importance),
        "novelty_energy": novelty,
        "last_activated_at": now,
        "activation_count": int(target.get("activation_count") or 0) + 1,
    }
    if not target.get("why_remembered") and draft.why_remembered:
        changes["why_remembered"] = draft.why_remembered
    extra = dict(target.get("extra") or {})
    if draft.quotes and not extra.get("quotes"):
        extra["quotes"] = draft.quotes
        changes["extra"] = extra
    return changes


class CompanionWriter:
    def __init__(
        self,
        runtime: BookuRuntime,
        scope: Scope,
        settings: CompanionSettings,
        *,
        tagger: MemoryTagger | None,
        splitter: GrowSplitter | None,
        service: Any = None,
    ) -> None:
        self.rt = runtime
        self.scope = scope
        self.settings = settings
        self.tagger = tagger
        self.splitter = splitter
        self.service = service
        self.store = CompanionStore(runtime.db)

    # ------------------------------------------------------------ helpers
    @property
    def folder_id(self) -> str:
        default = self.rt.config.storage.default_folder_id
        return normalise_folder_id(default, default)

    def ensure_may_author(self, what: str) -> None:
        if self.scope.authority == "mechanical":
            raise ValidationError(f"mechanical 权限不能撰写内容（{what}），只能改变状态，且必须注明原因")

    def item(self, record: dict[str, Any]) -> dict[str, Any]:
        return memory_item(record, record_score(record, self.settings.decay, time.time()))

    async def _writable(self, conn, memory_id: str, field_name: str = "bucket_id") -> dict[str, Any]:
        record = await self.rt.records.get(memory_id, conn=conn)
        if record is None or record["store_key"] != self.scope.writable_store_key or record["bucket"] != "memory":
            raise NotFoundError(
                f"{field_name}={memory_id!r} 不存在（或不在当前可写的记忆库中），请先用 breath_search 找到准确 ID"
            )
        return _row(record)

    async def _suggest(self, content: str, needed: bool, notices: list[str]) -> TagSuggestion | None:
        """The tagging model's proposal; None when there is no usable model (the caller then uses neutral values)."""
        if not needed or self.tagger is None:
            return None
        try:
            suggestion = await self.tagger.suggest(content)
        except Exception as exc:  # a failing model must never lose the memory
            notice = f"打标模型不可用（{exc}）"
            if notice not in notices:
                notices.append(notice)
            return None
        return suggestion if isinstance(suggestion, TagSuggestion) else None

    async def _draft(
        self,
        content: Any,
        *,
        title: Any,
        domain: Any,
        tags: Any,
        importance: Any,
        valence: Any,
        arousal: Any,
        why_remembered: Any,
        quotes: Any,
        kind: str = "memory",
        pinned: bool = False,
        ranges: list[list[int]] | None = None,
        source_bucket: str = "",
        notices: list[str],
        field_prefix: str = "",
    ) -> MomentDraft:
        """Validate explicit fields, then complete missing metadata from the tagger or neutral values.

        Explicit values always win; a suggested value is used only when it passes the same validation; whatever is
        still missing gets a neutral value and the answer lists which fields those were.
        """
        p = field_prefix
        body = f.checked_body(content, f"{p}content")
        given_importance = f.checked_importance(importance, f"{p}importance")
        explicit: dict[str, Any] = {
            "title": f.checked_line(title, f"{p}title", max_chars=f.MAX_TITLE_CHARS) or None,
            "domains": f.checked_domains(domain, f"{p}domain") or None,
            "importance": 10 if pinned else given_importance,
            "valence": f.checked_unit(valence, f"{p}valence"),
            "arousal": f.checked_unit(arousal, f"{p}arousal"),
        }
        if pinned and given_importance not in (None, 10):
            notices.append(f"pinned 锁定 importance=10，传入的 importance={given_importance} 未采用")
        if kind == "feel":
            if explicit["domains"] not in (None, [FEEL_DOMAIN]):
                notices.append(
                    f"feel=True 时 domain 固定为 feel，传入的 domain（{'、'.join(explicit['domains'])}）未采用"
                )
            explicit["domains"] = [FEEL_DOMAIN]
        tag_list = f.checked_tag_list(tags, f"{p}tags")
        why = f.checked_line(why_remembered, f"{p}why_remembered", max_chars=f.MAX_WHY_CHARS)
        quote_list = f.checked_quotes(quotes, f"{p}quotes")
        hint = await self._suggest(body, any(v is None for v in explicit.values()), notices)
        checks: dict[str, Callable[[Any], Any]] = {
            "title": f.checked_title,
            "domains": f.checked_domains,
            "importance": f.checked_importance,
            "valence": lambda v: f.checked_unit(v, "valence"),
            "arousal": lambda v: f.checked_unit(v, "arousal"),
        }
        neutral = {
            "title": extract_title(body),
            "domains": [],
            "importance": NEUTRAL_IMPORTANCE,
            "valence": NEUTRAL_VALENCE,
            "arousal": NEUTRAL_AROUSAL,
        }
        values: dict[str, Any] = {}
        filled: list[str] = []
        for key, value in explicit.items():
            if value is None and hint is not None:
                proposal = getattr(hint, key)
                try:
                    value = checks[key](list(proposal) if key == "domains" else proposal) or None
                except ValidationError:
                    value = None
            if value is None:
                value = neutral[key]
                filled.append(NEUTRAL_LABELS[key])
            values[key] = value
        if filled:
            notice = (
                f"{'打标模型未给出' if hint else '未配置打标模型'}，以下元数据用本地中性值补全：{'、'.join(filled)}"
            )
            if notice not in notices:
                notices.append(notice)
        if not tag_list and hint is not None and hint.tags:
            try:
                tag_list = f.checked_tag_list(list(hint.tags))
            except ValidationError:
                tag_list = []
        return MomentDraft(
            content=body,
            title=values["title"],
            kind=kind,
            domains=values["domains"],
            tags=tag_list,
            importance=values["importance"],
            valence=values["valence"],
            arousal=values["arousal"],
            pinned=pinned,
            why_remembered=why,
            quotes=quote_list,
            ranges=ranges or [],
            source_bucket=source_bucket,
        )

    # -------------------------------------------------------- write engine
    async def _judge(self, draft: MomentDraft, vector: np.ndarray, *, allow_merge: bool) -> WriteJudgement:
        """The same decision ``upsert_memory`` makes (``write_decision.judge_write``) among the writable store's
        memories of the draft's kind: a restatement to fold into (grow only, never a pinned, protected or anchor
        memory), an older memory this one updates, or a pair to leave for a model or a reviewer."""
        wc = self.rt.config.write_conflict
        try:
            hits = await self.rt.query_vectors(
                vector, store_keys=[self.scope.writable_store_key], tiers=["live"], limit=wc.top_n, with_embeddings=True
            )
        except EmbeddingUnavailableError:  # the vector index broke meanwhile: write without a merge check
            return WriteJudgement()
        if not hits:
            return WriteJudgement()
        records = await self.rt.records.get_many([h.memory_id for h in hits])
        same_kind = {k: _row(r) for k, r in records.items() if r["bucket"] == "memory" and kind_of(r) == draft.kind}
        fact = NewFact(draft.content, self.folder_id, KINDS[draft.kind].memory_type)
        # The neighbours' stored fact cues, as ``upsert_memory`` reads them; the ones missing are read here.
        cues = await run_plan(self.rt.db.reader, cue_book_plan(same_kind))
        with single_threaded_blas():
            return judge_write(
                wc,
                fact,
                vector,
                hits,
                same_kind,
                may_merge=allow_merge,
                merge_allowed=lambda r: not (r["pinned"] or r["protected"] or r["anchor"]),
                cues_of=cues.of,
            )

    async def _write(
        self,
        drafts: Sequence[MomentDraft],
        *,
        action: str,
        allow_merge: bool,
        source_text: str | None,
        digest_bucket: str = "",
    ) -> tuple[list[WriteOutcome], str]:
        """Write drafts in one transaction (plus their source links); returns the outcomes and a degraded reason."""
        vectors: list[np.ndarray | None] = [None] * len(drafts)
        degraded = ""
        if any(KINDS[d.kind].mergeable for d in drafts):
            if self.rt.embedding_available():
                try:
                    matrix = await self.rt.embed_documents([compose_embedding_text(d.title, d.content) for d in drafts])
                    vectors = list(matrix)
                except EmbeddingUnavailableError as exc:
                    degraded = str(exc)
            else:
                degraded = self.rt.degraded_reason()
        outcomes: list[WriteOutcome] = []
        now = time.time()
        context = self.scope.context
        store_key = self.scope.writable_store_key
        async with self.rt.write_lock:
            if not allow_merge and len(drafts) == 1:
                existing = await self.store.find_identical(
                    store_key=store_key, kind=drafts[0].kind, content=drafts[0].content
                )
                if existing is not None:
                    duplicate = await self.rt.records.get(existing)
                    # Deletes do not take write_lock: if it went meanwhile, there is no duplicate; write anew.
                    if duplicate is not None:
                        return [WriteOutcome("duplicate", _row(duplicate))], degraded
            judgements: list[WriteJudgement] = []
            for draft, vector in zip(drafts, vectors, strict=True):
                if vector is not None and KINDS[draft.kind].mergeable:
                    judgements.append(await self._judge(draft, vector, allow_merge=allow_merge))
                else:
                    judgements.append(WriteJudgement())
            async with self.rt.db.transaction() as conn:
                source_id = None
                if source_text is not None:
                    source_id = await self.store.save_source(
                        conn, owner_uid=self.scope.owner_uid, store_key=store_key, content=source_text
                    )
                for draft, judged in zip(drafts, judgements, strict=True):
                    target = judged.target
                    found = await self.rt.records.get(target["memory_id"], conn=conn) if target else None
                    current = None if found is None else _row(found)
                    if current is not None and current["store_key"] == store_key:
                        record = await self.rt.records.update(
                            conn,
                            current["memory_id"],
                            merge_changes(current, draft, judged.novelty, now),
                            action="merge",
                            actor=context,
                            note=f"{action} 合并：{draft.title[:60]}",
                        )
                        assert record is not None, "read in this transaction, so it exists"
                        outcomes.append(WriteOutcome("merged", record))
                    else:
                        record = await self.rt.records.insert(
                            conn, draft.record(self.scope, self.folder_id), action=action, actor=context
                        )
                        superseded = await self._supersede(conn, judged.replaces, record)
                        outcomes.append(
                            WriteOutcome("created", record, superseded, None if superseded or target else judged.unsure)
                        )
                    if source_id is not None or draft.source_bucket:
                        await self.store.link_source(
                            conn,
                            memory_id=record["memory_id"],
                            store_key=store_key,
                            source_id=source_id,
                            ranges=draft.ranges,
                            source_bucket=draft.source_bucket,
                        )
                if digest_bucket:
                    await self.rt.records.update(
                        conn,
                        digest_bucket,
                        {"digested": True},
                        action="digest",
                        actor=context,
                        note="写入感受后标记为已消化",
                    )
        report = await self.rt.sync_vectors()
        changed = [o.record["memory_id"] for o in outcomes] + ([digest_bucket] if digest_bucket else [])
        await self.rt.notify_changed(action, changed)
        replaced = [o.superseded["memory_id"] for o in outcomes if o.superseded is not None]
        if replaced:
            await self.rt.notify_changed("supersede", replaced)
        for outcome in outcomes:
            if outcome.unsure is not None:
                # After the commit and outside any transaction, as for upsert_memory: a model may take seconds.
                from ..evidence.unsure_pairs import schedule_unsure_pair

                schedule_unsure_pair(self.rt, self.scope, outcome.record["memory_id"], *outcome.unsure)
        return outcomes, degraded or getattr(report, "error", "")

    async def _supersede(self, conn: Any, replaces: str | None, record: dict[str, Any]) -> dict[str, Any] | None:
        """Mark ``replaces`` superseded by the just-inserted ``record`` in the same transaction (both or neither);
        None when there is nothing to replace or it was deleted or replaced meanwhile."""
        if replaces is None:
            return None
        old = await self.rt.records.get(replaces, conn=conn)
        if old is None or old["superseded_by"] or old["store_key"] != self.scope.writable_store_key:
            return None
        changes, note = supersession_mark(record)
        return await self.rt.records.update(
            conn, replaces, changes, action="supersede", actor=self.scope.context, touch=False, note=note
        )

    async def _observer_notices(self, outcomes: Sequence[WriteOutcome]) -> list[str]:
        notices: list[str] = []
        records = [o.record for o in outcomes if o.mode != "duplicate"]
        for observer in write_observers():
            notices.extend(await observer(self.service, records))
        return notices

    def _vector_notice(self, degraded: str, *, skipped_check: str) -> list[str]:
        reason = degraded or ("" if self.rt.embedding_available() else self.rt.degraded_reason())
        if not reason:
            return []
        skipped = f"；{skipped_check}本次跳过" if skipped_check else ""
        return [f"向量暂不可用（{reason}）：已写入数据库，向量稍后补建，检索暂时只走关键词{skipped}"]

    # ---------------------------------------------------------------- hold
    async def hold(
        self,
        content: Any,
        *,
        title: Any,
        domain: Any,
        tags: Any,
        importance: Any,
        pinned: Any,
        feel: Any,
        source_bucket: Any,
        source_content: Any,
        source_ranges: Any,
        valence: Any,
        arousal: Any,
        why_remembered: Any,
        quotes: Any,
        action: str = "hold",
    ) -> dict[str, Any]:
        self.ensure_may_author("hold")
        notices: list[str] = []
        is_pinned = bool(f.checked_flag(pinned, "pinned"))
        is_feel = bool(f.checked_flag(feel, "feel"))
        bucket = f.checked_bucket_id(source_bucket, "source_bucket") if source_bucket not in (None, "") else ""
        source_text = None
        if source_content not in (None, ""):
            source_text = f.checked_body(source_content, "source_content", max_chars=f.MAX_SOURCE_CHARS)
        if source_ranges not in (None, []) and source_text is None:
            raise ValidationError("source_ranges 需要同时提供 source_content（行号指向 source_content 的行）")
        ranges = f.checked_source_ranges(source_ranges, len(source_text.splitlines()) if source_text else 0)
        draft = await self._draft(
            content,
            title=title,
            domain=domain,
            tags=tags,
            importance=importance,
            valence=valence,
            arousal=arousal,
            why_remembered=why_remembered,
            quotes=quotes,
            kind="feel" if is_feel else "memory",
            pinned=is_pinned,
            ranges=ranges,
            source_bucket=bucket,
            notices=notices,
        )
        digest_bucket = await self._digest_target(bucket, is_feel, notices) if bucket else ""
        outcomes, degraded = await self._write(
            [draft], action=action, allow_merge=False, source_text=source_text, digest_bucket=digest_bucket
        )
        outcome = outcomes[0]
        if outcome.mode == "duplicate":
            notices = [f"已有逐字相同的记忆 [{outcome.record['memory_id']}]，未重复保存"]
        else:
            observed = await self._observer_notices(outcomes)
            checked = "是否更新旧记忆的判断" if KINDS[draft.kind].mergeable else ""
            notices = self._vector_notice(degraded, skipped_check=checked) + notices + observed
        item = self.item(outcome.record)
        lines = [
            f"{'已保存' if outcome.mode == 'created' else '未重复保存'}"
            f"{'感受' if is_feel else '记忆'} [{item['id']}] {display_name(item)}"
            f" · 域:{'/'.join(item['domains']) or '未分域'} · 重要度 {item['importance']}"
            + (" · 📌核心准则" if item["pinned"] else "")
        ]
        if item["speakers"]:
            lines.append(f"拆出 {len(item['speakers'])} 条他人说的话（speaker 行）")
        if outcome.noteworthy:
            lines.append(outcome.sentence(display_name(item)))
        if source_text is not None:
            lines.append("原文已存入不可变原文层（不参与 breath）")
        lines.extend(f"提示：{n}" for n in notices)
        return {
            "action": "hold",
            "mode": outcome.mode,
            "id": item["id"],
            "item": item,
            "speakers": item["speakers"],
            "notices": notices,
            **outcome.links(),
            "text": "\n".join(lines),
        }

    async def _digest_target(self, bucket: str, is_feel: bool, notices: list[str]) -> str:
        """Check ``source_bucket`` and decide whether this write marks it digested (a feeling written for it)."""
        record = await self.rt.records.get(bucket)
        if record is None or record["store_key"] not in self.scope.readable_store_keys or record["bucket"] != "memory":
            raise NotFoundError(f"source_bucket={bucket!r} 不存在，请传正在消化的那条记忆的准确 ID")
        if not is_feel:
            return ""
        if record["store_key"] != self.scope.writable_store_key:
            notices.append(f"来源记忆 {bucket} 不在当前可写的记忆库中，只记录关联，未标记为已消化")
            return ""
        if record["pinned"] or record["anchor"]:
            notices.append(f"来源记忆 {bucket} 是核心准则或 anchor，digested 对它不生效，保持原样")
            return ""
        if record["digested"]:
            return ""
        notices.append(f"来源记忆 {bucket} 已标记为已消化（从默认浮现与 dream 隐藏，breath_search 仍可找回）")
        return bucket

    # ---------------------------------------------------------------- grow
    async def grow(self, content: Any, items: Any) -> dict[str, Any]:
        self.ensure_may_author("grow")
        notices: list[str] = []
        if items not in (None, []):
            return await self._grow_items(content, items, notices)
        text = f.checked_body(content, "content", max_chars=f.MAX_SOURCE_CHARS)
        if len(text.strip()) < GROW_SHORT_CHARS:
            result = await self.hold(
                text,
                title=None,
                domain=None,
                tags=None,
                importance=None,
                pinned=False,
                feel=False,
                source_bucket=None,
                source_content=None,
                source_ranges=None,
                valence=None,
                arousal=None,
                why_remembered=None,
                quotes=None,
                action="grow",
            )
            result.update(
                action="grow",
                path="hold",
                items=[result["item"]],
                text=f"内容不足 {GROW_SHORT_CHARS} 字，走 hold 单条快速路径，未拆分。\n" + result["text"],
            )
            return result
        pieces = await self._split(text, notices)
        drafts = []
        for piece in pieces:
            drafts.append(
                await self._draft(
                    piece.content,
                    title=None,
                    domain=None,
                    tags=None,
                    importance=None,
                    valence=None,
                    arousal=None,
                    why_remembered=None,
                    quotes=None,
                    ranges=[[piece.first_line, piece.last_line]] if piece.first_line else [],
                    notices=notices,
                )
            )
        return await self._grow_write(drafts, source_text=text, notices=notices, path="split")

    async def _split(self, text: str, notices: list[str]) -> list[GrowPiece]:
        if self.splitter is not None:
            try:
                parts = [p for p in await self.splitter.split(text) if isinstance(p, str) and p.strip()]
            except Exception as exc:  # a failing model falls back to the local rule
                notices.append(f"拆分模型不可用（{exc}），已改用本地规则按段落/句子拆分")
            else:
                if 2 <= len(parts) <= 6:
                    return [GrowPiece(part, 0, 0) for part in parts]
                notices.append(f"拆分模型给出 {len(parts)} 条（应为 2~6 条），已改用本地规则按段落/句子拆分")
        else:
            notices.append("未配置拆分模型，已用本地规则按段落/句子拆分（正文逐字保留）")
        pieces = split_for_grow(text)
        if len(pieces) == 1:
            notices.append("全文只有一句，无法在句子边界拆开，保存为一条")
        for piece in pieces:
            f.checked_body(piece.content, "content（拆分后的单条）")
        return pieces

    async def _grow_items(self, content: Any, items: Any, notices: list[str]) -> dict[str, Any]:
        if not isinstance(items, (list, tuple)):
            raise ValidationError(
                "items 必须是列表：字符串，或含 title/content/tags/importance/domain/valence/arousal/"
                "why_remembered/source_ranges/quotes 的对象"
            )
        if len(items) > GROW_MAX_ITEMS:
            raise ValidationError(f"items 最多 {GROW_MAX_ITEMS} 条，当前 {len(items)} 条，请分批 grow")
        source_text = None
        if content not in (None, ""):
            source_text = f.checked_body(content, "content", max_chars=f.MAX_SOURCE_CHARS)
        line_count = len(source_text.splitlines()) if source_text else 0
        drafts = []
        for index, raw in enumerate(items, start=1):
            prefix = f"items[{index}]."
            entry = {"content": raw} if isinstance(raw, str) else raw
            if not isinstance(entry, dict):
                raise ValidationError(f"items 第 {index} 项必须是字符串或对象")
            unknown = set(entry) - set(GROW_ITEM_KEYS)
            if unknown:
                raise ValidationError(
                    f"items 第 {index} 项含未知字段 {sorted(unknown)}，允许：{'、'.join(GROW_ITEM_KEYS)}"
                )
            if entry.get("source_ranges") not in (None, []) and source_text is None:
                raise ValidationError(f"{prefix}source_ranges 需要同时传 content 作为共享原文")
            ranges = f.checked_source_ranges(entry.get("source_ranges"), line_count, f"{prefix}source_ranges")
            drafts.append(
                await self._draft(
                    entry.get("content"),
                    title=entry.get("title"),
                    domain=entry.get("domain"),
                    tags=entry.get("tags"),
                    importance=entry.get("importance"),
                    valence=entry.get("valence"),
                    arousal=entry.get("arousal"),
                    why_remembered=entry.get("why_remembered"),
                    quotes=entry.get("quotes"),
                    ranges=ranges,
                    notices=notices,
                    field_prefix=prefix,
                )
            )
        if not drafts:
            raise ValidationError("items 不能为空")
        return await self._grow_write(drafts, source_text=source_text, notices=notices, path="items")

    async def _grow_write(
        self, drafts: list[MomentDraft], *, source_text: str | None, notices: list[str], path: str
    ) -> dict[str, Any]:
        outcomes, degraded = await self._write(drafts, action="grow", allow_merge=True, source_text=source_text)
        notices = (
            self._vector_notice(degraded, skipped_check="相似合并与更新判断")
            + notices
            + await self._observer_notices(outcomes)
        )
        items = [self.item(o.record) for o in outcomes]
        superseded = sum(o.superseded is not None for o in outcomes)
        lines = [
            f"整理为 {len(items)} 条记忆（新建 {sum(o.mode == 'created' for o in outcomes)}，"
            f"合并 {sum(o.mode == 'merged' for o in outcomes)}"
            + (f"，其中 {superseded} 条取代了旧记录" if superseded else "")
            + "）："
        ]
        links: dict[str, list[dict[str, str]]] = {}
        for outcome, item in zip(outcomes, items, strict=True):
            verb = "合并入" if outcome.mode == "merged" else "新建"
            lines.append(f"- {verb} [{item['id']}] {display_name(item)} · 重要度 {item['importance']}")
            if outcome.noteworthy:
                lines.append(f"  {outcome.sentence(display_name(item))}")
            for key, entries in outcome.links().items():
                links.setdefault(key, []).extend({**entry, "by": item["id"]} for entry in entries)
        if source_text is not None:
            lines.append("原文已存入不可变原文层（不参与 breath），各条按行号区间关联")
        lines.extend(f"提示：{n}" for n in notices)
        return {
            "action": "grow",
            "path": path,
            "total": len(items),
            "items": items,
            "modes": [o.mode for o in outcomes],
            "ids": [i["id"] for i in items],
            "notices": notices,
            **links,
            "text": "\n".join(lines),
        }

    # --------------------------------------------------------------- trace
    async def trace(self, bucket_id: Any, **params: Any) -> dict[str, Any]:
        memory_id = f.checked_bucket_id(bucket_id)
        values = self._trace_values(params)
        authoring = {"name", "title", "content", "domain", "tags", "why_remembered", "quotes_replace"} & set(values)
        if authoring:
            self.ensure_may_author("、".join(sorted(authoring)))
        now = time.time()
        notices: list[str] = []
        async with self.rt.db.transaction() as conn:
            current = await self._writable(conn, memory_id)
            changes = self._trace_changes(current, values, notices, now)
            effective = {k: v for k, v in changes.items() if current.get(k) != v}
            record = current
            if effective:
                updated = await self.rt.records.update(
                    conn, memory_id, effective, action="trace", actor=self.scope.context, note="trace"
                )
                assert updated is not None, "read in this transaction, so it exists"
                record = updated
        if effective:
            await self.rt.sync_vectors()
            await self.rt.notify_changed("trace", [memory_id])
        if record["superseded_by"]:
            notices.append(
                f"这条记录{outdated_mark(record['superseded_by'])}；现在的情况请用 hold 记新事实，"
                "取代判断错了可用 memory_command history / revert 回退"
            )
        item = self.item(record)
        changed = sorted(effective)
        head = (
            f"已修改 [{memory_id}] {display_name(item)}：{'、'.join(changed)}"
            if changed
            else f"[{memory_id}] {display_name(item)} 没有字段发生变化"
        )
        return {
            "action": "trace",
            "id": memory_id,
            "changed_fields": changed,
            "notices": notices,
            "item": item,
            "text": "\n".join([head, *(f"提示：{n}" for n in notices)]),
        }

    @staticmethod
    def _trace_values(params: dict[str, Any]) -> dict[str, Any]:
        """Validated trace parameters that were given (None = leave unchanged)."""
        checks: dict[str, Callable[[Any], Any]] = {
            "name": f.checked_name,
            "title": lambda v: f.checked_line(v, "title", max_chars=f.MAX_TITLE_CHARS, allow_empty=False),
            "content": f.checked_body,
            "domain": f.checked_domains,
            "tags": f.checked_tag_list,
            "importance": f.checked_importance,
            "valence": lambda v: f.checked_unit(v, "valence"),
            "arousal": lambda v: f.checked_unit(v, "arousal"),
            "resolved": lambda v: f.checked_flag(v, "resolved"),
            "pinned": lambda v: f.checked_flag(v, "pinned"),
            "protected": lambda v: f.checked_flag(v, "protected"),
            "digested": lambda v: f.checked_flag(v, "digested"),
            "why_remembered": f.checked_why,
            "status": lambda v: f.checked_line(v, "status", max_chars=32).lower(),
            "quotes_replace": lambda v: f.checked_quotes(v, "quotes_replace"),
            "reinforce": lambda v: f.checked_flag(v, "reinforce"),
        }
        unknown = set(params) - set(checks)
        if unknown:
            raise ValidationError(f"trace 不认识的参数 {sorted(unknown)}，可用：{'、'.join(checks)}")
        values = {key: checks[key](value) for key, value in params.items() if value is not None}
        if values.get("reinforce") is False:
            values.pop("reinforce")
        if not values:
            raise ValidationError(
                "trace 没有要修改的字段：只传需要修改的字段（如 resolved=1、pinned=1、digested=1、title=…）"
            )
        return values

    def _trace_changes(
        self, current: dict[str, Any], values: dict[str, Any], notices: list[str], now: float
    ) -> dict[str, Any]:
        spec = spec_of(current)
        changes: dict[str, Any] = {}
        extra = dict(current.get("extra") or {})
        for key in ("name", "title", "content", "why_remembered", "valence", "arousal"):
            if key in values:
                changes[key] = values[key]
        if "content" in values:
            changes["last_activated_at"] = now  # rewriting a memory is engaging with it
        if "tags" in values:
            changes["tags"] = values["tags"]
        if "domain" in values:
            if spec.key == "feel" and values["domain"] != [FEEL_DOMAIN]:
                raise ValidationError("feel 类记忆的 domain 固定为 feel，不能修改")
            changes["domains"] = values["domain"]
        if "resolved" in values:
            changes["resolved"] = values["resolved"]
        if "status" in values:
            if not spec.statuses:
                raise ValidationError(f"status 只适用于有状态的记忆（如 plan），这条是「{spec.label}」，没有 status")
            if values["status"] not in spec.statuses:
                raise ValidationError(f"status 取值 {values['status']!r} 无效，可选：{'、'.join(spec.statuses)}")
            extra["status"] = values["status"]
        if "quotes_replace" in values:
            old, new = list(extra.get("quotes") or []), values["quotes_replace"]
            if new and not old:
                raise ValidationError("这条记忆写入时没有留下引语：quotes_replace 只能订正或删除，不能补录")
            if len(new) > len(old):
                raise ValidationError(
                    f"quotes_replace 只能保持或减少条数（原有 {len(old)} 句，传入 {len(new)} 句），不能补录"
                )
            if new:
                extra["quotes"] = new
            else:
                extra.pop("quotes", None)
        self._protection_changes(current, values, changes, notices, now)
        if values.get("digested") is not None:
            is_pinned = changes.get("pinned", current["pinned"])
            if values["digested"] and (is_pinned or current["anchor"]):
                notices.append(
                    "digested 对核心准则（pinned）和 anchor 不生效——它们始终在场；要让它安静请改用 "
                    "trace(bucket_id, pinned=0, importance=…) 或 release(bucket_id)"
                )
            else:
                changes["digested"] = values["digested"]
        if values.get("reinforce"):
            changes["last_activated_at"] = now
            changes["activation_count"] = int(current.get("activation_count") or 0) + 1
            if current["status"] != "active":
                changes["status"] = "active"
                notices.append("已从归档区恢复，重新参与浮现")
        if extra != (current.get("extra") or {}):
            changes["extra"] = extra
        return changes

    @staticmethod
    def _protection_changes(
        current: dict[str, Any], values: dict[str, Any], changes: dict[str, Any], notices: list[str], now: float
    ) -> None:
        """pinned / protected / importance: mutually exclusive protections that lock importance at 10."""
        was_locked = bool(current["pinned"] or current["protected"])
        pinned = values.get("pinned", current["pinned"])
        protected = values.get("protected", current["protected"])
        if pinned and protected:
            raise ValidationError("protected 与 pinned 互斥：一条记忆只能是核心准则（pinned）或受保护（protected）之一")
        if protected and current["anchor"]:
            raise ValidationError("protected 与 anchor 互斥：请先 release(bucket_id) 再设 protected")
        importance = values.get("importance")
        if pinned or protected:
            if importance is not None and importance != 10:
                which = "pinned" if pinned else "protected"
                raise ValidationError(f"{which} 记忆的 importance 锁定为 10，不能改成 {importance}")
            changes["importance"] = 10
        elif was_locked:
            if importance is None:
                raise ValidationError("解除最后一层 pinned/protected 保护时，必须在同一次调用显式传入 importance=1..10")
            changes["importance"] = importance
            changes["last_activated_at"] = now  # decay restarts from now instead of archiving an old memory at once
            notices.append("已解除保护：从现在起重新参与衰减")
        elif importance is not None:
            changes["importance"] = importance
        for key in ("pinned", "protected"):
            if key in values:
                changes[key] = values[key]

    # ------------------------------------------------------ anchor / release
    async def anchor(self, bucket_id: Any) -> dict[str, Any]:
        memory_id = f.checked_bucket_id(bucket_id)
        async with self.rt.db.transaction() as conn:
            current = await self._writable(conn, memory_id)
            if current["anchor"]:
                item = self.item(current)
                return {
                    "action": "anchor",
                    "id": memory_id,
                    "changed": False,
                    "item": item,
                    "anchors": len(await self.store.anchors(self.scope.writable_store_key, conn=conn)),
                    "text": f"[{memory_id}] {display_name(item)} 已经是 anchor，未改动",
                }
            spec = spec_of(current)
            if not spec.in_search:
                raise ValidationError(f"「{spec.label}」类记录不能设为 anchor，anchor 只用于普通记忆与感受")
            if current["protected"]:
                raise ValidationError(
                    "anchor 与 protected 互斥：先 trace(bucket_id, protected=0, importance=1..10) 再设 anchor"
                )
            if current["status"] != "active":
                raise ValidationError("已归档的记忆不能设为 anchor：先 trace(bucket_id, reinforce=1) 恢复")
            anchors = await self.store.anchors(self.scope.writable_store_key, conn=conn)
            if len(anchors) >= ANCHOR_LIMIT:
                listing = "；".join(f"{i} {label}" for i, label in anchors)
                raise ValidationError(
                    f"anchor 已达硬上限 {ANCHOR_LIMIT} 条，拒绝设置。请先 release(bucket_id) 释放一条"
                    f"不再需要的坐标，再设这一条。现有 anchor：{listing}"
                )
            record = await self.rt.records.update(
                conn, memory_id, {"anchor": True}, action="anchor", actor=self.scope.context, note="anchor"
            )
            assert record is not None, "read in this transaction, so it exists"
        await self.rt.notify_changed("anchor", [memory_id])
        item = self.item(record)
        return {
            "action": "anchor",
            "id": memory_id,
            "changed": True,
            "item": item,
            "anchors": len(anchors) + 1,
            "text": f"已将 [{memory_id}] {display_name(item)} 设为 ⚓ anchor（{len(anchors) + 1}/{ANCHOR_LIMIT}）："
            f"不再主动出现在默认 breath，query/domain/情绪命中时仍会返回",
        }

    async def release(self, bucket_id: Any) -> dict[str, Any]:
        memory_id = f.checked_bucket_id(bucket_id)
        async with self.rt.db.transaction() as conn:
            current = await self._writable(conn, memory_id)
            if not current["anchor"]:
                item = self.item(current)
                return {
                    "action": "release",
                    "id": memory_id,
                    "changed": False,
                    "item": item,
                    "text": f"[{memory_id}] {display_name(item)} 不是 anchor，未改动",
                }
            # Rejoining the default breath is activity: the clock restarts so it is not archived at once.
            record = await self.rt.records.update(
                conn,
                memory_id,
                {"anchor": False, "last_activated_at": time.time()},
                action="release",
                actor=self.scope.context,
                note="release",
            )
            assert record is not None, "read in this transaction, so it exists"
        await self.rt.notify_changed("release", [memory_id])
        item = self.item(record)
        pinned = "，pinned 状态保留" if item["pinned"] else ""
        return {
            "action": "release",
            "id": memory_id,
            "changed": True,
            "item": item,
            "text": f"已解除 [{memory_id}] {display_name(item)} 的 anchor，恢复为普通状态、重新参与默认 breath{pinned}",
        }

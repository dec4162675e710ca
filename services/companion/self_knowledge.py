"""The "I": self-knowledge as sediment, not a diary.

* ``I(content="我觉得……", aspect=...)`` writes a **candidate** (kind ``self_candidate``, domain ``self``,
  ``extra.self.stage = "candidate"``): it surfaces in breath, is found by search and decays exactly like an ordinary
  memory; only grow never merges other text into it. Every dream shows each live
  candidate next to the memories most related to it, and notes the local date: that is a *witness*.
* ``I(promote=<candidate id>)`` turns the candidate into a **formal** entry (kind ``self``) only once dreams on three
  different dates have witnessed it, optionally with refined wording (the candidate's words stay in its history).
  Formal entries are out of breath, breath_search and dream; ``I(read=True)`` reads them, and the host's session start
  gets ``latest(3)``.
* ``I(content=..., supersedes=<formal id>)`` challenges a formal entry of the same aspect. From that moment the old
  entry is no longer read out as a current belief (not a word of it is deleted, and ``I(read=True)`` still lists it
  as superseded). Whether an entry is superseded is computed, never stored: it is superseded while a live challenger
  exists. A challenger stops being live when it is withdrawn — let go (``trace(resolved=1)``), deleted, or faded into
  the archive by decay — and the old entry is a current belief again at once, also after an undo of any of these.
  The challenger itself still needs its three witnesses to become formal.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..errors import EmbeddingUnavailableError, NotFoundError, ValidationError
from ..logic.segmentation import query_terms
from ..logic.text import compose_embedding_text, extract_title
from ..memory_fields import checked_limit
from ..storage.record_filter import RecordFilter
from . import fields as f
from .decay_engine import record_score
from .extensions import DreamContext, DreamSection
from .kinds import KIND_KEY, KINDS, kind_of
from .letter_store import WitnessStore
from .rendering import ASPECT_LABELS, SELF_KEY, display_name, memory_item, render_block
from .writes import NEUTRAL_AROUSAL, NEUTRAL_IMPORTANCE, NEUTRAL_VALENCE, MomentDraft

ASPECTS = tuple(ASPECT_LABELS)
SELF_PREFIX = "我觉得"
SELF_DOMAIN = "self"
WITNESS_DATES_REQUIRED = 3  # docs/COMPANION.md: 被 3 次不同日期的 dream 见证后才能升级
MAX_SELF_CHARS = 2000
SELF_READ_DEFAULT = 20
SELF_READ_MAX = 100
LATEST_DEFAULT = 3  # docs/COMPANION.md: SessionStart 时自动附最近 3 条
DREAM_CANDIDATES_MAX = 10  # candidates shown (and witnessed) per dream, by decay score
RELATED_PER_CANDIDATE = 3
RELATED_MIN_SIMILARITY = 0.3
SELF_POOL = 5000
_SELF_SQL = f"json_extract(r.extra, '$.{SELF_KEY}.stage') IS NOT NULL"


# ------------------------------------------------------------------------------------------------------ the rules
def self_info(record: dict[str, Any]) -> dict[str, Any]:
    info = (record.get("extra") or {}).get(SELF_KEY)
    return info if isinstance(info, dict) else {}


def is_candidate(record: dict[str, Any]) -> bool:
    return kind_of(record) == "self_candidate"


def is_formal(record: dict[str, Any]) -> bool:
    return kind_of(record) == "self"


def is_live(record: dict[str, Any]) -> bool:
    """Not withdrawn: not deleted, not let go (resolved), not faded into the archive."""
    return not record.get("is_deleted") and record.get("status") == "active" and not record.get("resolved")


def superseded_by(entries: Sequence[dict[str, Any]]) -> dict[str, list[str]]:
    """``{formal id: [ids of the live entries that supersede it]}`` (a formal id absent = a current belief)."""
    retired: dict[str, list[str]] = {}
    for entry in entries:
        target = self_info(entry).get("supersedes")
        if target and is_live(entry):
            retired.setdefault(target, []).append(entry["memory_id"])
    return retired


def by_promotion(entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(entries, key=lambda e: -float(self_info(e).get("promoted_at") or e["created_at"]))


def classify(entries: Sequence[dict[str, Any]], retired: dict[str, list[str]]) -> dict[str, list[dict[str, Any]]]:
    """Split self entries into current beliefs (newest promotion first), pending candidates and former beliefs
    (superseded or withdrawn formal entries, newest first)."""
    current = by_promotion([e for e in entries if is_formal(e) and is_live(e) and e["memory_id"] not in retired])
    pending = [e for e in entries if is_candidate(e) and is_live(e)]
    former = sorted(
        (e for e in entries if is_formal(e) and (not is_live(e) or e["memory_id"] in retired)),
        key=lambda e: -e["created_at"],
    )
    return {"formal": current, "candidates": pending, "superseded": former}


def checked_aspect(value: Any) -> str:
    if value is None or (isinstance(value, str) and not value.strip()):
        return ""
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in ASPECT_LABELS:
        choices = "、".join(f"{key}（{label}）" for key, label in ASPECT_LABELS.items())
        raise ValidationError(f"aspect 取值 {value!r} 无效，可选：{choices}")
    return text


def checked_statement(value: Any, field: str = "content") -> str:
    """A self-knowledge statement: verbatim, starting with 「我觉得」."""
    body = f.checked_body(value, field, max_chars=MAX_SELF_CHARS)
    if not body.lstrip().startswith(SELF_PREFIX):
        raise ValidationError(
            f"{field} 必须是一个「{SELF_PREFIX}……」：I 记下的是自我认知的沉淀，不是日记或事件（事件请用 hold）"
        )
    return body


def local_date(moment: float) -> str:
    return time.strftime("%Y-%m-%d", time.localtime(moment))


def aspect_label(aspect: str) -> str:
    return f"{aspect}（{ASPECT_LABELS[aspect]}）" if aspect in ASPECT_LABELS else "未分维度"


# ------------------------------------------------------------------------------------------------------ the service
class SelfKnowledge:
    """The I tool for one companion service (its runtime, scope and clock)."""

    def __init__(self, service) -> None:
        self.service = service
        self.rt = service.runtime
        self.scope = service.scope
        self.witnesses = WitnessStore(self.rt.db)

    # ------------------------------------------------------------ reading
    async def entries(self, store_keys: Sequence[str]) -> list[dict[str, Any]]:
        """Every candidate and formal entry of the stores (deleted ones excluded), oldest first."""
        return await self.rt.records.list_records(
            RecordFilter(store_keys=list(store_keys), buckets=("memory",), extra_sql=[_SELF_SQL]),
            limit=SELF_POOL,
            order_by="r.created_at, r.rid",
        )

    def _item(self, record: dict[str, Any], dates: dict[str, list[str]], now: float) -> dict[str, Any]:
        item = memory_item(record, record_score(record, self.service.settings.decay, now))
        witnessed = dates.get(record["memory_id"], [])
        item["witness_dates"] = witnessed
        item["promoted_at"] = float(self_info(record).get("promoted_at") or 0.0)
        if item.get("self_stage") == "candidate":
            item["witnesses_needed"] = max(0, WITNESS_DATES_REQUIRED - len(witnessed))
        return item

    async def current_beliefs(self, store_keys: Sequence[str], *, aspect: str = "") -> list[dict[str, Any]]:
        """Formal, live, not superseded entries, newest promotion first (records)."""
        entries = await self.entries(store_keys)
        current = classify(entries, superseded_by(entries))["formal"]
        return [e for e in current if not aspect or self_info(e).get("aspect") == aspect]

    async def read(self, aspect: Any, limit: Any) -> dict[str, Any]:
        wanted = checked_aspect(aspect)
        count = checked_limit("limit", limit, default=SELF_READ_DEFAULT, maximum=SELF_READ_MAX)
        now = time.time()
        everything = await self.entries(self.scope.readable_store_keys)
        retired = superseded_by(everything)
        entries = [e for e in everything if not wanted or self_info(e).get("aspect") == wanted]
        dates = await self.witnesses.dates([e["memory_id"] for e in entries])
        groups = classify(entries, retired)
        groups["candidates"].sort(key=lambda e: (-len(dates[e["memory_id"]]), -e["created_at"]))
        shown: dict[str, list[dict[str, Any]]] = {}
        left = count
        for key, records in groups.items():
            shown[key] = [self._item(r, dates, now) for r in records[:left]]
            left -= len(shown[key])
        for item in shown["superseded"]:
            item["superseded_by"] = retired.get(item["id"], [])
        total = sum(len(v) for v in groups.values())
        listed = sum(len(v) for v in shown.values())
        sections = [
            f"🪞 自我认知{'（' + aspect_label(wanted) + '）' if wanted else ''}："
            f"正式 {len(groups['formal'])} 条 · 待沉淀候选 {len(groups['candidates'])} 条 · "
            f"已被取代/撤回 {len(groups['superseded'])} 条"
        ]
        if shown["formal"]:
            sections.append("【正式条目（当前信念）】\n" + "\n".join(self._line(i) for i in shown["formal"]))
        if shown["candidates"]:
            sections.append(
                "【待沉淀候选】\n"
                + "\n".join(
                    self._line(i) + f" · 见证 {len(i['witness_dates'])}/{WITNESS_DATES_REQUIRED}"
                    for i in shown["candidates"]
                )
            )
        if shown["superseded"]:
            sections.append(
                "【已被取代或撤回（一字未删，不再作为当前信念读出）】\n"
                + "\n".join(
                    self._line(i)
                    + (f" · 被 {'、'.join(i['superseded_by'])} 取代" if i["superseded_by"] else " · 已撤回")
                    for i in shown["superseded"]
                )
            )
        if not total:
            sections.append('还没有自我认知。写下一个「我觉得……」：I(content="我觉得……", aspect=…)')
        if listed < total:
            sections.append(f"另有 {total - listed} 条超出 limit={count} 未列出")
        return {
            "action": "I",
            "mode": "read",
            "aspect": wanted,
            **shown,
            "total": listed,
            "text": "\n\n".join(sections),
        }

    @staticmethod
    def _line(item: dict[str, Any]) -> str:
        return f"- [{item['id']}] {aspect_label(item.get('aspect') or '')}：{item['content']}"

    async def latest(self, limit: Any) -> dict[str, Any]:
        count = checked_limit("limit", limit, default=LATEST_DEFAULT, maximum=SELF_READ_MAX)
        now = time.time()
        records = (await self.current_beliefs(self.scope.readable_store_keys))[:count]
        items = [self._item(r, {}, now) for r in records]
        text = ("【自我认知】最近的正式条目（当前信念）：\n" + "\n".join(self._line(i) for i in items)) if items else ""
        return {"action": "latest_self_entries", "total": len(items), "items": items, "text": text}

    # ------------------------------------------------------------ writing
    def _ensure_may_author(self) -> None:
        if self.scope.authority == "mechanical":
            raise ValidationError("mechanical 权限不能撰写自我认知，只能改变状态，且必须注明原因")

    async def _own(self, memory_id: str, field: str) -> dict[str, Any]:
        record = await self.rt.records.get(memory_id)
        if (
            record is None
            or record["bucket"] != "memory"
            or record["store_key"] != self.scope.writable_store_key
            or not self_info(record)
        ):
            raise NotFoundError(
                f"{field}={memory_id!r} 不是当前可写库里的自我认知条目，请从 I(read=True) 的结果里取 ID"
            )
        return record

    async def write(self, content: Any, aspect: Any, supersedes: Any) -> dict[str, Any]:
        self._ensure_may_author()
        body = checked_statement(content)
        dimension = checked_aspect(aspect)
        target = None
        if supersedes not in (None, ""):
            target = await self._own(f.checked_bucket_id(supersedes, "supersedes"), "supersedes")
            if not is_formal(target):
                raise ValidationError(
                    f"supersedes 只能指向正式条目，[{target['memory_id']}] 还是候选；"
                    f"候选之间不用取代，不再这样觉得就 trace(bucket_id, resolved=1) 撤回它"
                )
            old_aspect = self_info(target).get("aspect") or ""
            if dimension and dimension != old_aspect:
                raise ValidationError(
                    f"只能在同一 aspect 内取代：[{target['memory_id']}] 是 {aspect_label(old_aspect)}，"
                    f"新的是 {aspect_label(dimension)}"
                )
            dimension = old_aspect
        async with self.rt.write_lock:
            for entry in await self.entries([self.scope.writable_store_key]):
                if entry["content"] == body and is_live(entry):
                    item = self._item(entry, await self.witnesses.dates([entry["memory_id"]]), time.time())
                    return {
                        "action": "I",
                        "mode": "duplicate",
                        "id": entry["memory_id"],
                        "item": item,
                        "text": f"已有逐字相同的自我认知 [{entry['memory_id']}]，未重复记下",
                    }
            draft = MomentDraft(
                content=body,
                title=extract_title(body),
                kind="self_candidate",
                domains=[SELF_DOMAIN],
                tags=[],
                importance=NEUTRAL_IMPORTANCE,
                valence=NEUTRAL_VALENCE,
                arousal=NEUTRAL_AROUSAL,
            )
            record = draft.record(self.scope, self.service.folder_id)
            info = {"stage": "candidate", "aspect": dimension}
            if target is not None:
                info["supersedes"] = target["memory_id"]
            record["extra"][SELF_KEY] = info
            if target is not None:
                record["relation_memory_ids"] = [target["memory_id"]]
            async with self.rt.db.transaction() as conn:
                stored = await self.rt.records.insert(
                    conn, record, action="self_candidate", actor=self.scope.context, note="自我认知候选"
                )
        await self.rt.sync_vectors()
        await self.rt.notify_changed("self_candidate", [stored["memory_id"]])
        item = self._item(stored, {}, time.time())
        lines = [
            f"🪞 已记下自我认知候选 [{item['id']}]（{aspect_label(dimension)}）：它像普通记忆一样会浮现、会衰减；"
            f"每次 dream 都会把它和相关记忆摆在一起。被 {WITNESS_DATES_REQUIRED} 个不同日期的 dream 见证后，"
            f'可用 I(promote="{item["id"]}") 升为正式条目（可同时传 content 用提炼后的措辞）'
        ]
        if target is not None:
            lines.append(
                f"[{target['memory_id']}] 从现在起不再作为当前信念读出（一字未删，I(read=True) 仍可查）；"
                f"撤回这条候选（trace(bucket_id, resolved=1) 或删除）它就回来"
            )
        return {"action": "I", "mode": "candidate", "id": item["id"], "item": item, "text": "\n".join(lines)}

    async def promote(self, candidate_id: Any, content: Any, aspect: Any) -> dict[str, Any]:
        self._ensure_may_author()
        memory_id = f.checked_bucket_id(candidate_id, "promote")
        refined = checked_statement(content) if content not in (None, "") else None
        dimension = checked_aspect(aspect)
        now = self.service.clock()
        async with self.rt.write_lock:
            record = await self._own(memory_id, "promote")
            info = dict(self_info(record))
            if is_formal(record):
                raise ValidationError(f"[{memory_id}] 已经是正式条目，不需要再 promote")
            if record.get("resolved"):
                raise ValidationError(f"[{memory_id}] 已撤回（resolved），要升级请先 trace(bucket_id, resolved=0)")
            if record.get("status") != "active":
                raise ValidationError(f"[{memory_id}] 已褪色归档，要升级请先 trace(bucket_id, reinforce=1) 让它回来")
            dates = (await self.witnesses.dates([memory_id]))[memory_id]
            if len(dates) < WITNESS_DATES_REQUIRED:
                seen = "、".join(dates) if dates else "还没有"
                raise ValidationError(
                    f"[{memory_id}] 只被 {len(dates)} 个不同日期的 dream 见证过（{seen}），"
                    f"需要 {WITNESS_DATES_REQUIRED} 个不同日期才能升为正式条目；"
                    f"还差 {WITNESS_DATES_REQUIRED - len(dates)} 个，先让它在之后的 dream 里多碰撞几次"
                )
            if dimension and info.get("aspect") and dimension != info["aspect"]:
                raise ValidationError(
                    f"[{memory_id}] 的 aspect 是 {aspect_label(info['aspect'])}，promote 不能改成 "
                    f"{aspect_label(dimension)}（取代关系只在同一 aspect 内成立）"
                )
            info.update(stage="formal", aspect=info.get("aspect") or dimension, promoted_at=now, witness_dates=dates)
            extra = {**(record.get("extra") or {}), KIND_KEY: "self", SELF_KEY: info}
            changes: dict[str, Any] = {"extra": extra, "memory_type": KINDS["self"].memory_type}
            if refined is not None and refined != record["content"]:
                changes.update(content=refined, title=extract_title(refined))
            async with self.rt.db.transaction() as conn:
                updated = await self.rt.records.update(
                    conn,
                    memory_id,
                    changes,
                    action="promote",
                    actor=self.scope.context,
                    note="自我认知升为正式条目" + ("（提炼措辞）" if refined else ""),
                )
        await self.rt.sync_vectors()
        await self.rt.notify_changed("promote", [memory_id])
        item = self._item(updated, {memory_id: dates}, time.time())
        lines = [
            f"🪞 [{memory_id}] 已升为正式自我认知（{aspect_label(info['aspect'])}，见证于 {'、'.join(dates)}）"
            + ("，采用了提炼后的措辞（候选时的原话留在历史版本里）" if "content" in changes else "")
            + "。正式条目不再参与 breath 与 dream，用 I(read=True) 读取；会话开始时会附上最近几条"
        ]
        if info.get("supersedes"):
            lines.append(f"它取代了 [{info['supersedes']}]（一字未删，在 I(read=True) 的「已被取代」里）")
        return {"action": "I", "mode": "promote", "id": memory_id, "item": item, "text": "\n".join(lines)}


# ----------------------------------------------------------------------------------------------- the dream section
async def _related(service, candidate: dict[str, Any]) -> list[dict[str, Any]]:
    """The memories most related to a candidate (ordinary memories and feelings, not self entries): by meaning when
    the model works, else (or when meaning finds none) by shared keywords."""
    runtime = service.runtime
    scope = service.scope

    async def eligible(ranked: Sequence[str]) -> list[dict[str, Any]]:
        records = await runtime.records.get_many(ranked)
        chosen = []
        for memory_id in ranked:
            record = records.get(memory_id)
            if (
                record is None
                or memory_id == candidate["memory_id"]
                or self_info(record)
                or kind_of(record) not in ("memory", "feel")
                or record["status"] != "active"
                or record["store_key"] not in scope.readable_store_keys
            ):
                continue
            chosen.append(record)
            if len(chosen) == RELATED_PER_CANDIDATE:
                break
        return chosen

    related: list[dict[str, Any]] = []
    if runtime.embedding_available():
        try:
            vector = (
                await runtime.embed_documents([compose_embedding_text(candidate["title"], candidate["content"])])
            )[0]
            hits = await runtime.query_vectors(
                vector, store_keys=scope.readable_store_keys, tiers=["live"], limit=RELATED_PER_CANDIDATE * 6
            )
            related = await eligible([h.memory_id for h in hits if h.similarity >= RELATED_MIN_SIMILARITY])
        except EmbeddingUnavailableError:
            related = []
    if not related:
        hits = await runtime.records.search_terms(
            query_terms(candidate["content"]),
            RecordFilter(store_keys=scope.readable_store_keys, buckets=("memory",), statuses=("active",)),
            limit=RELATED_PER_CANDIDATE * 6,
        )
        related = await eligible([memory_id for memory_id, _ in hits])
    return related


async def self_dream_section(service, context: DreamContext) -> DreamSection | None:
    """Every dream: each live candidate beside its related memories; the dream's local date is its witness."""
    book = SelfKnowledge(service)
    now = context.now
    entries = await book.entries(service.scope.readable_store_keys)
    live = [e for e in entries if is_candidate(e) and is_live(e) and not e.get("digested")]
    if not live:
        return None
    params = service.settings.decay
    live.sort(key=lambda e: -record_score(e, params, now))
    shown = live[:DREAM_CANDIDATES_MAX]
    moment = service.clock()
    witness_date = local_date(moment)
    await book.witnesses.record(
        [(e["memory_id"], e["store_key"]) for e in shown], witness_date=witness_date, now=moment
    )
    dates = await book.witnesses.dates([e["memory_id"] for e in shown])
    in_dream = {item["id"] for item in context.items}
    formal = {e["memory_id"]: e for e in entries if is_formal(e)}
    items, blocks = [], []
    for candidate in shown:
        item = book._item(candidate, dates, now)
        related = await _related(service, candidate)
        item["related"] = [r["memory_id"] for r in related]
        items.append(item)
        head = (
            f"🪞 [{item['id']}] {aspect_label(item['aspect'])} · 已被 {len(item['witness_dates'])} 个不同日期的 dream "
            f"见证（{'、'.join(item['witness_dates'])}）"
        )
        head += (
            f"，还差 {item['witnesses_needed']} 个"
            if item["witnesses_needed"]
            else f'，够了：可以 I(promote="{item["id"]}")'
        )
        lines = [head, item["content"]]
        old = formal.get(item["supersedes"]) if item["supersedes"] else None
        if old is not None:
            lines.append(f"  它在质疑 [{old['memory_id']}]：{old['content']}")
        if related:
            lines.append("  相关记忆：")
            for record in related:
                if record["memory_id"] in in_dream:
                    lines.append(f"  - [{record['memory_id']}] {display_name(record)}（见上文）")
                else:
                    block = render_block(memory_item(record, record_score(record, params, now)))
                    lines.append("  - " + block.replace("\n", "\n    "))
        else:
            lines.append("  相关记忆：暂时没有找到")
        blocks.append("\n".join(lines))
    guide = (
        f"每个候选都和相关记忆摆在一起：它们还撑得住这句话吗？被 {WITNESS_DATES_REQUIRED} 个不同日期的 dream "
        f"见证后可 I(promote=ID) 升为正式条目（可同时传 content 用提炼后的措辞）；不再这样觉得 → "
        f"trace(bucket_id, resolved=1) 撤回。本次见证日期 {witness_date}"
    )
    if len(live) > len(shown):
        guide += f"；候选共 {len(live)} 条，本次按权重展示前 {len(shown)} 条"
    return DreamSection(
        key="self_candidates", title="自我认知候选（与相关记忆碰撞）", items=items, text="\n\n".join([guide, *blocks])
    )

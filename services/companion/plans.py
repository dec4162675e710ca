"""Plans: commitments and open loops. A plan is a memory record of kind ``plan`` whose own status (active / resolved
/ abandoned) lives in ``extra.status``, next to its ``weight`` (how heavy the promise is, 0..1, distinct from
importance: how much it matters) and an optional ``related_bucket``.

Plans never decay and never surface in breath (the kind table says so); dream ends with the active ones. When hold or
grow writes an event that looks like it completes an active plan (semantically close, or sharing most of the plan's
words), the answer says so, but nothing closes a plan except an explicit ``trace(bucket_id, status="resolved")`` or
``status="abandoned"``: a guess must never tick off a promise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..logic.text import compose_embedding_text, extract_title
from ..storage.record_filter import RecordFilter
from . import fields as f
from .extensions import DreamContext, DreamSection
from .kinds import KIND_SQL, KINDS, kind_of, spec_of
from .relatedness import keyword_share, similarities
from .rendering import (
    PLAN_DEFAULT_WEIGHT,
    SELF_KEY,
    display_name,
    format_time,
    memory_item,
)
from .writes import NEUTRAL_AROUSAL, NEUTRAL_IMPORTANCE, NEUTRAL_VALENCE, MomentDraft

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

PLAN_STATUSES = KINDS["plan"].statuses
# A new event "looks like it completes" a plan when it is this close semantically, or contains this share of the
# plan's search terms. The model threshold is high because multilingual-e5 puts unrelated Chinese sentences near 0.8.
PLAN_HINT_SIMILARITY = 0.85
PLAN_HINT_COVERAGE = 0.6
ACTIVE_PLANS_LIMIT = 200
CLOSE_GUIDE = '完成了 → trace(bucket_id, status="resolved")；不打算做了 → trace(bucket_id, status="abandoned")'


def checked_weight(value: Any) -> float:
    if value is None:
        return PLAN_DEFAULT_WEIGHT
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
        raise ValidationError("weight 必须是 0.0 到 1.0 之间的数字（承诺有多重，与 importance 不同）")
    if not 0.0 <= float(value) <= 1.0:
        raise ValidationError(f"weight={value!r} 超出范围，必须在 0.0 到 1.0 之间")
    return float(value)


def checked_plan_status(value: Any) -> str:
    text = value.strip().lower() if isinstance(value, str) else value
    if text not in PLAN_STATUSES:
        raise ValidationError(f"status 取值 {value!r} 无效，可选：{'、'.join(PLAN_STATUSES)}")
    return text


def _active_filter(store_keys: Sequence[str], *extra_sql: str, params: Sequence[Any] = ()) -> RecordFilter:
    return RecordFilter(
        store_keys=list(store_keys),
        buckets=("memory",),
        statuses=("active",),
        extra_sql=[
            f"{KIND_SQL} = 'plan'",
            "COALESCE(json_extract(r.extra, '$.status'), 'active') = 'active'",
            *extra_sql,
        ],
        extra_params=list(params),
    )


async def active_plans(runtime: BookuRuntime, store_keys: Sequence[str]) -> list[dict[str, Any]]:
    """Active plans of the stores, heaviest first (then oldest first)."""
    records = await runtime.records.list_records(
        _active_filter(store_keys), limit=ACTIVE_PLANS_LIMIT, order_by="r.created_at, r.rid"
    )
    return sorted(records, key=lambda r: -float((r.get("extra") or {}).get("weight", PLAN_DEFAULT_WEIGHT)))


def plan_item(record: dict[str, Any]) -> dict[str, Any]:
    """The memory item of a plan; plans do not decay, so their ``score`` is their weight."""
    return memory_item(record, float((record.get("extra") or {}).get("weight", PLAN_DEFAULT_WEIGHT)))


def render_plan(item: dict[str, Any], related_label: str = "") -> str:
    head = [
        f"📋 [{item['id']}] 计划",
        item["plan_status"],
        f"重量 {item['weight']:g}",
        f"登记于 {format_time(item['created_at'])}",
    ]
    if item["related_bucket"]:
        head.append(f"关联 [{item['related_bucket']}]" + (f" {related_label}" if related_label else ""))
    block = " · ".join(head) + "\n" + item["content"]
    if item["why_remembered"]:
        block += f"\n  为什么登记：{item['why_remembered']}"
    return block


class PlanBook:
    """plan() for one companion service (its runtime and scope)."""

    def __init__(self, service) -> None:
        self.service = service
        self.rt = service.runtime
        self.scope = service.scope

    async def create(
        self, content: Any, status: Any, related_bucket: Any, weight: Any, why_remembered: Any
    ) -> dict[str, Any]:
        if self.scope.authority == "mechanical":
            raise ValidationError("mechanical 权限不能登记计划，只能改变状态，且必须注明原因")
        body = f.checked_body(content, "content")
        plan_status = checked_plan_status("active" if status is None else status)
        heaviness = checked_weight(weight)
        why = f.checked_why(why_remembered)
        related = f.checked_bucket_id(related_bucket, "related_bucket") if related_bucket not in (None, "") else ""
        related_record = await self._related(related) if related else None
        store_key = self.scope.writable_store_key
        async with self.rt.write_lock:
            if plan_status == "active":
                same = await self.rt.records.list_records(
                    _active_filter([store_key], "r.content = ?", params=[body]), limit=1
                )
                if same:
                    item = plan_item(same[0])
                    return {
                        "action": "plan",
                        "mode": "duplicate",
                        "id": item["id"],
                        "item": item,
                        "text": f"已有逐字相同的进行中计划 [{item['id']}]，未重复登记",
                    }
            draft = MomentDraft(
                content=body,
                title=extract_title(body),
                kind="plan",
                domains=[],
                tags=[],
                importance=NEUTRAL_IMPORTANCE,
                valence=NEUTRAL_VALENCE,
                arousal=NEUTRAL_AROUSAL,
                why_remembered=why,
            )
            record = draft.record(self.scope, self.service.folder_id)
            record["extra"].update(status=plan_status, weight=heaviness)
            if related:
                record["extra"]["related_bucket"] = related
                record["relation_memory_ids"] = [related]
            async with self.rt.db.transaction() as conn:
                stored = await self.rt.records.insert(
                    conn, record, action="plan", actor=self.scope.context, note=f"登记计划（{plan_status}）"
                )
        await self.rt.sync_vectors()
        await self.rt.notify_changed("plan", [stored["memory_id"]])
        item = plan_item(stored)
        lines = [
            f"📋 已登记计划 [{item['id']}] · {plan_status} · 重量 {heaviness:g}"
            + (f" · 关联 [{related}] {display_name(related_record)}" if related_record else ""),
            "计划不衰减、不出现在 breath，只在 dream 末尾的「进行中的计划」段出现；之后 hold/grow 写到像是完成了它的"
            "事时只会提示，关闭要你明确调用。" + CLOSE_GUIDE,
        ]
        return {"action": "plan", "mode": "created", "id": item["id"], "item": item, "text": "\n".join(lines)}

    async def _related(self, memory_id: str) -> dict[str, Any]:
        record = await self.rt.records.get(memory_id)
        if record is None or record["bucket"] != "memory" or record["store_key"] not in self.scope.readable_store_keys:
            raise NotFoundError(
                f"related_bucket={memory_id!r} 不存在，请传要关联的那条记忆的准确 ID（从 breath_search 结果里取）"
            )
        spec = spec_of(record)
        if not spec.in_search:
            raise ValidationError(f"related_bucket 只能关联普通记忆或感受，[{memory_id}] 是「{spec.label}」")
        return record


# ----------------------------------------------------------------------------------------------- extension hooks
async def plans_dream_section(service, context: DreamContext) -> DreamSection | None:
    """dream's last section: every active plan of the readable stores (None when there is none)."""
    runtime = service.runtime
    plans = await active_plans(runtime, service.scope.readable_store_keys)
    if not plans:
        return None
    related_ids = [(p.get("extra") or {}).get("related_bucket") for p in plans]
    related = await runtime.records.get_many([i for i in related_ids if i])
    items = [plan_item(p) for p in plans]
    blocks = [
        render_plan(item, display_name(related[item["related_bucket"]]) if item["related_bucket"] in related else "")
        for item in items
    ]
    text = "\n\n".join([f"{len(items)} 个进行中的计划（按重量）。{CLOSE_GUIDE}；只有明确调用才会关闭。", *blocks])
    return DreamSection(key="active_plans", title="进行中的计划（active）", items=items, text=text)


async def plan_completion_notices(service, records: list[dict[str, Any]]) -> list[str]:
    """Write observer: for each active plan a new hold/grow event looks like completing, one notice (never a close)."""
    events = [r for r in records if kind_of(r) in ("memory", "feel") and SELF_KEY not in (r.get("extra") or {})]
    if not events:
        return []
    runtime = service.runtime
    plans = await active_plans(runtime, [service.scope.writable_store_key])
    if not plans:
        return []
    plan_texts = [compose_embedding_text(p["title"], p["content"]) for p in plans]
    hinted: dict[str, tuple[dict[str, Any], str]] = {}
    for event in events:
        sims = await similarities(
            runtime, compose_embedding_text(event["title"], event["content"]), plan_texts, query=False
        )
        for index, plan in enumerate(plans):
            share = keyword_share(plan["content"], event["content"])
            similarity = float(sims.values[index]) if sims.values is not None else None
            if share >= PLAN_HINT_COVERAGE or (similarity is not None and similarity >= PLAN_HINT_SIMILARITY):
                if plan["memory_id"] not in hinted:
                    hinted[plan["memory_id"]] = (plan, event["memory_id"])
    notices = []
    for plan_id, (plan, event_id) in hinted.items():
        notices.append(
            f"[{event_id}] 可能完成了计划 [{plan_id}]「{display_name(plan)}」——若确实完成，请 "
            f'trace(bucket_id="{plan_id}", status="resolved")；不打算做了用 status="abandoned"。'
            f"系统不会自动关闭计划"
        )
    return notices

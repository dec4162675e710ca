"""Typed recall: retrieve per memory category with quotas and render a block that fits a character budget.

Categories (OpenViking's) map onto our records as documented in docs/RECALL.md and the manual:

| category     | records                                                                 |
|--------------|-------------------------------------------------------------------------|
| profile      | memory_type ``profile``                                                 |
| preferences  | memory_type ``preference``                                              |
| entities     | memory_type ``person``, ``place``, ``asset``, ``knowledge`` (facts)      |
| events       | memory_type ``event``                                                   |
| identity     | pinned memories in the ``identity`` domain                              |
| soul         | other pinned memories (core principles)                                 |
| cases        | memory_type ``case``                                                    |
| trajectories | memory_type ``trajectory``                                              |
| experiences  | memory_type ``experience``                                              |
| tools        | memory_type ``procedure`` with procedure_type ``tech`` or ``deploy``     |
| skills       | memory_type ``procedure`` with procedure_type ``process``/``cooking``/""  |

Peers: a memory is about a peer when it has a ``person_id`` or ``related_people``. ``origin`` is ``actor_peer``
when it is about the current speaker, ``other_peer`` when it is about somebody else, ``self`` otherwise.
``peer_scope="actor"`` keeps only actor-peer memories; ``"all"`` keeps everything and subtracts the per-type
``other_peer_penalty`` from other peers' scores. The caller's scope (stores) applies underneath.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .errors import ValidationError
from .logic.recall_budget import BudgetEntry, fit_to_budget, make_summary
from .logic.tags import TagTriplet
from .memory_search import MemorySearch
from .scope import Scope
from .storage.record_filter import RecordFilter

if TYPE_CHECKING:
    from .runtime import BookuRuntime

CATEGORIES = (
    "profile",
    "preferences",
    "entities",
    "events",
    "identity",
    "soul",
    "cases",
    "trajectories",
    "experiences",
    "tools",
    "skills",
)
DEFAULT_QUOTAS = {"events": 10, "entities": 10, "preferences": 3, "experiences": 0}
DEFAULT_PENALTIES = {"events": 0.1, "entities": 0.1, "preferences": 0.02, "experiences": 0.02}
OTHER_DEFAULT_PENALTY = 0.05
MAX_QUOTA = 100
PEER_SCOPES = ("all", "actor")

CATEGORY_FILTERS: dict[str, dict[str, Any]] = {
    "profile": {"memory_types": ("profile",)},
    "preferences": {"memory_types": ("preference",)},
    "entities": {"memory_types": ("person", "place", "asset", "knowledge"), "extra_sql": ["r.pinned = 0"]},
    "events": {"memory_types": ("event",)},
    "identity": {
        "extra_sql": ["r.pinned = 1", "EXISTS (SELECT 1 FROM json_each(r.domains) d WHERE d.value = 'identity')"]
    },
    "soul": {
        "extra_sql": ["r.pinned = 1", "NOT EXISTS (SELECT 1 FROM json_each(r.domains) d WHERE d.value = 'identity')"]
    },
    "cases": {"memory_types": ("case",)},
    "trajectories": {"memory_types": ("trajectory",)},
    "experiences": {"memory_types": ("experience",)},
    "tools": {"memory_types": ("procedure",), "extra_sql": ["r.procedure_type IN ('tech', 'deploy')"]},
    "skills": {"memory_types": ("procedure",), "extra_sql": ["r.procedure_type IN ('process', 'cooking', '')"]},
}


def category_of(record: Mapping[str, Any]) -> str:
    """The recall category a record belongs to (the same mapping as CATEGORY_FILTERS)."""
    kind = record.get("memory_type") or ""
    if record.get("pinned"):
        return "identity" if "identity" in (record.get("domains") or []) else "soul"
    if kind == "procedure":
        return "tools" if record.get("procedure_type") in ("tech", "deploy") else "skills"
    return {
        "profile": "profile",
        "preference": "preferences",
        "event": "events",
        "case": "cases",
        "trajectory": "trajectories",
        "experience": "experiences",
    }.get(kind, "entities")


def checked_quotas(quotas: Any) -> dict[str, int]:
    if quotas is None:
        return dict(DEFAULT_QUOTAS)
    if not isinstance(quotas, dict):
        raise ValidationError('quotas 必须是对象，如 {"events": 5, "preferences": 3}')
    result = {}
    for key, value in quotas.items():
        if key not in CATEGORIES:
            raise ValidationError(f"quotas 中的类型 {key!r} 无效，可选：{'、'.join(CATEGORIES)}")
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_QUOTA:
            raise ValidationError(f"quotas.{key} 必须是 0 到 {MAX_QUOTA} 的整数")
        result[key] = value
    return result


def checked_penalties(value: Any, categories: list[str]) -> dict[str, float]:
    penalties = {c: DEFAULT_PENALTIES.get(c, OTHER_DEFAULT_PENALTY) for c in categories}
    if value is None:
        return penalties
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or not 0 <= value <= 1:
            raise ValidationError("other_peer_penalty 必须是 0 到 1 之间的数字")
        return {c: float(value) for c in categories}
    if isinstance(value, dict):
        for key, number in value.items():
            if key not in CATEGORIES:
                raise ValidationError(f"other_peer_penalty 中的类型 {key!r} 无效，可选：{'、'.join(CATEGORIES)}")
            if (
                isinstance(number, bool)
                or not isinstance(number, (int, float))
                or not math.isfinite(number)
                or not 0 <= number <= 1
            ):
                raise ValidationError(f"other_peer_penalty.{key} 必须是 0 到 1 之间的数字")
            if key in penalties:
                penalties[key] = float(number)
        return penalties
    raise ValidationError("other_peer_penalty 必须是数字或 {类型: 数字} 对象")


def origin_of(record: Mapping[str, Any], actor_peer_id: str | None) -> str:
    people = set(record.get("related_people") or [])
    if record.get("person_id"):
        people.add(record["person_id"])
    if not people:
        return "self"
    return "actor_peer" if actor_peer_id and actor_peer_id in people else "other_peer"


class TypedRecall:
    def __init__(self, runtime: BookuRuntime, scope: Scope) -> None:
        self.rt = runtime
        self.scope = scope

    def uri(self, record: Mapping[str, Any], category: str) -> str:
        return f"booku://{record['store_key']}/memories/{category}/{record['memory_id']}"

    async def recall(
        self,
        query: str,
        *,
        quotas: Any,
        max_chars: Any,
        min_score: Any,
        peer_scope: Any,
        other_peer_penalty: Any,
        render: bool,
        actor_peer_id: str | None,
    ) -> dict[str, Any]:
        text = str(query or "").strip()
        if not text:
            raise ValidationError("query 不能为空")
        limits = checked_quotas(quotas)
        if isinstance(max_chars, bool) or not isinstance(max_chars, int) or not 0 < max_chars <= 200000:
            raise ValidationError("max_chars 必须是 1 到 200000 的整数")
        if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or not math.isfinite(min_score):
            raise ValidationError("min_score 必须是有限数字")
        if peer_scope not in PEER_SCOPES:
            raise ValidationError(f"peer_scope 取值 {peer_scope!r} 无效，可选：all、actor")
        if peer_scope == "actor" and not actor_peer_id:
            raise ValidationError("peer_scope=actor 需要知道当前说话人（actor_peer_id），当前会话没有提供")
        active = [c for c, n in limits.items() if n > 0]
        penalties = checked_penalties(other_peer_penalty, list(limits))
        search = MemorySearch(self.rt, self.scope)
        entries: list[BudgetEntry] = []
        searched = {c: 0 for c in limits}
        degraded = ""
        for category in active:
            spec = CATEGORY_FILTERS[category]
            flt = RecordFilter(memory_types=spec.get("memory_types"), extra_sql=list(spec.get("extra_sql", [])))
            ranking = await search.rank(
                text,
                limit=limits[category] * 3,
                include_archived=False,
                include_knowledge=False,
                triplet=TagTriplet(),
                flt_extra=flt,
            )
            degraded = degraded or ranking.degraded
            kept: list[BudgetEntry] = []
            for hit in ranking.hits:
                record = ranking.records[hit.memory_id]
                if category_of(record) != category:
                    continue
                origin = origin_of(record, actor_peer_id)
                if peer_scope == "actor" and origin != "actor_peer":
                    continue
                score = hit.score - (penalties[category] if origin == "other_peer" else 0.0)
                if score < min_score:
                    continue
                searched[category] += 1
                kept.append(
                    BudgetEntry(
                        uri=self.uri(record, category),
                        score=score,
                        category=category,
                        origin=origin,
                        content=record["content"],
                        summary=make_summary(record["title"], record["content"]),
                        extra={
                            "abstract": record["title"],
                            "memory_id": record["memory_id"],
                            "superseded_by": record.get("superseded_by") or "",
                        },
                    )
                )
            kept.sort(key=lambda e: e.score, reverse=True)
            for rank, entry in enumerate(kept[: limits[category]], start=1):
                entry.rank = rank
                entries.append(entry)
        rendered, dropped = fit_to_budget(entries, max_chars) if render else ("", 0)
        public = []
        for entry in entries:
            if render and entry.mode == "dropped":
                continue
            item = {
                "uri": entry.uri,
                "score": round(entry.score, 4),
                "type": entry.category,
                "mode": entry.mode if render else "full",
                "rank": entry.rank,
                "origin": entry.origin,
                "abstract": entry.extra["abstract"],
                "id": entry.extra["memory_id"],
            }
            if entry.extra.get("superseded_by"):
                item["superseded_by"] = entry.extra["superseded_by"]
            if item["mode"] == "full":
                item["content"] = entry.content
            elif item["mode"] == "summary":
                item["summary"] = entry.summary
            public.append(item)
        origins = {"actor_peer": 0, "self": 0, "other_peer": 0}
        for item in public:
            origins[item["origin"]] += 1
        result: dict[str, Any] = {
            "entries": public,
            "rendered": rendered,
            "stats": {
                "quotas": limits,
                "roots": [f"booku://{store}/memories" for store in self.scope.readable_store_keys],
                "searched": searched,
                "returned": len(public),
                "dropped": dropped,
                "max_chars": max_chars,
                "min_score": min_score,
                "peer_scope": peer_scope,
                "other_peer_penalties": penalties,
                "origins": origins,
            },
        }
        if degraded:
            result["stats"]["degraded"] = f"向量检索不可用，结果仅来自关键词检索：{degraded}"
        return result

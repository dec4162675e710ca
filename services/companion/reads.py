"""Every companion read: breath, breath_search, breath_advanced, dream and pulse.

Nothing here writes or counts an activation: reading a memory is not a reason for it to matter more (otherwise what
surfaces would keep itself alive by surfacing). Scores are computed live from the record (``decay_engine``); the
stored score only pre-selects candidates in large stores. Bodies are returned verbatim and whole: a token budget
drops whole memories and the answer says how many.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..logic.tags import TagTriplet
from ..memory_search import MemorySearch
from ..scope import Scope
from ..storage.record_filter import RecordFilter
from . import fields as f
from .decay_engine import record_score
from .extensions import DreamContext, dream_sections
from .fields import DateRange
from .kinds import FEEL_DOMAIN, KINDS, kinds_where
from .rendering import (
    UNTRUSTED_NOTE,
    catalog_line,
    fit_budget,
    format_time,
    memory_item,
    omitted_notice,
    render_block,
)
from .selection import Selection
from .settings import (
    ANCHOR_LIMIT,
    DREAM_MAX_ITEMS,
    DREAM_WINDOW_HOURS,
    PULSE_MAX_LINES,
    SURFACING_POOL,
    CompanionSettings,
)
from .store import CompanionStore

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

ALL_STATUSES = ("active", "archived", "expired")
STORED_SCORE_ORDER = "r.decay_score IS NOT NULL, r.decay_score DESC, r.updated_at DESC, r.rid DESC"
FEEL_TAG_ALIASES = ("feel", "__feel__")
DREAM_GUIDE = (
    "可据此操作：放下的 → trace(bucket_id, resolved=1) 沉底；有沉淀的 → hold(content=…, feel=True, "
    "source_bucket=…) 记录；无沉淀则不操作。"
)


class CompanionReader:
    def __init__(
        self, runtime: BookuRuntime, scope: Scope, settings: CompanionSettings, *, service: Any = None
    ) -> None:
        self.rt = runtime
        self.scope = scope
        self.settings = settings
        self.service = service
        self.store = CompanionStore(runtime.db)

    # ------------------------------------------------------------ plumbing
    def _score(self, record: Mapping[str, Any], now: float) -> float:
        return record_score(record, self.settings.decay, now)

    async def _listing(
        self,
        selection: Selection,
        *,
        limit: int,
        order_by: str = STORED_SCORE_ORDER,
        extra_sql: Sequence[str] = (),
        extra_params: Sequence[Any] = (),
    ) -> list[dict[str, Any]]:
        clauses, params = selection.sql()
        flt = RecordFilter(
            store_keys=self.scope.readable_store_keys,
            buckets=("memory",),
            extra_sql=[*clauses, *extra_sql],
            extra_params=[*params, *extra_params],
        )
        return await self.rt.records.list_records(flt, limit=limit, order_by=order_by)

    def _by_score(self, records: Sequence[dict[str, Any]], now: float) -> list[dict[str, Any]]:
        """Items sorted by live score, best first (ties: newer first)."""
        items = [memory_item(r, self._score(r, now)) for r in records]
        return sorted(items, key=lambda i: (-i["score"], -i["created_at"]))

    async def _search(
        self, query: str, selection: Selection, limit: int, *, quotes: bool = False
    ) -> tuple[list[dict[str, Any]], str]:
        """Hybrid (vector + keyword) ranking restricted to ``selection``; items in relevance order."""
        clauses, params = selection.sql()
        ranking = await MemorySearch(self.rt, self.scope).rank(
            query,
            limit=min(limit * 4, 200),
            include_archived=True,
            include_knowledge=False,
            triplet=TagTriplet(),
            flt_extra=RecordFilter(extra_sql=clauses, extra_params=params),
        )
        now = time.time()
        items = []
        for hit in ranking.hits:
            record = ranking.records[hit.memory_id]
            if selection.matches(record) and record["store_key"] in self.scope.readable_store_keys:
                item = memory_item(record, self._score(record, now), quotes=quotes)
                item["relevance"] = round(hit.score, 6)
                items.append(item)
        return items[:limit], ranking.degraded

    @staticmethod
    def _degraded_notice(degraded: str) -> str:
        return f"⚠ 向量检索不可用，本次已退回关键词检索（结果可能不全）：{degraded}" if degraded else ""

    def _blocks(self, items: Sequence[dict[str, Any]]) -> str:
        return "\n\n".join(render_block(item) for item in items)

    # -------------------------------------------------------------- breath
    async def surface(
        self, *, domains: list[str], tags: list[str], dates: DateRange, limit: int, max_tokens: int, action: str
    ) -> dict[str, Any]:
        """Default surfacing: every pinned core principle, then the highest-weighted unresolved, undigested memories.

        Anchors stay out unless a domain was asked for (then anchors of that domain come back); feelings only when
        the ``feel`` domain is asked for.
        """
        now = time.time()
        kinds = kinds_where("in_breath") + (("feel",) if FEEL_DOMAIN in domains else ())  # feelings on request
        pinned_records = await self._listing(
            Selection(kinds=kinds_where("in_search"), include_anchors=False, pinned=True),
            limit=1000,
            order_by="r.importance DESC, r.created_at, r.rid",
        )
        pinned = [memory_item(r, self._score(r, now)) for r in pinned_records]
        candidates = await self._listing(
            Selection(
                kinds=kinds,
                domains=tuple(domains),
                tags=tuple(tags),
                dates=dates,
                include_digested=False,
                include_resolved=False,
                include_anchors=bool(domains),
                pinned=False,
            ),
            limit=max(SURFACING_POOL, limit * 5),
        )
        weighted = self._by_score(candidates, now)[:limit]
        kept, omitted = fit_budget([*pinned, *weighted], max_tokens, render_block)
        kept_ids = {item["id"] for item in kept}
        pinned_kept = [i for i in pinned if i["id"] in kept_ids]
        weighted_kept = [i for i in weighted if i["id"] in kept_ids]
        sections = [UNTRUSTED_NOTE]
        if pinned_kept:
            sections.append(f"【核心准则】{len(pinned_kept)} 条\n" + self._blocks(pinned_kept))
        if weighted_kept:
            sections.append(f"【浮现】{len(weighted_kept)} 条（按衰减权重）\n" + self._blocks(weighted_kept))
        if not kept:
            sections.append("还没有可浮现的记忆。" if not omitted else "")
        notice = omitted_notice(omitted)
        if notice:
            sections.append(notice)
        return {
            "action": action,
            "mode": "surfacing",
            "pinned": pinned_kept,
            "items": weighted_kept,
            "total": len(kept),
            "omitted": [i["id"] for i in omitted],
            "text": "\n\n".join(s for s in sections if s),
        }

    async def breath(self, domain: Any, max_results: Any) -> dict[str, Any]:
        domains = f.checked_domains(domain)
        limit = f.checked_max_results(max_results, self.settings.breath_max_results)
        return await self.surface(
            domains=domains,
            tags=[],
            dates=DateRange(),
            limit=limit,
            max_tokens=self.settings.breath_max_tokens,
            action="breath",
        )

    # ------------------------------------------------------- breath_search
    async def breath_search(
        self, query: Any, domain: Any, date_from: Any, date_to: Any, max_results: Any, quotes: Any
    ) -> dict[str, Any]:
        text = f.checked_query(query)
        domains = f.checked_domains(domain)
        dates = f.checked_date_range(date_from, date_to)
        limit = f.checked_max_results(max_results, self.settings.breath_max_results)
        with_quotes = bool(f.checked_flag(quotes, "quotes"))
        selection = Selection(
            kinds=kinds_where("in_search"), statuses=ALL_STATUSES, domains=tuple(domains), dates=dates
        )
        items, degraded = await self._search(text, selection, limit, quotes=with_quotes)
        return self._search_answer("breath_search", text, items, degraded, self.settings.breath_max_tokens)

    def _search_answer(
        self, action: str, query: str, items: list[dict[str, Any]], degraded: str, max_tokens: int
    ) -> dict[str, Any]:
        kept, omitted = fit_budget(items, max_tokens, render_block)
        sections = [
            self._degraded_notice(degraded),
            UNTRUSTED_NOTE,
            f"检索「{query}」命中 {len(kept)} 条（逐字原文）" if kept else f"检索「{query}」没有命中记忆。",
            self._blocks(kept),
            omitted_notice(omitted),
        ]
        answer = {
            "action": action,
            "mode": "search",
            "query": query,
            "total": len(kept),
            "items": kept,
            "omitted": [i["id"] for i in omitted],
            "text": "\n\n".join(s for s in sections if s),
        }
        if degraded:
            answer["degraded"] = self._degraded_notice(degraded)
        return answer

    # ----------------------------------------------------- breath_advanced
    async def breath_advanced(
        self,
        *,
        query: Any,
        domain: Any,
        tags: Any,
        importance_min: Any,
        valence: Any,
        arousal: Any,
        catalog: Any,
        date_from: Any,
        date_to: Any,
        max_results: Any,
        max_tokens: Any,
    ) -> dict[str, Any]:
        text = None if query is None or (isinstance(query, str) and not query.strip()) else f.checked_query(query)
        domains = f.checked_domains(domain)
        tag_list = f.checked_tag_list(tags)
        if any(tag.lower() in FEEL_TAG_ALIASES for tag in tag_list):
            tag_list = [t for t in tag_list if t.lower() not in FEEL_TAG_ALIASES]
            domains = list(dict.fromkeys([*domains, FEEL_DOMAIN]))
        minimum = f.checked_importance(importance_min, "importance_min")
        emotion = (f.checked_unit(valence, "valence"), f.checked_unit(arousal, "arousal"))
        as_catalog = bool(f.checked_flag(catalog, "catalog"))
        dates = f.checked_date_range(date_from, date_to)
        limit = f.checked_max_results(max_results, self.settings.breath_max_results)
        budget = f.checked_max_tokens(max_tokens, self.settings.breath_max_tokens)
        explicit = Selection(
            kinds=kinds_where("in_search"),
            statuses=("active",),
            domains=tuple(domains),
            tags=tuple(tag_list),
            dates=dates,
            importance_min=minimum,
            valence=emotion[0],
            arousal=emotion[1],
        )
        now = time.time()
        if text is not None:
            items, degraded = await self._search(text, replace(explicit, statuses=ALL_STATUSES), limit)
            if as_catalog:
                return self._catalog_answer(items, budget, degraded=degraded, query=text)
            answer = self._search_answer("breath_advanced", text, items, degraded, budget)
            return answer
        if as_catalog:
            items = self._by_score(await self._listing(explicit, limit=max(SURFACING_POOL, limit * 5)), now)[:limit]
            return self._catalog_answer(items, budget)
        if minimum is not None:
            records = await self._listing(
                explicit, limit=max(SURFACING_POOL, limit * 5), order_by="r.importance DESC, " + STORED_SCORE_ORDER
            )
            items = sorted(self._by_score(records, now), key=lambda i: -i["importance"])[:limit]
            return self._list_answer("importance", f"重要度 ≥ {minimum} 的记忆", items, budget)
        if emotion != (None, None):
            records = await self._listing(explicit, limit=1000)

            def distance(item: dict[str, Any]) -> float:
                return sum(
                    abs(item[axis] - value) for axis, value in zip(("valence", "arousal"), emotion) if value is not None
                )

            items = sorted(self._by_score(records, now), key=distance)[:limit]
            wanted = "、".join(
                f"{axis}≈{value}" for axis, value in zip(("valence", "arousal"), emotion) if value is not None
            )
            return self._list_answer("emotion", f"情绪坐标 {wanted} 附近的记忆", items, budget)
        answer = await self.surface(
            domains=domains, tags=tag_list, dates=dates, limit=limit, max_tokens=budget, action="breath_advanced"
        )
        return answer

    def _list_answer(self, mode: str, heading: str, items: list[dict[str, Any]], budget: int) -> dict[str, Any]:
        kept, omitted = fit_budget(items, budget, render_block)
        sections = [
            UNTRUSTED_NOTE,
            f"{heading}：{len(kept)} 条" if kept else f"没有{heading}。",
            self._blocks(kept),
            omitted_notice(omitted),
        ]
        return {
            "action": "breath_advanced",
            "mode": mode,
            "total": len(kept),
            "items": kept,
            "omitted": [i["id"] for i in omitted],
            "text": "\n\n".join(s for s in sections if s),
        }

    def _catalog_answer(
        self, items: list[dict[str, Any]], budget: int, *, degraded: str = "", query: str | None = None
    ) -> dict[str, Any]:
        kept, omitted = fit_budget(items, budget, catalog_line)
        lines = [
            self._degraded_notice(degraded),
            f"目录（{'检索「' + query + '」' if query else '按衰减权重'}）{len(kept)} 条：名称 | 域 | 重要度"
            if kept
            else "目录为空：没有符合条件的记忆。",
            *(catalog_line(item) for item in kept),
            omitted_notice(omitted),
        ]
        answer = {
            "action": "breath_advanced",
            "mode": "catalog",
            "total": len(kept),
            "items": [{k: v for k, v in item.items() if k != "content"} for item in kept],
            "lines": [catalog_line(item) for item in kept],
            "omitted": [i["id"] for i in omitted],
            "text": "\n".join(line for line in lines if line),
        }
        if degraded:
            answer["degraded"] = self._degraded_notice(degraded)
        return answer

    # --------------------------------------------------------------- dream
    async def dream(self, window_hours: Any) -> dict[str, Any]:
        hours = f.checked_window_hours(DREAM_WINDOW_HOURS if window_hours is None else window_hours)
        now = time.time()
        since = now - hours * 3600
        records = await self._listing(
            Selection(kinds=kinds_where("in_dream"), include_digested=False),
            limit=100000,
            order_by="r.updated_at DESC",
            extra_sql=["MAX(r.updated_at, r.last_activated_at) >= ?"],
            extra_params=[since],
        )
        ranked = self._by_score(records, now)
        items = ranked[:DREAM_MAX_ITEMS]
        hours_text = f"{hours:g}"
        head = (
            f"🌙 dream：最近 {hours_text} 小时内有变动的记忆 {len(ranked)} 条"
            + (
                f"，超过 {DREAM_MAX_ITEMS} 条，按衰减权重取前 {DREAM_MAX_ITEMS} 条"
                if len(ranked) > DREAM_MAX_ITEMS
                else "，按衰减权重排序"
            )
            + "（完整正文，不截断）"
        )
        parts = [UNTRUSTED_NOTE, head, DREAM_GUIDE if items else "窗口内没有需要回顾的记忆。", self._blocks(items)]
        sections = []
        context = DreamContext(window_hours=hours, since=since, now=now, items=items)
        for _key, provider in dream_sections():
            section = await provider(self.service, context)
            if section is None:
                continue
            sections.append({"key": section.key, "title": section.title, "items": section.items, "text": section.text})
            parts.append(f"【{section.title}】\n{section.text}")
        return {
            "action": "dream",
            "window_hours": hours,
            "since": since,
            "candidates": len(ranked),
            "total": len(items),
            "items": items,
            "sections": sections,
            "text": "\n\n".join(p for p in parts if p),
        }

    # --------------------------------------------------------------- pulse
    async def pulse(self, include_archive: Any) -> dict[str, Any]:
        with_archive = bool(f.checked_flag(include_archive, "include_archive"))
        now = time.time()
        counts = await self._pulse_counts()
        anchors = len(await self.store.anchors(self.scope.writable_store_key))
        state = await self.store.decay_state()
        engine = self._engine_state(state)
        statuses = ALL_STATUSES if with_archive else ("active",)
        records = await self._listing(Selection(kinds=tuple(KINDS), statuses=statuses), limit=PULSE_MAX_LINES + 1)
        listed = self._by_score(records, now)
        shown = listed[:PULSE_MAX_LINES]
        storage = self._storage(counts)
        lines = [
            "📊 pulse：记忆系统状态",
            f"固化 {counts['permanent']} · 动态 {counts['dynamic']} · 归档 {counts['archived']} · "
            + " · ".join(f"{KINDS[k].label} {counts['kinds'][k]}" for k in KINDS if k != "memory")
            + f" · anchor {anchors}/{ANCHOR_LIMIT} · 已消化 {counts['digested']} · 已放下 {counts['resolved']}",
            f"总占用：{counts['total']} 条记忆、{storage['content_chars']} 字正文，原文层 {storage['source_count']} 份 "
            f"{storage['source_chars']} 字，数据库文件 {storage['database_bytes'] / 1024:.0f} KB",
            engine["text"],
            f"记忆列表（{'含归档区' if with_archive else '不含归档区'}，按衰减权重）：名称 | 域 | 重要度",
            *(
                f"{catalog_line(item)} · 权重 {item['score']:.2f}" + (" · 已归档" if item["status"] != "active" else "")
                for item in shown
            ),
        ]
        if len(records) > PULSE_MAX_LINES:
            lines.append(
                f"…列表只显示前 {PULSE_MAX_LINES} 条；用 breath_advanced(catalog=True, domain=…) 按主题查看其余"
            )
        return {
            "action": "pulse",
            "counts": {**counts, "anchors": anchors, "anchor_limit": ANCHOR_LIMIT},
            "storage": storage,
            "decay_engine": engine,
            "items": [{k: v for k, v in item.items() if k != "content"} for item in shown],
            "lines": [catalog_line(item) for item in shown],
            "include_archive": with_archive,
            "text": "\n".join(lines),
        }

    async def _pulse_counts(self) -> dict[str, Any]:
        raw = await self.store.pulse_counts(self.scope.readable_store_keys)
        counts = {
            "total": 0,
            "permanent": 0,
            "dynamic": 0,
            "archived": 0,
            "digested": 0,
            "resolved": 0,
            "content_chars": 0,
            "kinds": {k: 0 for k in KINDS},
            "source_count": raw["source_count"],
            "source_chars": raw["source_chars"],
        }
        for row in raw["rows"]:
            n = int(row["n"])
            kind = row["kind"] if row["kind"] in KINDS else "memory"
            counts["total"] += n
            counts["content_chars"] += int(row["chars"] or 0)
            if row["status"] != "active":
                counts["archived"] += n
                continue
            counts["kinds"][kind] += n
            if row["permanent"]:
                counts["permanent"] += n
            elif KINDS[kind].decays and not row["anchor"]:
                counts["dynamic"] += n
            counts["digested"] += n if row["digested"] else 0
            counts["resolved"] += n if row["resolved"] else 0
        return counts

    def _storage(self, counts: dict[str, Any]) -> dict[str, Any]:
        path = self.rt.db.path
        size = sum(os.path.getsize(p) for p in (path, path.with_name(path.name + "-wal")) if p.exists())
        return {
            "content_chars": counts["content_chars"],
            "source_count": counts["source_count"],
            "source_chars": counts["source_chars"],
            "database_bytes": size,
        }

    def _engine_state(self, state: dict[str, Any] | None) -> dict[str, Any]:
        maintenance = self.rt.config.maintenance
        params = self.settings.decay
        scheduled = bool(maintenance.enabled)
        base: dict[str, Any] = {
            "scheduled": scheduled,
            "interval_seconds": float(maintenance.interval_seconds),
            "half_life_days": params.half_life_days,
            "archive_threshold": params.archive_threshold,
            "auto_archive": self.settings.decay_auto_archive,
            "last_run": state,
        }
        schedule = (
            f"每 {maintenance.interval_seconds / 60:g} 分钟随维护任务运行"
            if scheduled
            else "定时维护已关闭（maintenance.enabled=false），分数只在读取时现算"
        )
        if state:
            last = (
                f"上次运行 {format_time(state['ran_at'])}：检查 {state['checked']} 条，归档 {state['archived']} 条，"
                f"最低权重 {state['lowest_score']:.2f}"
            )
        else:
            last = "尚未运行过"
        base["text"] = (
            f"衰减引擎：{schedule}；半衰期 {params.half_life_days:g} 天，权重低于 "
            f"{params.archive_threshold:g} 的陪伴记忆自动归档；{last}"
        )
        return base

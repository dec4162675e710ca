"""Which memories a companion read may return: one filter, evaluated in SQL and (for vector hits) in Python.

The SQL form pre-filters listings and the keyword route; ``matches`` applies the very same rules to the hits of the
vector route, which never see SQL. Both are built from the same fields, so the two routes cannot disagree.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..storage.database import placeholders
from .fields import DateRange
from .kinds import KIND_SQL, kind_of
from .settings import EMOTION_RADIUS

_NOT_DIGESTED_SQL = "(r.digested = 0 OR r.pinned = 1 OR r.anchor = 1)"


@dataclass(frozen=True)
class Selection:
    """Filters of a companion read. Empty tuples / None mean "no condition"."""

    kinds: tuple[str, ...]
    statuses: tuple[str, ...] = ("active",)
    domains: tuple[str, ...] = ()  # any of them
    tags: tuple[str, ...] = ()  # all of them (any tag group except opposing)
    dates: DateRange = field(default_factory=DateRange)
    importance_min: int | None = None
    valence: float | None = None
    arousal: float | None = None
    radius: float = EMOTION_RADIUS
    include_digested: bool = True  # digested never hides pinned memories or anchors
    include_resolved: bool = True
    include_anchors: bool = True
    pinned: bool | None = None  # True: only pinned, False: only not pinned

    def sql(self) -> tuple[list[str], list[Any]]:
        """``(clauses, params)`` for ``RecordFilter.extra_sql`` (table alias ``r``)."""
        clauses = [f"{KIND_SQL} IN ({placeholders(len(self.kinds))})" if self.kinds else "0"]
        params: list[Any] = list(self.kinds)
        if self.statuses:
            clauses.append(f"r.status IN ({placeholders(len(self.statuses))})")
            params.extend(self.statuses)
        if self.domains:
            wanted = placeholders(len(self.domains))
            clauses.append(f"EXISTS (SELECT 1 FROM json_each(r.domains) d WHERE lower(d.value) IN ({wanted}))")
            params.extend(self.domains)
        for tag in self.tags:
            clauses.append(
                "EXISTS (SELECT 1 FROM booku_memory_tags t WHERE t.memory_id = r.memory_id "
                "AND t.tag_type != 'opposing' AND t.tag_value = ?)"
            )
            params.append(tag)
        date_clauses, date_params = self.dates.sql()
        clauses.extend(date_clauses)
        params.extend(date_params)
        if self.importance_min is not None:
            clauses.append("r.importance >= ?")
            params.append(self.importance_min)
        for column, value in (("valence", self.valence), ("arousal", self.arousal)):
            if value is not None:
                clauses.append(f"ABS(r.{column} - ?) <= ?")
                params.extend([value, self.radius + 1e-9])
        if not self.include_digested:
            clauses.append(_NOT_DIGESTED_SQL)
        if not self.include_resolved:
            clauses.append("r.resolved = 0")
        if not self.include_anchors:
            clauses.append("r.anchor = 0")
        if self.pinned is not None:
            clauses.append(f"r.pinned = {1 if self.pinned else 0}")
        return clauses, params

    def matches(self, record: Mapping[str, Any]) -> bool:
        """The same rules as ``sql`` for a record dict."""
        if kind_of(record) not in self.kinds:
            return False
        if self.statuses and record.get("status") not in self.statuses:
            return False
        if self.domains and not {d.lower() for d in record.get("domains") or []} & set(self.domains):
            return False
        tags = {*(record.get("tags") or []), *(record.get("core_tags") or []), *(record.get("diffusion_tags") or [])}
        if any(tag not in tags for tag in self.tags):
            return False
        if not self.dates.contains(float(record.get("created_at") or 0.0)):
            return False
        if self.importance_min is not None and int(record.get("importance") or 0) < self.importance_min:
            return False
        for column, value in (("valence", self.valence), ("arousal", self.arousal)):
            if value is not None and abs(float(record.get(column) or 0.0) - value) > self.radius + 1e-9:
                return False
        exempt_from_digest = record.get("pinned") or record.get("anchor")
        if not self.include_digested and record.get("digested") and not exempt_from_digest:
            return False
        if not self.include_resolved and record.get("resolved"):
            return False
        if not self.include_anchors and record.get("anchor"):
            return False
        if self.pinned is not None and bool(record.get("pinned")) != self.pinned:
            return False
        return True

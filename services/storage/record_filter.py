"""The structured filter every record read shares (listings, keyword search, grep, retrieval), as SQL or as a test
the in-memory mirrors can apply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .database import placeholders
from .mirrors.record_states import RowStateTest


@dataclass(frozen=True)
class Visible:
    """One kind of record a search may see: a bucket, and the statuses it may have there (None: any)."""

    bucket: str
    statuses: tuple[str, ...] | None = None

    def admits(self, bucket: str, status: str) -> bool:
        return bucket == self.bucket and (self.statuses is None or status in self.statuses)


@dataclass
class RecordFilter:
    """Structured filters shared by listings, keyword search and grep. All conditions are ANDed."""

    store_keys: Sequence[str] | None = None
    buckets: Sequence[str] | None = ("memory",)
    statuses: Sequence[str] | None = None
    visible: Sequence[Visible] | None = None
    """Any of these kinds (ORed), on top of ``buckets`` and ``statuses``; None: no such condition, () none."""
    memory_types: Sequence[str] | None = None
    exclude_memory_types: Sequence[str] = ()
    folder_id: str | None = None
    person_id: str | None = None
    relation_of: str | None = None
    tag: str | None = None
    include_deleted: bool = False
    only_deleted: bool = False
    created_before: float | None = None
    extra_sql: list[str] = field(default_factory=list)
    extra_params: list[Any] = field(default_factory=list)

    def where(self, alias: str = "r") -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []

        def add_in(column: str, values: Sequence[Any] | None) -> None:
            if values is not None:
                clauses.append(f"{alias}.{column} IN ({placeholders(len(values))})" if values else "0")
                params.extend(values)

        add_in("store_key", self.store_keys)
        add_in("bucket", self.buckets)
        add_in("status", self.statuses)
        if self.visible is not None:
            kinds = []
            for kind in self.visible:
                if kind.statuses is None:
                    kinds.append(f"{alias}.bucket = ?")
                    params.append(kind.bucket)
                else:
                    kinds.append(f"({alias}.bucket = ? AND {alias}.status IN ({placeholders(len(kind.statuses))}))")
                    params.extend([kind.bucket, *kind.statuses])
            clauses.append(f"({' OR '.join(kinds)})" if kinds else "0")
        add_in("memory_type", self.memory_types)
        if self.exclude_memory_types:
            clauses.append(f"{alias}.memory_type NOT IN ({placeholders(len(self.exclude_memory_types))})")
            params.extend(self.exclude_memory_types)
        if self.only_deleted:
            clauses.append(f"{alias}.is_deleted = 1")
        elif not self.include_deleted:
            clauses.append(f"{alias}.is_deleted = 0")
        if self.folder_id is not None:
            clauses.append(f"{alias}.folder_id = ?")
            params.append(self.folder_id)
        if self.person_id is not None:
            clauses.append(f"{alias}.person_id = ?")
            params.append(self.person_id)
        if self.relation_of is not None:
            clauses.append(f"EXISTS (SELECT 1 FROM json_each({alias}.relation_memory_ids) j WHERE j.value = ?)")
            params.append(self.relation_of)
        if self.tag is not None:
            clauses.append(
                f"EXISTS (SELECT 1 FROM booku_memory_tags t WHERE t.memory_id = {alias}.memory_id AND t.tag_value = ?)"
            )
            params.append(self.tag)
        if self.created_before is not None:
            clauses.append(f"{alias}.created_at < ?")
            params.append(self.created_before)
        clauses.extend(self.extra_sql)
        params.extend(self.extra_params)
        return (" AND ".join(clauses) if clauses else "1"), params

    def state_test(self) -> RowStateTest | None:
        """This filter as a test of a record's (bucket, status, is_deleted), when those (and ``store_keys``, which
        the keyword index scopes itself) are all it checks; None when it has any other condition.

        Why: the in-memory keyword index keeps each row's bucket, status and deletion flag
        (``storage.mirrors.keyword_mirror``), so a retrieval's usual filter is applied there, before the best rows are
        taken, instead of by looking a hundred or more scattered rows up in SQL."""
        if (
            self.memory_types is not None
            or self.exclude_memory_types
            or self.folder_id is not None
            or self.person_id is not None
            or self.relation_of is not None
            or self.tag is not None
            or self.created_before is not None
            or self.extra_sql
            or self.extra_params
        ):
            return None
        buckets = None if self.buckets is None else frozenset(self.buckets)
        statuses = None if self.statuses is None else frozenset(self.statuses)
        visible = None if self.visible is None else tuple(self.visible)
        include_deleted, only_deleted = self.include_deleted, self.only_deleted

        def test(bucket: str, status: str, is_deleted: bool) -> bool:
            if only_deleted:
                if not is_deleted:
                    return False
            elif is_deleted and not include_deleted:
                return False
            return (
                (buckets is None or bucket in buckets)
                and (statuses is None or status in statuses)
                and (visible is None or any(kind.admits(bucket, status) for kind in visible))
            )

        return test


def escape_like(text: str) -> str:
    """Escape LIKE wildcards so user keywords match literally (reference bug B18)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")

"""Which stores are in use, and which store a memory, document, audit row or batch lives in (read-only SQL).

The dashboard acts through ``admin_scope(selected stores)``, and the service only ever changes records of its
scope's writable store. So before a write the router has to know the store of the thing being changed; these
lookups answer that, always restricted to the stores the administrator selected, so a lookup can neither reveal nor
reach an unselected store. They are plain ``SELECT``s on the runtime's reader connection: every change still goes
through the service (and is audited there). The router reaches them through ``services.store_locator``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from ..store_keys import OwnerMap, store_sort_key


class ReadOnlyDatabase(Protocol):
    """The part of ``services.storage.database.Database`` these lookups use: reads only."""

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[Any]: ...


def _distinct_values(table: str, column: str) -> str:
    """``SELECT DISTINCT column FROM table`` as an index skip-scan.

    Both tables have an index leading with ``store_key``; walking it with ``MIN(...) WHERE column > previous`` costs
    one index seek per distinct value instead of a scan over every row, and this runs on every dashboard request.
    """
    return (
        f"WITH RECURSIVE seen(value) AS ("
        f" SELECT MIN({column}) FROM {table}"
        f" UNION ALL"
        f" SELECT (SELECT MIN({column}) FROM {table} WHERE {column} > seen.value) FROM seen WHERE seen.value IS NOT NULL"
        f") SELECT value FROM seen WHERE value IS NOT NULL"
    )


def _placeholders(count: int) -> str:
    return ", ".join("?" for _ in range(count))


async def stores_in_use(db: ReadOnlyDatabase, owners: OwnerMap) -> list[str]:
    """Every store holding records or audit rows, plus the stores of live memos and the default store.

    Audit rows count because a store whose records were all deleted may still need its changes undone.
    """
    found: set[str] = {owners.default_store}
    for table in ("booku_memory_records", "booku_audit_log"):
        found.update(str(row[0]) for row in await db.fetch_all(_distinct_values(table, "store_key")))
    memo_owners = await db.fetch_all(
        "SELECT DISTINCT owner_uid FROM booku_temporary_memos WHERE expires_at > ?", [time.time()]
    )
    found.update(owners.store_of(str(row[0])) for row in memo_owners)
    return sorted(found, key=lambda key: store_sort_key(key, owners.default_store))


async def memory_stores(db: ReadOnlyDatabase, memory_ids: Iterable[str], selected: Sequence[str]) -> dict[str, str]:
    """``{memory_id: store_key}`` for the ids that live in one of the ``selected`` stores (soft-deleted included).

    A hard-deleted memory has no record any more but can still be reverted from its history: its store comes from
    its newest audit row.
    """
    ids = list(dict.fromkeys(memory_ids))
    if not ids or not selected:
        return {}
    stores: dict[str, str] = {}
    id_marks, store_marks = _placeholders(len(ids)), _placeholders(len(selected))
    rows = await db.fetch_all(
        f"SELECT memory_id, store_key FROM booku_memory_records "
        f"WHERE memory_id IN ({id_marks}) AND store_key IN ({store_marks})",
        [*ids, *selected],
    )
    stores.update({str(row[0]): str(row[1]) for row in rows})
    gone = [memory_id for memory_id in ids if memory_id not in stores]
    if gone:
        rows = await db.fetch_all(
            f"SELECT memory_id, store_key FROM booku_audit_log WHERE audit_id IN ("
            f" SELECT MAX(audit_id) FROM booku_audit_log WHERE memory_id IN ({_placeholders(len(gone))})"
            f" GROUP BY memory_id) AND store_key IN ({store_marks})",
            [*gone, *selected],
        )
        stores.update({str(row[0]): str(row[1]) for row in rows})
    return stores


async def _one_store(db: ReadOnlyDatabase, sql: str, params: Sequence[Any]) -> str | None:
    rows = await db.fetch_all(sql, params)
    return str(rows[0][0]) if rows else None


async def document_store(db: ReadOnlyDatabase, document_id: str, selected: Sequence[str]) -> str | None:
    """The store of a knowledge document, if it is one of the ``selected`` stores."""
    if not selected:
        return None
    return await _one_store(
        db,
        f"SELECT store_key FROM booku_knowledge_documents WHERE document_id = ? "
        f"AND store_key IN ({_placeholders(len(selected))})",
        [document_id, *selected],
    )


async def audit_location(db: ReadOnlyDatabase, audit_id: int, selected: Sequence[str]) -> tuple[str, str] | None:
    """``(store_key, memory_id)`` of one audit row, if it belongs to one of the ``selected`` stores."""
    if not selected:
        return None
    rows = await db.fetch_all(
        f"SELECT store_key, memory_id FROM booku_audit_log WHERE audit_id = ? "
        f"AND store_key IN ({_placeholders(len(selected))})",
        [audit_id, *selected],
    )
    return (str(rows[0][0]), str(rows[0][1])) if rows else None


async def batch_stores(db: ReadOnlyDatabase, batch_id: str, selected: Sequence[str]) -> list[str]:
    """The selected stores that hold audit rows of one batch (a run may have changed several stores)."""
    if not selected or not batch_id:
        return []
    rows = await db.fetch_all(
        f"SELECT DISTINCT store_key FROM booku_audit_log WHERE batch_id = ? "
        f"AND store_key IN ({_placeholders(len(selected))}) ORDER BY store_key",
        [batch_id, *selected],
    )
    return [str(row[0]) for row in rows]

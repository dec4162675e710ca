"""Where things live, for the dashboard: the stores in use and the store of a memory, document, audit row or batch.

The dashboard acts through ``admin_scope(selected stores)`` and a service changes only records of its scope's
writable store, so before a change the router must know the store of the thing being changed. Routes never touch a
store, so they ask this view, which answers from ``storage.store_lookups`` and only within the selected stores.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from .storage import store_lookups
from .storage.store_lookups import ReadOnlyDatabase
from .store_keys import OwnerMap


class StoreLocator:
    """Read-only store lookups over one runtime's database, each restricted to the ``selected`` stores."""

    def __init__(self, db: ReadOnlyDatabase) -> None:
        self._db = db

    async def stores_in_use(self, owners: OwnerMap) -> list[str]:
        """Every store holding records or audit rows, the stores of live memos and the default store."""
        return await store_lookups.stores_in_use(self._db, owners)

    async def memory_stores(self, memory_ids: Iterable[str], selected: Sequence[str]) -> dict[str, str]:
        """``{memory_id: store_key}`` for the ids living in one of the ``selected`` stores."""
        return await store_lookups.memory_stores(self._db, memory_ids, selected)

    async def document_store(self, document_id: str, selected: Sequence[str]) -> str | None:
        """The store of a knowledge document, if it is one of the ``selected`` stores."""
        return await store_lookups.document_store(self._db, document_id, selected)

    async def audit_location(self, audit_id: int, selected: Sequence[str]) -> tuple[str, str] | None:
        """``(store_key, memory_id)`` of one audit row, if it belongs to one of the ``selected`` stores."""
        return await store_lookups.audit_location(self._db, audit_id, selected)

    async def batch_stores(self, batch_id: str, selected: Sequence[str]) -> list[str]:
        """The selected stores holding audit rows of one batch."""
        return await store_lookups.batch_stores(self._db, batch_id, selected)

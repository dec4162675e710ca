"""Which titles are shared by many memories of their store, and re-framing the vectors of a title that crosses the line.

A title on ``SHARED_TITLE_MIN`` or more records of one store stops framing their vectors (``logic.text``). The
count is read from SQLite, over every row of the store that carries the title (soft-deleted and superseded ones
too, so deleting or superseding a memory never flips its neighbours' vectors), so a vector drain in any process and
``reindex`` frame a record alike. When a write makes a title cross the line (the insert that makes it shared, an
update or a hard delete that makes it rare again), every record carrying it is queued in the vector outbox in the
same transaction, and the drain re-embeds them with the new framing: the stored vectors always equal what a rebuild
from SQLite would give.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..logic.text import SHARED_TITLE_MIN
from .write_plans import PlanStatement, WritePlan

# Counting stops one row past the line (a crossing is the count landing exactly on it): the index on
# (store_key, title) (migration 0017) finds the first rows, and a title on thousands of turns costs no more to check
# than one on ten.
_COUNT_SQL = (
    "SELECT COUNT(*) FROM (SELECT 1 FROM booku_memory_records WHERE store_key = ? AND title = ? LIMIT "
    f"{SHARED_TITLE_MIN + 1})"
)


def shared_titles_plan(pairs: Iterable[tuple[str, str]]) -> WritePlan[set[tuple[str, str]]]:
    """The ``(store_key, title)`` pairs of ``pairs`` whose title is on at least ``SHARED_TITLE_MIN`` rows of their
    store; one bounded count per distinct non-empty pair, all in the caller's hop."""
    shared: set[tuple[str, str]] = set()
    for store_key, title in dict.fromkeys(pairs):
        if not title:
            continue
        rows = yield PlanStatement(_COUNT_SQL, [store_key, title], fetch=True)
        if int(rows[0][0]) >= SHARED_TITLE_MIN:
            shared.add((store_key, title))
    return shared


def title_crossing_plan(store_key: str, title: str, now: float, *, added: bool) -> WritePlan[None]:
    """After one row with ``title`` was added to (``added``) or taken from ``store_key``: when that made the title
    cross ``SHARED_TITLE_MIN``, queue every record of the store carrying it for re-embedding (op ``upsert``)."""
    if not title:
        return
    rows = yield PlanStatement(_COUNT_SQL, [store_key, title], fetch=True)
    if int(rows[0][0]) != (SHARED_TITLE_MIN if added else SHARED_TITLE_MIN - 1):
        return
    yield PlanStatement(
        "INSERT INTO booku_vector_outbox (memory_id, store_key, op, created_at) "
        "SELECT memory_id, store_key, 'upsert', ? FROM booku_memory_records WHERE store_key = ? AND title = ?",
        [now, store_key, title],
    )

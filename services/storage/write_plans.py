"""Write plans: a change as a generator of SQL statements, run in one hop to aiosqlite's worker thread.

Every store module writes this way (records, the vector outbox's settling, documents), so the runner lives apart from
any one table.
"""

from __future__ import annotations

import functools
import sqlite3
from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import Any, TypeVar

import aiosqlite

from .database import Database, aiosqlite_core

# A write is a plan: a generator that yields the statements of one change, receives each statement's rows (for a
# SELECT or a RETURNING clause; ``[]`` otherwise) and returns the stored result. ``run_plan`` runs a whole plan in ONE
# hop to aiosqlite's worker thread: every awaited ``conn.execute`` is a round trip through that thread and back to
# the event loop, and an insert needs more than a dozen statements.
T = TypeVar("T")


@dataclass(frozen=True)
class PlanStatement:
    """One SQL statement of a write plan (also written by other store modules, e.g. the vector outbox's settling)."""

    sql: str
    params: Any = ()
    many: bool = False  # executemany over a list of parameter rows
    fetch: bool = False  # the plan needs the statement's rows (SELECT, RETURNING)


WritePlan = Generator[PlanStatement, list[sqlite3.Row], T]


def run_plan_here(raw: sqlite3.Connection, plan: WritePlan[T]) -> T:
    """Run every statement of ``plan`` on ``raw`` in the calling thread (aiosqlite's worker thread).

    A failing statement's error is thrown into the plan, so a plan may answer it with more statements
    (``savepoint_plan`` rolls back); a plan that does not catch it ends, and the error propagates.
    """
    try:
        statement = next(plan)
        while True:
            try:
                rows: list[sqlite3.Row] = []
                if statement.many:
                    raw.executemany(statement.sql, statement.params)
                else:
                    cursor = raw.execute(statement.sql, statement.params)
                    if statement.fetch:
                        rows = cursor.fetchall()
                    cursor.close()
            except Exception as exc:
                statement = plan.throw(exc)
                continue
            statement = plan.send(rows)
    except StopIteration as done:
        return done.value


def _one_hop_runner(conn: aiosqlite.Connection) -> Callable[..., Awaitable[Any]] | None:
    """A runner that sends a whole plan to ``conn``'s worker thread in one hop, or None (see ``aiosqlite_core``)."""
    core = aiosqlite_core(conn)
    if core is None:
        return None
    execute, raw = core
    return functools.partial(execute, run_plan_here, raw)


async def run_plan(conn: aiosqlite.Connection, plan: WritePlan[T]) -> T:
    """Run a write plan on the transaction's connection; returns the plan's result.

    The statements run in order on ``conn`` exactly as separate ``execute`` calls would, inside the caller's
    transaction; an error raised by a statement propagates and the rest of the plan does not run.
    """
    runner = _one_hop_runner(conn)
    if runner is not None:
        return await runner(plan)
    try:
        statement = next(plan)
        while True:
            try:
                rows: list[sqlite3.Row] = []
                if statement.many:
                    await conn.executemany(statement.sql, statement.params)
                elif statement.fetch:
                    rows = list(await conn.execute_fetchall(statement.sql, statement.params))
                else:
                    await conn.execute(statement.sql, statement.params)
            except Exception as exc:
                statement = plan.throw(exc)
                continue
            statement = plan.send(rows)
    except StopIteration as done:
        return done.value


async def run_plan_in_transaction(db: Database, plan: WritePlan[T]) -> T:
    """Run a write plan as a transaction of its own; returns the plan's result.

    BEGIN, the plan's statements and COMMIT take one hop to the writer's thread (``Database.run_in_transaction``),
    not three; an error raised by a statement or by the plan rolls the whole transaction back and propagates.
    Falls back to ``Database.transaction`` and ``run_plan`` when aiosqlite's one-hop core is missing.
    """
    if db.one_hop_transactions():
        return await db.run_in_transaction(functools.partial(run_plan_here, plan=plan))
    async with db.transaction() as conn:
        return await run_plan(conn, plan)


def savepoint_plan(plan: WritePlan[T], savepoint: str | None) -> WritePlan[T]:
    """``plan`` inside ``SAVEPOINT savepoint``: when any of its statements (or its own code) fails, everything it
    wrote is rolled back to the savepoint and the error propagates; the enclosing transaction stays usable.

    Why inside the plan: the savepoint, the write and the release (or rollback) then cost one thread hop, not three.
    ``savepoint=None`` runs ``plan`` as it is. The name must be a plain SQL identifier chosen by the caller.
    """
    if savepoint is None:
        return (yield from plan)
    yield PlanStatement(f"SAVEPOINT {savepoint}")
    try:
        result = yield from plan
    except Exception:
        yield PlanStatement(f"ROLLBACK TO {savepoint}")
        yield PlanStatement(f"RELEASE {savepoint}")
        raise
    yield PlanStatement(f"RELEASE {savepoint}")
    return result

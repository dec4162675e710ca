"""A writer cancelled at BEGIN, inside its body or at COMMIT never leaves the writer connection in a transaction.

aiosqlite runs every statement on its worker thread, and cancelling the awaiting task does not stop a statement
already queued there. These tests park that thread on a gate (a SQL function that waits on a ``threading.Event``),
queue a transaction's statement behind it, cancel the writer, open the gate, and check that the next write works.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading

import pytest

from booku_memory.services.storage.database import Database

GATE_TIMEOUT_SECONDS = 10  # only a guard against a hung test; every test opens the gate itself


@pytest.fixture
async def db(tmp_path):
    database = Database(tmp_path / "booku_memory.db")
    await database.open()
    yield database
    await database.close()


class WriterGate:
    """Holds aiosqlite's writer thread inside ``SELECT hold()`` until ``open()``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.event = threading.Event()

    async def install(self) -> None:
        await self.db.writer.create_function("hold", 0, lambda: int(self.event.wait(GATE_TIMEOUT_SECONDS)))

    def close_on_writer(self) -> asyncio.Future:
        """Queue ``SELECT hold()`` on the writer: every statement queued after it waits for ``open()``."""
        return asyncio.ensure_future(self.db.writer.execute("SELECT hold()"))

    def open(self) -> None:
        self.event.set()


async def let_tasks_queue_their_statements() -> None:
    # A few loop turns: the writer task starts, takes the write lock and queues its statement behind the gate.
    for _ in range(10):
        await asyncio.sleep(0)


async def meta_value(db: Database, key: str) -> str | None:
    return await db.fetch_value("SELECT value FROM booku_meta WHERE key = ?", [key])


async def assert_next_write_works(db: Database) -> None:
    assert not db.writer.in_transaction
    async with db.transaction() as conn:
        await conn.execute("INSERT INTO booku_meta (key, value) VALUES ('after', 'ok')")
    assert await meta_value(db, "after") == "ok"


async def writer_waiting_on_begin(db: Database) -> tuple[WriterGate, asyncio.Future, asyncio.Task, asyncio.Event]:
    """A writer whose BEGIN is queued behind a closed gate: (gate, the gate's statement, the writer, body ran)."""
    gate = WriterGate(db)
    await gate.install()
    blocker = gate.close_on_writer()
    body_ran = asyncio.Event()

    async def writer() -> None:
        async with db.transaction() as conn:
            body_ran.set()
            await conn.execute("INSERT INTO booku_meta (key, value) VALUES ('cancelled', 'x')")

    task = asyncio.create_task(writer())
    await let_tasks_queue_their_statements()
    return gate, blocker, task, body_ran


async def test_cancel_while_begin_is_pending_rolls_the_late_begin_back(db):
    gate, blocker, task, body_ran = await writer_waiting_on_begin(db)
    task.cancel()
    gate.open()
    await blocker
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not body_ran.is_set()
    await assert_next_write_works(db)
    assert await meta_value(db, "cancelled") is None


async def test_cancelled_again_while_cleaning_up_still_leaves_no_transaction(db):
    gate, blocker, task, _ = await writer_waiting_on_begin(db)
    task.cancel()
    await let_tasks_queue_their_statements()
    task.cancel()
    gate.open()
    await blocker
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_next_write_works(db)


async def test_cancel_inside_the_body_rolls_back_its_writes(db):
    gate = WriterGate(db)
    await gate.install()
    inside = asyncio.Event()

    async def writer() -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO booku_meta (key, value) VALUES ('half_done', 'x')")
            inside.set()
            await conn.execute("SELECT hold()")

    task = asyncio.create_task(writer())
    await inside.wait()
    await let_tasks_queue_their_statements()
    task.cancel()
    gate.open()
    with pytest.raises(asyncio.CancelledError):
        await task
    await assert_next_write_works(db)
    assert await meta_value(db, "half_done") is None


async def test_cancel_while_commit_is_pending_keeps_the_committed_write(db):
    gate = WriterGate(db)
    await gate.install()
    body_done = asyncio.Event()
    blockers: list[asyncio.Future] = []

    async def writer() -> None:
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO booku_meta (key, value) VALUES ('committed', 'yes')")
            blockers.append(gate.close_on_writer())
            await let_tasks_queue_their_statements()  # the gate is queued before this transaction's COMMIT
            body_done.set()

    task = asyncio.create_task(writer())
    await body_done.wait()
    await let_tasks_queue_their_statements()
    task.cancel()
    gate.open()
    await blockers[0]
    with pytest.raises(asyncio.CancelledError):
        await task
    # COMMIT was already on its way when the task was cancelled: it completes, and nothing is left open.
    assert await meta_value(db, "committed") == "yes"
    await assert_next_write_works(db)


async def test_failed_commit_is_rolled_back_and_reported(db):
    # A deferred foreign key is only checked at COMMIT; SQLite then refuses the COMMIT and keeps the transaction.
    async with db.transaction() as conn:
        await conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
        await conn.execute(
            "CREATE TABLE child (parent_id INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)"
        )
    with pytest.raises(sqlite3.IntegrityError):
        async with db.transaction() as conn:
            await conn.execute("INSERT INTO booku_meta (key, value) VALUES ('orphan_batch', 'x')")
            await conn.execute("INSERT INTO child (parent_id) VALUES (42)")
    await assert_next_write_works(db)
    assert await meta_value(db, "orphan_batch") is None

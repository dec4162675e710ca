"""Write transactions leave the WAL to a background checkpoint instead of copying it into the database file inside
their own COMMIT; that checkpoint follows without any further write, and nothing is lost across close and reopen.

What a checkpoint did is read from a copy of the database file alone (without its WAL): a row is there only once a
checkpoint has copied it.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

from booku_memory.services.storage import database as database_module
from booku_memory.services.storage.database import Database
from booku_memory.services.storage.write_plans import (
    PlanStatement,
    run_plan_in_transaction,
)

WAIT_LIMIT_SECONDS = 30  # only a guard against a hung test; the checkpoint normally follows within milliseconds
BLOB_CHARS = 60_000  # ~15 pages of 4 KiB per transaction, so 80 transactions pass SQLite's default of 1,000 pages


def rows_in_database_file(path: Path, scratch: Path) -> int:
    """Test rows in the database file itself (what checkpoints copied there), the WAL left out."""
    copy = scratch / "file_only.db"
    shutil.copyfile(path, copy)
    with contextlib.closing(sqlite3.connect(copy)) as conn:
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'booku_meta'").fetchone() is None:
            return 0  # not even the schema has been checkpointed yet
        return int(conn.execute("SELECT COUNT(*) FROM booku_meta WHERE key LIKE 'row-%'").fetchone()[0])


async def rows_once_checkpointed(path: Path, scratch: Path, expected: int) -> int:
    """Rows in the database file once a background checkpoint has copied ``expected`` of them (or the wait ran out)."""
    found = rows_in_database_file(path, scratch)
    for _ in range(int(WAIT_LIMIT_SECONDS / 0.02)):
        if found == expected:
            break
        await asyncio.sleep(0.02)
        found = rows_in_database_file(path, scratch)
    return found


async def write_rows(db: Database, first: int, count: int) -> None:
    """``count`` transactions of one large row each, alternating both ways of writing (transaction and plan)."""
    for number in range(first, first + count):
        key, value = f"row-{number}", f"{number}-" + "x" * BLOB_CHARS
        if number % 2:
            async with db.transaction() as conn:
                await conn.execute("INSERT INTO booku_meta (key, value) VALUES (?, ?)", [key, value])
        else:

            def plan(key: str = key, value: str = value):
                yield PlanStatement("INSERT INTO booku_meta (key, value) VALUES (?, ?)", [key, value])

            await run_plan_in_transaction(db, plan())


@contextlib.asynccontextmanager
async def database_checkpointing_after(delay: float, path: Path, monkeypatch) -> AsyncIterator[Database]:
    """An open ``Database`` at ``path`` whose background checkpoint follows a commit after ``delay`` seconds."""
    monkeypatch.setattr(database_module, "CHECKPOINT_DELAY_SECONDS", delay)
    db = Database(path)
    await db.open()
    try:
        yield db
    finally:
        await db.close()


async def test_commits_do_not_checkpoint_inline_and_close_keeps_every_row(tmp_path, monkeypatch):
    # No background checkpoint within the test: whatever reaches the database file was copied by a COMMIT.
    path = tmp_path / "booku_memory.db"
    # Closing with a checkpoint still scheduled: close cancels it and the last connection checkpoints.
    async with database_checkpointing_after(3600.0, path, monkeypatch) as db:
        await write_rows(db, 0, 80)
        in_file = rows_in_database_file(path, tmp_path)
    assert in_file == 0  # SQLite's default would have checkpointed inside the COMMIT that passed 1,000 pages

    assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
    assert rows_in_database_file(path, tmp_path) == 80
    async with database_checkpointing_after(3600.0, path, monkeypatch) as reopened:
        assert await reopened.fetch_value("SELECT COUNT(*) FROM booku_meta WHERE key LIKE 'row-%'") == 80


async def test_a_checkpoint_follows_the_last_commit_without_another_write(tmp_path, monkeypatch):
    path = tmp_path / "booku_memory.db"
    async with database_checkpointing_after(0.01, path, monkeypatch) as db:
        await write_rows(db, 0, 6)
        assert await rows_once_checkpointed(path, tmp_path, 6) == 6
        # Commits made after a checkpoint get one of their own.
        await write_rows(db, 6, 3)
        assert await rows_once_checkpointed(path, tmp_path, 9) == 9


async def test_checkpoints_running_alongside_writes_and_reads_lose_nothing(tmp_path, monkeypatch):
    # A checkpoint starts after every commit while writes and reads go on: none of them fails or misses a row.
    path = tmp_path / "booku_memory.db"
    async with database_checkpointing_after(0.0, path, monkeypatch) as db:

        async def read_while_writing() -> int:
            seen = 0
            for _ in range(40):
                seen = int(await db.fetch_value("SELECT COUNT(*) FROM booku_meta WHERE key LIKE 'row-%'"))
                await asyncio.sleep(0)
            return seen

        _, seen = await asyncio.gather(write_rows(db, 0, 40), read_while_writing())
        assert 0 <= seen <= 40
        assert await db.fetch_value("SELECT COUNT(*) FROM booku_meta WHERE key LIKE 'row-%'") == 40
    assert rows_in_database_file(path, tmp_path) == 40

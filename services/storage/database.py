"""The SQLite database: two long-lived aiosqlite connections and numbered migrations.

Why two connections: every write runs inside ``transaction()`` on the writer connection (BEGIN IMMEDIATE, one writer
at a time, serialised by an asyncio lock), while reads go through the reader connection, which in WAL mode sees only
committed data and never waits behind a half-done write of another coroutine.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import re
import sqlite3
from importlib import resources
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Iterable, Sequence, TypeVar

import aiosqlite

MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


def available_migrations() -> list[tuple[int, str, str]]:
    """All shipped migrations as (number, file name, SQL), in order."""
    found = []
    folder = resources.files(__package__).joinpath("migrations")
    for entry in folder.iterdir():
        match = MIGRATION_NAME.match(entry.name)
        if match:
            found.append((int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    return sorted(found)


class Database:
    """Owns the writer and reader connections of one SQLite file."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._writer: aiosqlite.Connection | None = None
        self._reader: aiosqlite.Connection | None = None
        self._write_lock = asyncio.Lock()

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = await self._connect()
        await self.migrate()
        self._reader = await self._connect()

    async def _connect(self) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=10000")
        await conn.create_function("REGEXP", 2, _regexp, deterministic=True)
        return conn

    async def close(self) -> None:
        for conn in (self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    async def schema_version(self) -> int:
        async with self.writer.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        return int(row[0])

    async def migrate(self) -> list[str]:
        """Apply every migration newer than ``PRAGMA user_version``, each in its own transaction."""
        applied = []
        current = await self.schema_version()
        for number, name, sql in available_migrations():
            if number <= current:
                continue
            async with self._write_lock:
                await self.writer.execute("BEGIN IMMEDIATE")
                try:
                    # executescript would COMMIT implicitly; run statement by statement instead.
                    for statement in split_sql(sql):
                        await self.writer.execute(statement)
                    await self.writer.execute(f"PRAGMA user_version = {number}")
                    await self.writer.execute("COMMIT")
                except BaseException:
                    await self.writer.execute("ROLLBACK")
                    raise
            applied.append(name)
        return applied

    @property
    def writer(self) -> aiosqlite.Connection:
        if self._writer is None:
            raise RuntimeError("数据库尚未打开")
        return self._writer

    @property
    def reader(self) -> aiosqlite.Connection:
        if self._reader is None:
            raise RuntimeError("数据库尚未打开")
        return self._reader

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One atomic write: everything inside commits together or not at all.

        Why the care around BEGIN, COMMIT and ROLLBACK: aiosqlite runs each statement on its worker thread, and
        cancelling the awaiting task does not stop a statement already queued there. A task cancelled while its
        BEGIN was pending used to leave the writer connection inside a transaction nobody would end, and every
        later write failed with "cannot start a transaction within a transaction". These three statements are
        therefore awaited to their end whatever happens to the task, and the connection is handed to the next
        writer only outside a transaction; the cancellation is re-raised afterwards.
        """
        async with self._write_lock:
            conn = self.writer
            try:
                await _to_completion(conn.execute("BEGIN IMMEDIATE"))
            except BaseException:
                # BEGIN may have succeeded although this task was cancelled meanwhile.
                await _rollback_if_open(conn)
                raise
            try:
                yield conn
            except BaseException:
                await _rollback_if_open(conn)
                raise
            try:
                await _to_completion(conn.execute("COMMIT"))
            except BaseException:
                # A failed COMMIT (e.g. SQLITE_BUSY) leaves the transaction open: undo it, then report the failure.
                await _rollback_if_open(conn)
                raise

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        async with self.reader.execute(sql, params) as cur:
            return list(await cur.fetchall())

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Row | None:
        async with self.reader.execute(sql, params) as cur:
            return await cur.fetchone()

    async def fetch_value(self, sql: str, params: Sequence[Any] = (), default: Any = None) -> Any:
        row = await self.fetch_one(sql, params)
        return default if row is None else row[0]


T = TypeVar("T")


async def _to_completion(operation: Awaitable[T]) -> T:
    """Await ``operation`` to its end even if the awaiting task is cancelled meanwhile, then re-raise the cancellation.

    The operation runs as its own task, which the caller's cancellation does not reach (unlike a plain ``await``,
    which would abandon a statement aiosqlite runs anyway).
    """
    task = asyncio.ensure_future(operation)
    cancelled = False
    while not task.done():
        try:
            await asyncio.wait([task])
        except asyncio.CancelledError:
            cancelled = True
    if cancelled:
        if not task.cancelled() and task.exception() is not None:
            raise asyncio.CancelledError() from task.exception()
        raise asyncio.CancelledError()
    return task.result()


async def _rollback_if_open(conn: aiosqlite.Connection) -> None:
    """ROLLBACK the open transaction, if one is open, to the statement's end.

    The check matters: some errors end the transaction inside SQLite already, and a ROLLBACK without a transaction
    would raise and hide the error that caused it.
    """
    if not conn.in_transaction:
        return
    try:
        await _to_completion(conn.execute("ROLLBACK"))
    except sqlite3.OperationalError:
        # A statement still running when the caller was cancelled may have ended the transaction in between.
        if conn.in_transaction:
            raise


@functools.lru_cache(maxsize=64)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _regexp(pattern: str | None, value: str | None) -> bool:
    """SQLite calls ``X REGEXP Y`` as regexp(Y, X)."""
    if pattern is None or value is None:
        return False
    return _compiled(pattern).search(value) is not None


def split_sql(script: str) -> Iterable[str]:
    """Split a migration script into complete statements (trigger bodies with inner ``;`` stay whole)."""
    buffer = ""
    for line in script.splitlines(keepends=True):
        if line.strip().startswith("--"):
            continue
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip().rstrip(";").strip():
                yield buffer.strip()
            buffer = ""
    if buffer.strip():
        yield buffer.strip()


def placeholders(count: int) -> str:
    """``?, ?, ?`` for an IN (...) list."""
    return ", ".join("?" for _ in range(count))


async def dump_table(db: Database, table: str, *, order_by: str = "rowid") -> list[dict[str, Any]]:
    """Every row of a plain table as dicts (export)."""
    rows = await db.fetch_all(f"SELECT * FROM {table} ORDER BY {order_by}")
    return [dict(row) for row in rows]


async def insert_rows_ignoring_existing(conn: aiosqlite.Connection, table: str, rows: Sequence[dict[str, Any]]) -> int:
    """INSERT OR IGNORE rows (import is idempotent: rows whose key exists are kept as they are)."""
    inserted = 0
    for row in rows:
        columns = list(row)
        cur = await conn.execute(
            f"INSERT OR IGNORE INTO {table} ({', '.join(columns)}) VALUES ({placeholders(len(columns))})",
            [row[c] for c in columns],
        )
        inserted += max(cur.rowcount, 0)
    return inserted


def in_clause(column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
    """``column IN (...)`` with its parameters (``0`` for an empty list: nothing matches)."""
    if not values:
        return "0", []
    return f"{column} IN ({placeholders(len(values))})", list(values)


async def fetch_rows(db: Database, conn: aiosqlite.Connection | None, sql: str,
                     params: Sequence[Any]) -> list[aiosqlite.Row]:
    """Rows from the open transaction's connection when given (sees its own writes), else from the reader."""
    if conn is None:
        return await db.fetch_all(sql, params)
    async with conn.execute(sql, params) as cur:
        return list(await cur.fetchall())

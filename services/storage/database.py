"""The SQLite database: two long-lived aiosqlite connections and numbered migrations.

Why two connections: every write runs inside ``transaction()`` on the writer connection (BEGIN IMMEDIATE, one writer
at a time, serialised by an asyncio lock), while reads go through the reader connection, which in WAL mode sees only
committed data and never waits behind a half-done write of another coroutine. A third connection only copies the
WAL into the database file in the background (``CHECKPOINT_DELAY_SECONDS``), so no write's COMMIT does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, TypeVar

import aiosqlite

from .file_modes import private_sqlite

MIGRATION_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

logger = logging.getLogger(__name__)

PAGE_CACHE_KIB = 16384
"""SQLite page cache of the reader and the writer connection (``PRAGMA cache_size``), in KiB.

Why more than SQLite's 2 MiB default: every read by id descends the B-trees of the records table, its id index and
the embedding cache, and in a large store their interior pages alone outgrow 2 MiB, so each lookup read them from
the file again. A cache that holds them leaves one leaf read per row."""

WRITER_AUTOCHECKPOINT_PAGES = 8192
"""WAL pages (4 KiB each, 32 MiB) after which the writer checkpoints inside its own COMMIT, as a safety net only.

Why so many: SQLite's default (1,000 pages) made the COMMIT that crossed it copy the WAL into the database file and
sync both, inside the write, so every few dozen writes one COMMIT took many times longer than the others. The
background checkpointer (``CHECKPOINT_DELAY_SECONDS``) does that work on a connection of its own; this
bound only keeps the WAL from growing without limit should it fall behind (a sustained write stream keeps the WAL
from restarting between two background checkpoints; the writer's own checkpoint then copies only the tail the
background one has not copied yet)."""

CHECKPOINT_DELAY_SECONDS = 0.5
"""How long after a commit the background checkpointer copies the WAL into the database file.

Why a delay: each checkpoint syncs the WAL and the database file, so one per burst of writes rather than one per
commit; at the write path's pace (a few hundred memories a second, ~15 pages each) half a second is about the
thousand pages SQLite's default checkpointed at. A PASSIVE checkpoint never blocks a writer or a reader."""

RiderRows = list[tuple[str, list[Sequence[Any]]]]
"""What a rider hands a transaction: ``(sql, parameter rows)`` pairs, each run with ``executemany``."""


class TransactionRider(Protocol):
    """Deferred rows that ride along in the next write transaction instead of paying for one of their own.

    Why: a transaction on the writer costs BEGIN, COMMIT and the wait for the writer lock; the embedding cache used
    to pay that once per embedding request, in front of the very write that embedded the text. ``take`` hands over
    the rows to write as a transaction starts (they are written right after BEGIN, in the same thread hop, so
    anything the transaction itself does comes after them, e.g. a retraction's DELETE of a cache row) and
    ``settle`` says whether they were committed; rows not committed stay with the rider for the next transaction.
    """

    @property
    def pending(self) -> bool:
        """Whether rows are waiting for a transaction."""
        ...

    def take(self) -> tuple[RiderRows, Any]:
        """The statements to run now and a token identifying what was taken (passed back to ``settle``)."""
        ...

    def settle(self, token: Any, committed: bool) -> None:
        """The taken rows were committed (forget them) or not (keep them for the next transaction)."""
        ...


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
        self._riders: list[TransactionRider] = []
        # A third connection, only for background WAL checkpoints (see ``CHECKPOINT_DELAY_SECONDS``).
        self._checkpointer: aiosqlite.Connection | None = None
        self._checkpoint_timer: asyncio.TimerHandle | None = None
        self._checkpoint_task: asyncio.Task | None = None
        self._checkpoint_wanted = False  # a commit happened since the last checkpoint started

    def add_rider(self, rider: TransactionRider) -> None:
        """Let ``rider``'s deferred rows ride in every later transaction (see ``TransactionRider``)."""
        self._riders.append(rider)

    def riders_pending(self) -> bool:
        """Whether some rider holds rows no transaction has committed yet."""
        return any(rider.pending for rider in self._riders)

    async def open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        private_sqlite(self.path)
        self._writer = await self._connect(cache_kib=PAGE_CACHE_KIB)
        await self.migrate()
        self._reader = await self._connect(cache_kib=PAGE_CACHE_KIB)
        self._checkpointer = await self._connect()
        # The writer no longer checkpoints at SQLite's default 1,000 pages: the checkpointer does, off the write.
        await self._writer.execute(f"PRAGMA wal_autocheckpoint={WRITER_AUTOCHECKPOINT_PAGES}")

    async def _connect(self, *, cache_kib: int | None = None) -> aiosqlite.Connection:
        conn = await aiosqlite.connect(self.path, isolation_level=None)
        if cache_kib is not None:
            await conn.execute(f"PRAGMA cache_size=-{int(cache_kib)}")
        conn.row_factory = aiosqlite.Row
        await conn.execute("PRAGMA journal_mode=WAL")
        await conn.execute("PRAGMA synchronous=NORMAL")
        await conn.execute("PRAGMA foreign_keys=ON")
        await conn.execute("PRAGMA busy_timeout=10000")
        return conn

    async def close(self) -> None:
        if self._writer is not None and self.riders_pending():
            try:
                async with self.transaction():
                    pass  # the riders' rows go in right after BEGIN
            except Exception:  # e.g. a read-only or full disk: the rows are a cache, losing them costs time only
                logger.warning("关闭数据库时写入延迟数据失败", exc_info=True)
        checkpointer, self._checkpointer = self._checkpointer, None  # nothing schedules a checkpoint from here on
        if self._checkpoint_timer is not None:
            self._checkpoint_timer.cancel()
            self._checkpoint_timer = None
        while self._checkpoint_task is not None:
            await asyncio.gather(self._checkpoint_task, return_exceptions=True)
        # The writer closes last: SQLite checkpoints the whole WAL when its last connection to the file closes.
        for conn in (checkpointer, self._reader, self._writer):
            if conn is not None:
                await conn.close()
        self._reader = self._writer = None

    def _committed(self) -> None:
        """A write transaction committed: a background checkpoint follows (``CHECKPOINT_DELAY_SECONDS``)."""
        self._checkpoint_wanted = True
        if self._checkpoint_task is None:
            self._schedule_checkpoint()

    def _schedule_checkpoint(self) -> None:
        if self._checkpointer is not None and self._checkpoint_timer is None:
            self._checkpoint_timer = asyncio.get_running_loop().call_later(
                CHECKPOINT_DELAY_SECONDS, self._start_checkpoint
            )

    def _start_checkpoint(self) -> None:
        self._checkpoint_timer = None
        if self._checkpointer is not None and self._checkpoint_task is None:
            self._checkpoint_wanted = False
            self._checkpoint_task = asyncio.get_running_loop().create_task(
                self._checkpoint(self._checkpointer), name="booku-wal-checkpoint"
            )

    async def _checkpoint(self, conn: aiosqlite.Connection) -> None:
        """One PASSIVE checkpoint on ``conn``: it copies what it can without waiting for (or blocking) anyone.

        It never fails a write: the WAL holds every commit either way, and what it did not copy the next
        checkpoint does (or the writer's safety net, ``WRITER_AUTOCHECKPOINT_PAGES``). Commits made while it ran
        get a checkpoint of their own.
        """
        try:
            await _fetch(conn, "PRAGMA wal_checkpoint(PASSIVE)", (), first_only=True)
        except Exception as exc:
            logger.debug("后台 WAL 检查点未完成：%s", exc)
        finally:
            self._checkpoint_task = None
            if self._checkpoint_wanted:
                self._schedule_checkpoint()

    async def schema_version(self) -> int:
        async with self.writer.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        assert row is not None  # a PRAGMA read always answers one row
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
                        await _execute_migration_statement(self.writer, statement)
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
        BEGIN was pending would leave the writer connection inside a transaction nobody would end, and every
        later write failed with "cannot start a transaction within a transaction". These three statements are
        therefore awaited to their end whatever happens to the task, and the connection is handed to the next
        writer only outside a transaction; the cancellation is re-raised afterwards.
        """
        async with self._write_lock:
            conn = self.writer
            # Riders' rows go in right after BEGIN, in the same thread hop, before anything the caller does.
            riding = [(rider, *rider.take()) for rider in self._riders]
            riding = [(rider, statements, token) for rider, statements, token in riding if statements]
            try:
                rider_error = await _to_completion(_begin(conn, [row for _, rows, _ in riding for row in rows]))
            except BaseException:
                # BEGIN may have succeeded although this task was cancelled meanwhile.
                await _rollback_if_open(conn)
                _settle(riding, committed=False)
                raise
            if rider_error is not None:
                # A rider never fails the transaction it rides in: its rows were rolled back to their savepoint
                # and are dropped (a cache row is worth a model call, not a failed write, nor a retry forever).
                logger.warning("延迟写入的数据未能随事务写入，已放弃：%s", rider_error)
                _settle(riding, committed=True)
                riding = []
            try:
                yield conn
            except BaseException:
                await _rollback_if_open(conn)
                _settle(riding, committed=False)
                raise
            try:
                await _to_completion(conn.execute("COMMIT"))
            except BaseException:
                # A failed COMMIT (e.g. SQLITE_BUSY) leaves the transaction open: undo it, then report the failure.
                await _rollback_if_open(conn)
                _settle(riding, committed=False)
                raise
            _settle(riding, committed=True)
            self._committed()

    def one_hop_transactions(self) -> bool:
        """Whether ``run_in_transaction`` is available (aiosqlite's ``_execute``/``_conn`` core is present)."""
        return aiosqlite_core(self.writer) is not None

    async def run_in_transaction(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """``work(raw connection)`` as one atomic write, in ONE hop to the writer's thread; returns its result.

        The hop runs BEGIN IMMEDIATE, the riders' rows, ``work`` and COMMIT, or ROLLBACK when ``work`` (or COMMIT)
        raises, and the error propagates: the same transaction as ``transaction()`` with ``work``'s statements
        inside, including its care that a cancelled caller never leaves the connection inside a transaction (the
        hop always runs to its end). Why: ``transaction()`` costs a hop for BEGIN and one for COMMIT besides the
        caller's own, and for a single write each hop (a hand-over to the worker thread and back to the event
        loop) cost about as much as the write's SQL once other threads held the GIL. ``work`` runs on the worker
        thread and must not touch the event loop. Only when ``one_hop_transactions()``.
        """
        runner = aiosqlite_core(self.writer)
        if runner is None:
            raise RuntimeError("aiosqlite 缺少 _execute/_conn，无法在一次线程切换内完成事务")
        execute, raw = runner
        async with self._write_lock:
            riding = [(rider, *rider.take()) for rider in self._riders]
            riding = [(rider, statements, token) for rider, statements, token in riding if statements]
            try:
                rider_error, result = await _to_completion(
                    execute(_transaction_here, raw, [row for _, rows, _ in riding for row in rows], work)
                )
            except BaseException:
                # The hop rolled back whatever it began; a cancellation arriving while it ran is re-raised here
                # only after it ended, and then its COMMIT may have happened: the riders' rows are kept either way
                # (writing a cache row twice replaces it with the same vector).
                await _rollback_if_open(self.writer)
                _settle(riding, committed=False)
                raise
            if rider_error is not None:
                logger.warning("延迟写入的数据未能随事务写入，已放弃：%s", rider_error)
            _settle(riding, committed=True)
            self._committed()
            return result

    async def fetch_all(self, sql: str, params: Sequence[Any] = ()) -> list[aiosqlite.Row]:
        """Every row of a read on the reader connection (committed data only)."""
        return await _fetch(self.reader, sql, params, first_only=False)

    async def fetch_one(self, sql: str, params: Sequence[Any] = ()) -> aiosqlite.Row | None:
        """The first row of a read on the reader connection, or None."""
        return await _fetch(self.reader, sql, params, first_only=True)

    async def fetch_value(self, sql: str, params: Sequence[Any] = (), default: Any = None) -> Any:
        row = await self.fetch_one(sql, params)
        return default if row is None else row[0]


T = TypeVar("T")

_RIDER_SAVEPOINT = "booku_rider"


def _settle(riding: list[tuple[TransactionRider, RiderRows, Any]], *, committed: bool) -> None:
    for rider, _, token in riding:
        rider.settle(token, committed)


async def _begin(conn: aiosqlite.Connection, statements: RiderRows) -> Exception | None:
    """BEGIN IMMEDIATE, then the riders' rows inside a savepoint, in one hop to aiosqlite's worker thread.

    Raises what BEGIN raised; returns the error of a failing rider statement (its rows are rolled back, the
    transaction stays open and usable), else None. Falls back to one public call per statement when aiosqlite's
    ``_execute``/``_conn`` core is missing (see ``aiosqlite_core``).
    """
    core = aiosqlite_core(conn)
    if core is not None:
        execute, raw = core
        return await execute(_begin_here, raw, statements)
    await conn.execute("BEGIN IMMEDIATE")
    if not statements:
        return None
    await conn.execute(f"SAVEPOINT {_RIDER_SAVEPOINT}")
    try:
        for sql, rows in statements:
            await conn.executemany(sql, rows)
    except Exception as exc:
        await conn.execute(f"ROLLBACK TO {_RIDER_SAVEPOINT}")
        await conn.execute(f"RELEASE {_RIDER_SAVEPOINT}")
        return exc
    await conn.execute(f"RELEASE {_RIDER_SAVEPOINT}")
    return None


def aiosqlite_core(conn: aiosqlite.Connection) -> tuple[Callable[..., Awaitable[Any]], sqlite3.Connection] | None:
    """aiosqlite's ``_execute(fn, *args)`` (runs ``fn`` on the connection's worker thread) and its raw connection,
    or None when a release lacks them.

    Why private attributes: aiosqlite has no public way to run several statements in one thread hop, and each hop
    (a hand-over of the GIL between the worker thread and the event loop) cost more than most statements under
    load. ``_execute`` and ``_conn`` are the core of every aiosqlite release in use here (0.22.1 in every
    environment of this project), and every public method is built on them. Without them every caller falls back
    to one public call per statement: slower, same result.
    """
    execute, raw = getattr(conn, "_execute", None), getattr(conn, "_conn", None)
    if callable(execute) and isinstance(raw, sqlite3.Connection):
        return execute, raw
    return None


def _transaction_here(
    raw: sqlite3.Connection, statements: RiderRows, work: Callable[[sqlite3.Connection], T]
) -> tuple[Exception | None, T]:
    """``Database.run_in_transaction`` on the worker thread: (the riders' error or None, ``work``'s result)."""
    raw.execute("BEGIN IMMEDIATE")
    try:
        rider_error = _riders_here(raw, statements)
        result = work(raw)
        raw.execute("COMMIT")
    except BaseException:
        # A failed COMMIT (e.g. SQLITE_BUSY) leaves the transaction open as well; some errors end it inside SQLite.
        if raw.in_transaction:
            raw.execute("ROLLBACK")
        raise
    return rider_error, result


def _begin_here(raw: sqlite3.Connection, statements: RiderRows) -> Exception | None:
    """``_begin`` on the worker thread."""
    raw.execute("BEGIN IMMEDIATE")
    return _riders_here(raw, statements)


def _riders_here(raw: sqlite3.Connection, statements: RiderRows) -> Exception | None:
    """The riders' rows inside a savepoint of the open transaction; their error (rolled back), or None."""
    if not statements:
        return None
    raw.execute(f"SAVEPOINT {_RIDER_SAVEPOINT}")
    try:
        for sql, rows in statements:
            raw.executemany(sql, rows)
    except Exception as exc:
        raw.execute(f"ROLLBACK TO {_RIDER_SAVEPOINT}")
        raw.execute(f"RELEASE {_RIDER_SAVEPOINT}")
        return exc
    raw.execute(f"RELEASE {_RIDER_SAVEPOINT}")
    return None


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


_ADD_COLUMN = re.compile(r"^\s*ALTER\s+TABLE\s+\S+\s+ADD\s+COLUMN\s", re.IGNORECASE)


async def _execute_migration_statement(conn: aiosqlite.Connection, statement: str) -> None:
    """Run one statement of a migration; an ``ADD COLUMN`` of a column the table already has counts as done.

    Why: SQLite has no ``ADD COLUMN IF NOT EXISTS``, and a store whose ``user_version`` was set back (by hand, or
    by a tool that replays migrations) must still open; every other statement of a migration is idempotent.
    """
    try:
        await conn.execute(statement)
    except sqlite3.OperationalError as exc:
        if not (_ADD_COLUMN.match(statement) and "duplicate column name" in str(exc)):
            raise


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


async def fetch_rows(
    db: Database, conn: aiosqlite.Connection | None, sql: str, params: Sequence[Any]
) -> list[aiosqlite.Row]:
    """Rows from the open transaction's connection when given (sees its own writes), else from the reader."""
    if conn is None:
        return await db.fetch_all(sql, params)
    return await _fetch(conn, sql, params, first_only=False)


async def _fetch(conn: aiosqlite.Connection, sql: str, params: Sequence[Any], *, first_only: bool) -> Any:
    """A read in ONE hop to aiosqlite's worker thread: execute, fetch, close the cursor.

    Why: ``async with conn.execute(...) as cur: await cur.fetchall()`` is three hops (execute, fetch, close), and
    each hop is a hand-over of the GIL between the worker thread and the event loop, which under load (Chroma and
    the other connection's thread busy) cost more than most reads themselves. Falls back to the public calls when
    aiosqlite's ``_execute``/``_conn`` core is missing (see ``aiosqlite_core``).
    """
    core = aiosqlite_core(conn)
    if core is not None:
        execute, raw = core
        return await execute(_fetch_here, raw, sql, params, first_only)
    async with conn.execute(sql, params) as cur:
        return await cur.fetchone() if first_only else list(await cur.fetchall())


def _fetch_here(raw: sqlite3.Connection, sql: str, params: Sequence[Any], first_only: bool) -> Any:
    cursor = raw.execute(sql, params)
    try:
        return cursor.fetchone() if first_only else cursor.fetchall()
    finally:
        cursor.close()

"""One owning process per data directory: an OS file lock and, in the locked file, who holds it.

Why: SQLite is shared safely between processes, but embedded Chroma and the in-memory copies (keyword index,
candidate rows, vector copy, staged vectors) are per-process state that another process's writes never reach. Two
processes on one data dir therefore each miss what the other wrote. So the first process to start a runtime on a
data dir owns it; every other process becomes a client of the owner over loopback (``owner_client``) or refuses.

The lock is ``flock`` on ``<data_dir>/booku.lock`` (``msvcrt.locking`` on Windows), taken without waiting. The
kernel drops it when the owner dies, however it dies, so a stale lock is simply taken over by the next process.
The file itself holds the owner record as JSON (pid, entry point, start time and, once it accepts clients, its
loopback address and client token); it is created with mode 0600 because the token lets a client act on every
store.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from .errors import BookuError

LOCK_FILE_NAME = "booku.lock"
RECORD_WAIT_SECONDS = 2.0
"""How long a reader waits for a record it can read: the owner writes it right after taking the lock, so an empty
or half-written file is a moment's state, never a lasting one."""

ENTRY_POINTS = {
    "serve": "管理后台 serve",
    "mcp": "MCP 服务 mcp",
    "host": "Neo-MoFox 插件",
    "open": "程序内 booku_memory.open()",
    "cli": "命令行",
}


@dataclass(frozen=True)
class OwnerRecord:
    """Who owns a data dir. ``address``/``token`` are empty until the owner accepts clients (or when it never
    will: ``accepts_clients`` False)."""

    pid: int
    entry_point: str
    started_at: float
    accepts_clients: bool
    address: str = ""
    token: str = ""

    def describe(self) -> str:
        """``进程 1234（管理后台 serve，自 2026-12-04 05:10:03 起）``: how messages name the owner."""
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.started_at))
        return f"进程 {self.pid}（{ENTRY_POINTS.get(self.entry_point, self.entry_point)}，自 {since} 起）"

    @property
    def ready(self) -> bool:
        """Whether a client can connect now."""
        return self.accepts_clients and bool(self.address) and bool(self.token)


class DataDirBusy(BookuError):
    """Another process owns the data dir and this process may not become its client."""

    def __init__(self, message: str, owner: OwnerRecord | None) -> None:
        super().__init__(message)
        self.owner = owner


def _advice(owner: OwnerRecord | None) -> str:
    if owner is None:
        return "请等它退出后再试。"
    if owner.entry_point == "cli":
        return "它是一条正在运行的命令（如 reindex、import），请等它结束后再试。"
    if owner.entry_point == "open":
        return "请等它退出，或让它以 booku_memory.open(..., accept_clients=True) 打开，其他进程就会自动通过它读写。"
    return "请等它启动完成后重试。"


def busy_message(data_dir: Path, owner: OwnerRecord | None, *, wanted: str = "") -> str:
    """The Chinese refusal: which data dir, who owns it since when, and what to do instead."""
    who = owner.describe() if owner is not None else "另一个进程"
    head = f"数据目录 {data_dir} 正由{who}使用"
    if wanted:
        return f"{head}；{wanted}"
    return (
        f"{head}，它不接受其他进程连接。为免两个进程各自缓存、互相看不到对方的写入，本进程不会打开该目录。"
        + _advice(owner)
    )


def lock_path(data_dir: Path) -> Path:
    return data_dir / LOCK_FILE_NAME


def _try_lock(fd: int) -> bool:
    if sys.platform == "win32":  # pragma: no cover - exercised on Windows only
        import msvcrt

        try:  # a byte far past the record, so readers can still read the record itself
            os.lseek(fd, 1 << 20, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _parse(text: str) -> OwnerRecord | None:
    try:
        data = json.loads(text)
        return OwnerRecord(
            pid=int(data["pid"]),
            entry_point=str(data["entry_point"]),
            started_at=float(data["started_at"]),
            accepts_clients=bool(data["accepts_clients"]),
            address=str(data.get("address", "")),
            token=str(data.get("token", "")),
        )
    except (ValueError, KeyError, TypeError):
        return None


def read_owner(data_dir: Path) -> OwnerRecord | None:
    """The record in the lock file, waiting briefly while it is being written; ``None`` if it never becomes
    readable. Meaningful only while the lock is held (a dead owner leaves its last record behind)."""
    deadline = time.monotonic() + RECORD_WAIT_SECONDS
    while True:
        try:
            record = _parse(lock_path(data_dir).read_text(encoding="utf-8"))
        except OSError:
            record = None
        if record is not None or time.monotonic() >= deadline:
            return record
        time.sleep(0.02)


class Ownership:
    """The held lock of one data dir. ``claim`` takes it; ``publish`` announces the client endpoint; ``release``
    lets it go (the kernel does the same when the process dies)."""

    def __init__(self, data_dir: Path, fd: int, record: OwnerRecord) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd
        self.record = record

    @classmethod
    def claim(cls, data_dir: Path, *, entry_point: str, accepts_clients: bool) -> Ownership:
        """Take the data dir's lock and write this process's record. Raises ``DataDirBusy`` (with the owner's
        record) when another process, or another runtime of this process, holds it."""
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path(data_dir), os.O_RDWR | os.O_CREAT, 0o600)
        if not _try_lock(fd):
            os.close(fd)
            owner = read_owner(data_dir)
            raise DataDirBusy(busy_message(data_dir, owner), owner)
        if sys.platform != "win32":
            os.fchmod(fd, 0o600)  # a lock file left by an older version may be wider
        ownership = cls(data_dir, fd, OwnerRecord(os.getpid(), entry_point, time.time(), accepts_clients))
        ownership._write()
        return ownership

    def publish(self, address: str, token: str) -> None:
        """Record the loopback address and client token: from now on other processes connect instead of waiting."""
        self.record = replace(self.record, address=address, token=token)
        self._write()

    def release(self) -> None:
        """Empty the record and drop the lock (idempotent)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor releases the flock

    def _write(self) -> None:
        assert self._fd is not None
        data = json.dumps(asdict(self.record), ensure_ascii=False).encode("utf-8")
        os.ftruncate(self._fd, 0)
        os.lseek(self._fd, 0, os.SEEK_SET)
        os.write(self._fd, data)
        os.fsync(self._fd)

"""Owner-only permissions for everything Booku keeps on disk: the data dir 0700, its files 0600.

Memories are personal data and the data dir also holds the dashboard key and the MCP token, so no other local user
may list or read any of it. Permissions are set when a path is created (never a window where a file is readable by
others) and tightened again at every start, which repairs stores created by versions that used the process umask.
SQLite creates its ``-wal``/``-shm`` files with the database file's own mode, so pre-creating the database file 0600
covers them too.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """Create ``path`` (and missing parents) and make it owner-only; returns ``path``."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(path, DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """Create ``path`` empty if it is missing, created 0600 from the first moment, and make it owner-only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, FILE_MODE)
    os.close(fd)
    os.chmod(path, FILE_MODE)  # O_CREAT's mode does nothing for a file that already existed
    return path


def private_sqlite(path: Path) -> Path:
    """Make a SQLite database file and whichever of its journal files exist owner-only (creating the database
    file first, so the journal files SQLite makes later inherit 0600)."""
    private_file(path)
    for suffix in SQLITE_COMPANIONS:
        companion = path.with_name(path.name + suffix)
        if companion.exists():
            os.chmod(companion, FILE_MODE)
    return path


def open_private_for_writing(path: Path, *, encoding: str = "utf-8"):
    """A text file opened for writing (truncated) that is 0600 from its creation on, e.g. an export."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    os.chmod(path, FILE_MODE)
    return os.fdopen(fd, "w", encoding=encoding)

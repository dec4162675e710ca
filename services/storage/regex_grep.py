"""Runs a regex grep on a read-only connection and a thread of its own, within a time budget.

Why not SQLite's ``REGEXP`` on the runtime's reader: the reader connection serves every read of every chat in
turn, so a slow match there made all of them wait behind it. Here the scan has its own connection (WAL readers do
not block one another or the writer), its own small thread pool (a burst of greps queues there, not in the pool
other work uses), and the matcher is RE2 (``logic.safe_regex``), which releases the GIL while it matches. A
progress handler ends the statement once the budget is spent, so one call holds its thread for about the budget.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import BookuError
from ..logic.safe_regex import Matcher

# Concurrent regex greps; more wait for a free thread.
GREP_THREADS = 2
# SQLite virtual-machine steps between two looks at the clock (a few hundred microseconds of work).
PROGRESS_STEPS = 2_000

_pool = ThreadPoolExecutor(max_workers=GREP_THREADS, thread_name_prefix="booku-regex-grep")


class RegexBudgetExceeded(BookuError):
    """A regex grep spent its time budget before it finished (the caller may narrow the search)."""


def _scan(path: Path, sql: str, params: Sequence[Any], matcher: Matcher, budget_seconds: float) -> list[sqlite3.Row]:
    conn = sqlite3.connect(str(path))
    try:
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA query_only = 1")
        conn.execute("PRAGMA busy_timeout = 10000")
        conn.create_function(
            "REGEXP", 2, lambda _pattern, value: value is not None and matcher(value), deterministic=True
        )
        deadline = time.monotonic() + budget_seconds
        conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)
        try:
            return conn.execute(sql, list(params)).fetchall()
        except sqlite3.OperationalError as exc:
            if time.monotonic() > deadline and "interrupt" in str(exc):
                raise RegexBudgetExceeded(
                    f"正则搜索超过 {budget_seconds:g} 秒仍未完成，已停止：请用更具体的正则、缩小字段（-fields）"
                    "或文件夹范围后重试（时间上限见配置项 retrieval.grep_regex_budget_seconds）"
                ) from None
            raise
    finally:
        conn.close()


async def run_regex_grep(
    path: Path, sql: str, params: Sequence[Any], matcher: Matcher, *, budget_seconds: float
) -> list[sqlite3.Row]:
    """The rows of ``sql`` (whose ``REGEXP ?`` clauses call ``matcher`` on each value), read off the shared
    connections; raises ``RegexBudgetExceeded`` when ``budget_seconds`` pass first."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool, _scan, path, sql, params, matcher, budget_seconds)

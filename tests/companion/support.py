"""Helpers shared by the companion tests: move a memory through simulated time, read raw rows."""

from __future__ import annotations

import time
from typing import Any

DAY = 86400.0


async def age(runtime: Any, memory_id: str, days: float, *, activated_days: float | None = None) -> None:
    """Pretend a memory was created (and last changed) ``days`` ago; optionally last activated at another age."""
    now = time.time()
    created = now - days * DAY
    activated = 0.0 if activated_days is None else now - activated_days * DAY
    async with runtime.db.transaction() as conn:
        await conn.execute(
            "UPDATE booku_memory_records SET created_at = ?, updated_at = ?, last_activated_at = ? WHERE memory_id = ?",
            [created, created, activated, memory_id],
        )


async def set_created(runtime: Any, memory_id: str, timestamp: float) -> None:
    async with runtime.db.transaction() as conn:
        await conn.execute("UPDATE booku_memory_records SET created_at = ? WHERE memory_id = ?", [timestamp, memory_id])


async def row(runtime: Any, memory_id: str) -> dict[str, Any]:
    found = await runtime.db.fetch_one("SELECT * FROM booku_memory_records WHERE memory_id = ?", [memory_id])
    assert found is not None, memory_id
    return dict(found)


def ids(result: dict) -> list[str]:
    return [item["id"] for item in result["items"]]


async def advance(runtime: Any, days: float) -> None:
    """Let ``days`` pass for every memory: all its timestamps move that far into the past."""
    shift = days * DAY
    async with runtime.db.transaction() as conn:
        await conn.execute(
            "UPDATE booku_memory_records SET created_at = created_at - ?, updated_at = updated_at - ?, "
            "last_activated_at = CASE WHEN last_activated_at > 0 THEN last_activated_at - ? ELSE 0 END",
            [shift, shift, shift],
        )


class Clock:
    """An injected clock for the companion services: tests move ``now`` instead of waiting."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

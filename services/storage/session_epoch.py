"""The dashboard's session epoch in ``booku_meta``: every session cookie names the epoch it was issued in.

Session cookies are signed, not stored, so without this a copied cookie would stay valid until it expires even
after the operator logged out. Logging out advances the epoch, which ends every session issued before (all
browsers: the dashboard has a single operator). Kept in SQLite so a restart does not bring old cookies back, and
so a dashboard in another process sharing the store honours it too.
"""

from __future__ import annotations

from typing import Any

SESSION_EPOCH_KEY = "dashboard_session_epoch"


async def current_epoch(db: Any) -> int:
    """The epoch new sessions are issued in and old ones must match (0 before the first logout)."""
    raw = await db.fetch_value("SELECT value FROM booku_meta WHERE key = ?", [SESSION_EPOCH_KEY], None)
    try:
        return int(raw) if raw is not None else 0
    except (TypeError, ValueError):
        return 0


async def advance_epoch(db: Any) -> int:
    """End every session issued so far; returns the new epoch."""
    async with db.transaction() as conn:
        await conn.execute(
            "INSERT INTO booku_meta (key, value) VALUES (?, '1') ON CONFLICT (key) DO UPDATE SET "
            "value = CAST(CAST(value AS INTEGER) + 1 AS TEXT)",
            [SESSION_EPOCH_KEY],
        )
    return await current_epoch(db)

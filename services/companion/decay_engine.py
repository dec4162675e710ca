"""The decay engine: recompute every memory's decay score and archive faded companion memories.

``refresh_decay(runtime)`` is one pass; the runtime calls it from ``run_maintenance`` (every
``maintenance.interval_seconds``). It scores every live memory of every store (scores are derived data, written
without a revision), then archives companion memories (written by hold/grow) whose score fell below
``decay.archive_threshold``: that change goes through the record repository with the ``mechanical`` authority, cause
``decay_below_threshold`` and one batch id per pass, so history and audit show it and ``restore_batch`` undoes it.
Records written by other tools keep the memory service's own lifecycle and are only scored, never archived here.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..logic.decay import archive_due, days_since_activity, decay_score
from ..scope import WriteContext
from .kinds import COMPANION_SOURCE, is_exempt
from .settings import companion_settings
from .store import CompanionStore

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

logger = logging.getLogger(__name__)

DECAY_ACTOR = "booku-decay"
DECAY_CAUSE = "decay_below_threshold"


def record_score(record: Mapping[str, Any], params, now: float) -> float:
    """The live decay score of a record dict (see ``logic.decay``)."""
    return decay_score(
        importance=record.get("importance") or 5,
        days_since_activity=days_since_activity(
            record.get("created_at") or 0.0, record.get("last_activated_at") or 0.0, now
        ),
        activation_count=record.get("activation_count") or 0,
        arousal=record.get("arousal") or 0.0,
        resolved=bool(record.get("resolved")),
        exempt=is_exempt(record),
        params=params,
    )


async def refresh_decay(runtime: BookuRuntime, *, now: float | None = None) -> dict[str, Any]:
    """One decay pass over all stores.

    Returns ``{"checked", "archived", "archived_ids", "lowest_score", "batch_id", "ran_at"}`` and stores the same
    summary (without the ids) as the engine state that ``pulse`` reports.
    """
    settings = companion_settings(runtime.config)
    params = settings.decay
    moment = time.time() if now is None else now
    store = CompanionStore(runtime.db)
    rows = await store.scoring_rows()
    scores = [(row["memory_id"], record_score(row, params, moment)) for row in rows]
    due = [
        memory_id
        for row, (memory_id, score) in zip(rows, scores)
        if settings.decay_auto_archive
        and row["source"] == COMPANION_SOURCE
        and archive_due(score, exempt=is_exempt(row), params=params)
    ]
    batch_id = f"decay-{uuid.uuid4().hex[:12]}"
    context = WriteContext(authority="mechanical", actor=DECAY_ACTOR, cause=DECAY_CAUSE, batch_id=batch_id)
    archived: list[str] = []
    state = {
        "ran_at": moment,
        "checked": len(rows),
        "archived": 0,
        "lowest_score": min((s for _, s in scores), default=0.0),
        "batch_id": batch_id if due else "",
        "half_life_days": params.half_life_days,
        "archive_threshold": params.archive_threshold,
    }
    async with runtime.db.transaction() as conn:
        await store.write_scores(conn, scores, now=moment)
        for memory_id in due:
            # touch=False: being archived is not activity, and updated_at keeps meaning "last real change".
            updated = await runtime.records.update(
                conn,
                memory_id,
                {"status": "archived"},
                action="decay_archive",
                actor=context,
                note=DECAY_CAUSE,
                touch=False,
            )
            if updated is not None:
                archived.append(memory_id)
        state["archived"] = len(archived)
        await store.save_decay_state(conn, state)
    if archived:
        await runtime.sync_vectors()
        await runtime.notify_changed("decay_archive", archived)
        logger.info("衰减引擎归档了 %d 条记忆（批次 %s）", len(archived), batch_id)
    return {**state, "archived_ids": archived}

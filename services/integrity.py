"""``check``: do the derived indexes and the outbox agree with SQLite, the source of truth? Optionally repair.

What is compared (``check_store``):
- SQLite's own ``PRAGMA integrity_check``;
- vectors: every live record (and chat message, episode) has its vector in the partition its tier and store say,
  and no partition holds an id that does not belong there; ids with vector work still queued are left out of both
  (the outbox will place them);
- keyword rows: one FTS5 row per record (rowid = the record's rid), none for a rid that does not exist;
- the vector outboxes' pending rows;
- duplicate memories: live memories of one store with the same title and content.

Repair re-queues missing vectors and drains the outboxes, removes stray vectors, and rebuilds the keyword index
when its rows disagree: all derived data, rebuilt from SQLite. Duplicates are reported, never removed: which copy
to keep is a decision about the user's memories, not about derived data.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Any

from .errors import VectorIndexUnavailableError
from .storage.vector_index import collection_name, tier_of

if TYPE_CHECKING:
    from .runtime import BookuRuntime


async def _expected_vectors(runtime: BookuRuntime) -> dict[str, set[str]]:
    """Collection name → the ids SQLite says it must hold."""
    expected: dict[str, set[str]] = defaultdict(set)
    for row in await runtime.db.fetch_all(
        "SELECT memory_id, store_key, bucket, status FROM booku_memory_records WHERE is_deleted = 0", ()
    ):
        expected[collection_name(tier_of(dict(row)) or "live", row["store_key"])].add(row["memory_id"])
    for tier, sql in (
        ("chat", "SELECT entry_id, store_key FROM booku_chat_messages WHERE retracted_at = 0"),
        ("episode", "SELECT episode_id, store_key FROM booku_episodes"),
    ):
        for row in await runtime.db.fetch_all(sql, ()):
            expected[collection_name(tier, row[1])].add(row[0])
    return expected


async def _pending_ids(runtime: BookuRuntime) -> set[str]:
    rows = await runtime.db.fetch_all(
        "SELECT memory_id FROM booku_vector_outbox UNION SELECT item_id FROM booku_evidence_vector_outbox", ()
    )
    return {row[0] for row in rows}


async def _compare_vectors(runtime: BookuRuntime) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(missing: collection → ids, stray: collection → ids), both without ids whose vector work is queued."""
    expected = await _expected_vectors(runtime)
    pending = await _pending_ids(runtime)
    present = await runtime.vectors.partitions()
    missing: dict[str, list[str]] = {}
    stray: dict[str, list[str]] = {}
    for name in set(expected) | set(present):
        stored = set(await runtime.vectors.stored_ids(name)) if name in present else set()
        want = expected.get(name, set())
        if lost := sorted(want - stored - pending):
            missing[name] = lost
        if extra := sorted(stored - want - pending):
            stray[name] = extra
    return missing, stray


async def _compare_keywords(runtime: BookuRuntime) -> tuple[list[int], list[int]]:
    """(rids without a keyword row, keyword rows without a record)."""
    rids = {row[0] for row in await runtime.db.fetch_all("SELECT rid FROM booku_memory_records", ())}
    rows = {row[0] for row in await runtime.db.fetch_all("SELECT rowid FROM booku_memory_fts", ())}
    return sorted(rids - rows), sorted(rows - rids)


async def _duplicates(runtime: BookuRuntime) -> list[list[str]]:
    rows = await runtime.db.fetch_all(
        "SELECT group_concat(memory_id, ' ') FROM booku_memory_records WHERE is_deleted = 0 AND bucket = 'memory' "
        "GROUP BY store_key, title, content HAVING COUNT(*) > 1",
        (),
    )
    return [sorted(str(row[0]).split()) for row in rows]


_NULL_COMPLAINT = re.compile(r"^NULL value in (\w+)\.(\w+)$")


async def _sqlite_integrity(runtime: BookuRuntime) -> list[str]:
    """``PRAGMA integrity_check``'s findings, each "NULL value in table.column" confirmed by the data itself.

    Why: the SQLite this machine's Python links (3.40) reports NOT NULL columns of WITHOUT ROWID tables
    (``booku_memory_tags``) as holding NULLs when none does; a finding no row confirms is not a problem.
    """
    confirmed: list[str] = []
    for (finding,) in await runtime.db.fetch_all("PRAGMA integrity_check", ()):
        match = _NULL_COMPLAINT.match(str(finding))
        if match:
            table, column = match.groups()
            nulls = await runtime.db.fetch_value(f'SELECT COUNT(*) FROM "{table}" WHERE "{column}" IS NULL', (), 0)
            if not nulls:
                continue
        confirmed.append(str(finding))
    return confirmed or ["ok"]


async def inspect(runtime: BookuRuntime) -> dict[str, Any]:
    """One pass of every comparison; ``problems`` counts what differs (0: all agree)."""
    await runtime.settle_deferred_vectors()
    integrity = await _sqlite_integrity(runtime)
    report: dict[str, Any] = {
        "sqlite_integrity": "ok" if integrity == ["ok"] else integrity,
        "index": runtime.index_recovery.snapshot(),
        "vector_outbox_pending": await runtime.vector_sync.pending_count(),
        "evidence_outbox_pending": int(
            await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_evidence_vector_outbox", (), 0)
        ),
    }
    if runtime.index_recovery.healthy and runtime.embedder is not None:
        try:
            missing, stray = await _compare_vectors(runtime)
        except VectorIndexUnavailableError as exc:
            report["vectors_error"] = str(exc)
            missing, stray = {}, {}
    else:  # nothing to compare against while the index is rebuilt (or no model makes vectors)
        missing, stray = {}, {}
    report["missing_vectors"] = missing
    report["stray_vectors"] = stray
    report["keyword_rows_missing"], report["keyword_rows_stray"] = await _compare_keywords(runtime)
    report["duplicates"] = await _duplicates(runtime)
    report["problems"] = (
        (report["sqlite_integrity"] != "ok")
        + sum(map(len, missing.values()))
        + sum(map(len, stray.values()))
        + len(report["keyword_rows_missing"])
        + len(report["keyword_rows_stray"])
        + report["vector_outbox_pending"]
        + report["evidence_outbox_pending"]
        + len(report["duplicates"])
        + (runtime.index_recovery.state != "ok")
        + ("vectors_error" in report)
    )
    return report


async def _repair(runtime: BookuRuntime, found: dict[str, Any]) -> dict[str, int]:
    from .evidence.hub import evidence_hub

    done = {"vectors_requeued": 0, "stray_vectors_removed": 0, "keyword_rows_rebuilt": 0, "outbox_applied": 0}
    partitions = await runtime.vectors.partitions() if found["stray_vectors"] else {}
    for name, ids in found["stray_vectors"].items():
        if name in partitions:
            await runtime.vectors.delete_from(name, ids)
            done["stray_vectors_removed"] += len(ids)
    now = time.time()
    missing = [memory_id for ids in found["missing_vectors"].values() for memory_id in ids]
    if missing:
        async with runtime.db.transaction() as conn:
            for start in range(0, len(missing), 500):
                chunk = missing[start : start + 500]
                marks = ", ".join("?" * len(chunk))
                cur = await conn.execute(
                    "INSERT INTO booku_vector_outbox (memory_id, store_key, op, created_at) "
                    f"SELECT memory_id, store_key, 'upsert', ? FROM booku_memory_records WHERE memory_id IN ({marks})",
                    [now, *chunk],
                )
                done["vectors_requeued"] += cur.rowcount
                for tier, table, key in (
                    ("chat", "booku_chat_messages", "entry_id"),
                    ("episode", "booku_episodes", "episode_id"),
                ):
                    cur = await conn.execute(
                        "INSERT INTO booku_evidence_vector_outbox (tier, item_id, store_key, op, created_at) "
                        f"SELECT ?, {key}, store_key, 'upsert', ? FROM {table} WHERE {key} IN ({marks})",
                        [tier, now, *chunk],
                    )
                    done["vectors_requeued"] += cur.rowcount
    if found["keyword_rows_missing"] or found["keyword_rows_stray"]:
        async with runtime.db.transaction() as conn:
            done["keyword_rows_rebuilt"] = await runtime.records.rebuild_keyword_index(conn)
    if runtime.index_recovery.healthy:
        done["outbox_applied"] = (await runtime.sync_vectors()).applied
        done["outbox_applied"] += (await evidence_hub(runtime).vectors.drain()).applied
    return done


async def check_store(runtime: BookuRuntime, *, repair: bool = False) -> dict[str, Any]:
    """Compare and, with ``repair``, fix what is derived; returns ``{"found": report, "repaired": counts | None,
    "after": report | None, "ok": bool}``, ``ok`` when the last report found no difference at all."""
    found = await inspect(runtime)
    if not repair or not found["problems"]:
        return {"found": found, "repaired": None, "after": None, "ok": not found["problems"]}
    repaired = await _repair(runtime, found)
    after = await inspect(runtime)
    return {"found": found, "repaired": repaired, "after": after, "ok": not after["problems"]}

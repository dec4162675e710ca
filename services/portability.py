"""Export, import and reindex: moving memory between installs and rebuilding derived indexes.

Export writes JSON Lines with every field of every record (soft-deleted ones too) and its full history, the knowledge
documents with their revisions, and the live temporary memos. Import is idempotent: ids that already exist are
skipped, so running it twice changes nothing. Reindex rebuilds the keyword index and every vector from SQLite.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .storage.database import dump_table, insert_rows_ignoring_existing
from .storage.file_modes import open_private_for_writing

if TYPE_CHECKING:
    from .runtime import BookuRuntime

Progress = Callable[[int, int, str], None]
FORMAT = "booku-memory-export"
PLAIN_TABLES = {
    "document": ("booku_knowledge_documents", "created_at"),
    "document_revision": ("booku_knowledge_document_revisions", "revision_id"),
    "memo": ("booku_temporary_memos", "created_at"),
    "source": ("booku_memory_sources", "1"),
    "source_link": ("booku_memory_source_links", "1"),
    # Letters are exported like the database file holds them (bodies included, locks kept): an export is a backup.
    "letter": ("booku_companion_letters", "1"),
    "self_witness": ("booku_companion_self_witnesses", "1"),
    "chat_message": ("booku_chat_messages", "1"),
    "episode": ("booku_episodes", "1"),
    "episode_message": ("booku_episode_messages", "1"),
    "proposal": ("booku_dream_proposals", "1"),
    "proposal_evidence": ("booku_proposal_evidence", "1"),
    "dreaming_mark": ("booku_dreaming_marks", "1"),
    "provenance": ("booku_memory_provenance", "1"),
    "review_flag": ("booku_review_flags", "1"),
    # Pending pairs wait for a reviewer; decided ones must not be asked again. ``seq`` is local (see LOCAL_KEYS).
    "unsure_pair": ("booku_unsure_pairs", "seq"),
}
LOCAL_KEYS = {"document_revision": "revision_id", "unsure_pair": "seq"}
"""Row keys that number a table's rows in one database only: left out on import, so an imported row never takes
(or is ignored for) a number the target already gave one of its own rows; the row's own id keeps it unique."""


def _quiet(done: int, total: int, label: str) -> None:
    return None


async def export_jsonl(runtime: BookuRuntime, path: str | Path, *, progress: Progress = _quiet) -> dict[str, int]:
    path = Path(path)
    total = await runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records", (), 0)
    counts = {"record": 0}
    with open_private_for_writing(path) as out:
        out.write(
            json.dumps(
                {
                    "kind": "meta",
                    "format": FORMAT,
                    "version": 1,
                    "exported_at": time.time(),
                    "schema_version": await runtime.db.schema_version(),
                },
                ensure_ascii=False,
            )
            + "\n"
        )
        async for ids in runtime.records.iter_ids():
            records = await runtime.records.get_many(ids, include_deleted=True)
            history = await runtime.records.history_many(ids)
            for memory_id in ids:
                record = {k: v for k, v in records[memory_id].items() if k not in ("rid", "embedded_text_hash")}
                out.write(
                    json.dumps({"kind": "record", "record": record, "history": history[memory_id]}, ensure_ascii=False)
                    + "\n"
                )
                counts["record"] += 1
            progress(counts["record"], int(total), "导出记忆")
        for kind, (table, order) in PLAIN_TABLES.items():
            rows = await dump_table(runtime.db, table, order_by=order)
            for row in rows:
                out.write(json.dumps({"kind": kind, "row": row}, ensure_ascii=False) + "\n")
            counts[kind] = len(rows)
    return counts


async def import_jsonl(runtime: BookuRuntime, path: str | Path, *, progress: Progress = _quiet) -> dict[str, int]:
    path = Path(path)
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or json.loads(lines[0]).get("format") != FORMAT:
        from .errors import ValidationError

        raise ValidationError(f"{path} 不是 Booku 导出文件（第一行必须是 format={FORMAT} 的 meta 记录）")
    imported = {"record": 0, "skipped": 0, **{kind: 0 for kind in PLAIN_TABLES}}
    batch: list[dict[str, Any]] = []

    async def flush() -> None:
        async with runtime.db.transaction() as conn:
            for entry in batch:
                if entry["kind"] == "record":
                    if await runtime.records.import_record(conn, entry["record"], entry["history"]):
                        imported["record"] += 1
                    else:
                        imported["skipped"] += 1
                else:
                    table, _ = PLAIN_TABLES[entry["kind"]]
                    row = dict(entry["row"])
                    row.pop(LOCAL_KEYS.get(entry["kind"], ""), None)
                    if entry["kind"] == "document_revision":
                        exists = await runtime.db.fetch_value(
                            "SELECT COUNT(*) FROM booku_knowledge_document_revisions WHERE document_id = ? "
                            "AND version = ?",
                            [row["document_id"], row["version"]],
                            0,
                        )
                        if exists:
                            continue
                    imported[entry["kind"]] += await insert_rows_ignoring_existing(conn, table, [row])
        batch.clear()

    for number, line in enumerate(lines[1:], start=1):
        entry = json.loads(line)
        if entry.get("kind") in ("record", *PLAIN_TABLES):
            batch.append(entry)
        if len(batch) >= 200:
            await flush()
            progress(number, len(lines) - 1, "导入")
    if batch:
        await flush()
    progress(len(lines) - 1, len(lines) - 1, "导入")
    await runtime.sync_vectors()
    return imported


async def reindex(runtime: BookuRuntime, *, progress: Progress = _quiet, batch: int = 256) -> dict[str, Any]:
    """Rebuild the FTS index and every vector with the current embedding model, through the runtime's one rebuild
    job at a time (``services.index_recovery``): the keyword route serves meanwhile, never a half-built index."""
    return await runtime.index_recovery.reindex(progress=progress, batch=batch)

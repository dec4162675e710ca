"""A record row's columns, its conversion to and from the dict records travel as, and the plan steps that read rows
and tags by id (inside a transaction or on the reader).

Records travel as plain dicts (column name -> value, JSON lists decoded, plus the four tag lists).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import aiosqlite

from .database import placeholders
from .record_columns import TAG_GROUPS, decode_list, tags_sql
from .write_plans import PlanStatement, WritePlan

JSON_LIST_COLUMNS = ("relation_memory_ids", "relation_aliases", "related_people", "domains")
JSON_OBJECT_COLUMNS = ("extra",)
BOOL_COLUMNS = ("is_deleted", "pinned", "protected", "anchor", "digested", "resolved")

# Columns a caller may set; rid/version/timestamps/counters are managed here.
WRITABLE_COLUMNS = (
    "memory_id",
    "owner_uid",
    "store_key",
    "title",
    "name",
    "folder_id",
    "bucket",
    "content",
    "source",
    "memory_type",
    "status",
    "person_id",
    "relation_memory_ids",
    "relation_aliases",
    "event_start_at",
    "event_end_at",
    "related_people",
    "knowledge_type",
    "address_or_coord",
    "place_type",
    "asset_type",
    "disposition_status",
    "procedure_type",
    "novelty_energy",
    "importance",
    "valence",
    "arousal",
    "domains",
    "pinned",
    "protected",
    "anchor",
    "digested",
    "resolved",
    "why_remembered",
    "extra",
    "document_id",
    "chunk_index",
    "is_deleted",
    "deleted_at",
    "created_at",
    "updated_at",
    "last_activated_at",
    "activation_count",
    "authority",
    "author",
    "valid_from",
    "superseded_at",
    "superseded_by",
    "time_zone",
)
# Changing any of these changes the embedded text, so the vector must be recomputed.
EMBEDDED_COLUMNS = ("title", "content")
# Changing any of these moves the vector to another partition (tier) or drops it.
PARTITION_COLUMNS = ("status", "bucket", "is_deleted", "store_key")
# Changing any of these changes the record's keyword-index row (its text or its store token).
KEYWORD_INDEX_COLUMNS = (*EMBEDDED_COLUMNS, "store_key")


def row_to_record(row: aiosqlite.Row) -> dict[str, Any]:
    record = dict(row)
    # Most rows hold empty lists and objects: those skip the JSON parser (a third of this function's time).
    for column in JSON_LIST_COLUMNS:
        raw = record.get(column)
        record[column] = [] if not raw or raw == "[]" else decode_list(raw)
    for column in JSON_OBJECT_COLUMNS:
        raw = record.get(column)
        try:
            value = {} if not raw or raw == "{}" else json.loads(raw)
        except (TypeError, ValueError):
            value = {}
        record[column] = value if isinstance(value, dict) else {}
    for column in BOOL_COLUMNS:
        record[column] = bool(record.get(column))
    for group in TAG_GROUPS.values():
        record.setdefault(group, [])
    return record


def encode_column(column: str, value: Any) -> Any:
    if column in JSON_LIST_COLUMNS:
        return json.dumps([str(v).strip() for v in (value or []) if str(v).strip()], ensure_ascii=False)
    if column in JSON_OBJECT_COLUMNS:
        return json.dumps(value or {}, ensure_ascii=False, sort_keys=True)
    if column in BOOL_COLUMNS:
        return 1 if value else 0
    return value


def snapshot_of(record: dict[str, Any]) -> dict[str, Any]:
    """The part of a record that history keeps (everything a revert restores)."""
    skip = {"rid", "embedded_text_hash"}
    return {k: v for k, v in record.items() if k not in skip}


def read_record_plan(memory_id: str) -> WritePlan[dict[str, Any] | None]:
    """The record as ``RecordRepository.get(include_deleted=True)`` reads it, seen from inside the transaction."""
    rows = yield PlanStatement("SELECT * FROM booku_memory_records WHERE memory_id = ?", [memory_id], fetch=True)
    if not rows:
        return None
    record = row_to_record(rows[0])
    tag_rows = yield PlanStatement(
        "SELECT tag_type, tag_value FROM booku_memory_tags WHERE memory_id = ? ORDER BY tag_type, position",
        [memory_id],
        fetch=True,
    )
    for group in TAG_GROUPS.values():
        record[group] = []
    for row in tag_rows:
        record[TAG_GROUPS[row["tag_type"]]].append(row["tag_value"])
    return record


def replace_tags_plan(memory_id: str, source: dict[str, Any]) -> WritePlan[dict[str, list[str]]]:
    """Replace the record's tags with ``source``'s four groups (values stripped, duplicates dropped).

    Returns the groups as written, i.e. what reading the tags back would give.
    """
    yield PlanStatement("DELETE FROM booku_memory_tags WHERE memory_id = ?", [memory_id])
    written: dict[str, list[str]] = {}
    rows = []
    for tag_type, group in TAG_GROUPS.items():
        values: list[str] = []
        for value in source.get(group) or []:
            value = str(value).strip()
            if value and value not in values:
                values.append(value)
                rows.append((memory_id, tag_type, value, len(values)))
        written[group] = values
    if rows:
        yield PlanStatement(
            "INSERT INTO booku_memory_tags (memory_id, tag_type, tag_value, position) VALUES (?, ?, ?, ?)",
            rows,
            many=True,
        )
    return written


def _columns_query(
    columns: Sequence[str], memory_ids: Sequence[str], *, include_deleted: bool = False
) -> tuple[str, list[str]]:
    """``columns`` of the records among ``memory_ids`` (at most 500 ids), live ones only unless ``include_deleted``."""
    live = "" if include_deleted else " AND is_deleted = 0"
    return (
        f"SELECT {', '.join(columns)} FROM booku_memory_records "
        f"WHERE memory_id IN ({placeholders(len(memory_ids))}){live}",
        list(memory_ids),
    )


def columns_plan(
    memory_ids: Iterable[str],
    columns: Sequence[str],
    *,
    include_deleted: bool = False,
    decode: Callable[[sqlite3.Row], dict[str, Any]] = dict,
) -> WritePlan[dict[str, dict[str, Any]]]:
    """``columns`` of each record among ``memory_ids`` by id (each row through ``decode``: undecoded by default),
    live ones only unless ``include_deleted``; one statement per 500 ids."""
    ids = list(dict.fromkeys(i for i in memory_ids if i))
    found: dict[str, dict[str, Any]] = {}
    for start in range(0, len(ids), 500):
        rows = yield PlanStatement(
            *_columns_query(columns, ids[start : start + 500], include_deleted=include_deleted), fetch=True
        )
        found.update((row["memory_id"], decode(row)) for row in rows)
    return found


def tags_plan(records: dict[str, dict[str, Any]]) -> WritePlan[None]:
    """Set the four tag lists (``TAG_GROUPS``) of each of ``records`` (by id) from ``booku_memory_tags``, in stored
    order; one statement per 500 records."""
    ids = list(records)
    for record in records.values():
        for group in TAG_GROUPS.values():
            record[group] = []
    for start in range(0, len(ids), 500):
        chunk = ids[start : start + 500]
        rows = yield PlanStatement(tags_sql(len(chunk)), chunk, fetch=True)
        for row in rows:
            records[row["memory_id"]][TAG_GROUPS[row["tag_type"]]].append(row["tag_value"])

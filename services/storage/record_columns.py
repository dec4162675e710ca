"""Facts about the record table's columns that the SQL repository (``storage.records``) and the in-memory copy of
the ranking columns (``storage.mirrors.candidate_rows``) share, kept here so that neither has to import the other (the
repository imports the keyword index, which holds the copy).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..logic.shape import QUESTION_MARKS, TRAILING_CLOSERS, question_share
from ..logic.speaker import HEAD_CHARS as SPEAKER_HEAD_CHARS
from .database import placeholders

# tag_type in booku_memory_tags → the record's list of that group.
TAG_GROUPS = {"tag": "tags", "core": "core_tags", "diffusion": "diffusion_tags", "opposing": "opposing_tags"}
_TAGS_SELECT = "SELECT memory_id, tag_type, tag_value FROM booku_memory_tags"
_TAGS_ORDER = "ORDER BY memory_id, tag_type, position"
# Every tag row, grouped by record and in stored order (each group's values by position).
ALL_TAGS_SQL = f"{_TAGS_SELECT} {_TAGS_ORDER}"


def tags_sql(count: int) -> str:
    """``ALL_TAGS_SQL`` for ``count`` memory ids, given as parameters."""
    return f"{_TAGS_SELECT} WHERE memory_id IN ({placeholders(count)}) {_TAGS_ORDER}"


def decode_list(raw: Any) -> list[str]:
    """A JSON list column as a list of strings; ``[]`` for NULL, bad JSON or anything that is not a list."""
    try:
        value = json.loads(raw or "[]")
    except (TypeError, ValueError):
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def ends_with_question_sql(column: str = "content") -> str:
    """``logic.shape.ends_with_question`` of ``column`` in SQL."""
    return (
        f"substr(rtrim({column}, '"
        + TRAILING_CLOSERS.replace("'", "''")
        + "'), -1) IN ("
        + ", ".join(f"'{mark}'" for mark in QUESTION_MARKS)
        + ")"
    )


def candidate_columns(table: str = "") -> tuple[str, ...]:
    """What ranking reads of a candidate (``RecordRepository.candidates``), as select expressions on the record
    table (``table``: its alias with the dot, for a query that joins another table with a ``content`` column).

    Filters, partition, person, write order, time and the text shape (``logic.shape``): the text only of the
    candidates that end with a question, the length of all; and the start of every text, where a speaker label
    stands (``logic.speaker``)."""
    content = f"{table}content"
    plain = (
        "memory_id",
        "rid",
        "store_key",
        "bucket",
        "status",
        "memory_type",
        "folder_id",
        "person_id",
        "relation_memory_ids",
        "created_at",
        "event_start_at",
        "event_end_at",
        "superseded_by",
    )
    return (
        *(f"{table}{column}" for column in plain),
        f"CASE WHEN {ends_with_question_sql(content)} THEN {content} END AS question_text",
        f"length({content}) AS content_chars",
        f"substr({content}, 1, {SPEAKER_HEAD_CHARS}) AS content_head",
    )


CANDIDATE_COLUMNS = candidate_columns()
# The keys of a candidate row (``decode_candidate``), in CANDIDATE_COLUMNS order: the question's text is read to
# give its share (``logic.shape.question_share``; None when the text does not end with a question).
CANDIDATE_KEYS = tuple(
    "question_share" if key == "question_text" else key
    for key in (expression.rsplit(" AS ", 1)[-1] for expression in CANDIDATE_COLUMNS)
)
_QUESTION = CANDIDATE_KEYS.index("question_share")
_RELATIONS = CANDIDATE_KEYS.index("relation_memory_ids")


def decode_candidate(values: Sequence[Any]) -> list[Any]:
    """A candidate row as read with ``CANDIDATE_COLUMNS``, decoded (``CANDIDATE_KEYS`` order): the relation ids as
    a list, the question's text as its share. Why here: computing the share in every call cost the event loop
    time per retrieval; the in-memory copy computes it once per record, the SQL read in the
    reader's thread."""
    row = list(values)
    row[_RELATIONS] = decode_list(row[_RELATIONS])
    text = row[_QUESTION]
    row[_QUESTION] = None if text is None else question_share(text)
    return row

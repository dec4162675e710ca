"""Each memory's fact cues kept in SQLite (``booku_fact_cues``), so a write reads its neighbours' cues, not their text.

A write that lands near others compares its text with every neighbour in the update band
(``write_decision.judge_write``), and reading a text for its cues (``logic.supersession.fact_cues``: segmentation,
part-of-speech tags, every cue list) costs far more than the rest of the write. The cues of a memory depend only on
its content and on the reading code, so a write stores the cues it had to compute and later writes read them back.

A stored row counts only while it was read from the memory's current content (``content_hash``) by the current
reading code (``reader_version``); anything else is read again and replaced. The rows are derived: dropping the table
loses only time, and a row goes with its memory (``ON DELETE CASCADE``) and when its content changes (a trigger,
migration 0020), so no reading of a text the memory no longer holds stays behind.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import inspect
import json
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from types import ModuleType
from typing import Any

import jieba

from ..embedding.cached import text_hash
from ..logic import segmentation, supersession
from ..logic.supersession import FactCues, fact_cues
from .database import placeholders
from .write_plans import PlanStatement, WritePlan

# Ids per lookup: far below SQLite's bound-parameter limit.
_LOOKUP_CHUNK = 500

_STORE = (
    "INSERT INTO booku_fact_cues (memory_id, content_hash, reader, cues) VALUES (?, ?, ?, ?) "
    "ON CONFLICT (memory_id) DO UPDATE SET "
    "content_hash = excluded.content_hash, reader = excluded.reader, cues = excluded.cues"
)


@functools.cache
def reader_version() -> str:
    """What reads the cues: the code of the reading and of the segmentation it uses, and jieba's dictionary.

    Any change to them gives another version, so cues read by older code are never taken for current ones. A build
    without the modules' source (frozen, bytecode only) falls back to the plugin's version."""
    digest = hashlib.sha256(jieba.__version__.encode())
    for module in (supersession, segmentation):
        digest.update(_source_of(module))
    return digest.hexdigest()[:16]


def _source_of(module: ModuleType) -> bytes:
    try:
        return inspect.getsource(module).encode()
    except (OSError, TypeError):
        plugin = importlib.import_module(module.__name__.split(".")[0])
        return f"{module.__name__} {getattr(plugin, '__version__', '')}".encode()


def cues_to_json(cues: FactCues) -> str:
    """``cues`` as JSON: sets as sorted lists, the rest as is."""
    return json.dumps(
        {f.name: sorted(v) if isinstance(v := getattr(cues, f.name), frozenset) else v for f in fields(cues)},
        ensure_ascii=False,
        separators=(",", ":"),
    )


def cues_from_json(text: str) -> FactCues | None:
    """The cues ``cues_to_json`` wrote, or None when ``text`` is not such a record (then the text is read again)."""
    try:
        raw = json.loads(text)
        if isinstance(raw, dict):
            values: dict[str, Any] = {name: frozenset(v) if isinstance(v, list) else v for name, v in raw.items()}
            return FactCues(**values)
    except (ValueError, TypeError):
        pass
    return None


@dataclass
class CueBook:
    """The cues of one group commit's texts: stored ones read back, the others read once and remembered for storing.

    ``of`` is what ``judge_write`` reads cues with. Keyed by the text itself, so a text read for one write is not
    read again for the next write of the batch that meets it. A stored row is checked and decoded only when its text
    is asked for: the batch reads the rows of every neighbour, and the decision asks for the cues of the eligible
    ones in its bands only."""

    # text -> cues, stored or read during the batch
    known: dict[str, FactCues] = field(default_factory=dict)
    # text -> its stored rows not looked at yet: (memory id, content hash, cues JSON)
    unopened: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)
    # memory id -> the content its valid stored row was read from
    stored: dict[str, str] = field(default_factory=dict)

    def of(self, text: str) -> FactCues:
        """The cues of ``text``, read only when no stored or earlier reading has them."""
        cues = self.known.get(text)
        if cues is None:
            cues = self._open(text)
            if cues is None:
                cues = fact_cues(text)
            self.known[text] = cues
        return cues

    def _open(self, text: str) -> FactCues | None:
        """The cues of ``text``'s valid stored rows (read from this very content by the current reading code), if
        any; each such row's memory counts as stored."""
        found: FactCues | None = None
        rows = self.unopened.pop(text, [])
        digest = text_hash(text) if rows else ""
        for memory_id, row_digest, stored in rows:
            cues = cues_from_json(stored) if row_digest == digest else None
            if cues is not None:
                self.stored[memory_id] = text
                if found is None:
                    found = cues
        return found

    def rows_to_store(self, records: dict[str, dict[str, Any]]) -> list[tuple[str, str, str, str]]:
        """(memory id, content hash, reader, cues JSON) of each of ``records`` whose current content was read in
        this batch and has no valid stored row yet."""
        reader = reader_version()
        rows = []
        for memory_id, record in records.items():
            content = record["content"]
            cues = self.known.get(content)
            if cues is not None and self.stored.get(memory_id) != content:
                rows.append((memory_id, text_hash(content), reader, cues_to_json(cues)))
        return rows


def cue_book_plan(records: dict[str, dict[str, Any]]) -> WritePlan[CueBook]:
    """A ``CueBook`` holding the stored cues of ``records`` (by id, with their ``content``), to be opened as asked."""
    book = CueBook()
    ids = list(records)
    reader = reader_version()
    for start in range(0, len(ids), _LOOKUP_CHUNK):
        chunk = ids[start : start + _LOOKUP_CHUNK]
        rows: list[sqlite3.Row] = yield PlanStatement(
            f"SELECT memory_id, content_hash, cues FROM booku_fact_cues "
            f"WHERE reader = ? AND memory_id IN ({placeholders(len(chunk))})",
            [reader, *chunk],
            fetch=True,
        )
        for memory_id, digest, stored in rows:
            book.unopened.setdefault(records[memory_id]["content"], []).append((memory_id, digest, stored))
    return book


def store_cues_plan(rows: Iterable[tuple[str, str, str, str]]) -> WritePlan[None]:
    """Store ``CueBook.rows_to_store`` rows, replacing each memory's previous row."""
    rows = list(rows)
    if rows:
        yield PlanStatement(_STORE, rows, many=True)

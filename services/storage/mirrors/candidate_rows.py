"""The columns ranking reads of every live record (``record_columns.CANDIDATE_COLUMNS``) and its tags, in memory.

Why: a retrieval weighs the hundred or more candidates its routes found before it reads the full rows of the ten it
keeps. Reading their ranking columns in SQL is an index lookup by memory id per candidate into rows scattered over
a large file (and the question test and the head are computed from the whole text), the tags of the vector hits
another read, and an EPA retrieval reads both twice. Held here, a read is a dictionary lookup per id.

Kept by ``storage.mirrors.keyword_mirror`` with the keyword index it rides on: loaded from the same snapshot, and
brought up to the committed table by the same journal before every read. Every write of a record's text, tags or store
rewrites its keyword row, which journals it; triggers (migrations 0012 and 0013) journal every other change of a column
held here, by whichever code, connection or process makes it. A record this copy does not hold (written since the last
journal read, deleted, or without a keyword row) is read in SQL by the caller, so a miss costs time, never a wrong
answer.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, cast

from ..record_columns import CANDIDATE_KEYS, TAG_GROUPS, decode_candidate
from ..rows import CandidateRow

_RELATIONS = CANDIDATE_KEYS.index("relation_memory_ids")
# Short strings many records share: interned, so 100k rows hold one copy of each.
_SHARED = tuple(CANDIDATE_KEYS.index(key) for key in ("store_key", "bucket", "status", "memory_type", "folder_id"))
_GROUPS = tuple(TAG_GROUPS.values())
_GROUP_OF_TYPE = {tag_type: index for index, tag_type in enumerate(TAG_GROUPS)}
_NO_TAGS: tuple[tuple[str, ...], ...] = tuple(() for _ in _GROUPS)


class CandidateRows:
    """memory id → the candidate row of each live record held, and its tags."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[Any, ...]] = {}
        self._tags: dict[str, tuple[tuple[str, ...], ...]] = {}

    def __len__(self) -> int:
        return len(self._rows)

    def memory_ids(self) -> list[str]:
        """The ids of the records held."""
        return list(self._rows)

    def set(self, previous_id: str | None, values: Sequence[Any] | None) -> str | None:
        """A record now reads ``values`` (``CANDIDATE_KEYS`` order, as SQL returns them), or is deleted, gone or
        unknown (None); ``previous_id``: the memory id its keyword row had (``RecordStates.memory_ids``, which keeps
        rid → id for both), whose row is dropped. Its tags are dropped until ``set_tags`` gives them. Returns the
        memory id held."""
        if previous_id is not None:
            self._rows.pop(previous_id, None)
            self._tags.pop(previous_id, None)
        if values is None:
            return None
        row = decode_candidate(values)
        row[_RELATIONS] = tuple(row[_RELATIONS])
        for index in _SHARED:
            if isinstance(row[index], str):
                row[index] = sys.intern(row[index])
        memory_id = row[0]
        self._rows[memory_id] = tuple(row)
        return memory_id

    def set_tags(self, memory_ids: Iterable[str], tag_rows: Iterable[Sequence[Any]]) -> None:
        """The tags of ``memory_ids`` are now ``tag_rows``: (memory_id, tag_type, tag_value), in stored order (a
        record of ``memory_ids`` without rows has none). Rows of records not held are ignored."""
        grouped: dict[str, tuple[list[str], ...]] = {
            memory_id: tuple([] for _ in _GROUPS) for memory_id in memory_ids if memory_id in self._rows
        }
        for memory_id, tag_type, value in tag_rows:
            lists = grouped.get(memory_id)
            if lists is not None and tag_type in _GROUP_OF_TYPE:
                lists[_GROUP_OF_TYPE[tag_type]].append(sys.intern(value))
        for memory_id, lists in grouped.items():
            if any(lists):
                self._tags[memory_id] = tuple(tuple(values) for values in lists)
            else:
                self._tags.pop(memory_id, None)

    def lookup(
        self, memory_ids: Iterable[str], tags_for: AbstractSet[str] | None
    ) -> tuple[dict[str, CandidateRow], list[str]]:
        """The rows held of ``memory_ids`` as ``RecordRepository.candidates`` returns them (fresh dicts, the
        relation ids as a list; the four tag lists for the ids in ``tags_for``), and the ids not held, in order."""
        found: dict[str, CandidateRow] = {}
        missing: list[str] = []
        for memory_id in dict.fromkeys(memory_ids):
            if not memory_id:
                continue
            row = self._rows.get(memory_id)
            if row is None:
                missing.append(memory_id)
                continue
            record = cast(CandidateRow, dict(zip(CANDIDATE_KEYS, row)))
            record["relation_memory_ids"] = list(row[_RELATIONS])
            if tags_for is not None and memory_id in tags_for:
                for group, values in zip(_GROUPS, self._tags.get(memory_id, _NO_TAGS)):
                    record[group] = list(values)  # type: ignore[literal-required]
            found[memory_id] = record
        return found, missing

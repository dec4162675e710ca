"""What the in-memory keyword search needs to know of each row's record besides its text: its memory id, bucket,
status and deletion flag.

Why: a retrieval's keyword route keeps the best rows that its filter admits (readable stores, the buckets and
statuses its tiers allow, not deleted). Checking that in SQL means looking up a hundred or more rows scattered over
the store's file by rid, on the reader thread. Held here, the check is one numpy gather over
the scored rows, done before the best rows are taken (so no deeper retry when the filter drops many of them).

Kept in step with ``booku_memory_records`` by ``storage.mirrors.keyword_mirror``: it is loaded with the keyword rows,
and a trigger (migration 0012) journals every change of bucket, status or deletion flag, so a row is re-read whenever
its text or its state changes, whichever connection or process changed it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

RowStateTest = Callable[[str, str, bool], bool]
"""Whether a record passes a filter, from its (bucket, status, is_deleted) alone (``RecordFilter.state_test``)."""

RecordState = tuple[str | None, str | None, str | None, int | None]
"""(memory_id, bucket, status, is_deleted) of a keyword row's record; all None when the row has no record."""

_NONE = -1  # a rid without a record: indexes the always-False sentinel at the end of a search's lookup table


class RecordStates:
    """rid → memory id and a small code for its (bucket, status, is_deleted)."""

    def __init__(self) -> None:
        self._codes: dict[tuple[str, str, bool], int] = {}
        self._state = np.full(0, _NONE, np.int16)
        self.memory_ids: dict[int, str] = {}

    def set(self, rid: int, state: RecordState | None) -> None:
        """Row ``rid``'s record is now ``state`` (None or all-None: no record, or no row). Every rid the keyword
        index holds passes through here, so the state array covers them all."""
        if rid >= len(self._state):
            grown = np.full(max(rid + 1, 2 * len(self._state), 1024), _NONE, np.int16)
            grown[: len(self._state)] = self._state
            self._state = grown
        memory_id = None if state is None else state[0]
        if state is None or memory_id is None:
            self.memory_ids.pop(rid, None)
            self._state[rid] = _NONE
            return
        _, bucket, status, is_deleted = state
        key = (str(bucket), str(status), bool(is_deleted))
        self._state[rid] = self._codes.setdefault(key, len(self._codes))
        self.memory_ids[rid] = memory_id

    def admitted(self, test: RowStateTest) -> Callable[[np.ndarray], np.ndarray]:
        """A mask function over rids: True where the row's record passes ``test`` (evaluated once per distinct
        state, not per row)."""
        lookup = np.zeros(len(self._codes) + 1, bool)  # the last entry answers for _NONE
        for key, code in self._codes.items():
            lookup[code] = test(*key)
        states = self._state
        return lambda rids: lookup[states[rids]]

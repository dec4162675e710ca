"""The vector the vector index holds for each record, in memory: the unit passage vector of the text its
``embedded_text_hash`` names (``booku_embedding_cache``), for one model.

Why: ranking reads the stored vectors of the memories its keyword, time and context steps found (to score them by
meaning and to judge their relevance), and of every vector hit (the vector index would otherwise hand them over as
one Python float per dimension). In SQL each is an index lookup into rows scattered over a large file; held here, a
read is a dictionary lookup per id.

Kept by ``storage.mirrors.keyword_mirror`` with the keyword index it rides on: loaded from the same snapshot and
brought up to the committed tables by the same journal, which a trigger (migration 0018) appends to whenever a
record's indexed text changes. Each vector is replaced whole, never written in place, so a lookup from another
thread sees a record's old or new vector. A record not held (not indexed yet, or its cached vector gone) is read by
the caller from SQLite or the vector index, so a miss costs time, never a wrong answer.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ...embedding.base import l2_normalise


class StoredVectors:
    """memory id → unit vector (float32) of each record whose indexed text has a ``model`` passage vector of
    ``dimension`` in the embedding cache."""

    def __init__(self, model: str, dimension: int) -> None:
        self.model = model
        self.dimension = dimension
        self._vectors: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self._vectors)

    def holds(self, model: str | None, dimension: int | None) -> bool:
        """Whether these are the vectors of ``model`` at ``dimension``."""
        return model == self.model and dimension == self.dimension

    def set(self, previous_id: str | None, memory_id: str | None, blob: bytes | None) -> None:
        """A record now has the stored vector ``blob`` (float32 bytes, None = none); ``previous_id``: the memory
        id its row had before (``RecordStates.memory_ids``), whose vector is dropped."""
        if previous_id is not None:
            self._vectors.pop(previous_id, None)
        if memory_id is None:
            return
        if blob is None or len(blob) != self.dimension * 4:
            self._vectors.pop(memory_id, None)
            return
        # Normalised once here, as ``SqliteEmbeddingCache.indexed_vectors`` normalises them, so a lookup is only
        # dictionary reads; read-only, since every retrieval that reads it shares it.
        vector = l2_normalise(np.frombuffer(blob, dtype=np.float32))[0]
        vector.flags.writeable = False
        self._vectors[memory_id] = vector

    def lookup(self, memory_ids: Iterable[str]) -> tuple[dict[str, np.ndarray], list[str]]:
        """The unit vectors held of ``memory_ids`` (read-only, shared), and the ids not held, in order."""
        found: dict[str, np.ndarray] = {}
        missing: list[str] = []
        for memory_id in dict.fromkeys(memory_ids):
            vector = self._vectors.get(memory_id)  # one read: the reader's thread may replace it meanwhile
            if vector is None:
                missing.append(memory_id)
            else:
                found[memory_id] = vector
        return found, missing

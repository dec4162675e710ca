"""An in-memory copy of the stored vectors, so that a query asks Chroma for distances only.

Why: EPA needs the vectors of the hits (the logic depth, the reshaped query, de-duplication), and asking Chroma to
return them cost its query thread ~2 ms of CPU per pass at 100k memories, most of it Chroma's Rust binding building
a Python float for each of the 50 × 384 numbers while it holds the GIL, which every other thread of the process
waits for. Measured at 100k memories (``bench/service_latency.py --vector-copy memory|chroma``, four pairs
alternated on a busy machine): with ``core_tags`` (two passes) p50 29.1–35.3 against 34.5–38.5 ms and Chroma's thread
6.5–7.4 against 9.8–10.8 ms of CPU per call; plain calls within the noise, Chroma's thread 3.2–3.6 against 4.3–4.9.
The same ids for 589 of 589 calls with and without the copy.

The copy is never trusted blindly. A copied vector is used for a hit only when its cosine with the query equals
the similarity Chroma returned for that hit, to ``MATCH_TOLERANCE``; otherwise (not copied yet, or rewritten since
by another runtime or process, or by a write racing the query) the hit's vector is read from Chroma and the copy
refreshed. A stale vector would have to have the same cosine with the query to four decimals to pass, and then it
is one whose direction agrees with the stored one as far as this query can tell.

It is filled in the background after start-up from the embedding cache, where every embedded text's vector is
kept by its hash (``read_cached_vectors``: one SQLite scan, 3.5–4.5 s for 100k vectors; reading them from Chroma
instead took 10–15 s and left Chroma's own caches ~250 MB bigger), and by this runtime's own vector writes. A
collection counts as loaded once the cache gave vectors of it; until then, and for the others, its queries ask
Chroma for the vectors as before and copy them. Cost: 1.5 KB per vector of 384 dimensions, plus an eighth of room
for later writes (173 MB reserved, ~185 MB of RSS, for 100k memories).
"""

from __future__ import annotations

import sqlite3
import threading
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

MATCH_TOLERANCE = 1e-4
"""How far a copied vector's cosine with the query may be from Chroma's similarity for the same hit (Chroma
computes in float32: its error is ~1e-6)."""
CACHED_VECTORS_SQL = (
    "SELECT r.memory_id, r.store_key, r.bucket, r.status, e.vector FROM booku_memory_records r "
    "JOIN booku_embedding_cache e ON e.text_hash = r.embedded_text_hash AND e.mode = 'passage' AND e.model = ? "
    "WHERE r.is_deleted = 0 AND e.dimension = ?")


class VectorCopy:
    """memory id → its stored vector, rows of one float32 matrix (a dict of small arrays cost ~2.5× the numbers in
    RSS); and the collections whose vectors it was loaded with. Chroma's query thread and its write thread both use
    it: a lock keeps each row to one id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._row_of: dict[str, int] = {}
        self._matrix = np.zeros((0, 0), np.float32)
        self._free: list[int] = []
        self.loaded: set[str] = set()
        """Collections the load copied vectors of (or created empty after ``listed``): their queries ask Chroma
        for distances only."""
        self.listed: set[str] | None = None
        """The collections the load found (None until it lists them)."""

    def __len__(self) -> int:
        return len(self._row_of)

    def clear(self) -> None:
        """Forget everything (every collection is being dropped)."""
        with self._lock:
            self._use_dimension(0)
        self.loaded.clear()
        self.listed = set()

    def _use_dimension(self, dimension: int) -> None:
        """Start over unless the rows hold ``dimension`` numbers (another model's vectors are never mixed in)."""
        if self._matrix.shape[1] != dimension:
            self._row_of.clear()
            self._free.clear()
            self._matrix = np.zeros((0, dimension), np.float32)

    def _resize(self, capacity: int) -> None:
        used = len(self._row_of) + len(self._free)
        grown = np.zeros((capacity, self._matrix.shape[1]), np.float32)
        grown[:used] = self._matrix[:used]
        self._matrix = grown

    def reserve(self, rows: int, dimension: int) -> None:
        """Room for ``rows`` vectors in all, allocated once (growing while loading 100k vectors held the old and the
        new matrix at once: ~300 MB at the peak)."""
        with self._lock:
            self._use_dimension(dimension)
            if rows > len(self._matrix):
                self._resize(rows)

    def put(self, ids: Sequence[str], vectors: Sequence[Sequence[float]] | np.ndarray) -> None:
        if not len(ids):
            return
        rows = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1)
        with self._lock:
            self._use_dimension(rows.shape[1])
            for memory_id, vector in zip(ids, rows):
                row = self._row_of.get(memory_id)
                if row is None:
                    row = self._free.pop() if self._free else self._next_row()
                    self._row_of[memory_id] = row
                self._matrix[row] = vector

    def _next_row(self) -> int:
        used = len(self._row_of) + len(self._free)
        if used >= len(self._matrix):
            self._resize(max(1024, used + used // 4))
        return used

    def drop(self, ids: Sequence[str]) -> None:
        with self._lock:
            for memory_id in ids:
                row = self._row_of.pop(memory_id, None)
                if row is not None:
                    self._free.append(row)

    def vector(self, memory_id: str) -> np.ndarray | None:
        """A copy of ``memory_id``'s copied vector (a write may reuse its row meanwhile), or None."""
        with self._lock:
            row = self._row_of.get(memory_id)
            return None if row is None else self._matrix[row].copy()

    def verified(self, query: np.ndarray, ids: Sequence[str], similarities: Sequence[float]) -> list[np.ndarray | None]:
        """The copied vector of each hit whose cosine with ``query`` matches Chroma's ``similarities``; None where
        there is no copy or it does not match (see the module docstring). One gather and one product for all."""
        with self._lock:
            rows = [self._row_of.get(memory_id) for memory_id in ids]
            present = [index for index, row in enumerate(rows) if row is not None]
            vectors = self._matrix[[rows[index] for index in present]] if present else None
        found: list[np.ndarray | None] = [None] * len(ids)
        if vectors is None:
            return found
        norm = float(np.linalg.norm(query))
        direction = np.asarray(query, dtype=np.float32).reshape(-1) / (norm if norm > 0 else 1.0)
        lengths = np.linalg.norm(vectors, axis=1)
        cosines = (vectors @ direction) / np.where(lengths > 0, lengths, 1.0)
        expected = np.asarray(similarities, dtype=np.float64)[present]
        for position, index in enumerate(present):
            if abs(float(cosines[position]) - float(expected[position])) <= MATCH_TOLERANCE:
                found[index] = vectors[position]
        return found


def read_cached_vectors(path: Path, model_id: str, dimension: int, copy: VectorCopy,
                        collection_of: Callable[[str, str, str], str]) -> Counter[str]:
    """Copy every live record's vector that the embedding cache holds (run in a worker thread, on a connection
    of its own); returns how many were copied per collection (``collection_of(store_key, bucket, status)``)."""
    copied: Counter[str] = Counter()
    conn = sqlite3.connect(str(path), check_same_thread=False)
    try:
        conn.execute("PRAGMA query_only = 1")
        conn.execute("BEGIN")  # the count and the rows from one snapshot
        (rows,) = conn.execute(f"SELECT COUNT(*) FROM ({CACHED_VECTORS_SQL})", (model_id, dimension)).fetchone()
        copy.reserve(len(copy) + rows + rows // 8, dimension)  # an eighth more for the memories written later
        cursor = conn.execute(CACHED_VECTORS_SQL, (model_id, dimension))
        while batch := cursor.fetchmany(2000):
            copy.put([row[0] for row in batch],
                     np.frombuffer(b"".join(row[4] for row in batch), dtype=np.float32).reshape(len(batch), -1))
            copied.update(collection_of(row[1], row[2], row[3]) for row in batch)
    finally:
        conn.close()
    return copied

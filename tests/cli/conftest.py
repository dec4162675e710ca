"""Runs the real command line (``python -m booku_memory``) in a subprocess, in a temp working directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

# The CLI under test runs as a user would: with the bundled local model.
CLI_ENV = {**os.environ, "PYTHONUNBUFFERED": "1"}
QUIET_TOML = "[maintenance]\nenabled = false\n\n[startup_ingest]\nenabled = false\n"


def run_cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One CLI call with captured text output."""
    return subprocess.run(
        [sys.executable, "-m", "booku_memory", *args],
        cwd=cwd,
        env=CLI_ENV,
        text=True,
        capture_output=True,
        timeout=timeout,
    )


@pytest.fixture
def workdir(tmp_path) -> Path:
    """A working directory with a quiet config file (``booku.toml``) and no data yet."""
    (tmp_path / "booku.toml").write_text(QUIET_TOML, encoding="utf-8")
    return tmp_path

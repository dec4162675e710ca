"""Fixtures for the companion-memory tests: a real standalone store per test and a companion service on it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Any]:
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as handle:
        yield handle


@pytest.fixture
def companion(memory: Any) -> Any:
    from booku_memory.services.companion.service import BookuCompanionService

    return BookuCompanionService(memory.runtime)

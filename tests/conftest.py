"""Shared fixtures: a real standalone store (SQLite file + embedded Chroma) per test in a temp dir."""

from __future__ import annotations

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


@pytest.fixture
async def memory(tmp_path):
    """An open standalone memory with the fast deterministic test embedder."""
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as handle:
        yield handle


@pytest.fixture
async def service(memory):
    return memory.get_service(booku_memory.MEMORY_SERVICE)

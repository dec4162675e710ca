"""Fixtures for the memory-service tests.

Every test gets its own data directory: a real SQLite file and a real embedded Chroma index, opened through the
public ``booku_memory.open`` entry point exactly as a standalone user would.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from booku_memory.services.embedding.local import LocalE5Embedder

from .memory_support import MEMORY_SERVICE, Probe, open_store


@pytest.fixture
async def memory(tmp_path: Path) -> AsyncIterator[Any]:
    async with open_store(tmp_path / "data") as handle:
        yield handle


@pytest.fixture
def svc(memory: Any) -> Any:
    return memory.get_service(MEMORY_SERVICE)


@pytest.fixture
def rt(memory: Any) -> Any:
    return memory.runtime


@pytest.fixture
def probe(rt: Any) -> Probe:
    return Probe(rt)


@pytest.fixture(scope="session")
def e5() -> LocalE5Embedder:
    """The real local model, shared by the few tests where meaning (not word overlap) decides the outcome."""
    return LocalE5Embedder()

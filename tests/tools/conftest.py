"""Fixtures for the LLM-tool tests: a real standalone store per test (SQLite file + embedded Chroma).

``svc`` is the memory service exactly as the host adapter and the CLI get it; ``write_counter`` reads how many
revisions and memos exist, which changes on every write of any kind (create, merge, update, delete, restore,
revert, memo), so "nothing was written" can be checked precisely.
"""

from __future__ import annotations

from typing import Any

import pytest

import booku_memory

from .tool_support import WriteCounter


@pytest.fixture
def svc(memory: Any) -> Any:
    return memory.get_service(booku_memory.MEMORY_SERVICE)


@pytest.fixture
def write_counter(memory: Any) -> WriteCounter:
    return WriteCounter(memory.runtime)

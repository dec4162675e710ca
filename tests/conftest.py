"""Shared fixtures: a real standalone store (SQLite file + embedded Chroma) per test in a temp dir."""

from __future__ import annotations

import contextlib

import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
# The dashboard report of issue 30: a search for "大学同学" over these seven memories listed all seven.
ISSUE_30_MEMORIES = (
    "用户的大学同学李四在上海做程序员，每年春节会一起吃饭",
    "用户偏好：简洁回答",
    "李四 高中同桌",
    "用户养了一只橘猫，名字叫团子",
    "用户每周三晚上去游泳馆游泳",
    "用户喜欢喝不加糖的美式咖啡",
    "用户计划明年五月去日本京都旅游",
)


@pytest.fixture
async def memory(tmp_path):
    """An open standalone memory with the fast deterministic test embedder."""
    async with booku_memory.open(tmp_path / "data", QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as handle:
        yield handle


@pytest.fixture
async def service(memory):
    return memory.get_service(booku_memory.MEMORY_SERVICE)


class _NoLock:
    """Stands in for ``services.ownership.Ownership`` in a runtime that ignores the data dir's owner."""

    def publish(self, address: str, token: str) -> None:
        pass

    def release(self) -> None:
        pass


@pytest.fixture
def lock_ignored(monkeypatch):
    """``with lock_ignored(): async with booku_memory.open(...)`` opens a second runtime beside the data dir's owner,
    as a process that ignores the owner lock would (an older version, a tool writing SQLite directly). For the
    tests of how the in-memory copies follow writes their own runtime did not make; the product never does this."""
    from booku_memory.services.ownership import Ownership

    @contextlib.contextmanager
    def ignoring():
        with monkeypatch.context() as patch:
            patch.setattr(Ownership, "claim", classmethod(lambda cls, data_dir, **_: _NoLock()))
            yield

    return ignoring


@pytest.fixture
def seven_memories() -> tuple[str, ...]:
    """The seven memories of issue 30's dashboard report (the relevance floor's service and dashboard tests)."""
    return ISSUE_30_MEMORIES

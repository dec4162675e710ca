"""Evidence fixtures: a real standalone store per test, per-chat scopes, dreaming on with the scripted model."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import booku_memory
from booku_memory.services.chat_scope import admin_scope
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.evidence import (
    attach_evidence,
    dreaming_settings,
    evidence_settings,
)

from .support import ScriptedChatModel

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
PER_CHAT = {**QUIET, "scope": {"mode": "per_chat"}}
ALICE_STREAM = "s-alice"
BOB_STREAM = "s-bob"
ALICE_STORE = f"private:qq:{ALICE_STREAM}"
BOB_STORE = f"private:qq:{BOB_STREAM}"
T0 = 1_700_000_000.0  # a fixed moment; stage A is always run with an explicit ``now``


@pytest.fixture
async def memory(tmp_path) -> AsyncIterator[Any]:
    """A per-chat standalone memory (each private chat its own store) with the deterministic test embedder."""
    async with booku_memory.open(tmp_path / "data", PER_CHAT, embedder=DeterministicTestEmbedder()) as handle:
        yield handle


@pytest.fixture
def runtime(memory) -> Any:
    return memory.runtime


@pytest.fixture
def model() -> ScriptedChatModel:
    return ScriptedChatModel()


@pytest.fixture
def hub(runtime, model) -> Any:
    """Dreaming switched on with the scripted model; windows close after 10 quiet minutes or 10 messages."""
    return attach_evidence(
        runtime,
        evidence=evidence_settings(runtime.config),
        dreaming=dreaming_settings(runtime.config, enabled=True, episode_idle_seconds=600.0, episode_max_messages=10),
        chat_model=model,
    )


def human(*stores: str):
    """The dashboard's scope over some stores (human authority)."""
    return admin_scope(list(stores), write_store=stores[0])

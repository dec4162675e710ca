"""``vector.ef_search`` (how many HNSW candidates a vector query walks) is validated, defaults to the value the
index is built for, and reaches Chroma: new collections are created with it and a store made under another value
takes it at its next open, before any query loads the graph."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ConfigError
from booku_memory.services.storage.vector_index import DEFAULT_EF_SEARCH

SERVICE = "booku_memory:service:booku_memory"
QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


def stored_ef_search(vector_dir: Path) -> dict[str, int]:
    """Each booku collection's ``ef_search`` as a fresh Chroma client in another process reads it from disk."""
    script = textwrap.dedent(f"""
        import json, chromadb
        from chromadb.config import Settings
        client = chromadb.PersistentClient(path={str(vector_dir)!r}, settings=Settings(anonymized_telemetry=False))
        print(json.dumps({{c.name: c.configuration_json["hnsw"]["ef_search"] for c in client.list_collections()}}))
    """)
    out = subprocess.run([sys.executable, "-c", script], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


async def write_and_find(data_dir: Path, config: dict) -> list[str]:
    async with booku_memory.open(data_dir, {**QUIET, **config}, embedder=DeterministicTestEmbedder()) as memory:
        service = memory.get_service(SERVICE)
        await service.upsert_memory("周末去西湖边喝绿茶")
        await service.upsert_memory("Caroline painted a sunrise over the lake")
        found = await service.retrieve_memories("西湖 绿茶", top_k=3)
    return [hit["content_snippet"] for hit in found["results"]]


def test_ef_search_defaults_and_rejects_values_out_of_range():
    assert load_config(None).vector.ef_search == DEFAULT_EF_SEARCH
    assert load_config({"vector": {"ef_search": 64}}).vector.ef_search == 64
    with pytest.raises(ConfigError, match=r"vector\.ef_search=8.*16 到 4096"):
        load_config({"vector": {"ef_search": 8}})
    with pytest.raises(ConfigError, match="必须是整数"):
        load_config({"vector": {"ef_search": "many"}})


async def test_new_collections_are_created_with_the_configured_ef_search(tmp_path):
    found = await write_and_find(tmp_path / "data", {"vector": {"ef_search": 123}})
    assert found and found[0] == "周末去西湖边喝绿茶"
    stored = stored_ef_search(tmp_path / "data" / "chroma")
    assert stored and set(stored.values()) == {123}


async def test_a_store_made_under_another_ef_search_takes_the_configured_one_at_open(tmp_path):
    await write_and_find(tmp_path / "data", {"vector": {"ef_search": 64}})
    assert set(stored_ef_search(tmp_path / "data" / "chroma").values()) == {64}

    found = await write_and_find(tmp_path / "data", {})
    assert found[0] == "周末去西湖边喝绿茶"
    assert set(stored_ef_search(tmp_path / "data" / "chroma").values()) == {DEFAULT_EF_SEARCH}

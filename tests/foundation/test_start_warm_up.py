"""Start-up loads what the first write or search would otherwise wait for, off the event loop."""

from __future__ import annotations

import asyncio
import threading

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.logic import segmentation

WAIT_LIMIT_SECONDS = 30


async def test_start_loads_the_segmentation_dictionary_in_a_worker_thread(tmp_path, monkeypatch):
    loaded_in: list[str] = []
    real_initialize = segmentation.jieba.initialize

    def recording_initialize(*args, **kwargs):
        loaded_in.append(threading.current_thread().name)
        return real_initialize(*args, **kwargs)

    monkeypatch.setattr(segmentation, "_jieba_ready", False)
    monkeypatch.setattr(segmentation.jieba, "initialize", recording_initialize)
    config = {"maintenance": {"enabled": True}, "startup_ingest": {"enabled": False}}
    async with booku_memory.open(tmp_path / "data", config, embedder=DeterministicTestEmbedder()):
        for _ in range(int(WAIT_LIMIT_SECONDS / 0.05)):
            if segmentation._jieba_ready:
                break
            await asyncio.sleep(0.05)
        assert segmentation._jieba_ready
        assert len(loaded_in) == 1
        assert loaded_in[0] != threading.main_thread().name  # never on the event loop's thread


async def test_start_without_maintenance_leaves_the_dictionary_to_first_use(tmp_path, monkeypatch):
    monkeypatch.setattr(segmentation, "_jieba_ready", False)
    quiet = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
    async with booku_memory.open(tmp_path / "data", quiet, embedder=DeterministicTestEmbedder()) as memory:
        await asyncio.sleep(0.2)
        assert not segmentation._jieba_ready
        await memory.runtime.memory_service().upsert_memory("第一次写入时才加载词典")
        assert segmentation._jieba_ready

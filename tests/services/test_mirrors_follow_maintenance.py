"""The two in-memory copies left (keyword index, candidate rows) see what the owner's own maintenance paths write
behind the service's back (issue 29.4): an import (rows inserted in bulk, no service call) and a reindex (the
keyword table rebuilt whole). A change through the service itself is covered by ``test_keyword_mirror.py`` and
``test_candidate_rows.py``; a change by another runtime on the same file there too.
"""

from __future__ import annotations

from pathlib import Path

import booku_memory
import pytest
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.memory_search import searchable_filter
from booku_memory.services.portability import export_jsonl, import_jsonl, reindex
from booku_memory.services.scope import DEFAULT_SCOPE

from .test_candidate_rows import held_and_sql, write_corpus

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


async def _export(tmp_path: Path) -> tuple[Path, str]:
    async with booku_memory.open(tmp_path / "source", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        written = await memory.get_service(booku_memory.MEMORY_SERVICE).upsert_memory("独角兽在彩虹下奔跑")
        path = tmp_path / "export.jsonl"
        await export_jsonl(memory.runtime, path)
    return path, written["id"]


async def test_an_import_reaches_the_keyword_copy_and_the_candidate_rows(tmp_path: Path) -> None:
    path, imported_id = await _export(tmp_path)
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        records = memory.runtime.records
        ids = await write_corpus(memory.get_service(booku_memory.MEMORY_SERVICE))
        assert await records.memory_keywords.wait_ready()
        await import_jsonl(memory.runtime, path)

        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        hits = await records.search_terms(["独角兽"], flt, limit=5)
        assert [memory_id for memory_id, _ in hits] == [imported_id]
        assert records.memory_keywords.ready and records.memory_keywords.loads == 1  # followed, not reloaded
        held, by_sql, not_held = await held_and_sql(records, [*ids, imported_id])
        assert held == by_sql and imported_id in held and not not_held


async def test_a_reindex_reloads_the_copies_and_they_answer_as_before(tmp_path: Path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        records = memory.runtime.records
        ids = await write_corpus(memory.get_service(booku_memory.MEMORY_SERVICE))
        assert await records.memory_keywords.wait_ready()
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        before = await records.search_terms(["西湖"], flt, limit=5)

        await reindex(memory.runtime)

        # The rebuilt table is noticed at the next read: FTS5 answers while the copy reloads, then the copy does.
        for _ in range(2):
            after = await records.search_terms(["西湖"], flt, limit=5)
            assert [memory_id for memory_id, _ in after] == [memory_id for memory_id, _ in before]
            assert [score for _, score in after] == pytest.approx([score for _, score in before])
            assert await records.memory_keywords.wait_ready()
        assert records.memory_keywords.loads == 2
        held, by_sql, not_held = await held_and_sql(records, ids)
        assert held == by_sql and list(held) == ids and not not_held

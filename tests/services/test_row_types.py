"""The row types of ``storage.rows`` name exactly the keys storage returns, with values of the declared types:
retrieval, fusion and rendering are type-checked against them, so a column added by a migration, or a key added to
the candidate read, without its type here would leave the checker trusting a wrong shape."""

import types
import typing

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.storage.rows import CandidateRow, RecordRow

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
TAG_LISTS = {"tags", "core_tags", "diffusion_tags", "opposing_tags"}


def _accepted(hint) -> tuple[type, ...]:
    """The runtime classes a value of ``hint`` may have (``float`` also takes an int, as SQLite returns one)."""
    if typing.get_origin(hint) is typing.NotRequired:
        hint = typing.get_args(hint)[0]
    options = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
    classes = tuple(typing.get_origin(option) or option for option in options)
    return (*classes, int) if float in classes else classes


def _check(row: dict, row_type: type) -> None:
    hints = typing.get_type_hints(row_type, include_extras=True)
    assert set(row) <= set(hints)
    assert set(row) >= row_type.__required_keys__
    for key, value in row.items():
        assert isinstance(value, _accepted(hints[key])), (key, value)


async def test_rows_match_their_types(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        plain = (await service.upsert_memory("周末去西湖边喝绿茶，你也来吗？"))["id"]
        person = (
            await service.create_memory(
                title="Caroline",
                content="Caroline: I love the lake at dawn",
                memory_type="person",
                person_id="qq:10001",
                tags=["朋友"],
                core_tags=["Caroline"],
                diffusion_tags=["湖"],
                opposing_tags=["沙漠"],
                relation_memory_ids=[plain],
            )
        )["id"]
        records = memory.runtime.records
        full = await records.get_many([plain, person])
        assert set(full[person]) == set(RecordRow.__annotations__)
        for row in full.values():
            _check(row, RecordRow)
        slim = await records.candidates([plain, person], with_tags=True, tags_only_for=[person])
        assert set(slim[plain]) == CandidateRow.__required_keys__
        assert set(slim[person]) == CandidateRow.__required_keys__ | TAG_LISTS
        for row in slim.values():
            _check(row, CandidateRow)
        assert slim[plain]["question_share"] is not None and slim[person]["question_share"] is None

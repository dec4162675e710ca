"""A write reads its neighbours' fact cues back from SQLite (``storage.fact_cue_store``), never a stale reading.

The real local model embeds (whether two texts are near enough to be compared is a question of meaning); the store
is a real SQLite file, so what is checked is the row a later write, connection or process would find.
"""

from __future__ import annotations

import contextlib
import inspect
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from booku_memory.services.embedding.cached import text_hash
from booku_memory.services.logic import supersession
from booku_memory.services.logic.supersession import FactCues
from booku_memory.services.storage import fact_cue_store
from booku_memory.services.storage.fact_cue_store import CueBook, cues_from_json, cues_to_json, reader_version

from .memory_support import MEMORY_SERVICE, open_store
from .test_supersession import BACKGROUND, NEW, OLD

STORE_TEXTS = [
    OLD,
    NEW,
    *BACKGROUND,
    "用户：我下周要去杭州出差。\nAI：记得带伞，杭州最近多雨。",
    "Alice: I moved to Boston last May!\nBob: Wow, congrats on the new job at MIT.",
    "我的手机号换成了 138-0000-1234。",
    "",
]


def test_a_cue_book_opens_only_the_stored_rows_it_is_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch reads the stored rows of every neighbour; a row is checked and decoded when its text is asked for,
    and only then counts as stored (a malformed one is read again and replaced)."""
    opened: list[str] = []
    decode = fact_cue_store.cues_from_json
    monkeypatch.setattr(fact_cue_store, "cues_from_json", lambda text: opened.append(text) or decode(text))
    other = BACKGROUND[0]
    book = CueBook(
        unopened={
            OLD: [("m-old", text_hash(OLD), cues_to_json(supersession.fact_cues(OLD)))],
            NEW: [("m-new", text_hash(NEW), "{")],
            other: [("m-other", text_hash(other), cues_to_json(supersession.fact_cues(other)))],
        }
    )
    assert book.of(OLD) == supersession.fact_cues(OLD)
    assert book.of(NEW) == supersession.fact_cues(NEW)
    assert len(opened) == 2  # the row of ``other`` was never decoded
    records = {"m-old": {"content": OLD}, "m-new": {"content": NEW}, "m-other": {"content": other}}
    assert [row[0] for row in book.rows_to_store(records)] == ["m-new"]


@pytest.mark.parametrize("text", STORE_TEXTS)
def test_stored_cues_read_back_equal_to_a_fresh_reading(text: str) -> None:
    cues = supersession.fact_cues(text)
    assert cues_from_json(cues_to_json(cues)) == cues


@pytest.mark.parametrize("stored", ["", "{", "[]", '{"slots": ["x"]}', '{"unknown": 1}', "null"])
def test_a_row_that_is_no_reading_is_read_again(stored: str) -> None:
    assert cues_from_json(stored) is None


def test_the_reader_version_follows_the_reading_code(monkeypatch: pytest.MonkeyPatch) -> None:
    current = reader_version()
    real_source = inspect.getsource

    def edited(module: Any) -> str:
        text = real_source(module)
        return text + "\n# edited\n" if module is supersession else text

    reader_version.cache_clear()
    monkeypatch.setattr(inspect, "getsource", edited)
    try:
        assert reader_version() != current
    finally:
        reader_version.cache_clear()


def test_without_source_the_reader_version_is_the_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    import booku_memory

    def no_source(module: Any) -> str:
        raise OSError("frozen build")

    reader_version.cache_clear()
    monkeypatch.setattr(inspect, "getsource", no_source)
    try:
        version = reader_version()
        monkeypatch.setattr(booku_memory, "__version__", "9.9.9")
        reader_version.cache_clear()
        assert reader_version() != version
    finally:
        reader_version.cache_clear()


async def _row(rt: Any, memory_id: str) -> dict[str, Any] | None:
    row = await rt.db.fetch_one("SELECT * FROM booku_fact_cues WHERE memory_id = ?", [memory_id])
    return dict(row) if row is not None else None


async def _overwrite(rt: Any, memory_id: str, *, content: str, reader: str, cues: FactCues) -> None:
    async with rt.db.transaction() as conn:
        await conn.execute(
            "UPDATE booku_fact_cues SET content_hash = ?, reader = ?, cues = ? WHERE memory_id = ?",
            [text_hash(content), reader, cues_to_json(cues), memory_id],
        )


def _counting_readings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the write path reads for cues from now on (the in-process cache emptied first)."""
    supersession.fact_cues.cache_clear()
    read: list[str] = []
    real: Callable[[str], FactCues] = fact_cue_store.fact_cues

    def counting(text: str) -> FactCues:
        read.append(text)
        return real(text)

    monkeypatch.setattr(fact_cue_store, "fact_cues", counting)
    return read


async def _write_background_and_old(svc: Any) -> dict[str, Any]:
    for text in BACKGROUND:
        await svc.upsert_memory(text)
    return await svc.upsert_memory(OLD)


async def test_a_write_stores_the_cues_it_read_and_the_next_write_reads_them_back(
    tmp_path: Path, e5, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await _write_background_and_old(svc)
        row = await _row(rt, old["id"])
        assert row is not None and row["content_hash"] == text_hash(OLD) and row["reader"] == reader_version()
        assert cues_from_json(row["cues"]) == supersession.fact_cues(OLD)
        read = _counting_readings(monkeypatch)
        new = await svc.upsert_memory(NEW)
        assert new["superseded"] == [{"id": old["id"], "title": OLD}]
        assert OLD not in read and NEW in read  # the neighbour's text is not read again; the new one is
        new_row = await _row(rt, new["id"])
        assert new_row is not None and cues_from_json(new_row["cues"]) == supersession.fact_cues(NEW)


async def test_the_stored_row_is_what_the_decision_reads(tmp_path: Path, e5) -> None:
    """A row with the right hash and reader is taken as is: here a reading about the speaker's father, so the
    move no longer supersedes. (Proves the write reads the stored row; rows are only ever written by the reader.)"""
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await _write_background_and_old(svc)
        someone_else = supersession.fact_cues("我爸住在北京朝阳区，离公司不远。")
        await _overwrite(rt, old["id"], content=OLD, reader=reader_version(), cues=someone_else)
        new = await svc.upsert_memory(NEW)
        assert "superseded" not in new


async def test_another_connections_edit_drops_the_row(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await _write_background_and_old(svc)
        with contextlib.closing(sqlite3.connect(rt.db.path)) as other, other:
            edit = "UPDATE booku_memory_records SET content = ? WHERE memory_id = ?"
            other.execute(edit, ["我住在天津。", old["id"]])
        assert await _row(rt, old["id"]) is None


@pytest.mark.parametrize("stale", ["content", "reader"])
async def test_a_row_of_other_content_or_older_reading_code_is_read_again_and_replaced(
    tmp_path: Path, e5, monkeypatch: pytest.MonkeyPatch, stale: str
) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await _write_background_and_old(svc)
        someone_else = supersession.fact_cues("我爸住在北京朝阳区，离公司不远。")
        await _overwrite(
            rt,
            old["id"],
            content=OLD + "（旧）" if stale == "content" else OLD,
            reader="0000000000000000" if stale == "reader" else reader_version(),
            cues=someone_else,
        )
        read = _counting_readings(monkeypatch)
        new = await svc.upsert_memory(NEW)
        assert new["superseded"] == [{"id": old["id"], "title": OLD}]
        assert OLD in read
        row = await _row(rt, old["id"])
        assert row is not None and row["content_hash"] == text_hash(OLD) and row["reader"] == reader_version()
        assert cues_from_json(row["cues"]) == supersession.fact_cues(OLD)


async def test_an_edited_memory_is_read_from_its_new_text(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await _write_background_and_old(svc)
        edited = "我住在北京海淀区，离公司不远。"
        await svc.update_memory_by_id(memory_id=old["id"], content=edited)
        assert await _row(rt, old["id"]) is None  # no reading of the old text stays behind
        new = await svc.upsert_memory(NEW)
        assert new["superseded"] == [{"id": old["id"], "title": OLD}]
        row = await _row(rt, old["id"])
        assert row is not None and row["content_hash"] == text_hash(edited)


async def test_the_row_goes_with_its_memory(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old = await _write_background_and_old(svc)
        assert await _row(rt, old["id"]) is not None
        await svc.delete_memories(memory_ids=[old["id"]])
        assert await _row(rt, old["id"]) is not None  # a soft delete is restorable, and so is its reading
        await svc.delete_memories(memory_ids=[old["id"]], hard=True)
        assert await _row(rt, old["id"]) is None

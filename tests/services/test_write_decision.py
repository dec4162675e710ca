"""A chat turn is what was said at one moment: a client archiving a chat without event times must still get one memory
per turn, as a client that sends the times does; a fact told twice in plain words still merges."""

from __future__ import annotations

from pathlib import Path

from .memory_support import MEMORY_SERVICE, open_store

MONDAY = "用户：我最近每天早上都喝一杯美式咖啡，不加糖。\nAI：美式咖啡提神又健康。"
FRIDAY = "用户：我最近每天早上都会喝一杯美式咖啡，不加糖的。\nAI：美式咖啡提神又健康！"


async def test_two_turns_of_a_chat_written_without_times_stay_two_memories(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        first = await svc.upsert_memory(MONDAY)
        second = await svc.upsert_memory(FRIDAY)
        again = await svc.upsert_memory(FRIDAY)
    assert (first["mode"], second["mode"]) == ("created", "created") and second["id"] != first["id"]
    assert (again["mode"], again["id"]) == ("merged", second["id"])  # the very same text is one turn stored twice


async def test_a_fact_restated_in_plain_words_still_merges(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        first = await svc.upsert_memory("用户每天早上都喝一杯美式咖啡，不加糖。")
        second = await svc.upsert_memory("用户每天早上都会喝一杯美式咖啡，不加糖的。")
    assert (second["mode"], second["id"]) == ("merged", first["id"])

"""export -> import round trip into an empty store loses nothing, and importing twice changes nothing."""

import json

import booku_memory
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.portability import export_jsonl, import_jsonl

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}


async def snapshot(memory):
    db = memory.runtime.db
    records = await memory.runtime.records.get_many(
        [r["memory_id"] for r in await db.fetch_all("SELECT memory_id FROM booku_memory_records")], include_deleted=True
    )
    history = await db.fetch_all(
        "SELECT memory_id, version, action, snapshot FROM booku_memory_revisions ORDER BY memory_id, version"
    )
    memos = await db.fetch_all("SELECT memo_id, content, expires_at FROM booku_temporary_memos ORDER BY memo_id")
    strip = lambda r: {k: v for k, v in r.items() if k not in ("rid", "embedded_text_hash")}
    return ({k: strip(v) for k, v in records.items()}, [tuple(h) for h in history], [tuple(m) for m in memos])


async def test_export_import_round_trip_keeps_every_field_and_history(tmp_path):
    export_file = tmp_path / "export.jsonl"
    async with booku_memory.open(tmp_path / "a", QUIET, embedder=DeterministicTestEmbedder()) as source:
        service = source.get_service(booku_memory.MEMORY_SERVICE)
        person = await service.create_memory(
            title="张三",
            content="张三是我的大学同学",
            memory_type="person",
            person_id="qq:10001",
            core_tags=["朋友"],
            diffusion_tags=["学校"],
            opposing_tags=["路人"],
        )
        await service.update_memory_by_id(memory_id=person["id"], content="张三是我的大学同学，喜欢篮球")
        gone = await service.upsert_memory("这条会被软删除", title="待删除")
        await service.delete_memories(memory_ids=[gone["id"]])
        await service.create_temporary_memo(content="明早提醒喝水", stream_id="s1")
        before = await snapshot(source)
        counts = await export_jsonl(source.runtime, export_file)
        assert counts["record"] == 2 and counts["memo"] == 1

    lines = [json.loads(line) for line in export_file.read_text(encoding="utf-8").splitlines()]
    assert lines[0]["format"] == "booku-memory-export"

    async with booku_memory.open(tmp_path / "b", QUIET, embedder=DeterministicTestEmbedder()) as target:
        first = await import_jsonl(target.runtime, export_file)
        assert first["record"] == 2 and first["skipped"] == 0 and first["memo"] == 1
        assert await snapshot(target) == before
        second = await import_jsonl(target.runtime, export_file)
        assert second["record"] == 0 and second["skipped"] == 2 and second["memo"] == 0
        assert await snapshot(target) == before
        service = target.get_service(booku_memory.MEMORY_SERVICE)
        found = await service.retrieve_memories("大学同学篮球", top_k=1)
        assert found["results"][0]["id"] == person["id"]
        assert (await target.runtime.vectors.count())["live"] == 1  # the soft-deleted one stays unindexed


async def test_letters_and_chat_evidence_survive_the_round_trip(tmp_path):
    from booku_memory.services.companion.service import BookuCompanionService
    from booku_memory.services.evidence.capture import record_host_message

    export_file = tmp_path / "export.jsonl"
    async with booku_memory.open(tmp_path / "a", QUIET, embedder=DeterministicTestEmbedder()) as source:
        companion = BookuCompanionService(source.runtime, side="ai")
        await companion.letter_write(author="ai", content="写给一年后的你", title="给未来")
        await record_host_message(
            source.runtime,
            message_id="m-1",
            stream_id="s1",
            platform="qq",
            chat_type="private",
            sender_id="1001",
            sender_name="小明",
            text="今天去看海了",
            sent_at=1_700_000_000.0,
            direction="received",
        )
        await export_jsonl(source.runtime, export_file)
    async with booku_memory.open(tmp_path / "b", QUIET, embedder=DeterministicTestEmbedder()) as target:
        first = await import_jsonl(target.runtime, export_file)
        assert first["letter"] == 1 and first["chat_message"] == 1
        letters = await BookuCompanionService(target.runtime, side="ai").letter_read()
        assert "写给一年后的你" in letters["text"]
        again = await import_jsonl(target.runtime, export_file)
        assert again["letter"] == 0 and again["chat_message"] == 0

"""Recording chat: scoped like the chat's memories, immutable, deduplicated, switchable."""

from __future__ import annotations

import sqlite3

import pytest

from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.errors import ValidationError
from booku_memory.services.evidence import (
    EvidenceService,
    attach_evidence,
    evidence_settings,
    record_host_message,
)

from .conftest import ALICE_STORE, ALICE_STREAM, BOB_STORE, BOB_STREAM, T0, human
from .support import say


async def test_messages_land_in_the_store_the_chat_scope_writes_to(runtime, hub):
    entry = await say(runtime, ALICE_STREAM, "周末一起去爬山吧", T0)
    group = await say(runtime, "g-900", "群里说明天团建", T0, chat_type="group")
    tool_scope = scope_for_chat(runtime.config.scope, platform="qq", chat_type="private", stream_id=ALICE_STREAM)
    group_scope = scope_for_chat(runtime.config.scope, platform="qq", chat_type="group", stream_id="g-900")
    stored = await hub.chat_log.messages([entry, group], store_keys=None)
    assert stored[entry]["store_key"] == tool_scope.writable_store_key == ALICE_STORE
    assert stored[entry]["owner_uid"] == tool_scope.owner_uid
    assert stored[group]["store_key"] == group_scope.writable_store_key == "group:qq:g-900"


async def test_a_scope_never_sees_another_stores_chat(runtime, hub):
    await say(runtime, ALICE_STREAM, "爱丽丝的秘密：喜欢绿茶", T0)
    await say(runtime, BOB_STREAM, "鲍勃的秘密：喜欢绿茶", T0, sender="u2")
    bob_chat = scope_for_chat(runtime.config.scope, platform="qq", chat_type="private", stream_id=BOB_STREAM)
    found = await EvidenceService(runtime, bob_chat).search("喜欢绿茶 秘密")
    assert found["total"] >= 1
    assert {r["store_key"] for r in found["results"]} == {BOB_STORE}
    assert all("爱丽丝" not in r["text"] for r in found["results"])
    listed = await EvidenceService(runtime, bob_chat).list_messages()
    assert [m["text"] for m in listed["items"]] == ["鲍勃的秘密：喜欢绿茶"]


async def test_the_same_host_message_is_recorded_once(runtime, hub):
    first = await record_host_message(
        runtime,
        message_id="m-1",
        stream_id=ALICE_STREAM,
        platform="qq",
        chat_type="private",
        sender_id="u1",
        sender_name="小明",
        text="你好",
        sent_at=T0,
        direction="received",
    )
    again = await record_host_message(
        runtime,
        message_id="m-1",
        stream_id=ALICE_STREAM,
        platform="qq",
        chat_type="private",
        sender_id="u1",
        sender_name="小明",
        text="你好",
        sent_at=T0,
        direction="sent",
    )
    assert first["recorded"] and not again["recorded"]
    assert again["reason"] == "duplicate" and again["entry_id"] == first["entry_id"]
    assert (await hub.chat_log.counts())["messages"] == 1


async def test_rows_are_immutable_except_for_the_retraction_that_clears_them(runtime, hub):
    entry = await say(runtime, ALICE_STREAM, "原话不能被改写", T0)
    connection = sqlite3.connect(runtime.db.path)
    try:
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            connection.execute("UPDATE booku_chat_messages SET text = '被篡改了' WHERE entry_id = ?", [entry])
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            connection.execute("UPDATE booku_chat_messages SET sender_id = 'someone-else' WHERE entry_id = ?", [entry])
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            connection.execute("DELETE FROM booku_chat_messages WHERE entry_id = ?", [entry])
        # a "retraction" that keeps the text is not a retraction either
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            connection.execute(
                "UPDATE booku_chat_messages SET retracted_at = 1, retraction = 'retracted' WHERE entry_id = ?", [entry]
            )
        connection.execute(
            "UPDATE booku_chat_messages SET text = '', text_sha256 = '', retracted_at = 1, "
            "retraction = 'retracted' WHERE entry_id = ?",
            [entry],
        )
        connection.commit()
        with pytest.raises(sqlite3.DatabaseError, match="immutable"):
            connection.execute("UPDATE booku_chat_messages SET retracted_at = 0 WHERE entry_id = ?", [entry])
    finally:
        connection.close()


async def test_capture_can_be_switched_off_and_skips_empty_text(runtime):
    attach_evidence(runtime, evidence=evidence_settings(runtime.config, record_sent=False))
    sent = await record_host_message(
        runtime,
        message_id="s-1",
        stream_id=ALICE_STREAM,
        platform="qq",
        chat_type="private",
        sender_id="bot",
        sender_name="Booku",
        text="收到",
        sent_at=T0,
        direction="sent",
    )
    empty = await record_host_message(
        runtime,
        message_id="r-0",
        stream_id=ALICE_STREAM,
        platform="qq",
        chat_type="private",
        sender_id="u1",
        sender_name="小明",
        text="  ",
        sent_at=T0,
        direction="received",
    )
    assert (sent["recorded"], sent["reason"]) == (False, "disabled")
    assert (empty["recorded"], empty["reason"]) == (False, "empty")
    attach_evidence(runtime, evidence=evidence_settings(runtime.config, enabled=False))
    off = await record_host_message(
        runtime,
        message_id="r-1",
        stream_id=ALICE_STREAM,
        platform="qq",
        chat_type="private",
        sender_id="u1",
        sender_name="小明",
        text="在吗",
        sent_at=T0,
        direction="received",
    )
    assert (off["recorded"], off["reason"]) == (False, "disabled")
    assert (await EvidenceService(runtime, human(ALICE_STORE)).list_messages())["matched"] == 0


async def test_bad_arguments_are_refused_before_anything_is_written(runtime, hub):
    with pytest.raises(ValidationError, match="direction"):
        await record_host_message(
            runtime,
            message_id="x",
            stream_id=ALICE_STREAM,
            platform="qq",
            chat_type="private",
            sender_id="u1",
            sender_name="",
            text="你好",
            sent_at=T0,
            direction="incoming",
        )
    with pytest.raises(ValidationError, match="sent_at"):
        await record_host_message(
            runtime,
            message_id="x",
            stream_id=ALICE_STREAM,
            platform="qq",
            chat_type="private",
            sender_id="u1",
            sender_name="",
            text="你好",
            sent_at="昨天",
            direction="received",
        )
    assert (await hub.chat_log.counts())["messages"] == 0


async def test_long_messages_are_cut_with_a_marker_and_milliseconds_are_understood(runtime):
    attach_evidence(runtime, evidence=evidence_settings(runtime.config, max_message_chars=100))
    result = await record_host_message(
        runtime,
        message_id="long",
        stream_id=ALICE_STREAM,
        platform="qq",
        chat_type="private",
        sender_id="u1",
        sender_name="小明",
        text="长" * 500,
        sent_at=T0 * 1000,
        direction="received",
    )
    item = (await EvidenceService(runtime, human(ALICE_STORE)).get_message(result["entry_id"]))["item"]
    assert item["text"].startswith("长" * 100) and "未收录" in item["text"] and len(item["text"]) < 130
    assert item["sent_at"] == T0


async def test_capture_is_audited_without_the_text(runtime, hub):
    entry = await say(runtime, ALICE_STREAM, "审计里不应出现这句原话", T0)
    rows, _ = await runtime.audit.list(store_keys=[ALICE_STORE], action="chat_captured")
    assert [row["memory_id"] for row in rows] == [entry]
    assert rows[0]["authority"] == "mechanical" and rows[0]["before"] is None
    assert "审计里不应出现" not in str(rows[0]["after"])

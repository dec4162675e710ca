"""Letters: verbatim and forever, short bracketed ids, the side of a caller fixed by the interface, lock rules from
both sides (none / timed at its boundary / permanent), lock changes by the writing side only, reading and search."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

import booku_memory
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.companion.tool_table import spec_by_name
from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.errors import NotFoundError, ValidationError

from .conftest import QUIET_CONFIG
from .support import Clock

DAY = 86400.0
START = datetime(2030, 5, 1, 12, 0).timestamp()  # local noon
LETTER = "  亲爱的你：\n\n今天下了第一场雪，我想起你说过想看雪。\n\n——写于一个安静的晚上  "


@pytest.fixture
def clock() -> Clock:
    return Clock(START)


@pytest.fixture
def ai(memory: Any, clock: Clock) -> BookuCompanionService:
    return BookuCompanionService(memory.runtime, side="ai", clock=clock)


@pytest.fixture
def user(memory: Any, clock: Clock) -> BookuCompanionService:
    return BookuCompanionService(memory.runtime, side="user", clock=clock)


def by_id(result: dict, letter_id: str) -> dict:
    return next(item for item in result["items"] if item["id"] == letter_id)


# -------------------------------------------------------------------------------------------------- writing
async def test_a_letter_is_kept_verbatim_with_a_short_bracketed_id(ai, user, memory) -> None:
    written = await ai.letter_write("ai", LETTER, title="第一场雪", date="2030-04-30")
    assert re.fullmatch(r"[0-9a-f]{12}", written["id"])
    for side in (ai, user):
        read = await side.letter_read()
        item = by_id(read, written["id"])
        assert item["content"] == LETTER and item["title"] == "第一场雪" and item["date"] == "2030-04-30"
        assert f"[{written['id']}]" in read["text"] and LETTER in read["text"]
    assert by_id(await ai.letter_read(), written["id"])["author"] == memory.runtime.config.plugin.ai_name
    named = await ai.letter_write("ai", "另一封。", ai_name="小满")
    assert named["letter"]["author"] == "小满" and named["letter"]["author_side"] == "ai"
    custom = await user.letter_write("阿青", "署名随意的一封。")
    assert (custom["letter"]["author"], custom["letter"]["author_side"]) == ("阿青", "user")


async def test_letters_are_not_memories_and_are_never_merged(ai, companion, memory) -> None:
    records = int(await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records", (), 0))
    first = await ai.letter_write("ai", "一模一样的信。")
    second = await ai.letter_write("ai", "一模一样的信。")
    assert first["id"] != second["id"]
    assert int(await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records", (), 0)) == records
    assert (await companion.breath_search("一模一样的信"))["items"] == []
    assert (await companion.breath())["items"] == []
    assert (await companion.pulse())["counts"]["kinds"]["letter"] == 2


async def test_a_letter_can_never_be_deleted_or_rewritten(ai, memory) -> None:
    written = await ai.letter_write("ai", "永远留着。")
    with pytest.raises(sqlite3.DatabaseError, match="kept forever"):
        async with memory.runtime.db.transaction() as conn:
            await conn.execute("DELETE FROM booku_companion_letters WHERE letter_id = ?", [written["id"]])
    with pytest.raises(sqlite3.DatabaseError, match="only the lock"):
        async with memory.runtime.db.transaction() as conn:
            await conn.execute(
                "UPDATE booku_companion_letters SET content = '改过了' WHERE letter_id = ?", [written["id"]]
            )
    assert by_id(await ai.letter_read(), written["id"])["content"] == "永远留着。"


async def test_letter_input_is_validated(ai) -> None:
    with pytest.raises(ValidationError, match="author"):
        await ai.letter_write("  ", "正文")
    with pytest.raises(ValidationError, match="content"):
        await ai.letter_write("ai", "   ")
    with pytest.raises(ValidationError, match="date"):
        await ai.letter_write("ai", "正文", date="2030/05/01")
    with pytest.raises(ValidationError, match="lock_type"):
        await ai.letter_write("ai", "正文", lock_type="forever")
    with pytest.raises(ValidationError, match="unlock_date"):
        await ai.letter_write("ai", "正文", unlock_date="2031-01-01")
    assert (await ai.letter_read())["items"] == []


# ----------------------------------------------------------------------------------------------------- sides
async def test_the_side_comes_from_the_interface_never_from_an_argument(memory, clock) -> None:
    for name in ("letter_write", "letter_lock_update", "letter_read"):
        assert "side" not in {p.name for p in spec_by_name(name).params}
    admin = memory.runtime.default_scope.acting(authority="human", actor="admin")
    assert BookuCompanionService(memory.runtime, admin).side == "user"
    assert BookuCompanionService(memory.runtime).side == "ai"
    with pytest.raises(ValidationError, match="side"):
        BookuCompanionService(memory.runtime, side="admin")
    dashboard = BookuCompanionService(memory.runtime, admin, clock=clock)
    written = await dashboard.letter_write("我", "从仪表盘写的信。", lock_type="timed", unlock_date="2031-01-01")
    assert written["letter"]["written_by"] == "user"
    assert "content" not in by_id(await BookuCompanionService(memory.runtime, clock=clock).letter_read(), written["id"])


# ----------------------------------------------------------------------------------------------------- locks
async def test_a_timed_letter_opens_to_the_other_side_exactly_at_its_moment(ai, user, clock) -> None:
    moment = "2030-06-01T09:00:00+08:00"
    opens = datetime.fromisoformat(moment).timestamp()
    written = await ai.letter_write(
        "ai", "生日快乐，这是给一个月后的你的。", title="生日礼物是一条项链", lock_type="timed", unlock_date=moment
    )
    clock.now = opens - 1
    hidden = await user.letter_read()
    item = by_id(hidden, written["id"])
    assert item["readable"] is False and "content" not in item and "title" not in item
    assert "项链" not in hidden["text"] and "生日快乐" not in hidden["text"] and f"[{written['id']}]" in hidden["text"]
    mine = by_id(await ai.letter_read(), written["id"])
    assert mine["readable"] and mine["content"] == "生日快乐，这是给一个月后的你的。"
    clock.now = opens
    opened = by_id(await user.letter_read(), written["id"])
    assert opened["readable"] and opened["unlocked"] and opened["title"] == "生日礼物是一条项链"


async def test_a_date_only_unlock_opens_at_local_midnight(ai, user, clock) -> None:
    written = await user.letter_write("user", "一年后再看。", lock_type="timed", unlock_date="2030-05-03")
    midnight = datetime(2030, 5, 3).timestamp()
    clock.now = midnight - 0.001
    assert by_id(await ai.letter_read(), written["id"])["readable"] is False
    assert by_id(await user.letter_read(), written["id"])["readable"] is True
    clock.now = midnight
    assert by_id(await ai.letter_read(), written["id"])["readable"] is True


@pytest.mark.parametrize(
    "unlock_date, message",
    [
        (None, "unlock_date"),
        ("", "unlock_date"),
        ("2030-04-30", "不在未来"),
        ("2030-05-01", "不在未来"),  # today's midnight has passed
        ("2030-05-01T12:00:00", "时区偏移"),
        ("2031/01/01", "格式无效"),
        ("2031-02-30", "不是有效日期"),
    ],
)
async def test_a_timed_lock_needs_a_future_unlock_date(ai, unlock_date, message) -> None:
    with pytest.raises(ValidationError, match=message):
        await ai.letter_write("ai", "定时信。", lock_type="timed", unlock_date=unlock_date)


async def test_the_unlock_moment_must_be_strictly_in_the_future(ai, clock) -> None:
    now = datetime.fromtimestamp(START, tz=UTC).isoformat()
    with pytest.raises(ValidationError, match="不在未来"):
        await ai.letter_write("ai", "现在就打开？", lock_type="timed", unlock_date=now)
    later = (datetime.fromtimestamp(START, tz=UTC) + timedelta(seconds=1)).isoformat()
    written = await ai.letter_write("ai", "一秒后打开。", lock_type="timed", unlock_date=later)
    assert written["letter"]["unlock_at"] == START + 1


async def test_a_permanent_letter_is_never_readable_by_anyone(ai, user, clock, memory) -> None:
    written = await ai.letter_write("ai", "这些话只写给自己。", title="不寄出的信", lock_type="permanent")
    assert "content" not in written["letter"] and "这些话只写给自己" not in written["text"]
    for when in (START, START + 400 * 365 * DAY):
        clock.now = when
        for side in (ai, user):
            read = await side.letter_read()
            item = by_id(read, written["id"])
            assert item["readable"] is False and "content" not in item and "title" not in item
            assert "这些话只写给自己" not in read["text"] and "不寄出的信" not in read["text"]
            assert (await side.letter_read(query="这些话只写给自己"))["items"] == []
    with pytest.raises(ValidationError, match="终态"):
        await ai.letter_lock_update(written["id"], "none")
    with pytest.raises(sqlite3.DatabaseError, match="final"):
        async with memory.runtime.db.transaction() as conn:
            await conn.execute(
                "UPDATE booku_companion_letters SET lock_type = 'none' WHERE letter_id = ?", [written["id"]]
            )


async def test_only_the_writing_side_may_change_a_lock(ai, user) -> None:
    from_user = await user.letter_write("user", "给你的悄悄话。", lock_type="timed", unlock_date="2031-01-01")
    with pytest.raises(ValidationError, match="只有写这封信的一方"):
        await ai.letter_lock_update(from_user["id"], "none")
    assert by_id(await ai.letter_read(), from_user["id"])["readable"] is False
    await user.letter_lock_update(from_user["id"], "none")
    assert by_id(await ai.letter_read(), from_user["id"])["content"] == "给你的悄悄话。"

    from_ai = await ai.letter_write("ai", "我写给你的。")
    with pytest.raises(ValidationError, match="只有写这封信的一方"):
        await user.letter_lock_update(from_ai["id"], "permanent")
    assert by_id(await user.letter_read(), from_ai["id"])["readable"] is True
    await ai.letter_lock_update(from_ai["id"], "timed", "2031-01-01")
    assert by_id(await user.letter_read(), from_ai["id"])["readable"] is False
    assert by_id(await ai.letter_read(), from_ai["id"])["readable"] is True


async def test_a_lock_update_changes_only_the_lock_and_is_audited_without_the_text(ai, memory) -> None:
    written = await ai.letter_write("ai", "原文不动。", title="标题不动", date="2030-04-01")
    before = await memory.runtime.db.fetch_one(
        "SELECT * FROM booku_companion_letters WHERE letter_id = ?", [written["id"]]
    )
    changed = await ai.letter_lock_update(f"[{written['id']}]", "timed", "2031-01-01")
    assert changed["changed"] is True
    again = await ai.letter_lock_update(written["id"], "timed", "2031-01-01")
    assert again["changed"] is False and "未改动" in again["text"]
    after = await memory.runtime.db.fetch_one(
        "SELECT * FROM booku_companion_letters WHERE letter_id = ?", [written["id"]]
    )
    for column in ("author", "title", "content", "letter_date", "written_at", "created_at", "side"):
        assert after[column] == before[column]
    assert (before["lock_type"], after["lock_type"]) == ("none", "timed")
    rows = await memory.runtime.db.fetch_all(
        "SELECT action, before, after FROM booku_audit_log WHERE memory_id = ? ORDER BY audit_id", [written["id"]]
    )
    assert [r["action"] for r in rows] == ["letter_written", "letter_lock_changed"]
    assert all(r["before"] is None for r in rows)
    assert json.loads(rows[1]["after"])["lock_type"] == "timed"
    assert not any("原文不动" in r["after"] or "标题不动" in r["after"] for r in rows)


async def test_an_audit_restore_of_a_letter_event_changes_nothing(ai, memory) -> None:
    written = await ai.letter_write("ai", "不会被撤销。")
    audit_id = await memory.runtime.db.fetch_value(
        "SELECT audit_id FROM booku_audit_log WHERE memory_id = ?", [written["id"]]
    )
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    assert (await service.restore_from_audit(audit_id=audit_id))["restored"] == []
    assert by_id(await ai.letter_read(), written["id"])["content"] == "不会被撤销。"


async def test_a_letter_kept_on_the_other_sides_behalf_cannot_be_locked(ai) -> None:
    with pytest.raises(ValidationError, match="代为保存"):
        await ai.letter_write("user", "用户口述、我代存的信。", lock_type="timed", unlock_date="2031-01-01")
    kept = await ai.letter_write("user", "用户口述、我代存的信。")
    assert kept["letter"]["author_side"] == "user" and kept["letter"]["written_by"] == "ai"
    with pytest.raises(ValidationError, match="代为保存"):
        await ai.letter_lock_update(kept["id"], "permanent")


async def test_lock_update_errors_name_the_problem(ai) -> None:
    written = await ai.letter_write("ai", "一封信。")
    with pytest.raises(NotFoundError, match="letter_id"):
        await ai.letter_lock_update("000000000000", "none")
    with pytest.raises(ValidationError, match="lock_type"):
        await ai.letter_lock_update(written["id"], "sealed")
    with pytest.raises(ValidationError, match="unlock_date"):
        await ai.letter_lock_update(written["id"], "timed")
    with pytest.raises(ValidationError, match="unlock_date"):
        await ai.letter_lock_update(written["id"], "none", "2031-01-01")


# ----------------------------------------------------------------------------------------------------- reading
async def test_letter_read_lists_newest_first_with_author_date_and_limit_filters(ai, user) -> None:
    old = await user.letter_write("user", "三月的信。", date="2030-03-01")
    mid = await ai.letter_write("ai", "四月的信。", date="2030-04-01")
    new = await user.letter_write("小雨", "五月的信。", date="2030-05-01", user_name="小雨")
    assert [i["id"] for i in (await ai.letter_read())["items"]] == [new["id"], mid["id"], old["id"]]
    assert [i["id"] for i in (await ai.letter_read(limit=2))["items"]] == [new["id"], mid["id"]]
    assert [i["id"] for i in (await ai.letter_read(author="user"))["items"]] == [new["id"], old["id"]]
    assert [i["id"] for i in (await ai.letter_read(author="ai"))["items"]] == [mid["id"]]
    assert [i["id"] for i in (await ai.letter_read(author="小雨"))["items"]] == [new["id"]]
    ranged = await ai.letter_read(date_from="2030-03-15", date_to="2030-04-01")
    assert [i["id"] for i in ranged["items"]] == [mid["id"]]
    with pytest.raises(ValidationError, match="limit"):
        await ai.letter_read(limit=51)


async def test_a_query_finds_letters_by_meaning_but_never_ones_the_reader_may_not_open(ai, user) -> None:
    snow = await user.letter_write("user", "今天下了第一场雪，我想起你说过想看雪。")
    await user.letter_write("user", "周末去爬山吧，天气很好。")
    secret = await ai.letter_write("ai", "第一场雪的时候我就想告诉你。", lock_type="timed", unlock_date="2031-01-01")
    found = await user.letter_read(query="想看雪的人")  # not a literal substring: ranked by similarity
    assert found["items"][0]["id"] == snow["id"]
    assert secret["id"] not in [i["id"] for i in found["items"]]
    literal = await user.letter_read(query="第一场雪")
    assert [i["id"] for i in literal["items"]][:1] == [snow["id"]] and secret["id"] not in literal["text"]
    assert secret["id"] in [i["id"] for i in (await ai.letter_read(query="第一场雪"))["items"]]


async def test_letter_search_says_when_it_fell_back_to_keywords(tmp_path, clock) -> None:
    async with booku_memory.open(tmp_path / "down", QUIET_CONFIG, embedder=UnavailableEmbedder()) as handle:
        service = BookuCompanionService(handle.runtime, clock=clock)
        snow = await service.letter_write("ai", "今天下了第一场雪。")
        await service.letter_write("ai", "周末去爬山。")
        found = await service.letter_read(query="下雪 第一场雪")
        assert "degraded" in found and "关键词" in found["text"]
        assert [i["id"] for i in found["items"]] == [snow["id"]]

"""The temporary_memo tool end to end: create/refresh, list and cancel, scoped to the caller's stream."""

from __future__ import annotations

import time

import pytest

from booku_memory.tools.formatting import describe_remaining, rendered_len
from booku_memory.tools.temporary_memo import run_temporary_memo


async def test_create_uses_default_two_hours_and_the_stream(svc):
    before = time.time()
    result = await run_temporary_memo(svc, content="小王八点开会", stream_id="stream-123")
    assert result["ok"] is True and result["mode"] == "created"
    assert result["expires"] in ("约 2 小时后过期", "约 1.9 小时后过期")
    memos = (await svc.list_temporary_memos(stream_id="stream-123"))["items"]
    assert [m["content"] for m in memos] == ["小王八点开会"]
    assert memos[0]["expires_at"] == pytest.approx(before + 7200, abs=5)


@pytest.mark.parametrize("content", ["", "   ", None])
async def test_empty_content_is_rejected_and_mentions_content(svc, write_counter, content):
    before = await write_counter.snapshot()
    result = await run_temporary_memo(svc, content=content, stream_id="s")
    assert result == {"action": "temporary_memo", "ok": False, "error": result["error"]}
    assert "content" in result["error"]
    assert await write_counter.snapshot() == before


async def test_same_content_same_stream_refreshes_and_never_shortens(svc):
    first = await run_temporary_memo(svc, content="提醒喝水", expire_hours=4, stream_id="s1")
    again = await run_temporary_memo(svc, content="提醒喝水", expire_hours=1, stream_id="s1")
    assert again["mode"] == "refreshed" and again["memo_id"] == first["memo_id"]
    assert again["active_memos_here"] == 1
    assert "保留了它更晚的过期时间" in again["message"] and "allow_shorten" in again["message"]
    memo = (await svc.list_temporary_memos(stream_id="s1"))["items"][0]
    assert memo["expires_at"] > time.time() + 3.5 * 3600


async def test_refresh_extends_a_shorter_expiry(svc):
    await run_temporary_memo(svc, content="提醒喝水", expire_hours=1, stream_id="s1")
    again = await run_temporary_memo(svc, content="提醒喝水", expire_hours=5, stream_id="s1")
    assert again["mode"] == "refreshed" and "已刷新过期时间" in again["message"]
    memo = (await svc.list_temporary_memos(stream_id="s1"))["items"][0]
    assert memo["expires_at"] > time.time() + 4.5 * 3600


async def test_refresh_shortens_only_when_asked(svc):
    await run_temporary_memo(svc, content="提醒喝水", expire_hours=5, stream_id="s1")
    await run_temporary_memo(svc, content="提醒喝水", expire_hours=1, stream_id="s1", allow_shorten=True)
    memo = (await svc.list_temporary_memos(stream_id="s1"))["items"][0]
    assert memo["expires_at"] < time.time() + 1.1 * 3600


async def test_same_content_different_streams_are_separate(svc):
    first = await run_temporary_memo(svc, content="同一句话", stream_id="a")
    second = await run_temporary_memo(svc, content="同一句话", stream_id="b")
    assert first["mode"] == second["mode"] == "created"
    assert first["memo_id"] != second["memo_id"]


@pytest.mark.parametrize("hours", [0, -1, float("nan"), float("inf"), "abc", True, 10_000])
async def test_bad_expire_hours_are_rejected_without_writing(svc, write_counter, hours):
    before = await write_counter.snapshot()
    result = await run_temporary_memo(svc, content="x", expire_hours=hours, stream_id="s")
    assert result["ok"] is False and "expire_hours" in result["error"]
    assert await write_counter.snapshot() == before


async def test_list_shows_only_the_current_streams_memos(svc):
    await run_temporary_memo(svc, content="这里的", stream_id="here")
    await run_temporary_memo(svc, content="别处的私聊内容", stream_id="elsewhere")
    listed = await run_temporary_memo(svc, action="list", stream_id="here")
    assert listed["ok"] and listed["total"] == 1
    assert [item["text"] for item in listed["items"]] == ["这里的"]
    assert listed["items"][0]["expires"].startswith("约 ")
    unbound = await run_temporary_memo(svc, action="list")
    assert unbound["total"] == 0 and unbound["message"] == "当前聊天没有便签"


async def test_cancel_by_id_or_content_only_in_the_current_stream(svc):
    here = await run_temporary_memo(svc, content="取消我", stream_id="here")
    other = await run_temporary_memo(svc, content="取消我", stream_id="other")
    refused = await run_temporary_memo(svc, action="cancel", memo_id=other["memo_id"], stream_id="here")
    assert refused["ok"] is False and "只能取消当前聊天的便签" in refused["error"]
    cancelled = await run_temporary_memo(svc, action="CANCEL", content="取消我", stream_id="here")
    assert cancelled["ok"] and cancelled["cancelled"] == 1
    assert (await svc.list_temporary_memos(stream_id="here"))["items"] == []
    assert [m["memo_id"] for m in (await svc.list_temporary_memos(stream_id="other"))["items"]] == [other["memo_id"]]
    assert here["memo_id"] != other["memo_id"]


async def test_cancel_needs_id_or_content_and_unknown_action_is_rejected(svc):
    missing = await run_temporary_memo(svc, action="cancel", stream_id="s")
    assert missing["ok"] is False and "memo_id" in missing["error"]
    unknown = await run_temporary_memo(svc, action="delete", content="x", stream_id="s")
    assert unknown["ok"] is False and "create、list、cancel" in unknown["error"]


async def test_internal_failures_become_one_sentence():
    class Broken:
        async def create_temporary_memo(self, **kwargs):
            raise OSError("disk I/O error at /var/lib/booku/booku_memory.db")

    result = await run_temporary_memo(Broken(), content="x", stream_id="s")
    assert result["ok"] is False and "/var/lib" not in result["error"]
    assert result["error"] == "便签服务出错（OSError），这次没有完成，请稍后重试。"


async def test_long_memo_list_stays_within_budget_and_says_what_was_left_out(svc):
    for index in range(40):
        await run_temporary_memo(svc, content=f"第 {index} 条便签：" + "内容很长" * 40, stream_id="busy")
    listed = await run_temporary_memo(svc, action="list", stream_id="busy")
    assert listed["ok"] and listed["total"] == 40
    assert rendered_len(listed) <= svc.runtime.config.tools.output_char_budget
    assert len(listed["items"]) + listed["omitted"] == 40
    assert listed["hint"].startswith("另有") and "取消" in listed["hint"]


def test_describe_remaining_matches_reference_wording():
    now = 1000.0
    assert describe_remaining(now + 30, now) == "约 1 分钟后过期"
    assert describe_remaining(now + 59 * 60, now) == "约 59 分钟后过期"
    assert describe_remaining(now + 2 * 3600, now) == "约 2 小时后过期"
    assert describe_remaining(now + 2.5 * 3600, now) == "约 2.5 小时后过期"

"""``memory_command`` under hostile input: oversized queries get a short Chinese error and a short log line."""

from __future__ import annotations

import logging

import pytest

from booku_memory.tools import run_memory_command

LONG = "长" * 20_000


@pytest.mark.parametrize(
    "command",
    [
        f"grep -q {LONG}",
        f"search -q {LONG}",
        f"grep -q 一 && search -q {LONG}",
    ],
)
async def test_oversized_query_is_refused_naming_the_limit_and_logged_short(svc, write_counter, caplog, command):
    before = await write_counter.snapshot()
    with caplog.at_level(logging.DEBUG):
        answer = await run_memory_command(svc, command)
    assert answer["ok"] is False
    assert "2000" in answer["error"] and "max_query_chars" in answer["error"]
    assert len(answer["error"]) < 400
    assert all(len(record.getMessage()) < 1_000 for record in caplog.records), "a log line quoted the whole command"
    assert await write_counter.snapshot() == before

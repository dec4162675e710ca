"""Regex grep cannot freeze the process: linear-time matching (RE2), a capped program, a time budget, and a
connection and thread of its own, so other chats' reads go on while it runs.

Before: ``grep -q '(a+)+$' -regex`` over a memory of 28 ``a`` and a ``!`` ran Python's backtracking ``re`` inside
SQLite's REGEXP on the shared reader for ~30 s, and every other read waited.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time

import pytest

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.safe_regex import compile_safe_regex
from booku_memory.services.storage.regex_grep import RegexBudgetExceeded, run_regex_grep
from booku_memory.tools import run_memory_command

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "scope": {"mode": "per_chat"}}
SECTION = load_config(QUIET).scope
ATTACKER = scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="attacker")
BYSTANDER = scope_for_chat(SECTION, platform="qq", chat_type="group", stream_id="bystanders")
TAGS = {"core_tags": ["测试"], "diffusion_tags": ["正则"], "opposing_tags": ["无关"]}
# Catastrophic for a backtracking engine: nested quantifiers, overlapping alternations, star of star.
HOSTILE_PATTERNS = [
    r"(a+)+$",
    r"(a|aa)+$",
    r"(a|a?)+$",
    r"((a*)*)*b",
    r"(a*)*!x",
    r"(\w+\s?)+$",
    r"(.*a){25}$",
    r"^(a+)+$",
]
HOSTILE_TEXT = "a" * 27 + "!"


def services(memory):
    return (
        memory.get_service(booku_memory.MEMORY_SERVICE, scope=ATTACKER),
        memory.get_service(booku_memory.MEMORY_SERVICE, scope=BYSTANDER),
    )


async def timed(call) -> float:
    start = time.monotonic()
    await call
    return time.monotonic() - start


@pytest.fixture
async def memory(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        attacker, bystander = services(handle)
        for index, text in enumerate([HOSTILE_TEXT, "a" * 5000 + "!", "x" * 20 + "a" * 3000 + " \n!"]):
            await attacker.upsert_memory(text, title=f"敌意 {index}", **TAGS)
        await bystander.create_memory(
            title="咖啡",
            content="群里的小周每天早上都喝一杯手冲咖啡",
            memory_type="preference",
            core_tags=["咖啡"],
            diffusion_tags=["早上"],
            opposing_tags=["茶"],
        )
        yield handle


async def test_hostile_patterns_finish_at_once_while_other_chats_read(memory):
    attacker, bystander = services(memory)
    for pattern in HOSTILE_PATTERNS:
        grep = asyncio.create_task(
            attacker.grep_memories(query=pattern, search_fields=["title", "content"], use_regex=True)
        )
        read = await timed(bystander.retrieve_memories("小周 咖啡"))
        listed = await timed(bystander.list_memory_entries(keyword="咖啡"))
        assert read < 1.0 and listed < 1.0, f"another chat's read waited behind {pattern!r}"
        started = time.monotonic()
        result = await grep
        assert time.monotonic() - started < 5.0
        assert result["action"] == "grep_memories"


async def test_hostile_pattern_over_memory_command_and_mcp(memory):
    from mcp import Client

    from booku_memory.mcp_server import build_server, runtime_tool_call

    attacker, bystander = services(memory)
    answer = await asyncio.wait_for(run_memory_command(attacker, "grep -q '(a+)+$' -regex -in content"), timeout=10)
    assert answer["ok"] is True
    async with Client(build_server(memory.runtime.config, runtime_tool_call(memory.runtime, ATTACKER))) as client:
        grep = asyncio.create_task(client.call_tool("memory_command", {"command": "grep -q '(a|aa)+$' -regex"}))
        assert await timed(bystander.retrieve_memories("咖啡")) < 1.0
        served = await asyncio.wait_for(grep, timeout=10)
        assert not served.is_error


async def test_a_grep_that_runs_to_its_budget_does_not_hold_other_readers(memory):
    """A scan long enough to spend its whole budget runs on its own connection and thread: meanwhile another
    chat's reads answer at their usual speed, and the scan ends with an error naming the budget.

    The long scan is a table of 800k rows added to the runtime's own database file (building that many memories
    through the service would take minutes); the grep machinery is the one ``grep_memories`` uses."""
    _, bystander = services(memory)
    path = memory.runtime.db.path
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE grep_probe (body TEXT)")
        conn.executemany("INSERT INTO grep_probe VALUES (?)", (("a" * 60 + str(i),) for i in range(800_000)))
    matcher = compile_safe_regex(r"(a+)+$x")
    grep = asyncio.create_task(
        run_regex_grep(
            path, "SELECT body FROM grep_probe WHERE body REGEXP ?", ["(a+)+$x"], matcher, budget_seconds=1.0
        )
    )
    await asyncio.sleep(0.05)
    for _ in range(3):
        assert await timed(bystander.retrieve_memories("小周 咖啡")) < 1.0
        assert await timed(bystander.grep_memories(query="咖啡", search_fields=["content"])) < 1.0
    assert not grep.done(), "the long scan should still be running while the other chat reads"
    started = time.monotonic()
    with pytest.raises(RegexBudgetExceeded, match="grep_regex_budget_seconds"):
        await grep
    assert time.monotonic() - started < 3.0


@pytest.mark.parametrize(
    "pattern, says",
    [
        (r"(\w)\1", "不支持反向引用"),
        (r"a(?=b)", "环视"),
        (r"(?<!x)a", "环视"),
        (r"(?!a)b", "环视"),
        (r"a{100000}", "{m,n}"),
        (r"(a{1000}){1000}", "{m,n}"),
        (r"((((a{10}){10}){10}){10})", "{m,n}"),
        (r"(?s).{0,999}.{0,999}.{0,999}z", "太复杂"),
        (r"[\p{L}\p{N}]{1,500}", "太复杂"),
        (r"[", "无效"),
    ],
)
async def test_patterns_outside_the_safe_engine_are_refused_saying_what_is_supported(memory, pattern, says):
    attacker, _ = services(memory)
    with pytest.raises(ValidationError) as caught:
        await attacker.grep_memories(query=pattern, search_fields=["content"], use_regex=True)
    assert says in str(caught.value)
    answer = await run_memory_command(attacker, f"grep -q '{pattern}' -regex")
    assert answer["ok"] is False and says in answer["error"]


async def test_ordinary_patterns_still_find_what_they_should(memory):
    _, bystander = services(memory)
    await bystander.create_memory(
        title="Birthday",
        content="小周的生日是 1994-05-02，喜欢 Hello Kitty",
        memory_type="event",
        core_tags=["生日"],
        diffusion_tags=["蛋糕"],
        opposing_tags=["葬礼"],
    )

    async def titles(pattern, fields=("title", "content")):
        found = await bystander.grep_memories(query=pattern, search_fields=list(fields), use_regex=True)
        return {item["title"] for item in found["items"]}

    assert await titles(r"\d{4}-\d{2}-\d{2}") == {"Birthday"}
    assert await titles(r"(?i)hello kitty") == {"Birthday"}
    assert await titles(r"生日|手冲") == {"Birthday", "咖啡"}
    assert await titles(r"^\p{Han}{2}$", ("tags",)) == {"Birthday", "咖啡"}
    assert await titles(r"^咖啡$", ("tags",)) == {"咖啡"}
    assert await titles(r"a+!") == set(), "another chat's memories stay invisible"

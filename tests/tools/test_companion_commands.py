"""The companion sub-commands and ``recall`` of ``memory_command``, and the host-tool runner, end to end.

Every sub-command derived from the companion table runs against a real store through ``run_memory_command`` and the
effect is checked in the store (not only in the answer). The same table gives the host tools; those are checked
through ``run_host_tool`` here and inside the real host in ``tests/host``.
"""

from __future__ import annotations

import json
import re
import shlex
import typing
from datetime import datetime
from typing import Any

import pytest

from booku_memory.config import load_config
from booku_memory.manifest_tools import component_signatures
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.companion.tool_table import COMPANION_TOOLS
from booku_memory.tools import (
    host_parameters,
    llm_tool_specs,
    run_host_tool,
    session_self_entries,
)
from booku_memory.tools.command_lexer import parse_segment
from booku_memory.tools.command_spec import TOOL_COMMANDS, command_by_name
from booku_memory.tools.formatting import rendered_len
from booku_memory.tools.manual import build_command_help, build_manual
from booku_memory.tools.memory_command import run_memory_command

from .tool_support import WriteCounter, run, seed, step

TABLE_NAMES = {spec.name for spec in COMPANION_TOOLS}
part_two = pytest.mark.skipif(
    not {"plan", "letter_write", "letter_lock_update", "letter_read", "feel", "I"} <= TABLE_NAMES,
    reason="第二部分的陪伴工具还不在 COMPANION_TOOLS 里",
)


async def row(runtime: Any, memory_id: str) -> dict[str, Any]:
    found = await runtime.db.fetch_one("SELECT * FROM booku_memory_records WHERE memory_id = ?", [memory_id])
    assert found is not None, memory_id
    return dict(found)


def text_of(envelope: dict[str, Any], index: int = 0) -> str:
    result = step(envelope, index)
    assert set(result) == {"action", "text"}, result
    return result["text"]


def first_id(text: str) -> str:
    found = re.search(r"\[(mem-[0-9a-f]+)\]", text)
    assert found, text
    return found.group(1)


async def hold(svc: Any, content: str, *flags: str) -> str:
    envelope = await run(svc, "hold -content " + shlex.quote(content) + " " + " ".join(flags))
    return first_id(text_of(envelope))


# ----- one table, three surfaces -----------------------------------------------------------------------------------


def test_every_table_tool_is_a_sub_command_with_the_same_parameters() -> None:
    specs = llm_tool_specs()
    assert [spec.name for spec in specs] == [*[s.name for s in COMPANION_TOOLS], "recall"]
    assert [command.name for command in TOOL_COMMANDS] == [spec.name for spec in specs]
    for spec in specs:
        command = command_by_name(spec.name.upper())  # case-insensitive, so "I" is reachable as "i" too
        assert command is not None and command.tool is spec
        assert [flag.key for flag in command.flags] == [param.name for param in spec.params]
        assert [flag.key for flag in command.flags if flag.required] == [p.name for p in spec.params if p.required]
        assert [flag.help for flag in command.flags] == [param.description for param in spec.params]


def test_recall_parameters_are_the_service_method_parameters_with_its_defaults() -> None:
    import inspect

    from booku_memory.services.memory_service import BookuMemoryService
    from booku_memory.tools.llm_tool_specs import RECALL_SPEC

    signature = inspect.signature(BookuMemoryService.recall).parameters
    # actor_peer_id is keyword-only and comes from trusted host data, never from the model.
    callable_by_model = [p for name, p in signature.items() if name != "self" and p.kind is not p.KEYWORD_ONLY]
    assert [param.name for param in RECALL_SPEC.params] == [p.name for p in callable_by_model]
    for param, declared in zip(RECALL_SPEC.params, callable_by_model):
        assert param.required == (declared.default is inspect.Parameter.empty), param.name
        if not param.required:
            assert param.default == declared.default, param.name


def test_manual_names_every_table_sub_command_and_flag_with_a_runnable_example() -> None:
    manual = build_manual()
    for command in TOOL_COMMANDS:
        assert re.search(rf"^### {re.escape(command.name)}：", manual, flags=re.MULTILINE), command.name
        for flag in command.flags:
            for spelling in flag.names:
                assert re.search(rf"(?<![\w-])-{spelling}(?![\w])", manual), f"{command.name} -{spelling}"
        assert f"例：{command.example}\n" in manual
        example = parse_segment(command.example)
        assert example.spec is command
        assert all(example.has(flag.key) for flag in command.flags if flag.required), command.example
        detail = build_command_help(command.name)
        for flag in command.flags:
            assert flag.help in detail


def test_host_parameters_follow_the_table() -> None:
    by_name = {spec.name: host_parameters(spec) for spec in llm_tool_specs()}
    assert [p.required for p in by_name["breath"]] == [False, False]  # breath: nothing required, ever
    assert {p.name: p.annotation for p in by_name["breath"]} == {"domain": str, "max_results": int}
    hold_params = {p.name: p for p in by_name["hold"]}
    assert hold_params["content"].required and hold_params["content"].annotation is str
    assert hold_params["source_ranges"].annotation == list[list[int]]
    assert hold_params["quotes"].annotation == list[str]
    assert hold_params["pinned"].default is False and hold_params["valence"].annotation is float
    recall = {p.name: p for p in by_name["recall"]}
    assert recall["peer_scope"].annotation == typing.Literal["all", "actor"]
    assert recall["max_chars"].default == 6500 and recall["quotas"].annotation is dict
    assert [p.name for p in by_name["recall"] if p.required] == ["query"]


def test_every_table_tool_is_registered_as_a_host_component() -> None:
    signatures = set(component_signatures())
    for spec in llm_tool_specs():
        assert f"booku_memory:tool:{spec.name}" in signatures, spec.name
    assert "booku_memory:event_handler:booku_memory_session_self" in signatures


# ----- reads -------------------------------------------------------------------------------------------------------


async def test_breath_without_flags_surfaces_pinned_first_and_then_the_weighted(svc, memory) -> None:
    ordinary = await hold(svc, "周末一起去爬了香山，她说秋天最好看。")
    pinned = await hold(svc, "她不喜欢被催促，有事慢慢说。", "-pinned")
    assert (await row(memory.runtime, pinned))["pinned"] == 1
    text = text_of(await run(svc, "breath"))
    assert text.index(pinned) < text.index(ordinary)
    assert "她不喜欢被催促，有事慢慢说。" in text and "周末一起去爬了香山，她说秋天最好看。" in text
    limited = text_of(await run(svc, "breath -max_results 1"))
    assert pinned in limited  # core principles are always there; max_results only limits the surfacing part
    assert (await run(svc, "breath -max_results 0"))["ok"] is False


async def test_breath_search_returns_bodies_verbatim_and_rejects_bad_dates(svc) -> None:
    body = "  她说：\n下个月想去看海。  "
    memory_id = await hold(svc, body)
    text = text_of(await run(svc, "breath_search -q 看海 -max_results 5"))
    assert memory_id in text and body in text
    bad = await run(svc, "breath_search -q 看海 -date_from 2024/05/01")
    assert bad["ok"] is False and "date_from" in bad["error"]
    over = await run(svc, "breath_search -q 看海 -max_results 51")
    assert over["ok"] is False and over["executed"] == 0 and "-max_results" in over["error"]


async def test_breath_advanced_catalog_marks_anchors(svc) -> None:
    memory_id = await hold(svc, "第一次见面是在图书馆。", "-domain 回忆 -title 初见")
    text_of(await run(svc, f"anchor -bucket_id {memory_id}"))
    catalog = text_of(await run(svc, "breath_advanced -catalog -domain 回忆"))
    line = next(line for line in catalog.splitlines() if memory_id in line)
    assert "⚓ [anchor]" in line and "初见 | 回忆 |" in line
    assert "第一次见面是在图书馆。" not in catalog  # catalog lines carry no body


async def test_dream_and_pulse(svc) -> None:
    memory_id = await hold(svc, "今天一起修好了那辆旧自行车。")
    dream = text_of(await run(svc, "dream -window_hours 1.5"))
    assert memory_id in dream and "今天一起修好了那辆旧自行车。" in dream
    assert (await run(svc, "dream -window_hours 0"))["ok"] is False
    pulse = text_of(await run(svc, "pulse -include_archive"))
    assert "衰减引擎" in pulse and memory_id in pulse


# ----- writes ------------------------------------------------------------------------------------------------------


async def test_hold_keeps_content_verbatim_with_its_flags_as_agent(svc, memory) -> None:
    body = "  今天她第一次叫我的名字。\n@小王：你们俩真像一家人\n我记住了这一刻。  "
    envelope = await run(
        svc,
        "hold -content "
        + shlex.quote(body)
        + " -title 第一次叫名字 -domain 关系,日常 -tags 名字 -importance 8 -valence 0.9 -arousal 0.6"
        " -why_remembered '这是我们关系的转折' -quotes '[\"你们俩真像一家人\"]'",
    )
    memory_id = first_id(text_of(envelope))
    stored = await row(memory.runtime, memory_id)
    assert stored["content"] == body
    assert stored["title"] == "第一次叫名字"
    assert json.loads(stored["domains"]) == ["关系", "日常"]
    assert (stored["importance"], stored["valence"], stored["arousal"]) == (8, 0.9, 0.6)
    assert stored["why_remembered"] == "这是我们关系的转折"
    assert stored["authority"] == "agent" and stored["source"] == "companion"
    found = text_of(await run(svc, "breath_search -q 名字 -quotes"))
    assert "你们俩真像一家人" in found and "小王" in found


async def test_invalid_flags_are_refused_before_anything_is_written(svc, write_counter: WriteCounter) -> None:
    before = await write_counter.snapshot()
    for command in (
        "hold -content 你好 -importance 11",
        "hold -content 你好 -valence 1.5",
        "hold -content 你好 -quotes 不是JSON",
        'hold -content 你好 -quotes \'{"text": "不是列表"}\'',
        "hold -title 没有正文",
        "grow -items '[{bad'",
        "hold -content 你好 -bogus 1",
        "trace -resolved 1",
        "recall -q 测试 -peer_scope everyone",
        "hold -content 一 && hold -content 二 -importance 0",
    ):
        envelope = await run(svc, command)
        assert envelope["ok"] is False and envelope["executed"] == 0, command
    assert await write_counter.snapshot() == before
    message = (await run(svc, "hold -title 没有正文"))["error"]
    assert "-content" in message and "例：hold" in message


async def test_grow_splits_long_text_and_takes_caller_items(svc, memory) -> None:
    text = "上午陪她去医院复查，结果一切正常。\n\n晚上一起做了番茄炒蛋，她说比上次好吃。"
    grown = text_of(await run(svc, "grow -content " + shlex.quote(text)))
    ids = re.findall(r"\[(mem-[0-9a-f]+)\]", grown)
    assert len(ids) == 2
    bodies = [(await row(memory.runtime, memory_id))["content"] for memory_id in ids]
    assert sorted(bodies) == sorted(["上午陪她去医院复查，结果一切正常。", "晚上一起做了番茄炒蛋，她说比上次好吃。"])
    items = json.dumps(
        [{"title": "搬家", "content": "周六帮她搬家，累但开心。", "importance": 6}, "周日一起整理了书架。"],
        ensure_ascii=False,
    )
    from_items = text_of(await run(svc, f"grow -items '{items}'"))
    item_ids = re.findall(r"\[(mem-[0-9a-f]+)\]", from_items)
    assert len(item_ids) == 2
    moved = await row(memory.runtime, item_ids[0])
    assert (moved["title"], moved["content"], moved["importance"]) == ("搬家", "周六帮她搬家，累但开心。", 6)


async def test_trace_switches_are_written_as_flags_and_stored_as_zero_or_one(svc, memory) -> None:
    memory_id = await hold(svc, "那次争吵之后我们都道了歉。", "-importance 4")
    text_of(await run(svc, f"trace -id {memory_id} -resolved"))
    assert (await row(memory.runtime, memory_id))["resolved"] == 1
    text_of(await run(svc, f"trace -bucket_id {memory_id} -resolved 0 -pinned 1 -name 和好"))
    stored = await row(memory.runtime, memory_id)
    assert (stored["resolved"], stored["pinned"], stored["importance"], stored["name"]) == (0, 1, 10, "和好")
    refused = await run(svc, f"trace -id {memory_id} -pinned 0")  # leaving the last protection needs an importance
    assert refused["ok"] is False and "importance" in refused["error"]
    text_of(await run(svc, f"trace -id {memory_id} -pinned 0 -importance 3"))
    assert (await row(memory.runtime, memory_id))["importance"] == 3
    missing = await run(svc, "trace -id mem-0000 -resolved")
    assert missing["ok"] is False and missing["executed"] == 1


async def test_anchor_and_release(svc, memory) -> None:
    memory_id = await hold(svc, "我们的暗号是“月亮”。")
    text_of(await run(svc, f"anchor -bucket_id {memory_id}"))
    assert (await row(memory.runtime, memory_id))["anchor"] == 1
    assert memory_id not in text_of(await run(svc, "breath"))
    text_of(await run(svc, f"release -id {memory_id}"))
    assert (await row(memory.runtime, memory_id))["anchor"] == 0
    assert memory_id in text_of(await run(svc, "breath"))


async def test_long_verbatim_text_is_not_cut_by_the_output_budget(svc) -> None:
    body = "这一段很长的回忆要一字不差地回来。" * 300  # ~5100 characters, over the 3000-character answer budget
    envelope = await run(svc, "hold -content " + shlex.quote(body) + " && breath")
    assert envelope["ok"] and body in text_of(envelope, 1)
    assert rendered_len(envelope) > 3000


# ----- recall ------------------------------------------------------------------------------------------------------


async def test_recall_gives_the_block_and_a_compact_entry_list(svc) -> None:
    event = await seed(svc, "海边旅行", "去年夏天我们在青岛海边住了三天。", memory_type="event")
    envelope = await run(svc, 'recall -q 青岛海边 -quotas \'{"events": 3, "entities": 0}\'')
    result = step(envelope)
    assert result["action"] == "recall"
    assert "去年夏天我们在青岛海边住了三天。" in result["rendered"]
    assert result["items"][0] == {"id": event, "type": "events", "mode": "full", "score": result["items"][0]["score"]}
    assert result["total"] == 1 and result["dropped"] == 0 and "note" not in result
    bare = step(await run(svc, "recall -q 青岛海边 -render false"))
    assert "rendered" not in bare and bare["items"][0]["title"] == "海边旅行"
    refused = await run(svc, "recall -q 青岛 -quotas '{\"movies\": 1}'")
    assert refused["ok"] is False and "movies" in refused["error"]


async def test_recall_shrinks_the_block_to_the_output_budget(svc) -> None:
    places = [("青岛", "啤酒和海鸥"), ("厦门", "鼓浪屿的钢琴声"), ("大连", "星海广场的风"), ("三亚", "椰子和晒伤")]
    ids = [
        await seed(svc, f"{place}旅行", f"沿着海岸线旅行，在{place}记住了{memo}。" * 30, memory_type="event")
        for place, memo in places
    ]
    config = load_config({"tools": {"output_char_budget": 900}})
    envelope = await run_memory_command(svc, "recall -q '海岸线 旅行'", config=config)
    assert envelope["ok"] and rendered_len(envelope) <= 900
    result = step(envelope)
    assert "缩到" in result["note"] and "要求 6500 字" in result["note"]
    shown = {item["id"]: item["mode"] for item in result["items"]}
    assert set(shown) <= set(ids) and shown
    assert "full" not in shown.values()  # four ~600-character memories cannot all stay whole in under 900
    assert all(memory_id in result["rendered"] for memory_id in shown)
    roomy = step(await run_memory_command(svc, "recall -q '海岸线 旅行'"))
    assert "note" not in roomy or len(roomy["rendered"]) > len(result["rendered"])


# ----- host tools --------------------------------------------------------------------------------------------------


async def test_host_tool_runner_matches_the_sub_commands(svc) -> None:
    memory_id = await hold(svc, "她最喜欢的花是向日葵。")
    ok, text = await run_host_tool(svc, "breath", {})
    assert ok and memory_id in text and "她最喜欢的花是向日葵。" in text
    ok, text = await run_host_tool(svc, "breath_search", {"query": "向日葵", "domain": None, "max_results": None})
    assert ok and memory_id in text
    ok, text = await run_host_tool(svc, "hold", {"title": "缺正文"})
    assert not ok and "content" in text
    ok, text = await run_host_tool(svc, "breath", {"owner": "someone-else"})
    assert not ok and "owner" in text and "domain" in text
    ok, text = await run_host_tool(svc, "trace", {"bucket_id": memory_id, "resolved": 1})
    assert ok
    ok, text = await run_host_tool(svc, "breath_search", {"query": "向日葵", "max_results": 99})
    assert not ok and "max_results" in text and "Traceback" not in text
    await seed(svc, "向日葵花田", "秋天一起去看了向日葵花田。", memory_type="event")
    ok, text = await run_host_tool(svc, "recall", {"query": "向日葵"})
    answer = json.loads(text)
    assert ok and answer["action"] == "recall" and "向日葵花田" in answer["rendered"] + text


# ----- part two: plans, letters, feel, I ----------------------------------------------------------------------------


@part_two
async def test_plan_is_registered_and_closed_through_trace(svc, memory) -> None:
    plan_id = first_id(text_of(await run(svc, 'plan -content "周六陪她去看牙医" -weight 0.8')))
    stored = await row(memory.runtime, plan_id)
    assert stored["content"] == "周六陪她去看牙医" and json.loads(stored["extra"])["kind"] == "plan"
    text_of(await run(svc, f"trace -id {plan_id} -status resolved"))
    assert json.loads((await row(memory.runtime, plan_id))["extra"])["status"] == "resolved"


@part_two
async def test_letters_are_written_and_locked_as_the_ai_side(svc, memory) -> None:
    letter = "给一年后的你：\n别忘了今天的雪。"
    written = text_of(
        await run(
            svc,
            "letter_write -author ai -content "
            + shlex.quote(letter)
            + " -title 雪 -lock_type timed -unlock_date 2099-01-01",
        )
    )
    letter_id = re.search(r"\[([0-9a-f]{12})\]", written).group(1)
    own = text_of(await run(svc, "letter_read -author ai"))
    assert letter in own  # the writing side reads its own timed letter
    user = BookuCompanionService(memory.runtime, side="user")
    item = next(i for i in (await user.letter_read())["items"] if i["id"] == letter_id)
    assert item["readable"] is False and "content" not in item
    text_of(await run(svc, f"letter_lock_update -letter_id {letter_id} -lock_type none"))
    item = next(i for i in (await user.letter_read())["items"] if i["id"] == letter_id)
    assert item["readable"] is True and item["content"] == letter


@part_two
async def test_feel_finds_a_feeling_verbatim(svc) -> None:
    feeling = "看她睡着的样子，心里很安静。"
    memory_id = await hold(svc, feeling, "-feel")
    text = text_of(await run(svc, "feel -q " + shlex.quote(feeling)))
    assert memory_id in text and feeling in text
    assert (await run(svc, "feel"))["ok"] is False


@part_two
async def test_self_knowledge_candidate_promotion_and_session_start(svc, memory) -> None:
    assert await session_self_entries(svc) == ""
    statement = "我觉得我在意的是被认真对待。"
    candidate = first_id(text_of(await run(svc, "I -content " + shlex.quote(statement) + " -aspect values")))
    refused = await run(svc, f"I -promote {candidate}")
    assert refused["ok"] is False and "见证" in refused["error"]
    for day in (1, 2, 3):  # three dreams on three different dates witness the candidate
        moment = datetime(2031, 3, day, 21, 0).timestamp()
        dreamer = BookuCompanionService(memory.runtime, side="ai", clock=lambda moment=moment: moment)
        await dreamer.dream()
    text_of(await run(svc, f"I -promote {candidate}"))
    listing = text_of(await run(svc, "i -read"))
    assert statement in listing and "正式" in listing
    assert statement in await session_self_entries(svc)

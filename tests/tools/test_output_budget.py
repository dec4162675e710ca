"""Answers stay within tools.output_char_budget, say what was left out, and say how to get the rest."""

from __future__ import annotations

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.tools.formatting import fit_to_budget, rendered_len
from booku_memory.tools.memory_command import run_memory_command

from .tool_support import bulk_seed, run, seed, step


async def test_search_over_500_memories_stays_within_the_character_budget(memory, svc):
    await bulk_seed(memory.runtime, 500)
    assert (await svc.get_status())["counts"]["metadata"]["memory"] == 500
    budget = svc.runtime.config.tools.output_char_budget
    envelope = await run(svc, 'search -q "项目会议 纪要" -n 100')
    assert rendered_len(envelope) <= budget
    result = step(envelope)
    assert result["total"] == 100
    assert 0 < len(result["items"]) < 100
    assert len(result["items"]) + result["omitted"] == result["total"]
    assert result["hint"] == f"另有 {result['omitted']} 条因输出长度上限未显示，可减小 -n 或加过滤条件"
    snippet_chars = svc.runtime.config.tools.search_snippet_chars
    assert all(len(item["snippet"]) <= snippet_chars for item in result["items"])


async def test_budget_and_snippet_length_come_from_config(tmp_path):
    config = load_config(
        {
            "tools": {"output_char_budget": 600, "search_snippet_chars": 30},
            "maintenance": {"enabled": False},
            "startup_ingest": {"enabled": False},
        }
    )
    async with booku_memory.open(tmp_path / "d", config, embedder=DeterministicTestEmbedder()) as handle:
        svc = handle.get_service(booku_memory.MEMORY_SERVICE)
        await bulk_seed(handle.runtime, 30)
        envelope = await run_memory_command(svc, 'search -q "项目会议" -n 30')
        assert rendered_len(envelope) <= 600
        result = step(envelope)
        assert result["items"] and all(len(item["snippet"]) <= 30 for item in result["items"])
        assert result["omitted"] > 0


async def test_long_read_is_cut_with_the_offset_to_continue(svc):
    body = "".join(f"[{i:05d}]" for i in range(2500))  # 17 500 characters
    memory_id = await seed(svc, "长文", body)
    budget = svc.runtime.config.tools.output_char_budget
    pieces, offset = [], 0
    for _ in range(20):
        envelope = await run(svc, f"read -id {memory_id} -offset {offset}")
        assert rendered_len(envelope) <= budget
        item = step(envelope)["items"][0]
        if "more" not in item:
            pieces.append(item["content"])
            break
        text = item["content"]
        assert text.endswith("…")
        pieces.append(text[:-1])
        next_offset = int(item["more"].rsplit("-offset ", 1)[1].split()[0])
        assert next_offset == offset + len(text) - 1
        offset = next_offset
    assert "".join(pieces) == body


async def test_chain_of_searches_shares_one_budget(memory, svc):
    await bulk_seed(memory.runtime, 60)
    command = " && ".join(['search -q "项目会议" -n 30'] * 3)
    envelope = await run(svc, command)
    assert envelope["ok"] and envelope["executed"] == 3
    assert rendered_len(envelope) <= svc.runtime.config.tools.output_char_budget
    assert all(entry["result"]["items"] for entry in envelope["results"])


def test_fit_to_budget_falls_back_to_a_summary_when_details_cannot_fit():
    envelope = {
        "action": "memory_command",
        "ok": False,
        "executed": 3,
        "results": [{"command": "x" * 80, "success": False, "error": "很长的错误说明" * 40}] * 3,
        "error": "第 3 步失败" * 30,
    }
    fitted = fit_to_budget(envelope, 200)
    assert rendered_len(fitted) <= 200
    assert fitted["ok"] is False and fitted["executed"] == 3
    assert fitted["message"].startswith("输出超过长度上限")


def test_fit_to_budget_leaves_small_answers_untouched():
    envelope = {
        "action": "memory_command",
        "ok": True,
        "executed": 1,
        "results": [
            {"command": "folders", "success": True, "result": {"action": "folders", "total": 1, "items": ["default"]}}
        ],
    }
    before = repr(envelope)
    assert repr(fit_to_budget(envelope, 3000)) == before


def test_help_manual_is_exempt_but_other_steps_are_not():
    from booku_memory.tools.manual import build_manual

    manual = build_manual()
    envelope = {
        "action": "memory_command",
        "ok": True,
        "executed": 2,
        "results": [
            {"command": "help", "success": True, "result": {"action": "help", "content": manual}},
            {
                "command": "search",
                "success": True,
                "result": {
                    "action": "search",
                    "total": 50,
                    "items": [{"id": f"m{i}", "snippet": "字" * 100} for i in range(50)],
                },
            },
        ],
    }
    fitted = fit_to_budget(envelope, 1000)
    assert fitted["results"][0]["result"]["content"] == manual
    assert rendered_len(fitted) <= 1000 + rendered_len(manual)
    assert fitted["results"][1]["result"]["omitted"] > 0

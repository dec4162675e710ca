"""The manual and the host schemas are generated from the command table and stay complete and short."""

from __future__ import annotations

import re
import typing

import pytest

from booku_memory.config import BookuConfig, load_config
from booku_memory.services.errors import ValidationError
from booku_memory.tools import (
    memory_command_parameter_descriptions,
    memory_command_tool_schema,
    temporary_memo_parameter_descriptions,
    temporary_memo_tool_schema,
)
from booku_memory.tools.command_lexer import parse_segment
from booku_memory.tools.command_spec import COMMANDS, TOOL_COMMANDS, all_command_spellings
from booku_memory.tools.manual import build_command_help, build_manual
from booku_memory.tools.temporary_memo import MEMO_ACTIONS, run_temporary_memo

MANUAL_MAX_CHARS = 4500
"""The memory sub-commands, the syntax notes and the temporary_memo section."""
TOOL_SECTION_HEADER_CHARS = 400
TOOL_COMMAND_CHARS = 180
"""Each companion/recall sub-command gets one line (summary + flag names) and one example, nothing more."""


def _mentions_flag(text: str, spelling: str) -> bool:
    # "-n" must appear as a flag of its own, not as the tail of "-memory_ids" or inside "-include_knowledge".
    return re.search(rf"(?<![\w-])-{re.escape(spelling)}(?![\w])", text) is not None


def test_manual_mentions_every_sub_command_alias_and_flag_spelling_the_parser_accepts():
    manual = build_manual()
    for spelling in all_command_spellings():
        assert re.search(rf"(?<![\w-]){spelling}(?![\w])", manual), spelling
    for spec in COMMANDS:
        for spelling in spec.all_spellings():
            assert _mentions_flag(manual, spelling), f"{spec.name}: -{spelling}"


def test_every_flag_the_manual_mentions_is_accepted_by_some_sub_command():
    accepted = {spelling for spec in COMMANDS for spelling in spec.all_spellings()}
    code_part = build_manual().split("## temporary_memo")[0]
    mentioned = set(re.findall(r"(?<![\w-])-([a-z][a-z_]*)", code_part))
    assert mentioned <= accepted | {"x"}, mentioned - accepted  # "-x" is the generic example in the syntax notes


def test_manual_examples_all_parse():
    manual = build_manual()
    examples = re.findall(r"^例：(.+)$", manual, flags=re.MULTILINE)
    memory_examples = [example for example in examples if not example.startswith("temporary_memo(")]
    assert len(memory_examples) == len(COMMANDS)
    for example, spec in zip(memory_examples, COMMANDS):
        assert parse_segment(example).spec.name == spec.name


def test_manual_is_short_and_mentions_the_reference_keywords():
    manual = build_manual()
    start, end = manual.index("## 陪伴记忆"), manual.index("## temporary_memo")
    tool_section = manual[start:end]
    assert len(manual) - len(tool_section) <= MANUAL_MAX_CHARS
    assert len(tool_section) <= TOOL_SECTION_HEADER_CHARS + TOOL_COMMAND_CHARS * len(TOOL_COMMANDS)
    for word in ("search", "create", "temporary_memo", "-triple_tags", "&&"):
        assert word in manual


def test_manual_quotes_configured_limits():
    config = load_config({"retrieval": {"max_top_k": 42}, "memo": {"max_expire_hours": 12.0}})
    manual = build_manual(config)
    assert "最多 42" in manual
    assert "最多 12" in manual


def test_help_for_one_sub_command_lists_every_flag_with_choices():
    text = build_command_help("create")
    for spec in COMMANDS:
        if spec.name == "create":
            for flag in spec.flags:
                assert flag.shown in text
    assert "person/event/knowledge" in text
    assert build_command_help("UNDELETE").startswith("# restore")


def test_help_for_unknown_sub_command_lists_the_valid_ones():
    with pytest.raises(ValidationError, match="没有子命令 'nope'，可用：help、search"):
        build_command_help("nope")


def test_memory_command_schema_has_one_required_string_parameter_with_chinese_description():
    schema = memory_command_tool_schema()
    assert schema["name"] == "memory_command"
    assert schema["required"] == ["command"]
    assert schema["parameters"]["command"]["type"] == "string"
    assert schema["parameters"]["command"]["description"] == memory_command_parameter_descriptions()["command"]
    for spec in COMMANDS:
        assert spec.name in schema["description"]


def test_temporary_memo_schema_matches_the_runner_signature():
    schema = temporary_memo_tool_schema(BookuConfig())
    hints = typing.get_type_hints(run_temporary_memo)
    for name in schema["parameters"]:
        assert name in hints, name
    assert schema["parameters"]["action"]["enum"] == list(MEMO_ACTIONS)
    assert schema["parameters"]["expire_hours"]["default"] == 2.0
    assert set(schema["parameters"]) == set(temporary_memo_parameter_descriptions())
    assert "168" in schema["parameters"]["expire_hours"]["description"]

"""The companion tool table is the single source for host tools, memory_command and MCP: it must match the service."""

from __future__ import annotations

import inspect
import re

import pytest

from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.companion.tool_table import (
    COMPANION_TOOLS,
    REQUIRED,
    json_schema,
    spec_by_name,
)

SEED_TOOLS = (
    "breath",
    "breath_search",
    "breath_advanced",
    "hold",
    "grow",
    "trace",
    "dream",
    "anchor",
    "release",
    "pulse",
)


def test_the_table_starts_with_exactly_the_part_one_tools() -> None:
    # Plans, letters, feel and I append their tools to the same table; see test_tool_table_later_tools.py.
    assert tuple(spec.name for spec in COMPANION_TOOLS)[: len(SEED_TOOLS)] == SEED_TOOLS


@pytest.mark.parametrize("spec", COMPANION_TOOLS, ids=lambda s: s.name)
def test_every_parameter_matches_the_service_method(spec) -> None:
    signature = inspect.signature(getattr(BookuCompanionService, spec.method))
    method_params = {name: p for name, p in signature.parameters.items() if name != "self"}
    assert [p.name for p in spec.params] == list(method_params)
    for param in spec.params:
        default = method_params[param.name].default
        if param.required:
            assert default is inspect.Parameter.empty, param.name
        else:
            assert default == param.default, param.name


@pytest.mark.parametrize("spec", COMPANION_TOOLS, ids=lambda s: s.name)
def test_descriptions_are_chinese_and_schemas_are_closed(spec) -> None:
    assert re.search(r"[\u4e00-\u9fff]", spec.description)
    assert all(re.search(r"[\u4e00-\u9fff]", p.description) for p in spec.params)
    schema = json_schema(spec)
    assert schema["additionalProperties"] is False
    assert schema["required"] == [p.name for p in spec.params if p.default is REQUIRED]


def test_breath_is_its_own_zero_parameter_tool() -> None:
    assert json_schema(spec_by_name("breath"))["required"] == []
    assert json_schema(spec_by_name("breath_search"))["required"] == ["query"]
    assert json_schema(spec_by_name("hold"))["required"] == ["content"]
    assert json_schema(spec_by_name("breath_search"))["properties"]["max_results"]["maximum"] == 50

"""Plans, letters, feel and I in the one companion tool table (every tool's signature match: test_tool_table.py)."""

from __future__ import annotations

from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.companion.tool_table import (
    COMPANION_TOOLS,
    json_schema,
    spec_by_name,
)

PART_TWO = ("plan", "letter_write", "letter_lock_update", "letter_read", "feel", "I")


def test_the_part_two_tools_follow_the_part_one_tools() -> None:
    assert tuple(spec.name for spec in COMPANION_TOOLS)[-len(PART_TWO) :] == PART_TWO
    assert all(callable(getattr(BookuCompanionService, spec_by_name(name).method)) for name in PART_TWO)
    assert spec_by_name("I").method == "self_knowledge"


def test_required_parameters_are_the_seeds() -> None:
    required = {name: json_schema(spec_by_name(name))["required"] for name in PART_TWO}
    assert required == {
        "plan": ["content"],
        "letter_write": ["author", "content"],
        "letter_lock_update": ["letter_id", "lock_type"],
        "letter_read": [],
        "feel": ["query"],
        "I": [],
    }


def test_no_tool_lets_the_caller_name_a_side_owner_or_store() -> None:
    for spec in COMPANION_TOOLS:
        assert not {"side", "owner", "owner_uid", "store", "store_key", "authority"} & {p.name for p in spec.params}


def test_schema_bounds_match_the_rules() -> None:
    plan = json_schema(spec_by_name("plan"))["properties"]
    assert (plan["weight"]["minimum"], plan["weight"]["maximum"], plan["weight"]["default"]) == (0, 1, 0.5)
    assert json_schema(spec_by_name("letter_read"))["properties"]["limit"]["maximum"] == 50
    assert json_schema(spec_by_name("I"))["properties"]["limit"]["default"] == 20
    assert "0.65" in spec_by_name("feel").description
    assert "permanent" in spec_by_name("letter_lock_update").description

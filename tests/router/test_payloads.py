"""Turning form and JSON input into service arguments."""

from __future__ import annotations

import datetime as dt

import pytest

from booku_memory.router.payloads import (
    MEMORY_FIELDS,
    changed_memory_fields,
    clean_memory_fields,
    current_memory_fields,
    memory_fields_from_form,
    split_list,
)
from booku_memory.services.errors import ValidationError


def test_split_list_accepts_chinese_separators_and_dedupes():
    assert split_list("朋友，同学, 朋友、学校\n ") == ["朋友", "同学", "学校"]
    assert split_list([" a ", "", "a", "b"]) == ["a", "b"]
    assert split_list(None) == []


def test_form_times_are_parsed_and_bad_ones_name_the_field():
    fields = memory_fields_from_form({"title": " t ", "event_start_at": "2024-05-01T08:30", "event_end_at": ""})
    assert fields["title"] == "t"
    assert fields["event_start_at"] == dt.datetime(2024, 5, 1, 8, 30).timestamp()
    assert fields["event_end_at"] == 0.0
    with pytest.raises(ValidationError, match="event_start_at"):
        memory_fields_from_form({"event_start_at": "明天"})


def test_blank_folder_means_keep_and_null_means_absent():
    assert "folder_id" not in clean_memory_fields({"folder_id": "  "}, MEMORY_FIELDS)
    assert clean_memory_fields({"title": None, "status": "archived"}, MEMORY_FIELDS) == {"status": "archived"}
    with pytest.raises(ValidationError, match="event_end_at"):
        clean_memory_fields({"event_end_at": float("nan")}, MEMORY_FIELDS)


def test_changed_fields_sends_whole_triplet_and_ignores_case_and_minute_rounding():
    stored = {
        "id": "m",
        "title": "张三",
        "content": "正文",
        "metadata": {
            "core_tags": ["a"],
            "diffusion_tags": ["b"],
            "opposing_tags": ["c"],
            "event_start_at": 1_700_000_030.0,
            "memory_type": "person",
            "folder_id": "default",
        },
    }
    current = current_memory_fields(stored)
    same = {**current, "core_tags": ["A"], "event_start_at": 1_700_000_000.0}
    assert changed_memory_fields(current, same) == {}
    edited = {**current, "diffusion_tags": ["b", "d"], "title": "张三丰"}
    assert changed_memory_fields(current, edited) == {
        "title": "张三丰",
        "core_tags": ["a"],
        "diffusion_tags": ["b", "d"],
        "opposing_tags": ["c"],
    }

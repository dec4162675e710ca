"""Revision diffs shown in the history view."""

from __future__ import annotations

from booku_memory.router.diffs import DiffLine, diff_snapshots, snapshot_lines


def _snapshot(**fields):
    base = {
        "title": "张三",
        "content": "第一行\n第二行",
        "memory_type": "person",
        "status": "active",
        "core_tags": ["朋友"],
        "diffusion_tags": ["学校"],
        "opposing_tags": ["陌生人"],
        "version": 1,
        "updated_at": 1.0,
        "is_deleted": False,
    }
    return {**base, **fields}


def test_first_version_is_all_additions():
    lines = diff_snapshots(None, _snapshot())
    assert lines and all(line.kind == "add" for line in lines)
    assert DiffLine("add", "标题: 张三") in lines


def test_content_and_tag_changes_show_as_remove_and_add_with_context():
    lines = diff_snapshots(_snapshot(), _snapshot(content="第一行\n第二行改了", core_tags=["朋友", "篮球"]))
    assert DiffLine("remove", "第二行") in lines
    assert DiffLine("add", "第二行改了") in lines
    assert DiffLine("remove", "核心标签: 朋友") in lines
    assert DiffLine("add", "核心标签: 朋友、篮球") in lines
    assert DiffLine("same", "第一行") in lines


def test_bookkeeping_fields_alone_produce_no_diff():
    assert diff_snapshots(_snapshot(), _snapshot(version=2, updated_at=99.0)) == []


def test_content_line_starting_with_dashes_is_kept():
    lines = diff_snapshots(_snapshot(content="--- 分隔"), _snapshot(content="++ 新"))
    assert DiffLine("remove", "--- 分隔") in lines and DiffLine("add", "++ 新") in lines


def test_snapshot_lines_skip_empty_fields_and_show_deletion():
    lines = snapshot_lines(_snapshot(person_id=None, is_deleted=True))
    assert "已删除: 是" in lines
    assert not any(line.startswith("人物 ID") for line in lines)

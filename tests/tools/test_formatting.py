"""Compact output pieces: what one hit, one read item and each write message look like."""

from __future__ import annotations

from datetime import datetime

from booku_memory.tools.formatting import (
    compact_item,
    format_create,
    format_history,
    format_search,
    format_update,
    full_item,
    one_line,
    tag_shorthand,
)


def _item(**metadata):
    base = {
        "memory_type": "person",
        "status": "active",
        "bucket": "memory",
        "core_tags": ["a", "b"],
        "diffusion_tags": ["c"],
        "opposing_tags": ["d"],
        "folder_id": "default",
    }
    base.update(metadata)
    return {"id": "mem-1", "title": "张三\n同学", "content_snippet": "第一行\n\n第二行" * 30, "metadata": base}


def test_compact_item_keeps_only_what_the_model_needs():
    compact = compact_item({**_item(), "score": 0.123456}, snippet_chars=20)
    assert compact == {
        "id": "mem-1",
        "title": "张三 同学",
        "type": "person",
        "score": 0.1235,
        "snippet": one_line("第一行\n\n第二行" * 30, 20),
    }
    assert len(compact["snippet"]) == 20 and "\n" not in compact["snippet"]


def test_compact_item_marks_knowledge_chunks_archived_and_related():
    compact = compact_item({**_item(bucket="knowledge", status="archived"), "related": True}, snippet_chars=50)
    assert compact["type"] == "知识库片段" and compact["status"] == "archived" and compact["related"] is True
    assert "score" not in compact


def test_full_item_has_paste_ready_tags_and_only_set_fields():
    item = {**_item(person_id="qq:1", event_start_at=0.0, address_or_coord="", folder_id="工作"), "content": "正文"}
    detail = full_item(item)
    assert detail["tags"] == "a,b|c|d" and detail["person_id"] == "qq:1" and detail["folder"] == "工作"
    assert "event_start_at" not in detail and "address_or_coord" not in detail
    assert detail["content"] == "正文"
    assert tag_shorthand({}) == "||"


def test_format_create_created_and_merged_messages():
    created = format_create({"mode": "created", "id": "mem-1", "items": [{"id": "mem-1", "title": "张三"}]})
    assert created == {"action": "create", "result": "created", "id": "mem-1", "message": "已创建记忆 mem-1《张三》"}
    merged = format_create(
        {"mode": "merged", "id": "mem-7", "items": [{"id": "mem-7", "title": "张三"}], "degraded": "向量不可用"}
    )
    assert merged["result"] == "merged" and "已合并进这条记忆" in merged["message"] and "mem-7" in merged["message"]
    assert merged["degraded"] == "向量不可用"


def test_format_create_says_an_unsure_pair_waits_for_a_decision():
    result = format_create(
        {
            "mode": "created",
            "id": "mem-2",
            "items": [{"id": "mem-2", "title": "手机号"}],
            "unsure": [{"id": "mem-1", "kind": "maybe_update"}],
        }
    )
    assert result["unsure"] == ["mem-1"]
    assert "可能是它的更新：mem-1" in result["message"] and "两条暂都保留" in result["message"]


def test_format_update_reports_no_change_honestly():
    unchanged = format_update({"updated": 0, "missing": [], "changed_fields": []}, memory_id="mem-1")
    assert unchanged["updated_fields"] == [] and "没有变化" in unchanged["message"]


def test_format_search_passes_degraded_reason_and_hint():
    result = format_search({"items": [], "degraded": "向量检索不可用，结果仅来自关键词检索：x"}, snippet_chars=10)
    assert result["degraded"].startswith("向量检索不可用") and result["hint"]
    grep = format_search({"items": []}, snippet_chars=10, action="grep")
    assert "search" in grep["hint"]


def test_format_history_newest_first_with_limit():
    versions = [
        {
            "version": v,
            "action": "update",
            "created_at": 1714521600 + v,
            "snapshot": {"title": f"标题{v}", "content": "内容" * 50},
        }
        for v in range(1, 6)
    ]
    result = format_history({"memory_id": "mem-1", "versions": versions}, limit=2)
    assert [entry["version"] for entry in result["items"]] == [5, 4]
    assert result["total"] == 5 and result["omitted"] == 3
    assert result["items"][0]["time"] == datetime.fromtimestamp(1714521605).strftime("%Y-%m-%d %H:%M")


def test_format_create_says_which_old_record_became_outdated():
    raw = {
        "mode": "created",
        "id": "mem-2",
        "items": [{"id": "mem-2", "title": "搬到上海"}],
        "superseded": [{"id": "mem-1", "title": "住在北京"}],
    }
    result = format_create(raw)
    assert result["superseded"] == ["mem-1"]
    assert "已记录 mem-2《搬到上海》，并把旧记录 mem-1《住在北京》标记为过时" in result["message"]


def test_read_and_search_show_that_a_memory_is_outdated():
    metadata = {
        "memory_type": "knowledge",
        "status": "active",
        "superseded_by": "mem-2",
        "superseded_at": 1.7e9,
        "supersedes": [],
    }
    detail = full_item({"id": "mem-1", "title": "住在北京", "content": "我住在北京", "metadata": metadata})
    assert detail["superseded_by"] == "mem-2" and "已过时" in detail["outdated"] and "mem-2" in detail["outdated"]
    newer = full_item(
        {
            "id": "mem-2",
            "title": "搬到上海",
            "content": "我搬到上海了",
            "metadata": {"superseded_by": "", "supersedes": ["mem-1"]},
        }
    )
    assert newer["supersedes"] == ["mem-1"] and "outdated" not in newer
    hit = compact_item({"id": "mem-1", "title": "住在北京", "metadata": metadata}, snippet_chars=40)
    assert hit["superseded_by"] == "mem-2"

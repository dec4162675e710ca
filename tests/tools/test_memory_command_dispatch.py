"""What memory_command passes to the service, checked with a recording service (the original plugin's test cases).

These pin the exact keyword arguments, which a real store cannot show; the effects are tested end to end in
test_memory_command_e2e.py.
"""

from __future__ import annotations

from typing import Any

from booku_memory.tools.memory_command import run_memory_command

from .tool_support import assert_envelope


class RecordingService:
    """Answers every call with a minimal valid result and remembers (method, kwargs)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    async def search_memory_entries(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("search_memory_entries", kwargs))
        return {"action": "search_memory_entries", "total": 0, "items": []}

    async def read_full_content(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("read_full_content", kwargs))
        ids = kwargs["memory_ids"]
        items = [{"id": i, "title": i, "content": "x", "metadata": {}} for i in ids]
        return {"action": "read", "requested": len(ids), "total": len(ids), "items": items, "missing": []}

    async def delete_memories(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("delete_memories", kwargs))
        ids = kwargs["memory_ids"]
        return {
            "action": "delete_memories",
            "mode": "hard" if kwargs["hard"] else "soft",
            "deleted": len(ids),
            "requested": len(ids),
            "missing": [],
            "ids": ids,
        }

    async def create_memory(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("create_memory", kwargs))
        return {
            "action": "create_memory",
            "mode": "created",
            "total": 1,
            "id": "mem-1",
            "items": [{"id": "mem-1", "title": kwargs["title"], "metadata": {}}],
        }

    async def update_memory_by_id(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("update_memory_by_id", kwargs))
        return {
            "action": "update_memory_by_id",
            "updated": 1,
            "items": [],
            "missing": [],
            "changed_fields": sorted(k for k in kwargs if k != "memory_id"),
        }


async def _run(service: RecordingService, command: str) -> dict[str, Any]:
    envelope = await run_memory_command(service, command)
    assert_envelope(envelope)
    return envelope


async def test_dispatch_and_chain_pass_reference_kwargs():
    service = RecordingService()
    envelope = await _run(
        service,
        "search -type person -person_id qq:10001 -topn 3 -core_tags 同学 -diffusion_tags 校园 -opposing_tags 陌生人"
        " && read -ids m1,m2 && delete -id m2 -hard true",
    )
    assert envelope["ok"] and envelope["executed"] == 3
    assert [name for name, _ in service.calls] == ["search_memory_entries", "read_full_content", "delete_memories"]
    search = service.calls[0][1]
    assert search == {
        "top_n": 3,
        "query_text": None,
        "memory_type": "person",
        "status": None,
        "person_id": "qq:10001",
        "relation_of": None,
        "include_archived": False,
        "include_knowledge": True,
        "include_related": False,
        "core_tags": ["同学"],
        "diffusion_tags": ["校园"],
        "opposing_tags": ["陌生人"],
    }
    assert service.calls[1][1] == {"memory_ids": ["m1", "m2"]}
    assert service.calls[2][1] == {"memory_ids": ["m2"], "hard": True}


async def test_search_without_tags_passes_no_tag_groups():
    service = RecordingService()
    envelope = await _run(service, "search -topn 50")
    assert envelope["ok"]
    kwargs = service.calls[0][1]
    assert kwargs["top_n"] == 50
    assert not {"core_tags", "diffusion_tags", "opposing_tags"} & set(kwargs)


async def test_explicit_tag_groups_win_over_shorthand_group_by_group():
    service = RecordingService()
    await _run(service, 'search -triple_tags "a,b|c|d" -core_tags X')
    kwargs = service.calls[0][1]
    assert (kwargs["core_tags"], kwargs["diffusion_tags"], kwargs["opposing_tags"]) == (["x"], ["c"], ["d"])


async def test_person_create_requires_person_id_and_calls_nothing():
    service = RecordingService()
    envelope = await _run(
        service, 'create -type person -title 张三 -content x -triple_tags "朋友,同学|学校,班级|陌生人,路人"'
    )
    assert envelope["ok"] is False and "person_id" in envelope["error"]
    assert service.calls == []


async def test_person_id_format_is_checked_before_any_call():
    service = RecordingService()
    envelope = await _run(service, 'create -type person -title 张三 -person_id 10001 -content x -triple_tags "a|b|c"')
    assert envelope["ok"] is False and "platform:id" in envelope["error"]
    assert service.calls == []


async def test_partial_tags_on_search_and_update_are_rejected_without_a_call():
    service = RecordingService()
    for command in ("search -query 复盘 -core_tags 复盘", "update -id m1 -core_tags a -diffusion_tags b"):
        envelope = await _run(service, command)
        assert envelope["ok"] is False and "禁止只传一组或两组" in envelope["error"]
    assert service.calls == []


async def test_create_with_two_groups_mentions_three_groups():
    service = RecordingService()
    envelope = await _run(service, "create -title t -content c -core_tags a -diffusion_tags b")
    assert envelope["ok"] is False and "三组标签" in envelope["error"]
    assert service.calls == []


async def test_create_validation_order_title_content_person_tags():
    service = RecordingService()
    assert "create 命令缺少 -title" in (await _run(service, "create -content c"))["error"]
    assert "create 命令缺少 -content" in (await _run(service, "create -title t -content '  '"))["error"]
    assert "person_id" in (await _run(service, "create -title t -content c -type person"))["error"]


async def test_read_and_delete_without_ids_keep_reference_messages():
    service = RecordingService()
    read = await _run(service, "read")
    assert read["ok"] is False and read["results"][0]["error"].startswith("read 命令需要提供 -id 或 -ids")
    delete = await _run(service, "delete -hard")
    assert delete["results"][0]["error"].startswith("delete 命令需要提供 -id 或 -ids")
    assert service.calls == []


async def test_create_passes_given_typed_fields_only():
    service = RecordingService()
    await _run(
        service,
        'create -type place -title 公司 -content 上班的地方 -triple_tags "公司|工作|家" '
        '-address "北京市 海淀区" -place_type OFFICE',
    )
    kwargs = service.calls[0][1]
    assert kwargs == {
        "title": "公司",
        "content": "上班的地方",
        "memory_type": "place",
        "status": "active",
        "person_id": None,
        "core_tags": ["公司"],
        "diffusion_tags": ["工作"],
        "opposing_tags": ["家"],
        "address_or_coord": "北京市 海淀区",
        "place_type": "office",
    }


async def test_update_passes_only_given_fields():
    service = RecordingService()
    await _run(service, "update -id m1 -body 新内容")
    assert service.calls == [("update_memory_by_id", {"memory_id": "m1", "content": "新内容"})]


async def test_update_without_any_field_is_rejected():
    service = RecordingService()
    envelope = await _run(service, "update -id m1")
    assert envelope["ok"] is False and "至少要给一个要修改的字段" in envelope["error"]
    assert service.calls == []


async def test_unknown_step_short_circuits_before_anything_runs():
    service = RecordingService()
    envelope = await _run(service, "read -ids m1 && unknown -x 1 && delete -id m1")
    assert envelope["ok"] is False and envelope["executed"] == 0
    assert "不支持的命令: unknown" in envelope["results"][0]["error"]
    assert service.calls == []


async def test_read_id_limit():
    service = RecordingService()
    ids = ",".join(f"m{i}" for i in range(21))
    envelope = await _run(service, f"read -ids {ids}")
    assert envelope["ok"] is False and "一次最多 20 个 id" in envelope["error"]

"""Bad input is refused before anything is written (issue 3, item 2).

Every case must raise ``ValidationError`` (a ``ValueError``, which client plugins catch), with a Chinese message that
names the offending field, and leave every table and the vector index exactly as they were. Unknown ids are not
errors: they are reported in a ``missing`` list instead of being silently dropped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from booku_memory.services.errors import ValidationError

from .memory_support import CAT, HIKE, TRIPLET, Probe, seed

CJK = re.compile(r"[\u4e00-\u9fff]")


async def assert_refused(probe: Probe, call: Callable[[], Awaitable[Any]], field: str) -> ValidationError:
    """Run ``call``; it must fail with a Chinese ValidationError naming ``field`` and change nothing."""
    tables = await probe.table_counts()
    vectors = await probe.vector_counts()
    with pytest.raises(ValidationError) as caught:
        await call()
    error = caught.value
    assert isinstance(error, ValueError)
    message = str(error)
    assert field in message, f"错误信息未指明字段 {field}: {message}"
    assert CJK.search(message), f"错误信息不是中文: {message}"
    assert await probe.table_counts() == tables
    assert await probe.vector_counts() == vectors
    return error


# ------------------------------------------------------------------------------------------- empty content


@pytest.mark.parametrize("content", ["", "   ", "\n\t"])
async def test_empty_content_is_refused_everywhere(svc, probe: Probe, content: str) -> None:
    (existing,) = await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.upsert_memory(content), "content")
    await assert_refused(probe, lambda: svc.create_memory(title="空", content=content, **TRIPLET), "content")
    await assert_refused(probe, lambda: svc.update_memory_by_id(memory_id=existing, content=content), "content")
    await assert_refused(probe, lambda: svc.create_temporary_memo(content=content), "content")
    assert (await probe.row(existing))["content"] == CAT[1]


# ------------------------------------------------------------------------------------------- vocabularies


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_type", "diary"),
        ("status", "deleted"),
        ("bucket", "trash"),
        ("knowledge_type", "opinion"),
        ("procedure_type", "dance"),
        ("disposition_status", "lost"),
    ],
)
async def test_unknown_vocabulary_is_refused(svc, probe: Probe, field: str, value: str) -> None:
    error = await assert_refused(probe, lambda: svc.upsert_memory("一条正常的记忆内容。", **{field: value}), field)
    assert value in str(error)
    await assert_refused(
        probe,
        lambda: svc.create_memory(title="标题", content="一条正常的记忆内容。", **TRIPLET, **{field: value}),
        field,
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_type", "diary"),
        ("status", "deleted"),
        ("knowledge_type", "opinion"),
        ("procedure_type", "dance"),
        ("disposition_status", "lost"),
    ],
)
async def test_unknown_vocabulary_is_refused_on_update(svc, probe: Probe, field: str, value: str) -> None:
    (memory_id,) = await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.update_memory_by_id(memory_id=memory_id, **{field: value}), field)


async def test_error_lists_the_allowed_values(svc, probe: Probe) -> None:
    error = await assert_refused(probe, lambda: svc.upsert_memory("内容", memory_type="diary"), "memory_type")
    for allowed in ("person", "event", "knowledge", "place", "asset", "procedure"):
        assert allowed in str(error)
    error = await assert_refused(probe, lambda: svc.upsert_memory("内容", status="gone"), "status")
    for allowed in ("active", "archived", "expired"):
        assert allowed in str(error)


async def test_vocabulary_is_case_insensitive(svc, probe: Probe) -> None:
    result = await svc.upsert_memory(
        "用户把旧手机送给了表弟。", memory_type="ASSET", disposition_status="Disposed", status="Active"
    )
    row = await probe.row(result["id"])
    assert (row["memory_type"], row["disposition_status"], row["status"]) == ("asset", "disposed", "active")


# ----------------------------------------------------------------------------------------------- person_id


@pytest.mark.parametrize("person_id", [None, "", "10001", "qq:", ":10001", "qq 10001"])
async def test_person_needs_a_platform_id(svc, probe: Probe, person_id: str | None) -> None:
    await assert_refused(
        probe, lambda: svc.upsert_memory("张三喜欢打篮球。", memory_type="person", person_id=person_id), "person_id"
    )
    await assert_refused(
        probe,
        lambda: svc.create_memory(
            title="张三", content="张三喜欢打篮球。", memory_type="person", person_id=person_id, **TRIPLET
        ),
        "person_id",
    )


async def test_changing_type_to_person_needs_a_person_id(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.update_memory_by_id(memory_id=memory_id, memory_type="person"), "person_id")
    await assert_refused(probe, lambda: svc.update_memory_by_id(memory_id=memory_id, person_id="bad"), "person_id")


# ---------------------------------------------------------------------------------------------- event range


async def test_event_end_before_start_is_refused(svc, probe: Probe) -> None:
    await assert_refused(
        probe,
        lambda: svc.upsert_memory("周年聚会。", memory_type="event", event_start_at=2000.0, event_end_at=1000.0),
        "event_end_at",
    )
    result = await svc.upsert_memory("周年聚会。", memory_type="event", event_start_at=1000.0, event_end_at=2000.0)
    # An update that moves only one end must still respect the stored other end.
    await assert_refused(
        probe, lambda: svc.update_memory_by_id(memory_id=result["id"], event_end_at=500.0), "event_end_at"
    )
    await assert_refused(
        probe, lambda: svc.update_memory_by_id(memory_id=result["id"], event_start_at=3000.0), "event_end_at"
    )


@pytest.mark.parametrize("value", [math.nan, math.inf, -1.0, "昨天"])
async def test_event_times_must_be_finite_non_negative_numbers(svc, probe: Probe, value: Any) -> None:
    await assert_refused(
        probe, lambda: svc.upsert_memory("会议。", memory_type="event", event_start_at=value), "event_start_at"
    )


# ----------------------------------------------------------------------------------------------- tag groups


@pytest.mark.parametrize(
    "groups",
    [
        {"core_tags": ["朋友"]},
        {"core_tags": ["朋友"], "diffusion_tags": ["学校"]},
        {"diffusion_tags": ["学校"], "opposing_tags": ["陌生人"]},
        {"core_tags": ["朋友"], "diffusion_tags": ["学校"], "opposing_tags": []},
        {"core_tags": ["朋友"], "diffusion_tags": ["  "], "opposing_tags": ["陌生人"]},
    ],
)
async def test_partial_tag_groups_are_refused(svc, probe: Probe, groups: dict[str, list[str]]) -> None:
    await assert_refused(probe, lambda: svc.upsert_memory("张三是我的同学。", **groups), "tags")
    (memory_id,) = await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.update_memory_by_id(memory_id=memory_id, **groups), "tags")
    assert (await probe.tags(memory_id))["core"] == ["生活"]


@pytest.mark.parametrize(
    "groups",
    [
        {},
        {"core_tags": ["朋友"]},
        {"core_tags": ["朋友"], "diffusion_tags": ["学校"]},
        {"core_tags": ["朋友"], "diffusion_tags": ["学校"], "opposing_tags": []},
    ],
)
async def test_create_memory_needs_all_three_groups(svc, probe: Probe, groups: dict[str, list[str]]) -> None:
    error = await assert_refused(
        probe, lambda: svc.create_memory(title="张三", content="张三是我的同学。", **groups), "opposing_tags"
    )
    assert "创建记忆必须同时提供完整且非空" in str(error)


# -------------------------------------------------------------------------------------------- expire_hours


@pytest.mark.parametrize("hours", [math.nan, math.inf, -math.inf, -1.0, 0.0, "两小时", None])
async def test_bad_expire_hours_are_refused(svc, probe: Probe, hours: Any) -> None:
    await assert_refused(
        probe, lambda: svc.create_temporary_memo(content="稍后回复", expire_hours=hours), "expire_hours"
    )


# -------------------------------------------------------------------------------------------- limits / ids


@pytest.mark.parametrize("top_k", [0, -3, 10_000, 2.5, "many", True])
async def test_bad_top_k_is_refused(svc, probe: Probe, top_k: Any) -> None:
    await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.retrieve_memories("小橘", top_k=top_k), "top_k")


async def test_blank_query_and_bad_grep_fields_are_refused(svc, probe: Probe) -> None:
    await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.retrieve_memories("   "), "query_text")
    await assert_refused(probe, lambda: svc.grep_memories(query="小橘", search_fields=["body"]), "search_fields")
    await assert_refused(probe, lambda: svc.grep_memories(query="小橘", search_fields=[]), "search_fields")
    await assert_refused(probe, lambda: svc.grep_memories(query=" ", search_fields=["title"]), "query")


@pytest.mark.parametrize("ids", [[], [""], None])
async def test_empty_id_lists_are_refused(svc, probe: Probe, ids: Any) -> None:
    await seed(svc, CAT)
    await assert_refused(probe, lambda: svc.read_full_content(memory_ids=ids), "memory_ids")
    await assert_refused(probe, lambda: svc.delete_memories(memory_ids=ids), "memory_ids")
    await assert_refused(probe, lambda: svc.restore_memories(memory_ids=ids), "memory_ids")
    await assert_refused(probe, lambda: svc.move_memories(memory_ids=ids, to_folder_id="x"), "memory_ids")
    await assert_refused(probe, lambda: svc.archive_memories(ids), "memory_ids")


async def test_unknown_ids_are_reported_as_missing(svc, probe: Probe) -> None:
    cat, hike = await seed(svc, CAT, HIKE)
    ghost = "mem-0000000000000000000000000000dead"

    assert (await svc.read_full_content(memory_ids=[ghost, cat]))["missing"] == [ghost]
    assert (await svc.update_memory_by_id(memory_id=ghost, title="新标题"))["missing"] == [ghost]
    assert (await svc.move_memories(memory_ids=[ghost, cat], to_folder_id="pets"))["missing"] == [ghost]
    assert (await svc.archive_memories([ghost, hike]))["missing"] == [ghost]
    assert (await svc.delete_memories(memory_ids=[ghost, cat]))["missing"] == [ghost]
    assert (await svc.restore_memories(memory_ids=[ghost, cat]))["missing"] == [ghost]
    hard = await svc.delete_memories(memory_ids=[ghost, hike], hard=True)
    assert hard["missing"] == [ghost] and hard["deleted"] == 1
    assert await probe.count("booku_memory_records", "memory_id = ?", [ghost]) == 0


async def test_revert_needs_a_positive_integer_version(svc, probe: Probe) -> None:
    (memory_id,) = await seed(svc, CAT)
    for version in (0, -1, 1.5, "1", True):
        await assert_refused(probe, lambda: svc.revert_memory(memory_id=memory_id, version=version), "version")


async def test_oversized_input_is_refused(svc, probe: Probe) -> None:
    await assert_refused(probe, lambda: svc.upsert_memory("字" * 20001), "content")
    await assert_refused(probe, lambda: svc.upsert_memory("内容", title="标" * 201), "title")
    await assert_refused(
        probe,
        lambda: svc.upsert_memory("内容", core_tags=["长" * 65], diffusion_tags=["a"], opposing_tags=["b"]),
        "core_tags",
    )
    await assert_refused(probe, lambda: svc.create_temporary_memo(content="备" * 2001), "content")

"""Replays the calls of the real client plugins and reads the answers the way they do (docs/HOST_CONTRACT.md, Clients
of the memory service).

The clients are not importable here, so each test copies the client's call and its parsing code path: which method,
which keywords (or positional query), and which keys of the result it reads. If a key or a calling convention
changes, the client breaks, and so does this file.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from .memory_support import MEMORY_SERVICE, Probe

ARCHIVER_TAGS = {"core_tags": ["对话归档"], "diffusion_tags": ["上下文"], "opposing_tags": ["无关"]}


def archiver_entries(result: dict[str, Any]) -> list[dict[str, Any]]:
    """context_archiver's parser: rows from items/results/entries, id|memory_id, title, content|content_snippet."""
    rows = result.get("items") or result.get("results") or result.get("entries") or []
    parsed = []
    for row in rows:
        parsed.append(
            {
                "id": row.get("id") or row.get("memory_id"),
                "title": row.get("title") or "",
                "text": row.get("content") or row.get("content_snippet") or "",
            }
        )
    return parsed


async def archiver_write(svc: Any, **fields: Any) -> str:
    """context_archiver's write: create_memory(...), id from items[0], then update_activated(id) right away."""
    result = await svc.create_memory(bucket="memory", **ARCHIVER_TAGS, **fields)
    memory_id = result["items"][0]["id"]
    await svc.update_activated(memory_id)
    return memory_id


@pytest.fixture
async def archive(svc) -> dict[str, str]:
    """The memories context_archiver writes during a conversation."""
    now = time.time()
    return {
        "event": await archiver_write(
            svc,
            title="周末烧烤计划",
            content="用户和朋友约好周六在奥森公园烧烤，用户负责带炭和饮料。",
            memory_type="event",
            status="active",
            event_start_at=now + 86400,
            event_end_at=now + 100800,
        ),
        "person": await archiver_write(
            svc,
            title="小王",
            content="小王是用户的同事，负责前端开发，喜欢喝奶茶。",
            memory_type="person",
            status="active",
            person_id="qq:20001",
            event_start_at=0.0,
            event_end_at=0.0,
            folder_id="people",
        ),
        "knowledge": await archiver_write(
            svc,
            title="烧烤技巧",
            content="烧烤时先用大火把炭烧透，再把食材放上去。",
            memory_type="knowledge",
            status="active",
            event_start_at=0.0,
            event_end_at=0.0,
        ),
        "old": await archiver_write(
            svc,
            title="去年的旅行",
            content="用户去年夏天去了青岛旅行，在海边吃了烧烤。",
            memory_type="event",
            status="archived",
            event_start_at=now - 3e7,
            event_end_at=now - 2.9e7,
        ),
        "place": await archiver_write(
            svc,
            title="奥森公园",
            content="奥林匹克森林公园在北京北四环，南门有烧烤区。",
            memory_type="place",
            status="active",
            event_start_at=0.0,
            event_end_at=0.0,
        ),
        "procedure": await archiver_write(
            svc,
            title="腌肉步骤",
            content="腌肉：生抽两勺、蚝油一勺、黑胡椒少许，腌制两小时。",
            memory_type="procedure",
            status="active",
            event_start_at=0.0,
            event_end_at=0.0,
        ),
    }


async def test_context_archiver_writes_land_and_are_activated(svc, probe: Probe, archive: dict[str, str]) -> None:
    for kind, memory_id in archive.items():
        row = await probe.row(memory_id)
        assert row["activation_count"] == 1, kind
        assert row["bucket"] == "memory"
        tags = await probe.tags(memory_id)
        assert (tags["core"], tags["diffusion"], tags["opposing"]) == (["对话归档"], ["上下文"], ["无关"])
    assert (await probe.row(archive["old"]))["status"] == "archived"
    assert await probe.tiers_of(archive["old"]) == ["archive"]
    assert await probe.tiers_of(archive["event"]) == ["live"]
    assert (await probe.row(archive["person"]))["folder_id"] == "people"


async def test_context_archiver_create_with_an_empty_tag_list_raises(svc, probe: Probe) -> None:
    """The client fills default tags because of this rule (docs/HOST_CONTRACT.md); it must keep raising."""
    with pytest.raises(ValueError):
        await svc.create_memory(
            title="x", content="y", bucket="memory", core_tags=["a"], diffusion_tags=["b"], opposing_tags=[]
        )
    assert await probe.count("booku_memory_records") == 0


async def test_context_archiver_reads(svc, archive: dict[str, str]) -> None:
    by_person = archiver_entries(await svc.list_memory_entries(person_id="qq:20001", include_archived=False, limit=5))
    assert [e["id"] for e in by_person] == [archive["person"]]
    assert by_person[0]["title"] == "小王" and "前端" in by_person[0]["text"]

    recent_all = archiver_entries(await svc.list_memory_entries(include_archived=True, limit=10))
    assert {e["id"] for e in recent_all} == set(archive.values())
    recent_active = archiver_entries(await svc.list_memory_entries(include_archived=False, limit=10))
    assert archive["old"] not in {e["id"] for e in recent_active} and len(recent_active) == 5
    assert len(archiver_entries(await svc.list_memory_entries(include_archived=True, limit=2))) == 2

    grep = archiver_entries(
        await svc.grep_memories(
            query="烧烤", search_fields=["title", "content", "tags"], include_archived=False, top_k=10
        )
    )
    assert {e["id"] for e in grep} == {archive["event"], archive["knowledge"], archive["place"]}
    assert all(e["title"] and e["text"] for e in grep)
    by_tag = archiver_entries(
        await svc.grep_memories(
            query="对话归档", search_fields=["title", "content", "tags"], include_archived=True, top_k=3
        )
    )
    assert len(by_tag) == 3
    with_old = archiver_entries(
        await svc.grep_memories(
            query="烧烤", search_fields=["title", "content", "tags"], include_archived=True, top_k=10
        )
    )
    assert archive["old"] in {e["id"] for e in with_old}

    retrieved = archiver_entries(await svc.retrieve_memories(query_text="周末烧烤", top_k=3, include_archived=False))
    assert 1 <= len(retrieved) <= 3 and archive["event"] in {e["id"] for e in retrieved}
    assert archive["old"] not in {e["id"] for e in retrieved}
    assert all(e["title"] and e["text"] for e in retrieved)
    with_archive = archiver_entries(await svc.retrieve_memories(query_text="青岛旅行", top_k=3, include_archived=True))
    assert with_archive[0]["id"] == archive["old"]

    full = archiver_entries(await svc.read_full_content(memory_ids=[archive["procedure"], archive["event"]]))
    assert [e["id"] for e in full] == [archive["procedure"], archive["event"]]
    assert full[0]["text"] == "腌肉：生抽两勺、蚝油一勺、黑胡椒少许，腌制两小时。"
    await svc.update_activated(full[0]["id"])


async def test_daily_schedule_positional_query(memory, archive: dict[str, str]) -> None:
    """daily_schedule: service by signature, getattr(..., "retrieve_memories"), positional query, top_k=n."""
    service = memory.get_service(MEMORY_SERVICE)
    retrieve = service.retrieve_memories
    result = await retrieve("明天的烧烤安排", top_k=3)

    lines = []
    for row in result["results"]:
        text = row.get("content_snippet") or row.get("content") or row.get("summary") or ""
        lines.append(f"{row['title']}：{text}")
    assert 1 <= len(lines) <= 3
    assert any(line.startswith("周末烧烤计划：") and "奥森公园" in line for line in lines)


async def test_memory_passive_trigger_reads_score_snippet_and_folder(svc, archive: dict[str, str]) -> None:
    result = await svc.retrieve_memories(
        query_text="小王喜欢喝什么", top_k=3, include_archived=False, include_knowledge=False
    )
    assert result["results"]
    for row in result["results"]:
        assert isinstance(row["score"], float)
        assert isinstance(row["content_snippet"], str) and row["content_snippet"]
        assert isinstance(row["metadata"]["folder_id"], str)
    best = result["results"][0]
    assert best["id"] == archive["person"] and best["metadata"]["folder_id"] == "people"


async def test_memory_passive_trigger_threshold_keeps_an_exact_match(svc, archive: dict[str, str]) -> None:
    threshold = 0.5
    result = await svc.retrieve_memories(
        query_text="小王是用户的同事，负责前端开发，喜欢喝奶茶。",
        top_k=3,
        include_archived=False,
        include_knowledge=False,
    )
    kept = [row for row in result["results"] if row["score"] >= threshold]
    assert [row["id"] for row in kept][:1] == [archive["person"]]

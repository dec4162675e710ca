"""Helpers shared by the tool tests: seeding memories, running commands, detecting writes."""

from __future__ import annotations

from typing import Any

from booku_memory.tools.formatting import rendered_len
from booku_memory.tools.memory_command import run_memory_command

TAGS = {"core_tags": ["测试"], "diffusion_tags": ["样例"], "opposing_tags": ["无关"]}


class WriteCounter:
    """Counts rows that every kind of write adds or changes: revisions (one per record change) and memos."""

    def __init__(self, runtime: Any) -> None:
        self.rt = runtime

    async def snapshot(self) -> tuple[int, int, int, float]:
        revisions = await self.rt.db.fetch_one("SELECT COUNT(*) FROM booku_memory_revisions", [])
        records = await self.rt.db.fetch_one(
            "SELECT COUNT(*), COALESCE(MAX(updated_at), 0) FROM booku_memory_records", []
        )
        memos = await self.rt.db.fetch_one("SELECT COUNT(*) FROM booku_temporary_memos", [])
        return int(revisions[0]), int(records[0]), int(memos[0]), float(records[1])


async def seed(svc: Any, title: str, content: str, **fields: Any) -> str:
    """Create one memory through the service (not through the tool under test) and return its id."""
    kwargs = {**TAGS, **fields}
    result = await svc.create_memory(title=title, content=content, **kwargs)
    return result["id"]


async def run(svc: Any, command: str, **kwargs: Any) -> dict[str, Any]:
    """Run a command and check the envelope invariants every answer must satisfy."""
    envelope = await run_memory_command(svc, command, **kwargs)
    assert_envelope(envelope)
    return envelope


def assert_envelope(envelope: dict[str, Any], budget: int = 3000) -> None:
    """Every answer: the reference envelope keys, a message when not ok, and within the budget (the help manual and
    a companion result's verbatim ``text`` excepted: the companion service bounds that by its own token limit)."""
    assert envelope["action"] == "memory_command"
    assert isinstance(envelope["ok"], bool)
    if "results" in envelope:
        assert isinstance(envelope["executed"], int)
        for entry in envelope["results"]:
            assert set(entry) in ({"command", "success", "result"}, {"command", "success", "error"})
            if not entry["success"]:
                assert entry["error"].strip()
    if not envelope["ok"]:
        assert (envelope.get("error") or envelope.get("message") or "").strip()
    successes = [entry["result"] for entry in envelope.get("results", []) if entry.get("success")]
    help_chars = sum(rendered_len(result["content"]) for result in successes if result.get("action") == "help")
    verbatim_chars = sum(rendered_len(result["text"]) for result in successes if isinstance(result.get("text"), str))
    assert rendered_len(envelope) <= budget + help_chars + verbatim_chars


def step(envelope: dict[str, Any], index: int = 0) -> dict[str, Any]:
    """The result dict of a successful step."""
    entry = envelope["results"][index]
    assert entry["success"], entry
    return entry["result"]


WORDS = (
    "苹果 香蕉 火车 飞机 篮球 足球 音乐 电影 数学 物理 化学 历史 地理 北京 上海 广州 深圳 成都 杭州 南京 猫 狗 鸟 鱼 "
    "春天 夏天 秋天 冬天 医生 老师 工程师 画家 咖啡 茶 面条 米饭 周一 周二 周三 周四"
).split()


async def bulk_seed(runtime: Any, count: int, *, seed_value: int = 7) -> list[str]:
    """Insert ``count`` distinct memories in one transaction (the per-call write path is too slow for 500).

    Goes through the same validation (``build_draft``) and repository insert the service uses, then applies the
    vector outbox, so search sees exactly what it would after ``count`` service writes without merges.
    """
    import random
    import uuid

    from booku_memory.services.memory_fields import build_draft

    rng = random.Random(seed_value)
    ids: list[str] = []
    async with runtime.db.transaction() as conn:
        for index in range(count):
            words = "".join(rng.choice(WORDS) for _ in range(80))
            draft = build_draft(
                f"会议纪要 {index}：{words}。",
                title=f"项目会议 {index}",
                bucket="memory",
                folder_id=None,
                default_folder="default",
                tags=None,
                core_tags=["会议"],
                diffusion_tags=["项目"],
                opposing_tags=["娱乐"],
                memory_type="event",
                status="active",
                person_id=None,
                relation_memory_ids=None,
                relation_aliases=None,
                event_start_at=0,
                event_end_at=0,
                related_people=None,
                knowledge_type="",
                address_or_coord="",
                place_type="",
                asset_type="",
                disposition_status="",
                procedure_type="",
                source="test",
                require_triplet=True,
            )
            memory_id = f"mem-{uuid.uuid4().hex}"
            await runtime.records.insert(
                conn,
                {
                    **draft.as_record(),
                    "memory_id": memory_id,
                    "owner_uid": "default",
                    "store_key": "shared",
                    "novelty_energy": 1.0,
                },
            )
            ids.append(memory_id)
    await runtime.sync_vectors()
    return ids

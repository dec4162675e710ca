"""Memory that stays current (issue 28): a later fact supersedes an earlier one through the public service, never
deleting or merging its text; retrieval knows which is current; every change is audited and revertible.

The real local model embeds, because whether two texts are near enough to compare is a question of meaning.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from booku_memory.services.errors import NotFoundError, ValidationError
from booku_memory.services.evidence.unsure_pairs import UnsurePairs, resolve_unsure_pair
from booku_memory.services.portability import export_jsonl, import_jsonl
from booku_memory.services.storage.record_reads import superseded_of_sql

from .memory_support import MEMORY_SERVICE, open_store

OLD = "我住在北京朝阳区，离公司不远。"
NEW = "上个月我搬到上海浦东了，新家在世纪公园旁边。"
BACKGROUND = [
    "我喜欢周末去钓鱼。",
    "我老婆叫刘静，我们结婚七年了。",
    "我每天坐地铁十号线上班。",
    "I keep a journal and write in it most evenings.",
    "朵朵喜欢画画，尤其是画小动物。",
]


async def write_move(svc) -> tuple[dict, dict]:
    for text in BACKGROUND:
        await svc.upsert_memory(text)
    old = await svc.upsert_memory(OLD)
    new = await svc.upsert_memory(NEW)
    return old, new


async def test_a_move_supersedes_the_old_address_and_keeps_its_text(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        old, new = await write_move(svc)
        assert new["mode"] == "created" and new["superseded"] == [{"id": old["id"], "title": OLD}]
        old_item = (await svc.get_memory_detail(memory_id=old["id"]))["item"]
        new_item = (await svc.get_memory_detail(memory_id=new["id"]))["item"]
        assert old_item["content"] == OLD  # never merged, never deleted
        assert old_item["metadata"]["superseded_by"] == new["id"] and old_item["metadata"]["superseded_at"] > 0
        assert new_item["metadata"]["supersedes"] == [old["id"]]
        assert new_item["metadata"]["valid_from"] > 0 and new_item["metadata"]["superseded_by"] == ""
        history = await svc.get_memory_history(memory_id=old["id"])
        assert [v["action"] for v in history["versions"]] == ["create", "supersede"]
        audit = await svc.list_audit_log(memory_id=old["id"])
        assert "supersede" in [entry["action"] for entry in audit["items"]]


async def test_retrieval_puts_the_current_fact_first_the_old_one_for_the_past_and_keeps_order_for_when(
    tmp_path: Path, e5
) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        old, new = await write_move(svc)
        now = (await svc.retrieve_memories("我现在住在哪里？", top_k=5))["results"]
        plain = (await svc.retrieve_memories("我住在哪里？", top_k=5))["results"]
        past = (await svc.retrieve_memories("我搬家前住在哪里？", top_k=5))["results"]
        current_only = (await svc.retrieve_memories("我住在哪里？", top_k=5, include_superseded=False))["results"]
        # "When did …" asks for an event's time: the memory that matches it leads whether or not it was replaced.
        when = (await svc.retrieve_memories("我是什么时候住在北京朝阳区的？", top_k=5))["results"]
    ids = lambda results: [item["id"] for item in results]  # noqa: E731
    assert ids(now)[:2] == [new["id"], old["id"]]
    assert ids(plain)[:2] == [new["id"], old["id"]]
    assert ids(past)[0] == old["id"]
    assert next(item for item in now if item["id"] == old["id"])["metadata"]["superseded_by"] == new["id"]
    assert now[0]["metadata"]["supersedes"] == [old["id"]]  # the reverse link, in the results too
    assert old["id"] not in ids(current_only) and new["id"] in ids(current_only)
    assert when[0]["id"] == old["id"] and not when[0]["score_parts"].get("currency")


async def test_a_fact_that_only_adds_supersedes_nothing(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        first = await svc.upsert_memory("我的好朋友小雨怀孕了。")
        second = await svc.upsert_memory("小雨的宝宝预产期在明年四月。")
        third = await svc.upsert_memory("我每周三晚上去游泳。")
        fourth = await svc.upsert_memory("我每周六早上也会去爬山。")
        items = (await svc.read_full_content(memory_ids=[first["id"], third["id"]]))["items"]
    assert [r["mode"] for r in (second, fourth)] == ["created", "created"]
    assert "superseded" not in second and "superseded" not in fourth
    assert [item["metadata"]["superseded_by"] for item in items] == ["", ""]


async def test_a_restatement_merges_and_a_different_place_stays_apart(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        base = await svc.upsert_memory("我在北京海淀区的一家医院当护士。")
        again = await svc.upsert_memory("我是护士，在北京海淀区的一家医院工作。")
        other = await svc.upsert_memory("我是护士，在上海徐汇区的一家医院工作。")
        content = (await svc.get_memory_detail(memory_id=base["id"]))["item"]["content"]
    assert again["mode"] == "merged" and again["id"] == base["id"]
    assert "当护士" in content and "医院工作" in content  # lossless
    assert other["mode"] == "created" and other["id"] != base["id"]


async def test_revert_and_unsupersede_make_the_old_fact_current_again(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        old, new = await write_move(svc)
        reverted = await svc.revert_memory(memory_id=old["id"], version=1)
        assert reverted["item"]["metadata"]["superseded_by"] == ""
        assert (await svc.get_memory_detail(memory_id=new["id"]))["item"]["metadata"]["supersedes"] == []
        # Back to the superseded version, then the explicit "撤销取代".
        await svc.revert_memory(memory_id=old["id"], version=2)
        assert (await svc.get_memory_detail(memory_id=old["id"]))["item"]["metadata"]["superseded_by"] == new["id"]
        undone = await svc.unsupersede_memory(memory_id=old["id"])
        assert undone["was_superseded_by"] == new["id"] and undone["item"]["metadata"]["superseded_by"] == ""
        plain = (await svc.retrieve_memories("我住在哪里？", top_k=5))["results"]
        assert all(item["metadata"]["superseded_by"] == "" for item in plain)
        history = await svc.get_memory_history(memory_id=old["id"])
        assert [v["action"] for v in history["versions"]][-1] == "unsupersede"
        with pytest.raises(ValidationError, match="没有被其他记忆取代"):
            await svc.unsupersede_memory(memory_id=old["id"])
        with pytest.raises(NotFoundError):
            await svc.unsupersede_memory(memory_id="mem-missing")


async def test_export_import_round_trip_keeps_the_links(tmp_path: Path, e5) -> None:
    export_file = tmp_path / "export.jsonl"
    async with open_store(tmp_path / "source", embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        old, new = await write_move(svc)
        await export_jsonl(handle.runtime, export_file)
    async with open_store(tmp_path / "target", embedder=e5) as handle:
        await import_jsonl(handle.runtime, export_file)
        svc = handle.get_service(MEMORY_SERVICE)
        old_item = (await svc.get_memory_detail(memory_id=old["id"]))["item"]
        new_item = (await svc.get_memory_detail(memory_id=new["id"]))["item"]
        history = await svc.get_memory_history(memory_id=old["id"])
        now = (await svc.retrieve_memories("我现在住在哪里？", top_k=3))["results"]
    assert old_item["metadata"]["superseded_by"] == new["id"] and new_item["metadata"]["supersedes"] == [old["id"]]
    assert [v["action"] for v in history["versions"]] == ["create", "supersede"]
    assert now[0]["id"] == new["id"]


async def test_migration_0014_backfills_valid_from(tmp_path: Path) -> None:
    async with open_store(tmp_path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        told = await svc.upsert_memory("周末去爬了香山")
        dated = await svc.upsert_memory("去年国庆去了西湖", event_start_at=1696089600.0)
    with sqlite3.connect(tmp_path / "booku_memory.db") as conn:  # a store written before 0014
        conn.execute("UPDATE booku_memory_records SET valid_from = 0")
        conn.execute("PRAGMA user_version = 13")
    async with open_store(tmp_path) as handle:
        rows = {
            row["memory_id"]: row
            for row in await handle.runtime.db.fetch_all(
                "SELECT memory_id, valid_from, created_at FROM booku_memory_records", ()
            )
        }
    assert rows[dated["id"]]["valid_from"] == 1696089600.0
    assert rows[told["id"]]["valid_from"] == rows[told["id"]]["created_at"]


async def test_a_supersession_set_by_hand_is_checked_and_audited(svc) -> None:
    old = await svc.upsert_memory("我的手机号是13812345678。")
    new = await svc.upsert_memory("备用联系方式：邮箱 zhangwei@qq.com。")
    marked = await svc.supersede_memory(memory_id=old["id"], superseded_by=new["id"])
    assert marked["item"]["metadata"]["superseded_by"] == new["id"]
    with pytest.raises(ValidationError, match="已被"):
        await svc.supersede_memory(memory_id=old["id"], superseded_by=new["id"])
    with pytest.raises(ValidationError, match="不能再反过来取代"):
        await svc.supersede_memory(memory_id=new["id"], superseded_by=old["id"])
    with pytest.raises(ValidationError, match="不能取代它自己"):
        await svc.supersede_memory(memory_id=new["id"], superseded_by=new["id"])
    with pytest.raises(NotFoundError):
        await svc.supersede_memory(memory_id=new["id"], superseded_by="mem-missing")
    audit = await svc.list_audit_log(memory_id=old["id"])
    assert [entry["action"] for entry in audit["items"]].count("supersede") == 1


async def test_the_recall_block_marks_a_superseded_memory(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        old, new = await write_move(svc)
        recalled = await svc.recall("我住在哪里？")
    entries = {entry["id"]: entry for entry in recalled["entries"]}
    assert entries[old["id"]]["superseded_by"] == new["id"] and "superseded_by" not in entries[new["id"]]
    assert f"[已过时：已被 {new['id']} 取代" in recalled["rendered"]
    assert recalled["rendered"].index(new["id"]) < recalled["rendered"].index(f"{old['id']} (score")


async def test_two_dated_memories_are_two_events_not_an_update(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await svc.upsert_memory(OLD, event_start_at=1_700_000_000.0)
        said_later = await svc.upsert_memory(NEW, event_start_at=1_700_086_400.0)
    assert "superseded" not in said_later


async def test_the_public_export_and_import_carry_both_links_of_a_chain_and_the_pending_pairs(
    tmp_path: Path, e5
) -> None:
    """Through the handle's own export/import: a memory that replaced one and was replaced itself keeps both links,
    a second export of the imported store says the same, and a pair waiting for review still waits."""
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    async with open_store(tmp_path / "source", embedder=e5) as handle:
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        old, new = await write_move(svc)
        latest = await svc.upsert_memory("我又搬家了，上周搬到杭州西湖区，离公司更远了。")
        phone = await svc.upsert_memory("我的手机号是13800001111。")
        other = await svc.upsert_memory("我的手机号是13900002222。")
        await resolve_unsure_pair(rt, rt.default_scope, other["id"], phone["id"], "maybe_update")
        await handle.export_jsonl(first)
    assert latest["superseded"][0]["id"] == new["id"]
    async with open_store(tmp_path / "target", embedder=e5) as handle:
        await handle.import_jsonl(first)
        svc, rt = handle.get_service(MEMORY_SERVICE), handle.runtime
        items = (await svc.read_full_content(memory_ids=[old["id"], new["id"], latest["id"]]))["items"]
        [pair] = (await UnsurePairs(rt).list_pairs())["items"]
        await handle.export_jsonl(second)
        undone = await svc.unsupersede_memory(memory_id=new["id"])  # the imported link is an ordinary one
    links = [(i["metadata"]["superseded_by"], i["metadata"]["supersedes"]) for i in items]
    assert links == [(new["id"], []), (latest["id"], [old["id"]]), ("", [new["id"]])]
    assert (pair["old_memory_id"], pair["new_memory_id"], pair["status"]) == (phone["id"], other["id"], "pending")
    assert undone["was_superseded_by"] == latest["id"]

    def validity(path: Path) -> dict:
        rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()[1:]]
        return {
            r["record"]["memory_id"]: (
                r["record"]["valid_from"],
                r["record"]["superseded_at"],
                r["record"]["superseded_by"],
            )
            for r in rows
            if r["kind"] == "record"
        }

    assert validity(second) == validity(first)


# Updates the first cues missed: a handle (one value, never merged), a habit given up with no slot word, a price
# with no change word but a new amount and 了. Sentences in neither bench set.
UPDATES = [
    (
        "My GitHub username is @quiet_river.",
        "My GitHub username is @loud_ocean these days.",
        "What is my GitHub username now?",
    ),
    ("I play tennis every Sunday.", "I gave up tennis and took up golf.", "What sport do I play now?"),
    ("那家面馆的牛肉面一碗十五块。", "那家面馆的牛肉面要十八块了。", "那家面馆的牛肉面现在多少钱？"),
]


async def test_updates_in_other_words_supersede_and_lead_for_now(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        for text in BACKGROUND:
            await svc.upsert_memory(text)
        olds = [await svc.upsert_memory(old) for old, _, _ in UPDATES]
        news = [await svc.upsert_memory(new) for _, new, _ in UPDATES]
        firsts = [(await svc.retrieve_memories(query, top_k=3))["results"][0]["id"] for _, _, query in UPDATES]
        items = (await svc.read_full_content(memory_ids=[old["id"] for old in olds]))["items"]
    assert [new["mode"] for new in news] == ["created"] * 3  # an update is never merged into the old fact
    assert [item["metadata"]["superseded_by"] for item in items] == [new["id"] for new in news]
    assert [item["content"] for item in items] == [old for old, _, _ in UPDATES]
    assert firsts == [new["id"] for new in news]


async def test_a_dated_event_is_not_superseded_by_a_habit(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        event = await svc.upsert_memory("1月15日在公园跑了五公里。")
        habit = await svc.upsert_memory("我最近开始每天晨跑五公里。")
        item = (await svc.get_memory_detail(memory_id=event["id"]))["item"]
    assert habit["mode"] == "created" and "superseded" not in habit
    assert item["metadata"]["superseded_by"] == ""


async def test_two_dated_turns_in_nearly_the_same_words_stay_two_memories(tmp_path: Path, e5) -> None:
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        first = await svc.upsert_memory("Sam: Thanks, Evan! Your support means a lot.", event_start_at=1_700_000_000)
        second = await svc.upsert_memory(
            "Sam: Thanks, Evan! Your support means a lot to me.", event_start_at=1_700_600_000
        )
        same = await svc.upsert_memory("Sam: Thanks, Evan! Your support means a lot.", event_start_at=1_700_900_000)
        told = await svc.upsert_memory("我的血型是A型。")
        again = await svc.upsert_memory("我的血型是A型的。")
    assert second["mode"] == "created" and second["id"] != first["id"]  # two turns, each said on its day
    assert same["mode"] == "merged" and same["id"] == first["id"]  # the exact same words said again
    assert again["mode"] == "merged" and again["id"] == told["id"]  # an undated fact told again


TRANSCRIPT = [
    "用户：我上周去了杭州玩，西湖特别美。\nAI：杭州很不错，你还去了哪些地方？",
    "用户：我养了一只橘猫，叫年糕。\nAI：年糕这个名字真可爱！",
    "用户：谢谢你的建议。\nAI：不用谢，祝你工作顺利！",
    "用户：最近我在思考换工作的问题。\nAI：换工作要慎重，不用太着急。",
    "用户：我今天去图书馆借了两本书。\nAI：不客气，看完可以和我聊聊。",
    "用户：我现在感觉好多了，谢谢。\nAI：没关系，有事随时找我。",
    "User: I went hiking last weekend.\nAssistant: Sounds fun! Where did you go?",
    "User: thanks for the tips\nAssistant: No problem, you're welcome!",
]


async def test_an_undated_transcript_supersedes_nothing(tmp_path: Path, e5) -> None:
    """Chat turns written as a client without event times writes them: speaker labels and courtesy ("不用谢", "no
    problem") tie no turn to another, so every turn stays current."""
    async with open_store(tmp_path, embedder=e5) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        written = [await svc.upsert_memory(text) for text in TRANSCRIPT]
        items = [(await svc.get_memory_detail(memory_id=result["id"]))["item"] for result in written]
    assert [result.get("superseded", []) for result in written] == [[]] * len(TRANSCRIPT)
    assert [item["metadata"]["superseded_by"] for item in items] == [""] * len(TRANSCRIPT)


async def test_the_reverse_link_is_read_through_its_index_not_a_table_scan(tmp_path: Path) -> None:
    """Every retrieval reads ``supersedes`` of its results: over a big store a scan cost a hundred milliseconds."""
    async with open_store(tmp_path) as handle:
        await handle.get_service(MEMORY_SERVICE).upsert_memory("我喜欢周末去钓鱼。")
        db_path = handle.runtime.db.path
    with sqlite3.connect(db_path) as conn:
        plan = conn.execute("EXPLAIN QUERY PLAN " + superseded_of_sql(3), ["a", "b", "c"]).fetchall()
    details = " ".join(str(row[-1]) for row in plan)
    assert "idx_records_superseded_by" in details and "SCAN booku_memory_records" not in details

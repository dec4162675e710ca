"""Retraction removes a message's bytes and what only repeats them; retention expires old text the same way."""

from __future__ import annotations

import pytest

from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.cached import text_hash
from booku_memory.services.errors import NotFoundError, ValidationError
from booku_memory.services.evidence import (
    DreamingScheduler,
    EvidenceService,
    ReviewService,
    attach_evidence,
    dreaming_settings,
    evidence_settings,
)
from booku_memory.services.evidence.vectors import CHAT_TIER
from booku_memory.services.scope import Scope

from .conftest import ALICE_STORE, ALICE_STREAM, BOB_STORE, T0, human
from .support import find_message, say


def cite(*needles: str, title: str):
    """A stage B script proposing one memory that cites the messages containing ``needles``."""

    def script(task):
        hits = [find_message(task, n) for n in needles]
        if not all(hits):
            return []
        return [
            {
                "op": "create",
                "title": title,
                "content": f"{title}（整理自聊天）",
                "memory_type": "event",
                "message_ids": [h[0] for h in hits],
            }
        ]

    return script


async def test_retraction_removes_text_index_cache_and_vector(runtime, hub):
    entry = await say(runtime, ALICE_STREAM, "我的银行卡密码是一串数字", T0)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    vector = (await runtime.embed_queries(["银行卡密码"]))[0]
    assert entry in dict(await hub.vectors.query(CHAT_TIER, vector, store_keys=[ALICE_STORE], limit=5))
    assert (
        await runtime.db.fetch_value(
            "SELECT COUNT(*) FROM booku_embedding_cache WHERE text_hash = ?", [text_hash("我的银行卡密码是一串数字")]
        )
        == 1
    )
    result = await evidence.retract_message(entry, reason="敏感信息")
    assert result["retracted"] and result["wal_checkpoint"] in ("complete", "busy")
    await hub.vectors.drain()
    item = (await evidence.get_message(entry))["item"]
    assert (item["text"], item["retracted"], item["retraction"]) == ("", True, "retracted")
    assert (
        await runtime.db.fetch_value(
            "SELECT COUNT(*) FROM booku_embedding_cache WHERE text_hash = ?", [text_hash("我的银行卡密码是一串数字")]
        )
        == 0
    )
    assert entry not in dict(await hub.vectors.query(CHAT_TIER, vector, store_keys=[ALICE_STORE], limit=5))
    assert (await evidence.search("银行卡密码", sources=["chat"]))["total"] == 0
    again = await evidence.retract_message(entry)
    assert not again["retracted"] and again["already"] == "retracted"


async def test_pending_proposals_resting_only_on_the_message_are_withdrawn_and_redacted(runtime, hub, model):
    model.proposals = lambda task: cite("搬家", title="搬家计划")(task) + cite("搬家", "新家", title="新家地址")(task)
    moving = await say(runtime, ALICE_STREAM, "我下个月搬家", T0)
    address = await say(runtime, ALICE_STREAM, "新家在滨江区", T0 + 60)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    await evidence.run_stage_b()
    review = ReviewService(runtime, human(ALICE_STORE))
    ids = {p["title"]: p["id"] for p in (await review.list_proposals())["items"]}
    result = await evidence.retract_message(moving)
    assert result["proposals_withdrawn"] == [ids["搬家计划"]]
    withdrawn = (await review.get_proposal(ids["搬家计划"]))["proposal"]
    assert (withdrawn["status"], withdrawn["content"], withdrawn["redacted"]) == ("withdrawn", "", True)
    survivor = await review.get_proposal(ids["新家地址"])
    assert survivor["proposal"]["status"] == "pending"
    assert [(m["id"], m["retracted"]) for m in survivor["messages"]] == [(moving, True), (address, False)]
    rows, _ = await runtime.audit.list(store_keys=[ALICE_STORE], action="proposal_withdrawn")
    assert [row["memory_id"] for row in rows] == [ids["搬家计划"]] and rows[0]["authority"] == "mechanical"


async def test_a_rejected_proposal_loses_its_text_when_its_only_source_goes(runtime, hub, model):
    model.proposals = cite("体检", title="体检结果")
    entry = await say(runtime, ALICE_STREAM, "体检结果显示血压偏高", T0)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    [pid] = (await evidence.run_stage_b())["created"]
    review = ReviewService(runtime, human(ALICE_STORE))
    await review.reject(pid, reason="隐私，不记")
    result = await evidence.retract_message(entry)
    assert result["proposals_redacted"] == [pid] and result["episodes_removed"]
    rejected = (await review.get_proposal(pid))["proposal"]
    assert (rejected["status"], rejected["content"], rejected["review_reason"]) == ("rejected", "", "隐私，不记")
    removed, _ = await runtime.audit.list(store_keys=[ALICE_STORE], action="episode_removed")
    assert removed[0]["after"]["cause"] == "only_source_retracted"


async def test_only_humans_and_mechanical_callers_may_retract_visible_messages(runtime, hub):
    entry = await say(runtime, ALICE_STREAM, "一条普通消息", T0, message_id="host-77")
    bot = scope_for_chat(runtime.config.scope, platform="qq", chat_type="private", stream_id=ALICE_STREAM)
    with pytest.raises(ValidationError, match="human 或 mechanical"):
        await EvidenceService(runtime, bot).retract_message(entry)
    with pytest.raises(NotFoundError):
        await EvidenceService(runtime, human(BOB_STORE)).retract_message(entry)
    host = bot.acting(authority="mechanical", actor="host-recall", cause="host:message_recalled")
    result = await EvidenceService(runtime, host).retract_message(stream_id=ALICE_STREAM, message_id="host-77")
    assert result["retracted"] and result["entry_id"] == entry
    rows, _ = await runtime.audit.list(store_keys=[ALICE_STORE], action="chat_retracted")
    assert (rows[0]["authority"], rows[0]["actor"]) == ("mechanical", "host-recall")
    with pytest.raises(ValidationError):
        await EvidenceService(runtime, human(ALICE_STORE)).retract_message()


async def test_retention_expires_old_text_and_drops_episodes_with_nothing_left(runtime, model):
    hub = attach_evidence(
        runtime,
        evidence=evidence_settings(runtime.config, retention_days=30.0),
        dreaming=dreaming_settings(runtime.config, enabled=True, episode_idle_seconds=600.0),
        chat_model=model,
    )
    day = 86400.0
    now = T0 + 100 * day
    old_a = await say(runtime, ALICE_STREAM, "很久以前的第一句", T0)
    old_b = await say(runtime, ALICE_STREAM, "很久以前的第二句", T0 + 60)
    straddle = await say(runtime, ALICE_STREAM, "跨越保留期的旧话", now - 40 * day)
    fresh = await say(runtime, ALICE_STREAM, "最近的新话", now - 40 * day + 60)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=now)
    assert len((await evidence.list_episodes())["items"]) == 2
    scheduler = DreamingScheduler(runtime, hub=hub)
    tick = await scheduler.tick(now=now - 35 * day)  # straddle (40 days old then 5 days younger) not yet expired
    assert tick["retention"]["expired"] == 2 and tick["retention"]["episodes_removed"] == 1
    listed = {m["id"]: m for m in (await evidence.list_messages())["items"]}
    assert listed[old_a]["retraction"] == "expired" and listed[old_a]["text"] == ""
    assert listed[old_b]["retraction"] == "expired" and listed[fresh]["text"] == "最近的新话"
    assert listed[straddle]["text"] == "跨越保留期的旧话"
    expired_rows, _ = await runtime.audit.list(store_keys=[ALICE_STORE], action="chat_expired")
    assert {row["memory_id"] for row in expired_rows} == {old_a, old_b}
    assert expired_rows[0]["authority"] == "mechanical"
    purge = await evidence.purge_expired()  # "now" is far beyond: everything older than 30 days goes
    assert purge["expired"] == 2
    assert (await evidence.list_episodes())["items"] == []


async def test_flagging_writes_an_audited_mechanical_revision_on_the_memory(runtime, hub, model):
    model.proposals = cite("生日", title="生日")
    entry = await say(runtime, ALICE_STREAM, "我的生日是三月五日", T0)
    evidence = EvidenceService(runtime, human(ALICE_STORE))
    await evidence.run_stage_a(now=T0 + 5000)
    [pid] = (await evidence.run_stage_b())["created"]
    approved = await ReviewService(runtime, human(ALICE_STORE)).approve(pid)
    await evidence.retract_message(entry)
    history = (await runtime.memory_service(human(ALICE_STORE)).get_memory_history(memory_id=approved["memory_id"]))[
        "versions"
    ]
    assert [v["action"] for v in history] == ["create", "attach_provenance", "flag_for_review"]
    rows, _ = await runtime.audit.list(
        store_keys=[ALICE_STORE], memory_id=approved["memory_id"], action="flag_for_review"
    )
    assert rows[0]["authority"] == "mechanical" and rows[0]["cause"] == f"source_retracted:{entry}"
    scope = Scope(owner_uid="x", readable_store_keys=(ALICE_STORE,), writable_store_key=ALICE_STORE)
    assert (await runtime.memory_service(scope).read_full_content(memory_ids=[approved["memory_id"]]))["total"] == 1
    # "restoring" an event row of the audit log (the flag, the approval) puts nothing back and deletes nothing
    admin = runtime.memory_service(human(ALICE_STORE))
    for action in ("review_flag_raised", "proposal_approved", "chat_retracted"):
        [row], _ = await runtime.audit.list(store_keys=[ALICE_STORE], action=action)
        assert row["before"] is None and not row["memory_id"].startswith("mem-")
        assert (await admin.restore_from_audit(audit_id=row["audit_id"]))["restored"] == []
    assert not (await runtime.records.get(approved["memory_id"]))["is_deleted"]

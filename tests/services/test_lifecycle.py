"""Lifecycle (issue 3, item 5): the emergent window and temporary memos.

Age is simulated by moving ``created_at`` (and memo ``expires_at``) back in SQLite, never by sleeping.
"""

from __future__ import annotations

import time

import pytest

from booku_memory.services.errors import ValidationError

from .memory_support import CAT, COFFEE, HIKE, MEMORY_SERVICE, PROJECT, Probe, open_store, seed


def ids_of(result: dict) -> list[str]:
    return [item["id"] for item in result.get("results", result.get("items", []))]


# -------------------------------------------------------------------------------------------- emergent window


async def test_promote_stale_emergent_archives_recalled_and_expires_the_rest(svc, probe: Probe) -> None:
    recalled, forgotten, young, pinned = await seed(svc, CAT, HIKE, COFFEE, PROJECT)
    await probe.set_created_days_ago([recalled, forgotten, pinned], 8)  # emergent_days defaults to 7
    await probe.execute("UPDATE booku_memory_records SET pinned = 1 WHERE memory_id = ?", [pinned])
    await svc.update_activated(recalled)
    await svc.update_activated(recalled)  # activation_threshold defaults to 2
    await svc.update_activated(forgotten)

    result = await svc.promote_stale_emergent()

    assert (result["promoted"], result["discarded"], result["folder_id"]) == (1, 1, "all")
    assert result["promoted_ids"] == [recalled] and result["expired_ids"] == [forgotten]
    statuses = {i: (await probe.row(i))["status"] for i in (recalled, forgotten, young, pinned)}
    assert statuses == {recalled: "archived", forgotten: "expired", young: "active", pinned: "active"}
    # Soft: every row is still there, with its vector in the archive partition.
    assert await probe.count("booku_memory_records") == 4
    assert await probe.count("booku_memory_records", "is_deleted = 1") == 0
    assert await probe.tiers_of(recalled) == ["archive"] and await probe.tiers_of(forgotten) == ["archive"]
    assert await probe.tiers_of(young) == ["live"] and await probe.tiers_of(pinned) == ["live"]
    assert [a for _, a in await probe.revisions(forgotten)][-1] == "expire"

    assert forgotten not in ids_of(await svc.retrieve_memories("香山 爬山", top_k=5))
    assert forgotten in ids_of(await svc.retrieve_memories("香山 爬山", top_k=5, include_archived=True))


async def test_expired_memories_are_recoverable(svc, probe: Probe) -> None:
    (forgotten,) = await seed(svc, HIKE)
    await probe.set_created_days_ago([forgotten], 30)
    await svc.promote_stale_emergent()
    assert (await probe.row(forgotten))["status"] == "expired"

    history = await svc.get_memory_history(memory_id=forgotten)
    before = next(v["version"] for v in reversed(history["versions"]) if v["snapshot"]["status"] == "active")
    await svc.revert_memory(memory_id=forgotten, version=before)

    assert (await probe.row(forgotten))["status"] == "active"
    assert await probe.tiers_of(forgotten) == ["live"]
    assert ids_of(await svc.retrieve_memories("香山 爬山", top_k=1)) == [forgotten]


async def test_promotion_needs_recent_activations(svc, probe: Probe) -> None:
    """Recalls from before the window do not keep a memory alive (the reference counted lifetime activations)."""
    (memory_id,) = await seed(svc, CAT)
    await probe.set_created_days_ago([memory_id], 20)
    await probe.execute(
        "UPDATE booku_memory_records SET activation_count = 9, last_activated_at = created_at + 3600 "
        "WHERE memory_id = ?",
        [memory_id],
    )
    result = await svc.promote_stale_emergent()
    assert result["expired_ids"] == [memory_id]


async def test_promotion_window_and_threshold_come_from_config(tmp_path) -> None:
    config = {"time_window": {"emergent_days": 3, "activation_threshold": 5}}
    async with open_store(tmp_path, config=config) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        probe = Probe(handle.runtime)
        stale, fresh, busy = await seed(svc, CAT, HIKE, COFFEE)
        await probe.set_created_days_ago([stale, busy], 4)
        await probe.set_created_days_ago([fresh], 2)
        for _ in range(3):
            await svc.update_activated(stale)  # below the configured threshold of 5
        for _ in range(5):
            await svc.update_activated(busy)

        result = await svc.promote_stale_emergent()

        assert result["promoted_ids"] == [busy] and result["expired_ids"] == [stale]
        assert (await probe.row(fresh))["status"] == "active"


async def test_promotion_can_be_limited_to_one_folder(svc, probe: Probe) -> None:
    home = (await seed(svc, CAT))[0]
    work = (await seed(svc, PROJECT, folder_id="work"))[0]
    await probe.set_created_days_ago([home, work], 10)

    result = await svc.promote_stale_emergent(folder_id="work")

    assert result["folder_id"] == "work" and result["expired_ids"] == [work]
    assert (await probe.row(home))["status"] == "active"


async def test_maintenance_pass_runs_the_lifecycle_and_purges_memos(svc, rt, probe: Probe) -> None:
    (old,) = await seed(svc, HIKE)
    await probe.set_created_days_ago([old], 10)
    memo = await svc.create_temporary_memo(content="下午三点开会", stream_id="s1")
    await probe.execute(
        "UPDATE booku_temporary_memos SET expires_at = ? WHERE memo_id = ?", [time.time() - 60, memo["memo_id"]]
    )

    report = await rt.run_maintenance()

    assert report["memos_purged"] == 1
    assert report["lifecycle"]["expired_ids"] == [old]
    assert await probe.count("booku_temporary_memos") == 0
    assert (await probe.row(old))["status"] == "expired"


# ------------------------------------------------------------------------------------------- temporary memos


async def test_memos_are_per_stream(svc, probe: Probe) -> None:
    a = await svc.create_temporary_memo(content="晚上八点直播", stream_id="group-a")
    b = await svc.create_temporary_memo(content="晚上八点直播", stream_id="group-b")
    c = await svc.create_temporary_memo(content="只在 A 群说过的事", stream_id="group-a")

    assert (a["mode"], b["mode"], c["mode"]) == ("created", "created", "created")
    assert a["memo_id"] != b["memo_id"]
    assert c["active_memo_count"] == 2  # the count is of the writer's stream
    in_a = await svc.list_temporary_memos(stream_id="group-a")
    in_b = await svc.list_temporary_memos(stream_id="group-b")
    assert {m["memo_id"] for m in in_a["items"]} == {a["memo_id"], c["memo_id"]}
    assert [m["memo_id"] for m in in_b["items"]] == [b["memo_id"]]
    assert all(m["stream_id"] == "group-b" for m in in_b["items"])
    assert (await svc.list_temporary_memos(stream_id="group-c"))["total"] == 0
    # Cancelling in one stream leaves the same text in another stream alone.
    assert (await svc.cancel_temporary_memo(content="晚上八点直播", stream_id="group-a"))["cancelled"] == 1
    assert [m["memo_id"] for m in (await svc.list_temporary_memos(stream_id="group-b"))["items"]] == [b["memo_id"]]


async def test_memos_never_enter_long_term_memory(svc, probe: Probe) -> None:
    await svc.create_temporary_memo(content="快递放在门口的鞋柜上", stream_id="s")
    assert (await svc.retrieve_memories("快递 鞋柜", top_k=5, include_archived=True))["total"] == 0
    assert (await svc.list_memory_entries())["total"] == 0
    assert (await svc.grep_memories(query="快递", search_fields=["content"]))["total"] == 0
    assert sum((await probe.vector_counts()).values()) == 0


async def test_refresh_never_shortens_unless_asked(svc, probe: Probe) -> None:
    first = await svc.create_temporary_memo(content="周五前交报告", expire_hours=10, stream_id="s")
    kept = await svc.create_temporary_memo(content="周五前交报告", expire_hours=1, stream_id="s")
    assert kept["mode"] == "refreshed" and kept["expires_at"] == pytest.approx(first["expires_at"])

    shortened = await svc.create_temporary_memo(
        content="周五前交报告", expire_hours=1, stream_id="s", allow_shorten=True
    )
    assert shortened["mode"] == "refreshed" and shortened["memo_id"] == first["memo_id"]
    assert shortened["expires_at"] < first["expires_at"]
    assert shortened["expires_at"] - shortened["item"]["updated_at"] == pytest.approx(3600.0)
    assert await probe.count("booku_temporary_memos") == 1


async def test_expired_memo_is_not_listed_and_is_recreated(svc, probe: Probe) -> None:
    memo = await svc.create_temporary_memo(content="取快递", stream_id="s")
    await probe.execute(
        "UPDATE booku_temporary_memos SET expires_at = ? WHERE memo_id = ?", [time.time() - 1, memo["memo_id"]]
    )
    assert (await svc.list_temporary_memos(stream_id="s"))["total"] == 0

    again = await svc.create_temporary_memo(content="取快递", stream_id="s")
    assert again["mode"] == "created" and again["memo_id"] != memo["memo_id"]
    assert await probe.count("booku_temporary_memos") == 1  # the expired one was cleaned up on the way


async def test_max_expiry_comes_from_config(tmp_path) -> None:
    async with open_store(tmp_path / "default") as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        assert (await svc.create_temporary_memo(content="一周后复查", expire_hours=168))["mode"] == "created"
        with pytest.raises(ValidationError, match="expire_hours"):
            await svc.create_temporary_memo(content="八天后复查", expire_hours=169)

    async with open_store(tmp_path / "short", config={"memo": {"max_expire_hours": 1.5}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        assert (await svc.create_temporary_memo(content="一小时后", expire_hours=1.5))["mode"] == "created"
        with pytest.raises(ValidationError, match="expire_hours"):
            await svc.create_temporary_memo(content="两小时后", expire_hours=2)
        with pytest.raises(ValidationError, match="expire_hours"):
            await svc.create_temporary_memo(content="一小时后", expire_hours=3, allow_shorten=True)

"""Retrieval reads the dates a query names: "我5月2日去博物馆看了什么" finds the May 2nd visit, "我昨天说了什么"
finds yesterday's memories even when no word or meaning of the query points at them (``logic.time_anchor``)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from booku_memory.services.scope import Scope

from .memory_support import MEMORY_SERVICE, Probe, SwitchableEmbedder, open_store, write_turns

ZONE = "Asia/Shanghai"
SHANGHAI = ZoneInfo(ZONE)
MUSEUM_VISITS = {  # day → what the user saw; same topic, so only the date tells them apart
    2: "用户去市博物馆看了恐龙化石展，最喜欢那具霸王龙骨架。",
    9: "用户去市博物馆看了青铜器特展，拍了很多青铜鼎的照片。",
    16: "用户去市博物馆看了印象派油画展，在莫奈的睡莲前站了很久。",
}
FILLER = [
    f"用户提到第{n}件日常小事：{topic}。"
    for n, topic in enumerate(
        [
            "换了新的手机壳",
            "周末整理了书架",
            "买了一盆绿萝",
            "学会了做番茄炒蛋",
            "修好了自行车的刹车",
            "给阳台换了窗帘",
            "报名了游泳课",
            "把旧衣服捐了出去",
            "试了一家新开的面馆",
            "给电脑清了灰",
            "订了下个月的火车票",
            "看完了一部纪录片",
            "把照片备份到了硬盘",
            "学了三个吉他和弦",
            "和邻居聊了一会儿天",
        ]
    )
]


def noon(month: int, day: int, year: int = 2023) -> float:
    return datetime(year, month, day, 12, tzinfo=SHANGHAI).timestamp()


async def test_a_named_day_picks_the_memory_of_that_day(tmp_path: Path) -> None:
    async with open_store(tmp_path, config={"retrieval": {"timezone": ZONE}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        for text in FILLER:  # a store of ordinary size, so each route's scores have a realistic spread
            await svc.upsert_memory(text)
        ids = {}
        for day, text in MUSEUM_VISITS.items():
            ids[day] = (await svc.upsert_memory(text, memory_type="event", event_start_at=noon(5, day)))["id"]
        for day in MUSEUM_VISITS:
            result = await svc.retrieve_memories(f"我{5}月{day}日去博物馆看了什么展览？", top_k=3)
            top = result["results"][0]
            assert top["id"] == ids[day]
            assert top["score_parts"]["time"] > 0
            assert all(item["score_parts"]["time"] == 0 for item in result["results"][1:])


async def test_an_event_window_matches_every_day_it_covers(tmp_path: Path) -> None:
    async with open_store(tmp_path, config={"retrieval": {"timezone": ZONE}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        trip = await svc.upsert_memory(
            "用户和家人去青岛旅行，每天都在海边散步。",
            memory_type="event",
            event_start_at=noon(7, 1),
            event_end_at=noon(7, 5),
        )
        await svc.upsert_memory(
            "用户在家附近的公园散步，看到很多人放风筝。", memory_type="event", event_start_at=noon(7, 10)
        )
        result = await svc.retrieve_memories("我7月3日在哪里散步？", top_k=2)
    assert result["results"][0]["id"] == trip["id"]


async def test_the_query_date_is_read_in_the_configured_zone(tmp_path: Path) -> None:
    """21:00 on May 2nd in Shanghai is 13:00 UTC the same day, but 23:00 on May 2nd in Shanghai is May 2nd in
    Shanghai and 15:00 UTC; a memory at 01:00 Shanghai time on May 3rd is still May 2nd in UTC."""
    late = datetime(2023, 5, 3, 1, tzinfo=SHANGHAI).timestamp()
    for zone, expect_match in ((ZONE, False), ("UTC", True)):
        async with open_store(tmp_path / zone.replace("/", "_"), config={"retrieval": {"timezone": zone}}) as handle:
            svc = handle.get_service(MEMORY_SERVICE)
            await svc.upsert_memory("用户半夜还在看展览的画册。", memory_type="event", event_start_at=late)
            result = await svc.retrieve_memories("5月2日我在看什么", top_k=1)
        assert (result["results"][0]["score_parts"]["time"] > 0) is expect_match, zone


async def _store_with_one_memory_from_yesterday(svc, probe: Probe) -> str:
    older = await write_turns(svc, FILLER)
    await probe.set_created_days_ago(older, 10)
    target = (await svc.upsert_memory("用户说晚饭吃了酸菜鱼，辣得直冒汗。"))["id"]
    await probe.set_created_days_ago([target], 1)
    return target


async def test_yesterday_is_found_by_the_time_route_when_neither_words_nor_meaning_find_it(tmp_path: Path) -> None:
    small_pool = {"retrieval": {"candidate_pool": 5}}
    async with open_store(tmp_path / "on", config=small_pool) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        target = await _store_with_one_memory_from_yesterday(svc, Probe(handle.runtime))
        found = await svc.retrieve_memories("我昨天说了什么？", top_k=1)
    async with open_store(
        tmp_path / "off", config={"retrieval": {"candidate_pool": 5, "time_anchor_weight": 0.0}}
    ) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        await _store_with_one_memory_from_yesterday(svc, Probe(handle.runtime))
        without = await svc.retrieve_memories("我昨天说了什么？", top_k=5)
    assert found["results"][0]["id"] == target
    assert found["results"][0]["score_parts"]["cosine"] is not None  # its vector was read and scored too
    assert target not in [item["id"] for item in without["results"]]


async def test_the_time_route_works_without_embeddings(tmp_path: Path) -> None:
    embedder = SwitchableEmbedder()
    async with open_store(tmp_path, embedder=embedder) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        target = await _store_with_one_memory_from_yesterday(svc, Probe(handle.runtime))
        embedder.down = True
        result = await svc.retrieve_memories("我昨天说了什么？", top_k=3)
    assert "degraded" in result
    assert result["results"][0]["id"] == target


async def test_the_time_route_never_reads_another_owners_memories(tmp_path: Path) -> None:
    async with open_store(tmp_path) as handle:
        rt = handle.runtime
        alice = rt.memory_service(Scope(owner_uid="alice", readable_store_keys=("alice",), writable_store_key="alice"))
        bob = rt.memory_service(Scope(owner_uid="bob", readable_store_keys=("bob",), writable_store_key="bob"))
        secret = (await alice.upsert_memory("爱丽丝昨天告诉我她的银行卡密码提示是小猫。"))["id"]
        await Probe(rt).set_created_days_ago([secret], 1)
        mine = (await bob.upsert_memory("鲍勃今天去超市买了牛奶。"))["id"]
        result = await bob.retrieve_memories("我昨天说了什么？", top_k=10)
    assert secret not in [item["id"] for item in result["results"]]
    assert [item["id"] for item in result["results"]] == [mine]


async def test_a_date_never_lifts_or_fetches_knowledge_chunks(tmp_path: Path) -> None:
    """A chunk's time is when its document was ingested, not a time the user lived."""
    async with open_store(tmp_path, config={"retrieval": {"candidate_pool": 5}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        probe = Probe(handle.runtime)
        target = await _store_with_one_memory_from_yesterday(svc, probe)
        manual = "\n\n".join(f"## 第{n}节\n\n设备维护说明第{n}条：定期清洁滤网并检查电源线。" for n in range(12))
        await handle.get_service("booku_memory:service:booku_knowledge").ingest_document(
            title="维护手册", content=manual
        )
        await probe.execute(
            "UPDATE booku_memory_records SET created_at = created_at - 86400 WHERE bucket = 'knowledge'"
        )
        result = await svc.retrieve_memories("我昨天说了什么？", top_k=5, include_knowledge=True)
    assert result["results"][0]["id"] == target
    chunks = [item for item in result["results"] if item["metadata"]["bucket"] == "knowledge"]
    assert all(item["score_parts"]["time"] == 0 for item in chunks)

"""Time zones: a query's dates are read in the deployment's zone, each memory's days in the zone it was written in,
and status says which zone is used and where it came from."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from .memory_support import MEMORY_SERVICE, open_store

SHANGHAI = ZoneInfo("Asia/Shanghai")
QUESTION = "我2023年5月2日做了什么？"


def _at(zone: ZoneInfo, *fields: int) -> float:
    return datetime(*fields, tzinfo=zone).timestamp()


async def _write_in_shanghai(path: Path) -> dict[str, str]:
    """Two memories written by a deployment in Shanghai: one on the morning of May 2nd (still May 1st in UTC and in
    Los Angeles) and one on the evening of May 1st."""
    async with open_store(path, config={"retrieval": {"timezone": "Asia/Shanghai"}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        may2 = await svc.upsert_memory(
            "早上去公园散步，看到很多人在打太极。", event_start_at=_at(SHANGHAI, 2023, 5, 2, 7, 0)
        )
        may1 = await svc.upsert_memory(
            "晚上在家看了一部纪录片，讲的是深海鱼类。", event_start_at=_at(SHANGHAI, 2023, 5, 1, 21, 0)
        )
    return {"may2": may2["id"], "may1": may1["id"]}


@pytest.mark.parametrize("query_zone", ["America/Los_Angeles", "UTC", "Asia/Shanghai"])
async def test_a_named_day_finds_the_memory_of_that_day_in_the_writers_calendar(
    tmp_path: Path, query_zone: str
) -> None:
    ids = await _write_in_shanghai(tmp_path)
    async with open_store(tmp_path, config={"retrieval": {"timezone": query_zone}}) as handle:
        result = await handle.get_service(MEMORY_SERVICE).retrieve_memories(QUESTION, top_k=2, min_score=0)
    matched = {item["id"] for item in result["results"] if item["score_parts"]["time"] > 0}
    assert matched == {ids["may2"]}  # Shanghai's May 2nd, not the process zone's


async def test_a_memory_keeps_the_zone_it_was_written_in_and_an_edit_of_its_time_takes_the_editors(
    tmp_path: Path,
) -> None:
    ids = await _write_in_shanghai(tmp_path)
    async with open_store(tmp_path, config={"retrieval": {"timezone": "Europe/Paris"}}) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        zones = await handle.runtime.records.time_zones(ids.values())
        assert zones == {ids["may2"]: "Asia/Shanghai", ids["may1"]: "Asia/Shanghai"}
        await svc.update_memory_by_id(
            memory_id=ids["may1"], event_start_at=_at(ZoneInfo("Europe/Paris"), 2023, 5, 2, 9, 0)
        )
        assert (await handle.runtime.records.time_zones([ids["may1"]])) == {ids["may1"]: "Europe/Paris"}
        result = await svc.retrieve_memories(QUESTION, top_k=2, min_score=0)
    assert {item["id"] for item in result["results"] if item["score_parts"]["time"] > 0} == set(ids.values())


async def test_status_names_the_zone_and_its_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_store(tmp_path / "a", config={"retrieval": {"timezone": "Asia/Shanghai"}}) as handle:
        configured = (await handle.get_service(MEMORY_SERVICE).get_status())["time_zone"]
    monkeypatch.setenv("TZ", "Asia/Tokyo")
    async with open_store(tmp_path / "b") as handle:
        from_env = (await handle.get_service(MEMORY_SERVICE).get_status())["time_zone"]
    monkeypatch.setenv("TZ", "Not/AZone")
    async with open_store(tmp_path / "c") as handle:
        fallback = (await handle.get_service(MEMORY_SERVICE).get_status())["time_zone"]
    assert configured == {"name": "Asia/Shanghai", "source": "config", "label": "配置 retrieval.timezone"}
    assert from_env == {"name": "Asia/Tokyo", "source": "TZ", "label": "环境变量 TZ"}
    assert fallback["source"] == "system" and fallback["name"]

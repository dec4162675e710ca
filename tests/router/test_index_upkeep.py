"""The dashboard while the vector index is broken or rebuilt: never a 500, a banner, a reindex button with progress
(issue 29.2, issue 31.7)."""

from __future__ import annotations

import asyncio
import shutil
import time

from .conftest import TRIPLET

FACTS = [("小橘喜欢鱼干", "小橘是一只橘猫，最喜欢吃鱼干。"), ("周末去香山", "上周末和朋友去香山爬山，看了红叶。")]


async def _seed(api) -> list[str]:
    ids = []
    for title, content in FACTS:
        response = await api.post("/api/memories", json={"title": title, "content": content, **TRIPLET})
        assert response.status_code == 201, response.text
        ids.append(response.json()["item"]["id"])
    return ids


async def test_api_never_answers_500_while_the_index_is_gone_and_recovers(api, memory) -> None:
    runtime = memory.runtime
    ids = await _seed(api)
    await runtime.flush_vectors()
    statuses: list[int] = []

    async def round_(number: int) -> tuple[dict, str]:
        search = await api.get("/api/search", params={"q": "小橘 鱼干"})
        recall = await api.post("/api/v1/search/recall", json={"query": "香山 红叶"})
        created = await api.post(
            "/api/memories", json={"title": f"第{number}条", "content": f"期间写下的第{number}条记忆", **TRIPLET}
        )
        status = await api.get("/api/status")
        page = await api.get("/stats")
        statuses.extend(
            [search.status_code, recall.status_code, created.status_code, status.status_code, page.status_code]
        )
        assert search.json()["results"][0]["id"] == ids[0]
        return search.json(), page.text

    # Holding the rebuild job's turn stands for a slow rebuild: the index stays broken until it is let go.
    async with runtime.index_recovery._lock:
        shutil.rmtree(runtime.vectors.path)
        deadline = time.monotonic() + 10
        number = 0
        while runtime.index_recovery.healthy:
            number += 1
            await round_(number)  # the unlinked index still answers reads until a write or the watchdog notices
            assert time.monotonic() < deadline, "the deleted index went unnoticed"
            await asyncio.sleep(0.1)
        search, page = await round_(number + 1)
        assert "关键词" in search["degraded"]
        assert "检索已退回关键词模式" in page
        health = (await api.get("/api/maintenance/index")).json()
        assert health["state"] in ("degraded", "rebuilding") and health["degraded_reason"]

    deadline = time.monotonic() + 30
    while True:
        search, page = await round_(number + 2)
        health = (await api.get("/api/maintenance/index")).json()
        if health["state"] == "ok" and "degraded" not in search:
            break
        assert time.monotonic() < deadline, health
        await asyncio.sleep(0.1)

    assert statuses and set(statuses) <= {200, 201}
    assert health["recoveries"] >= 1 and health["job"]["kind"] == "recovery" and not health["job"]["running"]
    assert "检索已退回关键词模式" not in (await api.get("/stats")).text
    counts = (await api.get("/api/status")).json()["counts"]
    assert counts["vector"]["memory"] == counts["metadata"]["memory"]


async def test_reindex_button_is_csrf_protected_and_reports_progress(browser, anon, api, memory) -> None:
    await _seed(api)
    assert (await anon.post("/api/maintenance/reindex")).status_code == 401
    assert (await browser.post("/stats/reindex", data={})).status_code == 403

    page = await browser.get("/stats")
    assert 'action="/stats/reindex"' in page.text and "python -m booku_memory reindex" not in page.text
    started = await browser.post("/stats/reindex", data={"csrf_token": browser.csrf})
    assert started.status_code == 303 and "reindex_started" in started.headers["location"]
    again = await api.post("/api/maintenance/reindex")
    assert again.status_code in (202, 409)

    deadline = time.monotonic() + 30
    while True:
        health = (await api.get("/api/maintenance/index")).json()
        if not health["job"]["running"]:
            break
        assert time.monotonic() < deadline, health
        await asyncio.sleep(0.1)
    assert health["state"] == "ok" and health["job"]["error"] == ""
    assert health["job"]["done"] == health["job"]["total"] == len(FACTS)
    assert "已完成" in (await browser.get("/stats")).text

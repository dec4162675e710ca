"""In a real browser: the banner while the vector index is broken, and the statistics page's reindex button with its
progress (issue 29.2, issue 31.7)."""

from __future__ import annotations

import asyncio
import re
import shutil
import threading
import time

import pytest

from .conftest import TRIPLET
from .test_browser import CHROMIUM, api, chromium, live_server, log_in, page, screenshot  # noqa: F401

pytestmark = pytest.mark.browser
BANNER = "检索已退回关键词模式"


def _hold_rebuilds(live_server, release: threading.Event) -> None:
    """Keep the runtime's rebuild job waiting (as a slow rebuild would) until ``release`` is set."""

    async def hold(memory) -> None:
        taken = asyncio.Event()

        async def keep() -> None:
            async with memory.runtime.index_recovery._lock:
                taken.set()
                while not release.is_set():
                    await asyncio.sleep(0.05)

        asyncio.get_running_loop().create_task(keep())
        await taken.wait()

    live_server.call(hold)


def _wait(check, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_banner_while_the_index_is_broken_then_the_reindex_button(page, live_server, api):  # noqa: F811
    base = live_server.url
    for title, content in (("小橘喜欢鱼干", "小橘是一只橘猫，最喜欢吃鱼干。"), ("周末去香山", "上周末去香山看红叶。")):
        assert api.post("/api/memories", json={"title": title, "content": content, **TRIPLET}).status_code == 201
    log_in(page, base, "/stats")
    assert BANNER not in page.content()

    release = threading.Event()
    _hold_rebuilds(live_server, release)
    try:
        vector_dir = live_server.call(lambda memory: asyncio.sleep(0, memory.runtime.vectors.path))
        shutil.rmtree(vector_dir)
        _wait(lambda: api.get("/api/maintenance/index").json()["state"] != "ok", "the broken index went unnoticed")
        page.goto(f"{base}/memories")
        assert BANNER in page.inner_text(".degraded-banner")
        page.click(".degraded-banner a")
        page.wait_for_url(re.compile(r"/stats$"))
        assert "不可用" in page.inner_text("main") or "重建中" in page.inner_text("main")
        screenshot(page, "stats-degraded")
    finally:
        release.set()
    _wait(lambda: api.get("/api/maintenance/index").json()["state"] == "ok", "no recovery")

    page.goto(f"{base}/stats")
    assert page.locator(".degraded-banner").count() == 0
    page.click("button:has-text('重建索引')")
    page.wait_for_url(re.compile(r"/stats\?notice=reindex_started$"))
    assert "已开始重建索引" in page.inner_text(".notice")
    _wait(lambda: not api.get("/api/maintenance/index").json()["job"]["running"], "the reindex never finished")
    page.goto(f"{base}/stats")
    assert re.search(r"手动）：2/2，已完成", page.inner_text("main"))
    screenshot(page, "stats-reindexed")

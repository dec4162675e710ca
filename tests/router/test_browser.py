"""Real-browser tests: Playwright drives Debian's Chromium against the dashboard served by uvicorn.

The server runs in a thread with its own event loop and a real store (deterministic test embedder). Screenshots of
the main pages go to ``test-output/screenshots/`` for a human to look at.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

pytestmark = pytest.mark.browser

playwright_sync = pytest.importorskip("playwright.sync_api")

import booku_memory  # noqa: E402
from booku_memory.router import DashboardSettings, create_dashboard_app  # noqa: E402
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder  # noqa: E402

from .conftest import API_KEY, TRIPLET, chat_scope  # noqa: E402

T = TypeVar("T")

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
README_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "dashboard.png"
QUIET_CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}

if not CHROMIUM.exists():
    pytest.skip("需要 Debian 的 Chromium（apt-get install chromium）", allow_module_level=True)


class LiveServer:
    """uvicorn serving the dashboard over a real store on 127.0.0.1, in a background thread."""

    def __init__(self, data_dir: Path) -> None:
        import uvicorn

        self.data_dir = data_dir
        self.socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.ready = threading.Event()
        self.failure: BaseException | None = None
        self.server: uvicorn.Server | None = None
        self.memory: booku_memory.MemoryHandle | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name="dashboard-live-server", daemon=True)

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # surfaced by start()
            self.failure = exc
            self.ready.set()

    async def _serve(self) -> None:
        import uvicorn

        async with booku_memory.open(self.data_dir, QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as memory:
            self.memory, self.loop = memory, asyncio.get_running_loop()
            app = create_dashboard_app(lambda: memory.runtime, settings=DashboardSettings(api_key=API_KEY))
            config = uvicorn.Config(app, log_level="warning", lifespan="off")
            self.server = uvicorn.Server(config)
            serving = asyncio.create_task(self.server.serve(sockets=[self.socket]))
            while not self.server.started and not serving.done():
                await asyncio.sleep(0.05)
            self.ready.set()
            await serving

    def start(self) -> None:
        self.thread.start()
        self.ready.wait(timeout=120)
        if self.failure is not None:
            raise RuntimeError("后台服务启动失败") from self.failure
        if not self.ready.is_set():
            raise RuntimeError("后台服务未能在 120 秒内启动")

    def call(self, make_coroutine: Callable[[booku_memory.MemoryHandle], Awaitable[T]]) -> T:
        """Run ``make_coroutine(memory)`` on the server's own event loop (e.g. to write as a chat scope would)."""
        assert self.memory is not None and self.loop is not None
        return asyncio.run_coroutine_threadsafe(make_coroutine(self.memory), self.loop).result(timeout=60)

    def stop(self) -> None:
        if self.server is not None:
            self.server.should_exit = True
        self.thread.join(timeout=60)
        self.socket.close()


@pytest.fixture(scope="module")
def live_server(tmp_path_factory) -> Iterator[LiveServer]:
    server = LiveServer(tmp_path_factory.mktemp("dashboard") / "data")
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def api(live_server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=live_server.url, headers={"X-API-Key": API_KEY}, timeout=60) as client:
        yield client


@pytest.fixture(scope="module")
def chromium() -> Iterator[object]:
    with playwright_sync.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class PageErrors:
    """Console errors and JS dialogs seen by a page (a CSP violation or an executed script shows up here)."""

    def __init__(self, page) -> None:
        self.console: list[str] = []
        self.dialogs: list[str] = []
        page.on("console", lambda message: message.type == "error" and self.console.append(message.text))
        page.on("dialog", self._on_dialog)

    def _on_dialog(self, dialog) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()


@contextmanager
def desktop_page(chromium, *, tolerated: str = "") -> Iterator[object]:
    """A 1280 px page that must end without console errors (except ones containing ``tolerated``) or dialogs."""
    context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    page = context.new_page()
    page.errors = PageErrors(page)
    yield page
    console = [text for text in page.errors.console if not (tolerated and tolerated in text)]
    assert console == [], console
    assert page.errors.dialogs == [], page.errors.dialogs
    context.close()


@pytest.fixture
def page(chromium, live_server):
    with desktop_page(chromium) as page:
        yield page


def log_in(page, base_url: str, target: str = "/memories") -> None:
    page.goto(f"{base_url}{target}")
    assert "/login" in page.url
    page.fill("#api_key", API_KEY)
    page.click("button:has-text('登录')")
    page.wait_for_url(re.compile(re.escape(target) + r"$"))


def screenshot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)


def test_curator_flow_create_find_edit_delete_restore_revert(page, live_server):
    base = live_server.url
    log_in(page, base)

    page.click("nav.nav >> text=新建")
    page.fill("#f-title", "王五的生日")
    page.fill("#f-content", "王五的生日是三月十二日，喜欢芝士蛋糕")
    page.select_option("#f-memory_type", "event")
    page.fill("#f-core_tags", "生日, 王五")
    page.fill("#f-diffusion_tags", "蛋糕")
    page.fill("#f-opposing_tags", "纪念日")
    page.click("button:has-text('创建记忆')")
    page.wait_for_url(re.compile(r"/memories/mem-[0-9a-f]+\?notice=created$"))
    memory_url = page.url.split("?")[0]
    assert page.inner_text(".notice") == "已创建记忆"

    page.click("nav.nav >> text=记忆")
    page.fill("#f-keyword", "芝士蛋糕")
    page.click("button:has-text('筛选')")
    assert page.locator(".card").count() == 1
    page.click(".card-title a:has-text('王五的生日')")
    page.wait_for_url(memory_url)

    page.click("a.button:has-text('编辑')")
    page.fill("#f-core_tags", "生日, 朋友")
    page.fill("#f-content", "王五的生日是三月十五日，喜欢芝士蛋糕")
    page.click("button:has-text('保存修改')")
    page.wait_for_url(memory_url + "?notice=saved")
    assert page.locator(".tag-core").all_inner_texts() == ["生日", "朋友"]
    assert "三月十五日" in page.inner_text(".content-box")

    page.click("button:has-text('移入回收站')")
    page.wait_for_url(memory_url + "?notice=deleted")
    page.click("nav.nav >> text=回收站")
    assert page.locator(".card-title a:has-text('王五的生日')").count() == 1
    page.click(".card:has-text('王五的生日') button:has-text('恢复')")
    page.wait_for_url(memory_url + "?notice=restored")
    assert page.locator(".badge-deleted").count() == 0

    page.click(".history-entry:has-text('v1') button:has-text('回滚到此版本')")
    page.wait_for_url(memory_url + "?notice=reverted")
    assert "三月十二日" in page.inner_text(".content-box")
    assert page.locator(".tag-core").all_inner_texts() == ["生日", "王五"]
    screenshot(page, "memory-detail-after-revert")


def test_upload_knowledge_document(page, live_server, tmp_path):
    source = tmp_path / "泡茶指南.md"
    source.write_text(
        "# 泡茶指南\n\n## 绿茶\n\n八十度水，不加盖。\n\n## 乌龙茶\n\n沸水冲泡，第一泡洗茶。\n", encoding="utf-8"
    )
    log_in(page, live_server.url, "/knowledge")
    page.set_input_files("#k-file", str(source))
    page.click("button:has-text('上传并入库')")
    page.wait_for_url(re.compile(r"/knowledge/[^/?]+\?notice=uploaded$"))
    assert "《泡茶指南》" in page.inner_text("h1")
    assert "沸水冲泡" in page.inner_text("main")
    screenshot(page, "knowledge-document")
    page.click("nav.nav >> text=知识库")
    assert page.locator("table.simple a:has-text('泡茶指南')").count() == 1


def test_script_in_memory_is_shown_as_text_and_never_runs(page, live_server, api):
    created = api.post(
        "/api/memories",
        json={"title": "<img src=x onerror=alert(2)>", "content": "<script>alert(1)</script>", **TRIPLET},
    )
    memory_id = created.json()["item"]["id"]
    log_in(page, live_server.url, f"/memories/{memory_id}")
    assert page.inner_text(".content-box") == "<script>alert(1)</script>"
    assert page.locator("main script, main img").count() == 0
    page.goto(f"{live_server.url}/memories")
    assert page.locator("main img").count() == 0
    api.post(f"/api/memories/{memory_id}/hard-delete", json={"confirm": memory_id})


async def _write_move(memory) -> tuple[str, str]:
    service = memory.get_service("booku_memory:service:booku_memory")
    old = await service.upsert_memory("我住在杭州西湖区，离公司很近。")
    new = await service.upsert_memory("上个月我搬到了南京鼓楼区。")
    await service.supersede_memory(memory_id=old["id"], superseded_by=new["id"])
    return old["id"], new["id"]


def test_a_superseded_memory_links_both_ways_and_unsupersede_is_one_click(page, live_server):
    old_id, new_id = live_server.call(_write_move)
    log_in(page, live_server.url, f"/memories/{old_id}")
    assert "已被" in page.inner_text("#validity") and new_id in page.inner_text("#validity")
    page.click(f"#validity a:has-text('{new_id}')")
    page.wait_for_url(re.compile(re.escape(new_id) + r"$"))
    assert old_id in page.inner_text("#validity .supersedes")
    assert page.locator("#validity button:has-text('撤销取代')").count() == 0  # the successor is current
    page.click(f"#validity a:has-text('{old_id}')")
    page.wait_for_url(re.compile(re.escape(old_id) + r"$"))
    page.click("#validity button:has-text('撤销取代')")
    page.wait_for_url(re.compile(re.escape(old_id) + r"\?notice=unsuperseded$"))
    assert "撤销取代" in page.inner_text(".notice")
    assert page.locator("#validity").count() == 0
    assert page.locator(".history-entry:has-text('v3')").count() == 1  # create, supersede, unsupersede


async def _write_unsure_pairs(memory) -> list[tuple[str, str, str]]:
    """Two pairs the local decision was unsure of, queued as the write path queues them (no model configured)."""
    from booku_memory.services.evidence.unsure_pairs import resolve_unsure_pair

    service = memory.get_service("booku_memory:service:booku_memory")
    pairs = []
    for old_text, new_text in (
        ("我的手机号是13800001111。", "我的手机号是13900002222。"),
        ("我每周二晚上上<b>钢琴课</b>。", "我每周四晚上上<b>钢琴课</b>。"),
    ):
        old = await service.create_memory(title=old_text, content=old_text, **TRIPLET)
        new = await service.create_memory(title=new_text, content=new_text, **TRIPLET)
        old_id, new_id = old["id"], new["id"]
        pair = await resolve_unsure_pair(memory.runtime, memory.runtime.default_scope, new_id, old_id, "maybe_update")
        pairs.append((pair["pair_id"], old_id, new_id))
    return pairs


def test_unsure_pairs_are_accepted_or_dismissed_in_one_click(page, live_server):
    (accepted, old_id, new_id), (dismissed, kept_old, kept_new) = live_server.call(_write_unsure_pairs)
    log_in(page, live_server.url, "/review")
    card = page.locator(f"#unsure-pairs [data-pair='{accepted}']")
    assert "可能是更新" in card.inner_text() and "13800001111" in card.inner_text()
    assert page.locator("#unsure-pairs b").count() == 0  # memory text is shown as text
    card.locator("button:has-text('确认是更新')").click()
    page.wait_for_url(re.compile(r"/review\?notice=pair_accepted$"))
    assert "已确认" in page.inner_text(".notice")
    assert page.locator(f"[data-pair='{accepted}']").count() == 0
    page.locator(f"[data-pair='{dismissed}'] button:has-text('两条都保留')").click()
    page.wait_for_url(re.compile(r"/review\?notice=pair_dismissed$"))
    assert page.locator("#unsure-pairs").count() == 0
    page.goto(f"{live_server.url}/memories/{old_id}")
    assert "已被" in page.inner_text("#validity") and new_id in page.inner_text("#validity")
    page.goto(f"{live_server.url}/memories/{kept_old}")
    assert page.locator("#validity").count() == 0  # dismissed: both stay current
    page.goto(f"{live_server.url}/audit")
    assert "确认更新/重复" in page.inner_text("body") and "判定为不同的事实" in page.inner_text("body")


def _seed_showcase(api: httpx.Client) -> None:
    memories = [
        (
            "张三",
            "张三是我的大学同学，喜欢打篮球，现在在上海做产品经理。",
            "person",
            "qq:10001",
            ["朋友", "同学"],
            ["学校", "篮球"],
            ["陌生人"],
        ),
        (
            "第一次去青岛",
            "去年七月和家人去青岛看海，在八大关散步，吃了很多海鲜。",
            "event",
            None,
            ["旅行", "青岛"],
            ["海鲜", "家人"],
            ["出差"],
        ),
        (
            "乌龙茶的冲泡",
            "沸水冲泡，第一泡洗茶，第二泡开始饮用；铁观音可以冲七泡。",
            "procedure",
            None,
            ["茶"],
            ["饮品", "冲泡"],
            ["咖啡"],
        ),
        (
            "Rust 所有权",
            "每个值只有一个所有者；所有者离开作用域时值被释放。借用分为可变与不可变。",
            "knowledge",
            None,
            ["rust", "所有权"],
            ["内存", "借用"],
            ["垃圾回收"],
        ),
        ("中山公园", "周末常去散步的公园，东门有家很好吃的面馆。", "place", None, ["公园"], ["散步", "面馆"], ["商场"]),
        (
            "旧山地车",
            "放在车库里的旧山地车，打算下个月挂到二手平台。",
            "asset",
            None,
            ["自行车"],
            ["二手", "车库"],
            ["汽车"],
        ),
        (
            "用户偏好：简洁回答",
            "用户希望回答简洁，先给结论再给理由。",
            "preference",
            None,
            ["偏好", "回答风格"],
            ["简洁"],
            ["长篇大论"],
        ),
    ]
    for title, content, kind, person, core, diffusion, opposing in memories:
        payload = {
            "title": title,
            "content": content,
            "memory_type": kind,
            "core_tags": core,
            "diffusion_tags": diffusion,
            "opposing_tags": opposing,
        }
        if person:
            payload["person_id"] = person
        assert api.post("/api/memories", json=payload).status_code == 201
    trashed = api.post("/api/memories", json={"title": "过时的地址", "content": "旧公司在西湖区文三路。", **TRIPLET})
    api.delete(f"/api/memories/{trashed.json()['item']['id']}")
    api.post(
        "/api/knowledge/documents",
        json={
            "title": "部署手册",
            "content": "# 部署手册\n\n## 安装\n\n创建虚拟环境并安装依赖。\n\n## 启动\n\n运行 serve。\n",
        },
    )


def test_screenshots_of_main_pages_desktop_and_phone(chromium, live_server, api):
    _seed_showcase(api)
    first = api.get("/api/memories", params={"keyword": "张三"}).json()["items"][0]["id"]
    api.put(f"/api/memories/{first}", json={"content": "张三是我的大学同学，喜欢打篮球和游泳，现在在上海做产品经理。"})
    document_id = api.get("/api/knowledge/documents").json()["items"][0]["document_id"]
    pages = {
        "memories": "/memories",
        "memory-detail": f"/memories/{first}",
        "memory-edit": f"/memories/{first}/edit",
        "memory-new": "/memories/new",
        "search": "/search?q=%E5%A4%A7%E5%AD%A6%E5%90%8C%E5%AD%A6",
        "trash": "/trash",
        "knowledge": "/knowledge",
        "knowledge-chunks": f"/knowledge/{document_id}",
        "memos": "/memos",
        "stats": "/stats",
        "audit": "/audit",
        "recall": "/recall?query=%E5%A4%A7%E5%AD%A6%E5%90%8C%E5%AD%A6&min_score=-1&render=true"
        "&quota_events=10&quota_entities=10&quota_preferences=3&quota_experiences=0",
    }
    for device, viewport in (("desktop", {"width": 1280, "height": 900}), ("phone", {"width": 390, "height": 844})):
        context = chromium.new_context(viewport=viewport, locale="zh-CN", device_scale_factor=1)
        page = context.new_page()
        errors = PageErrors(page)
        log_in(page, live_server.url)
        for name, path in pages.items():
            page.goto(f"{live_server.url}{path}")
            assert page.locator("h1").count() >= 1, name
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 1, f"{device}/{name} 页面横向溢出 {overflow}px"
            screenshot(page, f"{device}-{name}")
            if device == "desktop" and name == "memories":
                page.screenshot(path=str(README_SCREENSHOT))  # first screen only: the README shows the current page
        assert errors.console == [] and errors.dialogs == []
        context.close()
    login_context = chromium.new_context(viewport={"width": 1280, "height": 900}, locale="zh-CN")
    login_page = login_context.new_page()
    login_page.goto(f"{live_server.url}/login")
    screenshot(login_page, "desktop-login")
    login_context.close()


async def _alice_dreaming_run(memory) -> list[str]:
    """What one dreaming pass writes into Alice's private store (QQ 1001), as one batch."""
    scope = chat_scope("1001").acting(authority="dreaming", actor="dream", batch_id="dream-browser")
    service = memory.runtime.memory_service(scope)
    ids = []
    for title, content in (
        ("梦境：爱丽丝喜欢围棋", "爱丽丝这个月常提到围棋和乌龙茶。"),
        ("梦境：爱丽丝早睡", "爱丽丝最近晚上十点前就休息。"),
    ):
        created = await service.create_memory(title=title, content=content, memory_type="experience", **TRIPLET)
        ids.append(created["id"])
    return ids


def test_audit_view_per_chat_store_and_batch_restore(page, live_server, api):
    """Runs last: it adds a private chat store to the shared live server."""
    base = live_server.url
    dreamt = live_server.call(_alice_dreaming_run)
    log_in(page, base, "/audit")
    assert page.locator(".audit-row").count() >= 2
    screenshot(page, "audit-all-stores")

    page.click(".store-picker summary")
    page.check("input[name='store'][value='private:qq:1001']")
    page.click("button:has-text('只看勾选的库')")
    page.wait_for_url(base + "/audit?notice=stores")
    assert page.inner_text(".store-picker summary") == "记忆库：私聊 qq:1001"
    assert page.locator(".audit-row").count() == 2
    assert "梦境整理" in page.inner_text("main")

    page.click(".audit-row:has-text('梦境：爱丽丝早睡') button:has-text('恢复整个批次')")
    assert "确认恢复整个批次" in page.inner_text("h1")
    assert page.locator("table.simple tbody tr").count() == 2
    screenshot(page, "audit-batch-confirm")
    page.click("button:has-text('确认恢复整个批次')")
    page.wait_for_url(base + "/audit?notice=batch_restored")
    assert "已撤销整个批次的改动" in page.inner_text(".notice")
    assert page.locator(".audit-row:has-text('撤销创建')").count() == 2

    page.goto(f"{base}/memories/{dreamt[0]}")
    assert page.locator(".badge-deleted").count() == 1
    page.click("a:has-text('审计记录')")
    page.wait_for_url(f"{base}/audit?memory_id={dreamt[0]}")
    assert page.locator(".audit-row").count() == 2
    screenshot(page, "audit-memory-trail")
    trash = api.get("/api/trash", params={"store": "private:qq:1001"}).json()["items"]
    assert {item["id"] for item in trash} == set(dreamt)

"""Dashboard fixtures: the real app over a real standalone store, reached through httpx's ASGI transport."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from booku_memory.config import load_config
from booku_memory.router import DashboardSettings, create_dashboard_app
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.scope import Scope

API_KEY = "test-dashboard-key-0123456789"
TRIPLET = {"core_tags": ["朋友", "同学"], "diffusion_tags": ["学校"], "opposing_tags": ["陌生人"]}


@pytest.fixture
def settings() -> DashboardSettings:
    return DashboardSettings(api_key=API_KEY, page_size=5)


@pytest.fixture
def dashboard_app(memory, settings):
    return create_dashboard_app(lambda: memory.runtime, settings=settings)


def _client(app, **kwargs: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver", **kwargs)


@pytest.fixture
async def api(dashboard_app) -> AsyncIterator[httpx.AsyncClient]:
    """A script client authenticated by the X-API-Key header (no cookie, no CSRF token needed)."""
    async with _client(dashboard_app, headers={"X-API-Key": API_KEY}) as client:
        yield client


@pytest.fixture
async def anon(dashboard_app) -> AsyncIterator[httpx.AsyncClient]:
    """A client with no credentials at all."""
    async with _client(dashboard_app) as client:
        yield client


async def login(client: httpx.AsyncClient, prefix: str = "") -> str:
    """Log in through the form like a browser; returns the session's CSRF token."""
    page = await client.get(f"{prefix}/login")
    token = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    response = await client.post(f"{prefix}/login", data={"api_key": API_KEY, "csrf_token": token, "next": ""})
    assert response.status_code == 303, response.text
    session = await client.get(f"{prefix}/api/session")
    return session.json()["csrf_token"]


@pytest.fixture
async def browser(dashboard_app) -> AsyncIterator[httpx.AsyncClient]:
    """A client logged in with the session cookie; its CSRF token is in ``browser.csrf``."""
    async with _client(dashboard_app) as client:
        client.csrf = await login(client)  # type: ignore[attr-defined]
        yield client


async def create_memory(api: httpx.AsyncClient, **fields: Any) -> dict[str, Any]:
    """Create a memory through the API and return its detail item."""
    payload = {"title": "张三", "content": "张三是我的大学同学，喜欢打篮球", **TRIPLET, **fields}
    response = await api.post("/api/memories", json=payload)
    assert response.status_code == 201, response.text
    return response.json()["item"]


def csrf_field(html: str) -> str:
    """The CSRF token embedded in a page's forms."""
    return re.search(r'name="csrf_token" value="([^"]+)"', html).group(1)


# ------------------------------------------------------------------------------------ two owners, two stores

PER_CHAT = load_config({"scope": {"mode": "per_chat"}}).scope
ALICE_STORE = "private:qq:1001"
BOB_STORE = "private:qq:2002"
ALICE_MARK = "ALICE-NOTE-4410"
BOB_MARK = "BOB-SECRET-7731"
# Both owners write the same words, so any read that crossed stores would find the other owner's memory.
OVERLAP = "我最喜欢的饮料是绿茶，周末常去西湖边散步"


def chat_scope(user_id: str, **acting: str) -> Scope:
    """The scope the bot gets in a private QQ chat with ``user_id`` (optionally with another write authority)."""
    scope = scope_for_chat(PER_CHAT, platform="qq", chat_type="private", user_id=user_id, stream_id=f"s-{user_id}")
    return scope.acting(**acting) if acting else scope


async def _write_owner(memory, user_id: str, name: str, mark: str) -> dict[str, Any]:
    """One owner's data in every kind the dashboard shows: memories, trash, a document, a memo, a batch, audit rows."""
    runtime = memory.runtime
    service = runtime.memory_service(chat_scope(user_id))
    hobby = await service.create_memory(
        title=f"{name} 的爱好",
        content=f"{OVERLAP}（{name} {mark}）",
        memory_type="preference",
        core_tags=["绿茶", name],
        diffusion_tags=["散步"],
        opposing_tags=["咖啡"],
        folder_id="爱好",
    )
    event = await service.create_memory(
        title=f"{name} 去西湖",
        content=f"上周六 {name} 在西湖边散步喝绿茶 {mark}",
        memory_type="event",
        core_tags=["西湖"],
        diffusion_tags=["绿茶"],
        opposing_tags=["加班"],
    )
    await service.update_memory_by_id(memory_id=hobby["id"], content=f"{OVERLAP}，也喜欢乌龙茶（{name} {mark}）")
    trashed = await service.create_memory(
        title=f"{name} 的旧地址",
        content=f"以前住在绿茶路 {mark}",
        core_tags=["地址"],
        diffusion_tags=["搬家"],
        opposing_tags=["新家"],
    )
    await service.delete_memories(memory_ids=[trashed["id"]])
    batch_id = f"dream-{name}"
    dreaming = runtime.memory_service(chat_scope(user_id, authority="dreaming", actor="dream", batch_id=batch_id))
    dreamt = await dreaming.create_memory(
        title=f"{name} 的梦境总结",
        content=f"{name} 似乎很享受绿茶和散步 {mark}",
        memory_type="experience",
        core_tags=["总结"],
        diffusion_tags=["绿茶"],
        opposing_tags=["焦虑"],
    )
    document = await runtime.knowledge_service(chat_scope(user_id)).ingest_document(
        title=f"{name} 的茶谱", content=f"# {name} 的茶谱\n\n## 绿茶\n\n八十度水冲泡 {mark}\n", source="chat"
    )
    memo = await service.create_temporary_memo(content=f"{name} 明天要喝绿茶 {mark}", stream_id=f"s-{user_id}")
    audit = await service.list_audit_log(limit=500)
    return {
        "store": f"private:qq:{user_id}",
        "mark": mark,
        "memory_ids": {hobby["id"], event["id"], trashed["id"], dreamt["id"]},
        "hobby": hobby["id"],
        "trashed": trashed["id"],
        "dreamt": dreamt["id"],
        "batch_id": batch_id,
        "document_id": document["document_id"],
        "memo_id": memo["memo_id"],
        "audit_ids": {row["audit_id"] for row in audit["items"]},
    }


@pytest.fixture
async def two_owners(memory) -> dict[str, dict[str, Any]]:
    """Alice (qq:1001) and Bob (qq:2002), each with a private store full of overlapping data."""
    return {
        "alice": await _write_owner(memory, "1001", "alice", ALICE_MARK),
        "bob": await _write_owner(memory, "2002", "bob", BOB_MARK),
    }

"""Dashboard fixtures: the real app over a real standalone store, reached through httpx's ASGI transport."""

from __future__ import annotations

import re
from typing import Any, AsyncIterator

import httpx
import pytest

from booku_memory.router import DashboardSettings, create_dashboard_app

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

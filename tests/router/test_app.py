"""The app as a whole: every route behind auth, security headers, CORS, mounting under a prefix."""

from __future__ import annotations

import re

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from booku_memory.router import DashboardSettings, create_dashboard_app
from booku_memory.router import api as api_module
from booku_memory.router import pages as pages_module
from booku_memory.services.errors import ConfigError

from .conftest import API_KEY, create_memory, login

PUBLIC_PATHS = {"/login"}


def _all_routes(app: FastAPI) -> list[tuple[str, str]]:
    """(method, concrete path) of every route of the routers the app includes, login form excepted."""
    routes = []
    for route in [*api_module.router.routes, *pages_module.router.routes, *pages_module.public_router.routes]:
        if isinstance(route, APIRoute) and route.path not in PUBLIC_PATHS:
            concrete = re.sub(r"\{[^}]+\}", "some-id", route.path)
            routes.extend((method, concrete) for method in sorted(route.methods))
    return routes


async def test_every_route_requires_authentication(dashboard_app, anon):
    routes = _all_routes(dashboard_app)
    assert len(routes) > 40  # the whole API and every page, not an empty loop
    for method, path in routes:
        response = await anon.request(method, path)
        if path.startswith("/api"):
            assert response.status_code == 401, (method, path, response.status_code)
            assert response.headers["content-type"].startswith("application/json")
            body = response.json()
            if path.startswith("/api/v1/"):  # the OpenViking-compatible routes keep that API's error envelope
                assert body["status"] == "error" and "X-API-Key" in body["error"], (method, path)
            else:
                assert "X-API-Key" in body["detail"], (method, path)
        else:
            assert response.status_code == 303, (method, path, response.status_code)
            assert response.headers["location"].startswith("/login?next="), (method, path)


async def test_wrong_key_gets_401_everywhere_in_the_api(dashboard_app):
    from booku_memory.router.throttle import GuessThrottle

    # This test is about the 401s; the slowing of repeated wrong keys has tests of its own (test_throttle.py).
    dashboard_app.state.auth.guesses = GuessThrottle(free_failures=10_000)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=dashboard_app), base_url="http://testserver", headers={"X-API-Key": "x"}
    ) as client:
        for method, path in _all_routes(dashboard_app):
            if path.startswith("/api"):
                assert (await client.request(method, path)).status_code == 401, (method, path)


async def test_login_page_and_stylesheet_are_public(anon):
    assert (await anon.get("/login")).status_code == 200
    css = await anon.get("/static/dashboard.css")
    assert css.status_code == 200
    assert "text/css" in css.headers["content-type"]


async def test_security_headers_on_pages_api_and_errors(anon, api):
    for response in (await anon.get("/login"), await api.get("/api/memories"), await api.get("/api/memories/nope")):
        assert "default-src 'self'" in response.headers["content-security-policy"]
        assert "frame-ancestors 'none'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["cache-control"] == "no-store"


async def test_no_cors_headers_by_default(api):
    response = await api.get("/api/memories", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in response.headers
    preflight = await api.options(
        "/api/memories", headers={"Origin": "http://evil.example", "Access-Control-Request-Method": "DELETE"}
    )
    assert "access-control-allow-origin" not in preflight.headers


async def test_cors_only_for_configured_origins(memory):
    settings = DashboardSettings(api_key=API_KEY, allowed_origins=("http://127.0.0.1:8000",))
    app = create_dashboard_app(lambda: memory.runtime, settings=settings)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers={"X-API-Key": API_KEY}
    ) as client:
        allowed = await client.get("/api/memories", headers={"Origin": "http://127.0.0.1:8000"})
        assert allowed.headers["access-control-allow-origin"] == "http://127.0.0.1:8000"
        assert "access-control-allow-credentials" not in allowed.headers
        other = await client.get("/api/memories", headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers


def test_wildcard_origin_is_refused(memory):
    with pytest.raises(ConfigError, match="allowed_origins"):
        create_dashboard_app(
            lambda: memory.runtime, settings=DashboardSettings(api_key=API_KEY, allowed_origins=("*",))
        )


async def test_runtime_not_started_answers_503(settings):
    app = create_dashboard_app(lambda: None, settings=settings)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers={"X-API-Key": API_KEY}
    ) as client:
        response = await client.get("/api/memories")
    assert response.status_code == 503
    assert "尚未启动" in response.json()["detail"]


def _host_with_direct_mount(dashboard: FastAPI) -> FastAPI:
    host = FastAPI()
    host.mount("/booku-memory", dashboard)
    return host


def _host_with_router_wrapper(dashboard: FastAPI) -> FastAPI:
    """The host's BaseRouter layout: its own sub-app at the custom path, ours mounted at "/" inside it."""
    wrapper = FastAPI()
    wrapper.mount("/", dashboard)
    host = FastAPI()
    host.mount("/booku-memory", wrapper)
    return host


@pytest.mark.parametrize("layout", [_host_with_direct_mount, _host_with_router_wrapper])
async def test_mounted_under_a_prefix_every_link_keeps_the_prefix(memory, settings, layout):
    """The host mounts the dashboard at /booku-memory: redirects, cookies, forms and links must stay inside it."""
    host = layout(create_dashboard_app(lambda: memory.runtime, settings=settings))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=host), base_url="http://testserver") as client:
        redirect = await client.get("/booku-memory/memories")
        assert redirect.status_code == 303
        assert redirect.headers["location"] == "/booku-memory/login?next=%2Fbooku-memory%2Fmemories"
        csrf = await login(client, prefix="/booku-memory")
        cookie = next(c for c in client.cookies.jar if c.name == "booku_session")
        assert cookie.path == "/booku-memory"
        created = await client.post(
            "/booku-memory/api/memories",
            json={
                "title": "挂载测试",
                "content": "挂载在前缀下",
                "core_tags": ["a"],
                "diffusion_tags": ["b"],
                "opposing_tags": ["c"],
            },
            headers={"X-CSRF-Token": csrf},
        )
        assert created.status_code == 201
        memory_id = created.json()["item"]["id"]
        page = await client.get("/booku-memory/memories")
        hrefs = re.findall(r'(?:href|action)="([^"]+)"', page.text)
        assert hrefs and all(h.startswith("/booku-memory/") for h in hrefs), hrefs
        assert f'href="/booku-memory/memories/{memory_id}"' in page.text
        deleted = await client.post(f"/booku-memory/memories/{memory_id}/delete", data={"csrf_token": csrf})
        assert deleted.headers["location"].startswith(f"/booku-memory/memories/{memory_id}")
        home = await client.get("/booku-memory/")
        assert home.headers["location"] == "/booku-memory/memories"


async def test_unknown_page_is_a_friendly_404(browser):
    response = await browser.get("/memories/does-not-exist")
    assert response.status_code == 404
    assert "未找到记忆" in response.text


async def test_api_validation_error_does_not_echo_the_body(api):
    response = await api.post("/api/memories", json={"title": "x", "content": "secret body", "unknown_field": 1})
    assert response.status_code == 422
    assert "secret body" not in response.text


async def test_service_validation_error_is_400_with_chinese_message(api):
    response = await api.post("/api/memories", json={"title": "x", "content": "y"})
    assert response.status_code == 400
    assert "core_tags" in response.json()["detail"]


async def test_created_memory_is_reachable(api):
    item = await create_memory(api)
    assert (await api.get(f"/api/memories/{item['id']}")).status_code == 200

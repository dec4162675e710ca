"""Authentication: key resolution, signed sessions, login form, CSRF, throttle."""

from __future__ import annotations

import stat

import pytest

from booku_memory.config import load_config
from booku_memory.router.auth import (
    API_KEY_FILE_NAME,
    SESSION_COOKIE,
    SessionSigner,
    ensure_api_key,
)

from .conftest import API_KEY, create_memory, csrf_field, login


def test_ensure_api_key_generates_private_file_once(tmp_path, monkeypatch):
    monkeypatch.delenv("BOOKU_DASHBOARD_API_KEY", raising=False)
    config = load_config()
    first = ensure_api_key(tmp_path, config)
    path = tmp_path / API_KEY_FILE_NAME
    assert len(first) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ensure_api_key(tmp_path, config) == first


def test_ensure_api_key_prefers_config_then_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("BOOKU_DASHBOARD_API_KEY", "from-env-0123456789abcdefgh")
    assert ensure_api_key(tmp_path, load_config()) == "from-env-0123456789abcdefgh"
    configured = load_config({"dashboard": {"api_key": "from-config-0123456789abcdef"}})
    assert ensure_api_key(tmp_path, configured) == "from-config-0123456789abcdef"
    assert not (tmp_path / API_KEY_FILE_NAME).exists()


def test_session_cookie_rejects_tampering_expiry_and_other_keys():
    signer = SessionSigner("key-a", session_hours=1)
    cookie, session = signer.issue(now=1000.0)
    assert signer.verify(cookie, now=1001.0) == session
    assert signer.verify(cookie, now=1000.0 + 3601) is None
    body, signature = cookie.split(".")
    assert signer.verify(f"{body}x.{signature}", now=1001.0) is None
    assert SessionSigner("key-b", session_hours=1).verify(cookie, now=1001.0) is None
    assert signer.verify("garbage", now=1001.0) is None


async def test_login_sets_strict_httponly_cookie_and_redirects_to_next(anon):
    page = await anon.get("/login", params={"next": "/trash"})
    response = await anon.post(
        "/login", data={"api_key": API_KEY, "csrf_token": csrf_field(page.text), "next": "/trash"}
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/trash"
    cookie = next(h for h in response.headers.get_list("set-cookie") if h.startswith(SESSION_COOKIE))
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert (await anon.get("/trash")).status_code == 200


async def test_login_never_redirects_off_site(anon):
    page = await anon.get("/login")
    response = await anon.post(
        "/login", data={"api_key": API_KEY, "csrf_token": csrf_field(page.text), "next": "//evil.example/x"}
    )
    assert response.headers["location"] == "/memories"


async def test_wrong_key_is_refused(anon):
    page = await anon.get("/login")
    token = csrf_field(page.text)
    wrong = await anon.post("/login", data={"api_key": "nope", "csrf_token": token})
    assert wrong.status_code == 401
    assert "密钥不正确" in wrong.text
    assert SESSION_COOKIE not in anon.cookies


async def test_login_post_without_form_token_is_refused(anon):
    """A foreign page cannot log the browser into the attacker's session (login CSRF)."""
    response = await anon.post("/login", data={"api_key": API_KEY, "csrf_token": "forged"})
    assert response.status_code == 403
    assert SESSION_COOKIE not in anon.cookies


async def test_cross_site_form_post_without_csrf_token_is_refused(browser, api):
    item = await create_memory(api)
    response = await browser.post(f"/memories/{item['id']}/delete", data={})
    assert response.status_code == 403
    wrong = await browser.post(f"/memories/{item['id']}/delete", data={"csrf_token": "guessed"})
    assert wrong.status_code == 403
    detail = (await api.get(f"/api/memories/{item['id']}")).json()["item"]
    assert detail["metadata"]["is_deleted"] is False
    accepted = await browser.post(f"/memories/{item['id']}/delete", data={"csrf_token": browser.csrf})
    assert accepted.status_code == 303
    assert (await api.get(f"/api/memories/{item['id']}")).json()["item"]["metadata"]["is_deleted"] is True


async def test_cookie_api_writes_need_csrf_header_but_key_requests_do_not(browser, api):
    item = await create_memory(api)
    refused = await browser.delete(f"/api/memories/{item['id']}")
    assert refused.status_code == 403
    assert refused.json()["detail"].startswith("CSRF")
    allowed = await browser.delete(f"/api/memories/{item['id']}", headers={"X-CSRF-Token": browser.csrf})
    assert allowed.status_code == 200
    restored = await api.post(f"/api/memories/{item['id']}/restore")
    assert restored.status_code == 200


async def test_wrong_api_key_is_not_rescued_by_a_valid_cookie(browser):
    response = await browser.get("/api/memories", headers={"X-API-Key": "wrong"})
    assert response.status_code == 401


async def test_logout_forgets_the_session(browser):
    response = await browser.post("/logout", data={"csrf_token": browser.csrf})
    assert response.status_code == 303
    assert (await browser.get("/memories")).status_code == 303


async def test_forged_session_cookie_is_rejected(anon):
    anon.cookies.set(SESSION_COOKIE, "eyJjc3JmIjoieCIsImV4cCI6OTk5OTk5OTk5OTl9.AAAA")
    assert (await anon.get("/api/memories")).status_code == 401


async def test_rotating_the_key_logs_sessions_out(memory, settings):
    import httpx

    from booku_memory.router import DashboardSettings, create_dashboard_app

    old = create_dashboard_app(lambda: memory.runtime, settings=settings)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=old), base_url="http://testserver") as client:
        await login(client)
        cookie = client.cookies[SESSION_COOKIE]
    new = create_dashboard_app(
        lambda: memory.runtime, settings=DashboardSettings(api_key="rotated-key-0123456789abcdef")
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=new), base_url="http://testserver") as client:
        client.cookies.set(SESSION_COOKIE, cookie)
        assert (await client.get("/api/memories")).status_code == 401


def test_empty_api_key_is_refused(memory):
    from booku_memory.router import DashboardSettings, create_dashboard_app

    with pytest.raises(ValueError, match="api_key"):
        create_dashboard_app(lambda: memory.runtime, settings=DashboardSettings(api_key=""))


# ----------------------------------------------------------------------------------- malformed session cookies

MALFORMED_COOKIES = [
    "你好".encode(),  # non-ASCII bytes, as a browser or a script may send them
    "ü.ü".encode("latin-1"),
    b"\xff\xfe.\x80",
    b"a.b.c",
    b".",
    b"x" * 4000 + b"." + b"y" * 40,
    b"eyJjc3JmIjoxfQ.AAAA",
]


@pytest.mark.parametrize("raw", MALFORMED_COOKIES)
async def test_a_malformed_session_cookie_means_logged_out_everywhere(dashboard_app, raw):
    import httpx

    headers = {"Cookie": b"booku_session=" + raw}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=dashboard_app), base_url="http://testserver", headers=headers
    ) as client:
        assert (await client.get("/login")).status_code == 200
        page = await client.get("/memories")
        assert page.status_code == 303 and page.headers["location"].startswith("/login")
        assert (await client.get("/api/memories")).status_code == 401
        assert (await client.post("/api/memories", json={"title": "x"})).status_code == 401


async def test_malformed_preference_cookies_do_not_break_a_logged_in_page(browser):
    browser.headers["Cookie"] = "; ".join(f"{name}={value}" for name, value in browser.cookies.items())
    for name in ("booku_stores", "booku_login_csrf"):
        raw = browser.headers["Cookie"].encode("latin-1") + f"; {name}=".encode() + "你好".encode()
        response = await browser.get("/memories", headers={"Cookie": raw})
        assert response.status_code == 200, (name, response.status_code)


# ------------------------------------------------------------------------------------------ session epochs


async def test_logout_ends_the_session_even_for_a_copied_cookie(dashboard_app, browser):
    import httpx

    copied = browser.cookies[SESSION_COOKIE]
    assert (await browser.post("/logout", data={"csrf_token": browser.csrf})).status_code == 303
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=dashboard_app), base_url="http://testserver"
    ) as replay:
        replay.cookies.set(SESSION_COOKIE, copied)
        assert (await replay.get("/api/memories")).status_code == 401
        assert (await replay.get("/memories")).status_code == 303
        csrf = await login(replay)  # logging in again works and gives a session of the new epoch
        assert csrf and (await replay.get("/api/memories")).status_code == 200


async def test_a_logged_out_cookie_stays_dead_after_a_restart(tmp_path, settings):
    import httpx

    import booku_memory
    from booku_memory.router import create_dashboard_app
    from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

    quiet = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}

    async def client_for(handle) -> httpx.AsyncClient:
        app = create_dashboard_app(lambda: handle.runtime, settings=settings)
        return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver")

    async with booku_memory.open(tmp_path / "data", quiet, embedder=DeterministicTestEmbedder()) as handle:
        async with await client_for(handle) as client:
            csrf = await login(client)
            copied = client.cookies[SESSION_COOKIE]
            await client.post("/logout", data={"csrf_token": csrf})
    async with booku_memory.open(tmp_path / "data", quiet, embedder=DeterministicTestEmbedder()) as handle:
        async with await client_for(handle) as client:
            client.cookies.set(SESSION_COOKIE, copied)
            assert (await client.get("/api/memories")).status_code == 401


# ---------------------------------------------------------------------------------------------- key length


def test_a_short_configured_key_is_a_config_error(tmp_path, monkeypatch, memory):
    from booku_memory.router import DashboardSettings, create_dashboard_app
    from booku_memory.services.errors import ConfigError

    monkeypatch.delenv("BOOKU_DASHBOARD_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="至少需要 24 个字符"):
        ensure_api_key(tmp_path, load_config({"dashboard": {"api_key": "short-key-123"}}))
    monkeypatch.setenv("BOOKU_DASHBOARD_API_KEY", "23-characters-long-key!")
    with pytest.raises(ConfigError, match="至少需要 24 个字符"):
        ensure_api_key(tmp_path, load_config())
    with pytest.raises(ConfigError, match="至少需要 24 个字符"):
        create_dashboard_app(lambda: memory.runtime, settings=DashboardSettings(api_key="password"))
    monkeypatch.setenv("BOOKU_DASHBOARD_API_KEY", "24-characters-long-key!!")
    assert ensure_api_key(tmp_path, load_config()) == "24-characters-long-key!!"

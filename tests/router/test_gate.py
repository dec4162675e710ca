"""The gate in front of the dashboard: authentication before any body is read, body caps per route (declared and
streamed), and JSON text that cannot be stored refused cleanly.

Bodies come from generators that count what the app pulled: httpx's ASGI transport hands the app a chunk only when
the app asks for one, so "consumed nothing" means the body was never read, buffered or spooled to disk.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from booku_memory.router import DashboardSettings, create_dashboard_app

from .conftest import API_KEY, TRIPLET, create_memory

MIB = 1024 * 1024


class CountingBody:
    """An endless-looking request body of ``chunks`` MiB-sized pieces that records how many the app took."""

    def __init__(self, chunks: int, piece: bytes = b"a" * MIB, head: bytes = b"") -> None:
        self.chunks = chunks
        self.piece = piece
        self.head = head
        self.taken = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for index in range(self.chunks):
            self.taken += 1
            yield self.head + self.piece if index == 0 else self.piece


def _client(app, **kwargs) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://testserver", **kwargs)


MULTIPART = "multipart/form-data; boundary=xyz"
# A well-formed start of a file part, so the multipart parser keeps reading the (endless) file content.
MULTIPART_HEAD = (
    b'--xyz\r\nContent-Disposition: form-data; name="file"; filename="a.md"\r\nContent-Type: text/markdown\r\n\r\n'
)
UNAUTHENTICATED_BODIES = [
    ("/api/memories", "text/plain"),
    ("/api/memories", "application/json"),
    ("/api/knowledge/upload", MULTIPART),
    ("/api/knowledge/documents", "application/json"),
    ("/api/v1/search/recall", "application/json"),
    ("/memories/new", "application/x-www-form-urlencoded"),
    ("/knowledge/upload", MULTIPART),
    ("/api/no-such-route", "application/json"),
]


@pytest.mark.parametrize("path, content_type", UNAUTHENTICATED_BODIES)
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_an_unauthenticated_body_is_never_read(anon, path, content_type, declared):
    body = CountingBody(64)
    headers = {"Content-Type": content_type}
    if declared:
        headers["Content-Length"] = str(64 * MIB)
    response = await anon.post(path, content=body, headers=headers)
    if path.startswith("/api"):
        assert response.status_code == 401, response.text
    else:
        assert response.status_code == 303 and response.headers["location"].startswith("/login")
    assert body.taken == 0


async def test_a_wrong_key_gets_no_body_read_either(dashboard_app):
    body = CountingBody(64)
    async with _client(dashboard_app, headers={"X-API-Key": "wrong-key-0123456789abcdefgh"}) as client:
        response = await client.post("/api/memories", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 401
    assert body.taken == 0


@pytest.fixture
def small_caps_app(memory):
    """The dashboard with a 64 KB ordinary cap and a 96 KB document text cap (document bodies: 2 × + framing)."""
    settings = DashboardSettings(api_key=API_KEY, max_body_bytes=64 * 1024, max_upload_bytes=96 * 1024)
    return create_dashboard_app(lambda: memory.runtime, settings=settings)


async def test_a_declared_length_over_the_cap_is_refused_before_reading(small_caps_app, service):
    async with _client(small_caps_app, headers={"X-API-Key": API_KEY}) as client:
        body = CountingBody(4)
        response = await client.post(
            "/api/memories", content=body, headers={"Content-Type": "application/json", "Content-Length": str(4 * MIB)}
        )
        assert response.status_code == 413
        assert "64 KB" in response.json()["detail"]
        assert body.taken == 0

        recall = await client.post(
            "/api/v1/search/recall",
            content=CountingBody(4),
            headers={"Content-Type": "application/json", "Content-Length": str(4 * MIB)},
        )
        assert recall.status_code == 413 and recall.json()["status"] == "error"  # the v1 envelope
    assert (await service.list_memory_entries())["matched"] == 0


@pytest.mark.parametrize(
    "path, content_type",
    [
        ("/api/memories", "application/json"),
        ("/api/memories", "text/plain"),
        ("/api/knowledge/upload", MULTIPART),
        ("/api/knowledge/documents", "application/json"),
    ],
)
async def test_a_streamed_body_past_the_cap_is_cut_off_at_the_cap(small_caps_app, path, content_type):
    body = CountingBody(64, piece=b"a" * (16 * 1024), head=MULTIPART_HEAD if content_type == MULTIPART else b"")
    async with _client(small_caps_app, headers={"X-API-Key": API_KEY}) as client:
        response = await client.post(path, content=body, headers={"Content-Type": content_type})
    assert response.status_code == 413, response.text
    assert response.json()["detail"].startswith("请求体过大")
    cap = small_caps_app.state.settings.max_upload_body_bytes if "knowledge" in path else 64 * 1024
    assert body.taken * 16 * 1024 <= cap + 16 * 1024  # stopped within one chunk past the cap


async def test_a_page_form_past_the_cap_gets_an_error_page(small_caps_app):
    async with _client(small_caps_app) as client:
        from .conftest import login

        csrf = await login(client)
        body = CountingBody(64, piece=b"content=" + b"a" * (16 * 1024))
        response = await client.post(
            "/memories/bulk",
            content=body,
            headers={"Content-Type": "application/x-www-form-urlencoded", "X-CSRF-Token": csrf},
        )
    assert response.status_code == 413
    assert "请求体过大" in response.text and response.headers["content-type"].startswith("text/html")
    assert body.taken <= 6


async def test_document_routes_take_more_than_ordinary_routes(small_caps_app, service):
    text = "# 大文档\n\n" + "部署步骤说明。" * 4000  # ~84 KB of UTF-8: over the ordinary cap, under the upload cap
    async with _client(small_caps_app, headers={"X-API-Key": API_KEY}) as client:
        upload = await client.post(
            "/api/knowledge/upload", files={"file": ("big.md", text.encode("utf-8"), "text/markdown")}
        )
        assert upload.status_code == 201, upload.text
        memory = await client.post("/api/memories", json={"title": "t", "content": text, **TRIPLET})
        assert memory.status_code == 413
    assert (await service.list_memory_entries())["matched"] == 0


SURROGATE_BODIES = [
    (
        "POST",
        "/api/memories",
        b'{"title": "\\ud800", "content": "x", "core_tags": ["a"], "diffusion_tags": ["b"], "opposing_tags": ["c"]}',
    ),
    (
        "POST",
        "/api/memories",
        b'{"title": "ok", "content": "tail \\udfff", "core_tags": ["a"], '
        b'"diffusion_tags": ["b"], "opposing_tags": ["c"]}',
    ),
    ("POST", "/api/v1/search/recall", b'{"query": "\\ud83d"}'),
    ("POST", "/api/knowledge/documents", b'{"title": "doc", "content": "\\udc00\\ud800"}'),
    ("POST", "/api/memories", b'{"\\ud800": 1}'),  # in a key
    ("POST", "/api/memories/bulk", b'{"action": "delete", "memory_ids": ["\\ud800"]}'),
]


@pytest.mark.parametrize("method, path, raw", SURROGATE_BODIES)
async def test_lone_surrogates_in_json_are_a_clean_400(api, service, method, path, raw):
    response = await api.request(method, path, content=raw, headers={"Content-Type": "application/json"})
    assert response.status_code == 400, response.text
    payload = response.json()
    message = payload.get("detail") or payload.get("error")
    assert "代理码位" in message
    assert (await service.list_memory_entries())["matched"] == 0


async def test_a_lone_surrogate_in_an_update_changes_nothing(api):
    item = await create_memory(api)
    response = await api.put(
        f"/api/memories/{item['id']}", content=b'{"content": "\\ud800"}', headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 400
    after = (await api.get(f"/api/memories/{item['id']}")).json()["item"]
    assert after["content"] == item["content"]


async def test_paired_surrogates_and_invalid_utf8(api):
    emoji = await api.post(
        "/api/memories",
        content=b'{"title": "\\ud83d\\ude00 smile", "content": "x", '
        b'"core_tags": ["a"], "diffusion_tags": ["b"], '
        b'"opposing_tags": ["c"]}',
        headers={"Content-Type": "application/json"},
    )
    assert emoji.status_code == 201  # a proper pair is one character (U+1F600), stored as such
    assert emoji.json()["item"]["title"].startswith("\U0001f600")
    broken = await api.post(
        "/api/memories", content=b'{"title": "\xff\xfe", "content": "x"}', headers={"Content-Type": "application/json"}
    )
    assert broken.status_code == 400 and "UTF-8" in broken.json()["detail"]

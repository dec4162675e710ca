"""Property: no JSON route of the dashboard answers 5xx, whatever strings a client puts in its path, query or body.

The routes are enumerated from the app itself (every ``/api`` route of every router it includes), so a route added
later is fuzzed without anyone listing it. Strings come from hypothesis with lone surrogates allowed, plus a pool
of hostile ones (NUL, RTL override, emoji, markup, huge-ish text); in a JSON body a lone surrogate travels as the
``\\udXXX`` escape a client would send, in a URL as its percent-encoded (invalid) UTF-8 bytes. Path ids are
sometimes real ones, so the fuzz also reaches the services behind the 404s.
"""

from __future__ import annotations

import asyncio
import json
import re
import types
import typing
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.routing import APIRoute
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import booku_memory
from booku_memory.router import DashboardSettings, create_dashboard_app
from booku_memory.router.gate import flat_routes
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

from .conftest import API_KEY, TRIPLET

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
HOSTILE = [
    "\ud800",
    "\udfff",
    "a\ud83d",
    "\x00",
    "a\x00b",
    "\u202eevil",
    "مرحبا بالعالم",
    "😀👍🏽",
    "\ufeff",
    "\uffff",
    "<script>alert(1)</script>",
    "../../etc/passwd",
    "%00",
    "'; DROP TABLE x; --",
    "(a+)+$",
    "   ",
    "",
    "大" * 3000,
    "x" * 20000,
    "1e309",
    "-1",
    "null",
    "true",
    "\\",
    '"',
    "\r\n",
]
ANY_CHAR = st.characters(exclude_categories=())  # surrogates included
WITH_LONE_SURROGATE = st.builds(
    lambda head, lone, tail: head + lone + tail,
    st.text(ANY_CHAR, max_size=20),
    st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
    st.text(max_size=20),
)
TEXT = st.one_of(
    st.sampled_from(HOSTILE),
    WITH_LONE_SURROGATE,
    st.text(ANY_CHAR, max_size=60),
    st.text(ANY_CHAR, min_size=200, max_size=2000),
)
JSON_VALUE = st.one_of(TEXT, st.lists(TEXT, max_size=4), st.integers(-5, 10**12), st.none(), st.booleans())


def api_routes(app) -> list[tuple[str, APIRoute]]:
    """``(method, route)`` for every JSON route the app serves."""
    found = []
    for route in flat_routes(app.router.routes):
        if isinstance(route, APIRoute) and route.path.startswith("/api"):
            found.extend((method, route) for method in sorted(route.methods))
    return found


def query_names(dependant: Any) -> set[str]:
    """The query parameters of a route, its sub-dependencies' (e.g. the filter classes) included."""
    names = {param.alias for param in dependant.query_params}
    for sub in dependant.dependencies:
        names |= query_names(sub)
    return names


def _url_piece(text: str) -> str:
    """Percent-encoded UTF-8 (a lone surrogate as its invalid bytes), cut to keep the URL within what a client
    sends at all."""
    return quote(text[:1000].encode("utf-8", "surrogatepass"), safe="")


def _typed_value(annotation: Any) -> st.SearchStrategy[Any]:
    """A value of the field's own shape, so the request gets past validation into the service."""
    origin = typing.get_origin(annotation)
    args = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
    if origin in (typing.Union, types.UnionType) and args:
        return _typed_value(args[0])
    if origin is list:
        return st.lists(TEXT, min_size=1, max_size=3)
    if annotation is int:
        return st.integers(-5, 10**6)
    if annotation is float:
        return st.floats(-1e12, 1e12)
    return TEXT


def _plain_value(name: str, info: Any) -> Any:
    """A harmless valid value: the field's default, plain text for required text, one plain tag per tag group (a
    memory needs all three)."""
    if name.endswith("_tags") and info.is_required() is False and info.get_default(call_default_factory=True) == []:
        return ["普通"]
    if not info.is_required():
        return info.get_default(call_default_factory=True)
    return ["普通"] if typing.get_origin(info.annotation) is list else "普通文本"


@st.composite
def _model_body(draw: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """Plain values everywhere except in one to three fields, which get hostile values of their shape: the body
    passes validation and carries the hostile text into the service."""
    body = {name: _plain_value(name, info) for name, info in fields.items()}
    for name in draw(st.lists(st.sampled_from(sorted(fields)), min_size=1, max_size=3, unique=True)):
        body[name] = draw(_typed_value(fields[name].annotation))
    return body


def body_strategy(route: APIRoute) -> st.SearchStrategy[Any]:
    """A JSON body for the route: its model's fields filled in (now and then any JSON object instead), or, for
    routes that read JSON themselves, the recall arguments."""
    field = route.body_field
    model = field.field_info.annotation if field is not None else None
    fields = getattr(model, "model_fields", None)
    anything = st.dictionaries(TEXT, JSON_VALUE, max_size=4)
    if fields:
        return st.one_of(_model_body(fields), _model_body(fields), _model_body(fields), anything)
    recall = st.fixed_dictionaries(
        {"query": TEXT},
        optional={"max_chars": JSON_VALUE, "quotas": JSON_VALUE, "render": JSON_VALUE, "peer_scope": JSON_VALUE},
    )
    return st.one_of(recall, recall, recall, anything)


class Fuzzer:
    """One real store and dashboard app shared by every route's run (opening a store per route would dominate)."""

    def __init__(self, root) -> None:
        self.runner = asyncio.Runner()
        self.root = root
        self.memory = None
        self.ids: list[str] = []

    def start(self) -> None:
        self.memory = self.runner.run(self._open())

    async def _open(self):
        handle = booku_memory.open(self.root / "data", QUIET, embedder=DeterministicTestEmbedder())
        memory = await handle.__aenter__()
        self._handle = handle
        self.app = create_dashboard_app(lambda: memory.runtime, settings=DashboardSettings(api_key=API_KEY))
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url="http://testserver",
            headers={"X-API-Key": API_KEY},
            timeout=120,
        )
        for index in range(3):
            created = await self.client.post(
                "/api/memories", json={"title": f"种子{index}", "content": f"种子记忆 {index}", **TRIPLET}
            )
            self.ids.append(created.json()["item"]["id"])
        document = await self.client.post(
            "/api/knowledge/documents", json={"title": "种子文档", "content": "# 标题\n\n正文"}
        )
        self.ids.append(document.json()["document_id"])
        return memory

    def close(self) -> None:
        async def shut() -> None:
            await self.client.aclose()
            await self._handle.__aexit__(None, None, None)

        self.runner.run(shut())
        self.runner.close()

    def request(self, method: str, path: str, query: dict[str, str], body: Any) -> httpx.Response:
        url = path + ("?" + "&".join(f"{_url_piece(k)}={_url_piece(v)}" for k, v in query.items()) if query else "")
        content = json.dumps(body).encode("ascii") if body is not None else None  # lone surrogates as \\udXXX
        headers = {"Content-Type": "application/json"} if content is not None else {}
        return self.runner.run(self.client.request(method, url, content=content, headers=headers))


@pytest.fixture(scope="module")
def fuzzer(tmp_path_factory):
    fuzzer = Fuzzer(tmp_path_factory.mktemp("route-fuzz"))
    fuzzer.start()
    yield fuzzer
    fuzzer.close()


_PROBE_APP = create_dashboard_app(lambda: None, settings=DashboardSettings(api_key=API_KEY))
ROUTES = api_routes(_PROBE_APP)


def test_every_json_route_is_enumerated():
    paths = {route.path for _, route in ROUTES}
    assert len(ROUTES) >= 40
    assert {"/api/memories", "/api/v1/search/recall", "/api/knowledge/documents", "/api/review/proposals"} <= paths


@pytest.mark.parametrize("method, route", ROUTES, ids=[f"{m} {r.path}" for m, r in ROUTES])
def test_no_json_route_answers_5xx(fuzzer, method, route):
    params = re.findall(r"\{([^}:]+)[^}]*\}", route.path)
    names = sorted(query_names(route.dependant))
    has_body = route.body_field is not None or method in ("POST", "PUT", "PATCH")

    @settings(
        max_examples=40 if has_body else 10, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    @given(
        path_values=st.fixed_dictionaries({name: st.one_of(TEXT, st.sampled_from(fuzzer.ids)) for name in params}),
        query=st.fixed_dictionaries({}, optional={name: TEXT for name in names}),
        body=body_strategy(route) if has_body else st.none(),
    )
    def run(path_values: dict[str, str], query: dict[str, str], body: Any) -> None:
        path = route.path
        for name, value in path_values.items():
            path = re.sub(r"\{" + name + r"[^}]*\}", _url_piece(value) or "x", path)
        response = fuzzer.request(method, path, query, body)
        assert response.status_code < 500, (method, path, query, body, response.status_code, response.text[:500])

    run()


COOKIE_NAMES = ("booku_session", "booku_stores", "booku_login_csrf")


def test_no_page_answers_5xx_for_any_cookie(fuzzer):
    """Whatever bytes a client puts in the dashboard's cookies, pages and the API answer as for a logged-out (or,
    with the key, a logged-in) visitor, never with a server error."""

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        name=st.sampled_from(COOKIE_NAMES),
        raw=st.binary(max_size=300).map(lambda value: bytes(b for b in value if b not in b"\r\n\x00;")),
        path=st.sampled_from(["/login", "/memories", "/api/status", "/knowledge"]),
        with_key=st.booleans(),
    )
    def run(name: str, raw: bytes, path: str, with_key: bool) -> None:
        request = fuzzer.client.build_request("GET", path, headers={"Cookie": name.encode() + b"=" + raw})
        if not with_key:
            del request.headers["X-API-Key"]  # a cookie-only visitor
        response = fuzzer.runner.run(fuzzer.client.send(request))
        assert response.status_code < 500, (name, raw, path, response.status_code)
        if not with_key and name == "booku_session" and path != "/login":
            assert response.status_code in (303, 401)

    run()


def page_routes(app) -> list[tuple[str, APIRoute]]:
    """``(method, route)`` for every HTML page and form the app serves (logout left out: it ends the session the
    rest of the run uses)."""
    found = []
    for route in flat_routes(app.router.routes):
        if isinstance(route, APIRoute) and not route.path.startswith("/api") and route.path != "/logout":
            found.extend((method, route) for method in sorted(route.methods))
    return found


PAGES = page_routes(_PROBE_APP)


def form_names(route: APIRoute) -> list[str]:
    """The form fields a page route declares, plus the ones the page forms post and routes read by hand."""
    declared = {param.alias for param in route.dependant.body_params}
    return sorted(
        declared
        | {
            "title",
            "content",
            "memory_ids",
            "action",
            "store",
            "return_to",
            "version",
            "confirm",
            "status",
            "note",
            "api_key",
            "next",
        }
    )


@pytest.mark.parametrize("method, route", PAGES, ids=[f"{m} {r.path}" for m, r in PAGES])
def test_no_page_answers_5xx(fuzzer, method, route):
    """The same property for the server-rendered pages and their forms (url-encoded, where a lone surrogate can only
    arrive as invalid percent-encoded UTF-8)."""
    params = re.findall(r"\{([^}:]+)[^}]*\}", route.path)
    names = sorted(query_names(route.dependant))
    fields = form_names(route)

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(
        path_values=st.fixed_dictionaries({name: st.one_of(TEXT, st.sampled_from(fuzzer.ids)) for name in params}),
        query=st.fixed_dictionaries({}, optional={name: TEXT for name in names}),
        form=st.fixed_dictionaries({}, optional={name: TEXT for name in fields}),
    )
    def run(path_values: dict[str, str], query: dict[str, str], form: dict[str, str]) -> None:
        path = route.path
        for name, value in path_values.items():
            path = re.sub(r"\{" + name + r"[^}]*\}", _url_piece(value) or "x", path)
        url = path + ("?" + "&".join(f"{_url_piece(k)}={_url_piece(v)}" for k, v in query.items()) if query else "")
        content = "&".join(f"{_url_piece(k)}={_url_piece(v)}" for k, v in form.items()).encode("ascii")
        headers = {"Content-Type": "application/x-www-form-urlencoded"} if method == "POST" else {}
        response = fuzzer.runner.run(
            fuzzer.client.request(method, url, content=content if method == "POST" else None, headers=headers)
        )
        assert response.status_code < 500, (method, path, query, form, response.status_code, response.text[:500])

    run()

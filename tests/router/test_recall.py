"""``POST /api/v1/search/recall`` (OpenViking's typed recall over HTTP) and the recall preview page."""

from __future__ import annotations

import httpx

from .conftest import API_KEY, TRIPLET, create_memory

RECALL = "/api/v1/search/recall"
# The request of OpenViking's documented curl example, byte for byte.
SEED_REQUEST = {
    "query": "OpenViking API 文档偏好",
    "quotas": {"events": 5, "entities": 5, "preferences": 3, "experiences": 2},
    "max_chars": 6500,
    "peer_scope": "all",
}
PREFERENCE = "用户偏好在 API 文档中同时提供 HTTP、SDK 和 CLI 示例。"
ENTRY_KEYS = {"uri", "score", "type", "mode", "rank", "origin", "content", "summary", "abstract"}
STATS_KEYS = {
    "quotas",
    "roots",
    "searched",
    "returned",
    "dropped",
    "max_chars",
    "min_score",
    "peer_scope",
    "other_peer_penalties",
    "origins",
}


async def _seed(api) -> dict[str, str]:
    preference = await create_memory(
        api,
        title="API 文档偏好",
        content=PREFERENCE,
        memory_type="preference",
        core_tags=["API", "文档"],
        diffusion_tags=["偏好"],
        opposing_tags=["口头说明"],
    )
    event = await create_memory(
        api, title="OpenViking 文档评审", content="上周评审了 OpenViking API 文档的目录结构", memory_type="event"
    )
    person = await create_memory(
        api, title="张三", content="张三负责维护 OpenViking API 文档", memory_type="person", person_id="qq:10001"
    )
    return {"preference": preference["id"], "event": event["id"], "person": person["id"]}


def _check_seed_shape(body: dict, request: dict) -> dict:
    """Every field of OpenViking's example response, for whatever entries came back; returns ``result``."""
    assert set(body) == {"status", "result"} and body["status"] == "ok"
    result = body["result"]
    assert set(result) == {"entries", "rendered", "stats"}
    entries = result["entries"]
    for entry in entries:
        assert set(entry) - {"id"} <= ENTRY_KEYS, entry
        assert isinstance(entry["uri"], str) and entry["uri"].endswith(entry["id"])
        assert isinstance(entry["score"], float)
        assert entry["type"] in request["quotas"]
        assert entry["mode"] in ("full", "summary", "uri")
        assert isinstance(entry["rank"], int) and entry["rank"] >= 1
        assert entry["origin"] in ("actor_peer", "self", "other_peer")
        assert ("content" in entry) == (entry["mode"] == "full")
        assert ("summary" in entry) == (entry["mode"] == "summary")
    for kind, quota in request["quotas"].items():
        ranks = [entry["rank"] for entry in entries if entry["type"] == kind]
        assert ranks == list(range(1, len(ranks) + 1)), (kind, ranks)
        assert len(ranks) <= quota

    rendered = result["rendered"]
    assert isinstance(rendered, str) and len(rendered) <= request["max_chars"]
    assert bool(rendered) == bool(entries)
    for entry in entries:
        assert f"{entry['uri']} (score={entry['score']:.4f})" in rendered

    stats = result["stats"]
    assert set(stats) - {"degraded"} == STATS_KEYS
    assert stats["quotas"] == request["quotas"]
    assert stats["roots"] == ["booku://shared/memories"]
    assert set(stats["searched"]) == set(request["quotas"])
    assert all(isinstance(count, int) and count >= 0 for count in stats["searched"].values())
    assert stats["returned"] == len(entries)
    assert stats["dropped"] == 0
    assert stats["max_chars"] == 6500
    assert stats["min_score"] == request.get("min_score", 0.1)
    assert stats["peer_scope"] == "all"
    assert stats["other_peer_penalties"] == {"events": 0.1, "entities": 0.1, "preferences": 0.02, "experiences": 0.02}
    assert set(stats["origins"]) == {"actor_peer", "self", "other_peer"}
    assert sum(stats["origins"].values()) == len(entries)
    return result


async def test_seed_example_request_answers_the_seed_response_shape(api):
    """The curl example exactly as OpenViking documents it (default ``min_score`` 0.1) finds the stored preference."""
    seeded = await _seed(api)
    response = await api.post(RECALL, json=SEED_REQUEST)
    assert response.status_code == 200, response.text
    result = _check_seed_shape(response.json(), SEED_REQUEST)
    preference = next(entry for entry in result["entries"] if entry["id"] == seeded["preference"])
    assert preference["type"] == "preferences" and preference["content"] == PREFERENCE
    assert preference["score"] >= SEED_REQUEST.get("min_score", 0.1)


async def test_seed_example_entries_field_by_field(api):
    """The documented request with the score floor lowered, so the entries are there to inspect field by field."""
    seeded = await _seed(api)
    request = {**SEED_REQUEST, "min_score": -1.0}
    result = _check_seed_shape((await api.post(RECALL, json=request)).json(), request)
    by_id = {entry["id"]: entry for entry in result["entries"]}
    preference = by_id[seeded["preference"]]
    assert preference["type"] == "preferences" and preference["mode"] == "full" and preference["rank"] == 1
    assert preference["content"] == PREFERENCE and preference["origin"] == "self"
    assert preference["abstract"] == "API 文档偏好"
    assert preference["uri"] == f"booku://shared/memories/preferences/{seeded['preference']}"
    assert by_id[seeded["event"]]["type"] == "events"
    if seeded["person"] in by_id:  # a memory about somebody is another peer's when no speaker is known
        assert by_id[seeded["person"]]["type"] == "entities" and by_id[seeded["person"]]["origin"] == "other_peer"
    assert "## Global Memory" in result["rendered"] and "### Preferences" in result["rendered"]
    assert f"{preference['uri']} (score={preference['score']:.4f})\n{PREFERENCE}" in result["rendered"]
    assert result["stats"]["searched"]["preferences"] >= 1


async def test_render_false_gives_an_empty_block_and_full_entries(api):
    await _seed(api)
    result = (await api.post(RECALL, json={**SEED_REQUEST, "render": False, "min_score": -1.0})).json()["result"]
    assert result["rendered"] == ""
    assert result["entries"] and all(entry["mode"] == "full" for entry in result["entries"])


async def test_a_small_budget_degrades_entries_instead_of_overflowing(api):
    await _seed(api)
    result = (await api.post(RECALL, json={**SEED_REQUEST, "max_chars": 200, "min_score": -1.0})).json()["result"]
    assert len(result["rendered"]) <= 200
    assert any(entry["mode"] != "full" for entry in result["entries"]) or result["stats"]["dropped"] > 0


async def test_unauthenticated_and_wrong_key_are_401_in_the_seed_error_envelope(anon, dashboard_app):
    response = await anon.post(RECALL, json=SEED_REQUEST)
    assert response.status_code == 401
    body = response.json()
    assert body["status"] == "error" and "X-API-Key" in body["error"]
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=dashboard_app),
        base_url="http://testserver",
        headers={"X-API-Key": API_KEY + "x"},
    ) as wrong:
        assert (await wrong.post(RECALL, json=SEED_REQUEST)).status_code == 401


async def test_browser_session_needs_the_csrf_token(browser):
    refused = await browser.post(RECALL, json=SEED_REQUEST)
    assert refused.status_code == 403 and refused.json()["status"] == "error"
    allowed = await browser.post(RECALL, json=SEED_REQUEST, headers={"X-CSRF-Token": browser.csrf})
    assert allowed.status_code == 200 and allowed.json()["status"] == "ok"


async def test_bad_input_is_a_400_with_a_chinese_message_naming_the_field(api):
    cases = [
        ({"quotas": {"events": 1}}, "query"),
        ({"query": "   "}, "query"),
        ({"query": 42}, "query"),
        ({"query": "x", "top_k": 5}, "top_k"),
        ({"query": "x", "quotas": {"memes": 1}}, "quotas"),
        ({"query": "x", "quotas": {"events": -1}}, "quotas.events"),
        ({"query": "x", "quotas": [1, 2]}, "quotas"),
        ({"query": "x", "max_chars": 0}, "max_chars"),
        ({"query": "x", "max_chars": "6500"}, "max_chars"),
        ({"query": "x", "min_score": "high"}, "min_score"),
        ({"query": "x", "peer_scope": "everyone"}, "peer_scope"),
        ({"query": "x", "peer_scope": "actor"}, "actor_peer_id"),
        ({"query": "x", "other_peer_penalty": 2}, "other_peer_penalty"),
        ({"query": "x", "render": "yes"}, "render"),
        (["query"], "JSON 对象"),
    ]
    for payload, field in cases:
        response = await api.post(RECALL, json=payload)
        assert response.status_code == 400, (payload, response.text)
        body = response.json()
        assert set(body) == {"status", "error"} and body["status"] == "error", payload
        assert field in body["error"], (payload, body["error"])
    broken = await api.post(RECALL, content=b"{not json", headers={"Content-Type": "application/json"})
    assert broken.status_code == 400 and "JSON" in broken.json()["error"]


async def test_preview_page_shows_the_rendered_block_escaped_and_the_entries(api, browser):
    item = await create_memory(
        api,
        title="<b>偏好</b>",
        content="<script>alert(1)</script> 喜欢简洁的 API 文档",
        memory_type="preference",
        **{**TRIPLET, "core_tags": ["API", "文档"]},
    )
    page = await browser.get("/recall")
    assert page.status_code == 200 and "召回预览" in page.text
    assert 'name="quota_events" value="10"' in page.text and 'name="quota_preferences" value="3"' in page.text
    html = (
        await browser.get(
            "/recall",
            params={
                "query": "API 文档",
                "quota_preferences": "3",
                "max_chars": "6500",
                "min_score": "-5",
                "render": "true",
            },
        )
    ).text
    block = html.split('class="content-box rendered-block">')[1].split("</pre>")[0]
    assert "### Preferences" in block and "&lt;script&gt;alert(1)&lt;/script&gt;" in block
    assert "<script" not in html
    assert f'href="/memories/{item["id"]}"' in html and "&lt;b&gt;偏好&lt;/b&gt;" in html
    assert "recall-entries" in html and "全文" in html


async def test_preview_page_reports_bad_input_in_words(browser):
    html = (await browser.get("/recall", params={"query": "x", "max_chars": "lots", "render": "true"})).text
    assert "max_chars 必须是整数" in html
    actor = (await browser.get("/recall", params={"query": "x", "peer_scope": "actor", "render": "true"})).text
    assert "actor_peer_id" in actor

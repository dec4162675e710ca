"""The JSON API against a real store: listing, search, edits, history, trash, bulk actions, memos, statistics."""

from __future__ import annotations

import datetime as dt

import booku_memory

from .conftest import TRIPLET, create_memory


async def _seed(api) -> dict[str, dict]:
    specs = {
        "alice": dict(title="爱丽丝", content="爱丽丝喜欢下围棋和喝乌龙茶", memory_type="person", person_id="qq:1"),
        "bob": dict(title="鲍勃", content="鲍勃在杭州做前端开发", memory_type="person", person_id="qq:2"),
        "trip": dict(
            title="去年夏天的旅行", content="一起去了青岛看海，吃了很多海鲜", memory_type="event", folder_id="旅行"
        ),
        "tea": dict(
            title="乌龙茶的冲泡",
            content="水温九十五度，第一泡洗茶",
            memory_type="procedure",
            core_tags=["茶"],
            diffusion_tags=["饮品"],
            opposing_tags=["咖啡"],
        ),
        "rust": dict(title="Rust 所有权", content="每个值只有一个所有者，离开作用域即释放", memory_type="knowledge"),
        "park": dict(title="中山公园", content="周末常去散步的公园，东门有家面馆", memory_type="place"),
        "bike": dict(title="旧自行车", content="放在车库里的旧山地车，准备卖掉", memory_type="asset"),
    }
    return {key: await create_memory(api, **fields) for key, fields in specs.items()}


async def test_list_paginates_and_filters(api):
    seeded = await _seed(api)
    first = (await api.get("/api/memories")).json()
    assert first["page_size"] == 5 and len(first["items"]) == 5 and first["has_more"] is True
    assert first["matched"] == 7
    second = (await api.get("/api/memories", params={"page": 2})).json()
    assert len(second["items"]) == 2 and second["has_more"] is False
    assert {i["id"] for i in first["items"] + second["items"]} == {m["id"] for m in seeded.values()}

    people = (await api.get("/api/memories", params={"memory_type": "person"})).json()["items"]
    assert {i["id"] for i in people} == {seeded["alice"]["id"], seeded["bob"]["id"]}
    travel = (await api.get("/api/memories", params={"folder_id": "旅行"})).json()["items"]
    assert [i["id"] for i in travel] == [seeded["trip"]["id"]]
    tea = (await api.get("/api/memories", params={"tag": "咖啡"})).json()["items"]
    assert [i["id"] for i in tea] == [seeded["tea"]["id"]]
    keyword = (await api.get("/api/memories", params={"keyword": "乌龙茶"})).json()["items"]
    assert {i["id"] for i in keyword} == {seeded["alice"]["id"], seeded["tea"]["id"]}
    assert (await api.get("/api/memories", params={"status": "archived"})).json()["items"] == []


async def test_invalid_filter_value_is_a_400_naming_the_field(api):
    response = await api.get("/api/memories", params={"memory_type": "robot"})
    assert response.status_code == 400
    assert "memory_type" in response.json()["detail"]


async def test_page_size_takes_every_size_the_route_declares(api):
    seeded = await _seed(api)
    for size in (101, 150, 200):  # above the service's per-call maximum for the LLM (retrieval.max_top_k = 100)
        page = await api.get("/api/memories", params={"page_size": size})
        assert page.status_code == 200, (size, page.text)
        assert page.json()["page_size"] == size and len(page.json()["items"]) == len(seeded)
        trash = await api.get("/api/trash", params={"page_size": size})
        assert trash.status_code == 200, (size, trash.text)
    for size in (0, 201, 10_000):
        refused = await api.get("/api/memories", params={"page_size": size})
        assert refused.status_code == 422
        assert refused.json()["detail"][0]["loc"] == ["query", "page_size"]


async def test_a_page_larger_than_max_top_k_is_read_in_slices(tmp_path):
    import httpx

    from booku_memory.router import DashboardSettings, create_dashboard_app
    from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder

    from .conftest import API_KEY

    config = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "retrieval": {"max_top_k": 3}}
    async with booku_memory.open(tmp_path / "data", config, embedder=DeterministicTestEmbedder()) as handle:
        app = create_dashboard_app(lambda: handle.runtime, settings=DashboardSettings(api_key=API_KEY, page_size=5))
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers={"X-API-Key": API_KEY}
        ) as client:
            seeded = await _seed(client)
            first = (await client.get("/api/memories", params={"page_size": 4})).json()
            second = (await client.get("/api/memories", params={"page_size": 4, "page": 2})).json()
            assert len(first["items"]) == 4 and first["has_more"] is True and first["matched"] == 7
            assert len(second["items"]) == 3 and second["has_more"] is False
            assert {i["id"] for i in first["items"] + second["items"]} == {m["id"] for m in seeded.values()}
            page = await client.get("/memories")  # the page list uses the configured page size (5 > 3)
            assert page.status_code == 200 and page.text.count('name="memory_ids"') == 5


async def test_semantic_search_returns_scores_and_their_parts(api):
    seeded = await _seed(api)
    result = (await api.get("/api/search", params={"q": "乌龙茶", "top_k": 3})).json()
    assert result["results"], result
    top = result["results"][0]
    assert top["id"] in {seeded["alice"]["id"], seeded["tea"]["id"]}
    assert isinstance(top["score"], float)
    assert isinstance(top["score_parts"], dict)
    assert {"logic_depth", "resonance", "beta"} <= result.keys()


async def test_keyword_search_matches_literally_in_title_content_and_tags(api):
    seeded = await _seed(api)
    result = (await api.get("/api/search", params={"q": "咖啡", "mode": "keyword"})).json()
    assert [i["id"] for i in result["results"]] == [seeded["tea"]["id"]]


async def test_update_with_three_tag_groups_and_keep_tags_when_omitted(api):
    item = await create_memory(api)
    response = await api.put(
        f"/api/memories/{item['id']}",
        json={"core_tags": ["篮球"], "diffusion_tags": ["运动", "体育馆"], "opposing_tags": ["足球"]},
    )
    assert response.status_code == 200
    meta = response.json()["item"]["metadata"]
    assert (meta["core_tags"], meta["diffusion_tags"], meta["opposing_tags"]) == (
        ["篮球"],
        ["运动", "体育馆"],
        ["足球"],
    )

    renamed = (await api.patch(f"/api/memories/{item['id']}", json={"title": "张三（同学）"})).json()["item"]
    assert renamed["title"] == "张三（同学）"
    assert renamed["metadata"]["core_tags"] == ["篮球"]


async def test_partial_tag_triplet_is_rejected_and_nothing_changes(api):
    item = await create_memory(api)
    response = await api.put(f"/api/memories/{item['id']}", json={"core_tags": ["只有核心"]})
    assert response.status_code == 400
    detail = (await api.get(f"/api/memories/{item['id']}")).json()
    assert detail["item"]["metadata"]["core_tags"] == TRIPLET["core_tags"]
    assert len(detail["history"]) == 1


async def test_update_moves_folder_and_unknown_id_is_404(api):
    item = await create_memory(api)
    moved = (await api.put(f"/api/memories/{item['id']}", json={"folder_id": "Project-A"})).json()["item"]
    assert moved["metadata"]["folder_id"] == "project-a"
    assert "project-a" in (await api.get("/api/folders")).json()["items"]
    assert (await api.put("/api/memories/mem-nope", json={"title": "x"})).status_code == 404
    assert (await api.put(f"/api/memories/{item['id']}", json={"titel": "typo"})).status_code == 422


async def test_detail_has_history_with_diffs_and_revert_restores_old_text(api):
    item = await create_memory(api, content="第一版正文")
    await api.put(f"/api/memories/{item['id']}", json={"content": "第二版正文"})
    detail = (await api.get(f"/api/memories/{item['id']}")).json()
    assert detail["item"]["content"] == "第二版正文"
    versions = detail["history"]
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[0]["is_current"] is True
    assert {"kind": "remove", "text": "第一版正文"} in versions[0]["diff"]
    assert {"kind": "add", "text": "第二版正文"} in versions[0]["diff"]

    reverted = await api.post(f"/api/memories/{item['id']}/revert", json={"version": 1})
    assert reverted.status_code == 200
    assert reverted.json()["item"]["content"] == "第一版正文"
    history = (await api.get(f"/api/memories/{item['id']}/history")).json()["versions"]
    assert [v["version"] for v in history] == [3, 2, 1]
    assert (await api.post(f"/api/memories/{item['id']}/revert", json={"version": 99})).status_code == 400


async def test_soft_delete_trash_restore_cycle(api):
    item = await create_memory(api)
    assert (await api.delete(f"/api/memories/{item['id']}")).json()["deleted"] == 1
    assert (await api.get("/api/memories")).json()["items"] == []
    trash = (await api.get("/api/trash")).json()["items"]
    assert [i["id"] for i in trash] == [item["id"]]
    edit = await api.put(f"/api/memories/{item['id']}", json={"title": "不该生效"})
    assert edit.status_code == 400 and "回收站" in edit.json()["detail"]

    assert (await api.post(f"/api/memories/{item['id']}/restore")).json()["restored"] == 1
    assert (await api.get("/api/trash")).json()["items"] == []
    assert [i["id"] for i in (await api.get("/api/memories")).json()["items"]] == [item["id"]]
    again = await api.post(f"/api/memories/{item['id']}/restore")
    assert again.status_code == 400


async def test_hard_delete_requires_the_id_as_confirmation(api):
    item = await create_memory(api)
    url = f"/api/memories/{item['id']}/hard-delete"
    assert (await api.post(url, json={})).status_code == 400
    assert (await api.post(url, json={"confirm": "yes"})).status_code == 400
    assert (await api.get(f"/api/memories/{item['id']}")).status_code == 200
    done = await api.post(url, json={"confirm": item["id"]})
    assert done.status_code == 200 and done.json()["mode"] == "hard"
    assert (await api.get(f"/api/memories/{item['id']}")).status_code == 404


async def test_archive_sets_status(api):
    item = await create_memory(api)
    assert (await api.post(f"/api/memories/{item['id']}/archive")).json()["archived"] == 1
    detail = (await api.get(f"/api/memories/{item['id']}")).json()["item"]
    assert detail["metadata"]["status"] == "archived"


async def test_bulk_actions(api):
    seeded = await _seed(api)
    ids = [seeded["alice"]["id"], seeded["bob"]["id"]]
    bulk = "/api/memories/bulk"
    assert (await api.post(bulk, json={"action": "delete", "memory_ids": ids})).status_code == 200
    assert {i["id"] for i in (await api.get("/api/trash")).json()["items"]} == set(ids)
    assert (await api.post(bulk, json={"action": "restore", "memory_ids": ids})).json()["result"]["restored"] == 2
    moved = await api.post(bulk, json={"action": "move", "memory_ids": ids, "to_folder_id": "朋友们"})
    assert moved.json()["result"]["moved"] == 2
    assert len((await api.get("/api/memories", params={"folder_id": "朋友们"})).json()["items"]) == 2
    assert (await api.post(bulk, json={"action": "move", "memory_ids": ids})).status_code == 400
    archived = await api.post(bulk, json={"action": "archive", "memory_ids": ids})
    assert archived.json()["result"]["archived"] == 2

    refused = await api.post(bulk, json={"action": "purge", "memory_ids": ids, "confirm": "ok"})
    assert refused.status_code == 400 and "永久删除" in refused.json()["detail"]
    purged = await api.post(bulk, json={"action": "purge", "memory_ids": ids, "confirm": "永久删除"})
    assert purged.json()["result"]["deleted"] == 2
    assert (await api.get(f"/api/memories/{ids[0]}")).status_code == 404
    assert (await api.post(bulk, json={"action": "explode", "memory_ids": ids})).status_code == 422


async def test_temporary_memos_list_and_cancel(api, memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    created = await service.create_temporary_memo(content="下午三点提醒喝水", expire_hours=1, stream_id="qq:group:1")
    memos = (await api.get("/api/memos")).json()["items"]
    assert [m["memo_id"] for m in memos] == [created["memo_id"]]
    assert (await api.delete(f"/api/memos/{created['memo_id']}")).json()["cancelled"] == 1
    assert (await api.get("/api/memos")).json()["items"] == []


async def test_statistics_count_by_type_and_month(api):
    await _seed(api)
    stats = (await api.get("/api/statistics")).json()
    assert stats["total"] == 7
    assert stats["by_type"]["person"] == 2 and stats["by_type"]["event"] == 1
    assert stats["by_month"] == {dt.datetime.now().strftime("%Y-%m"): 7}
    status = (await api.get("/api/status")).json()
    assert status["counts"]["metadata"]["memory"] == 7


async def test_session_endpoint_reports_key_auth(api):
    assert (await api.get("/api/session")).json() == {"method": "api_key", "csrf_token": ""}


MARKDOWN = "# 部署手册\n\n## 安装\n\n先安装依赖，再初始化数据库。\n\n## 启动\n\n运行 serve 命令，浏览器打开后台。\n"


async def test_knowledge_upload_list_chunks_and_delete(api):
    uploaded = await api.post(
        "/api/knowledge/upload", files={"file": ("部署手册.md", MARKDOWN.encode("utf-8"), "text/markdown")}
    )
    assert uploaded.status_code == 201, uploaded.text
    document_id = uploaded.json()["document_id"]
    listing = (await api.get("/api/knowledge/documents")).json()
    assert [d["document_id"] for d in listing["items"]] == [document_id]
    assert listing["items"][0]["raw_title"] == "部署手册"
    detail = (await api.get(f"/api/knowledge/documents/{document_id}")).json()
    assert detail["chunks"] and any("serve" in chunk["content"] for chunk in detail["chunks"])
    assert (await api.delete(f"/api/knowledge/documents/{document_id}")).json()["deleted_chunks"] == len(
        detail["chunks"]
    )
    assert (await api.get("/api/knowledge/documents")).json()["items"] == []
    assert (await api.get(f"/api/knowledge/documents/{document_id}")).status_code == 404


async def test_knowledge_json_ingest_and_upload_limits(api):
    created = await api.post("/api/knowledge/documents", json={"title": "茶谱", "content": "乌龙茶用沸水冲泡。"})
    assert created.status_code == 201 and created.json()["chunk_count"] >= 1
    binary = await api.post("/api/knowledge/upload", files={"file": ("a.pdf", b"%PDF-1.4", "application/pdf")})
    assert binary.status_code == 400 and "file" in binary.json()["detail"]
    gbk = await api.post(
        "/api/knowledge/upload", files={"file": ("茶经.txt", "陆羽著茶经".encode("gbk"), "text/plain")}
    )
    assert gbk.status_code == 201 and gbk.json()["mode"] == "created"
    detail = await api.get(f"/api/knowledge/documents/{gbk.json()['document_id']}")
    assert "陆羽著茶经" in detail.text
    binary_txt = await api.post("/api/knowledge/upload", files={"file": ("b.txt", b"\x00\x01\x02", "text/plain")})
    assert binary_txt.status_code == 400 and "二进制" in binary_txt.json()["detail"]


async def test_upload_larger_than_the_limit_is_refused(memory):
    import httpx

    from booku_memory.router import DashboardSettings, create_dashboard_app

    from .conftest import API_KEY

    app = create_dashboard_app(
        lambda: memory.runtime, settings=DashboardSettings(api_key=API_KEY, max_upload_bytes=100)
    )
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://testserver", headers={"X-API-Key": API_KEY}
    ) as client:
        response = await client.post("/api/knowledge/upload", files={"file": ("big.txt", b"x" * 101, "text/plain")})
    assert response.status_code == 400 and "大小上限" in response.json()["detail"]


async def test_dashboard_edits_are_recorded_as_human_dashboard_changes(api):
    item = await create_memory(api)
    await api.put(f"/api/memories/{item['id']}", json={"title": "改名"})
    history = (await api.get(f"/api/memories/{item['id']}/history")).json()["versions"]
    assert [entry["actor"] for entry in history] == ["dashboard", "dashboard"]
    assert item["metadata"]["source"] == "dashboard"


async def test_a_supersession_is_set_undone_and_filtered_through_the_api(api):
    old = await create_memory(api, title="旧住址", content="我住在北京朝阳区的望京")
    new = await create_memory(api, title="新住址", content="我搬到上海浦东的世纪公园旁边了")
    marked = await api.post(f"/api/memories/{old['id']}/supersede", json={"superseded_by": new["id"]})
    assert marked.status_code == 200 and marked.json()["item"]["metadata"]["superseded_by"] == new["id"]
    detail = (await api.get(f"/api/memories/{new['id']}")).json()["item"]
    assert detail["metadata"]["supersedes"] == [old["id"]]

    for mode, query in (("semantic", "住址 北京 上海"), ("keyword", "住")):
        every = (await api.get("/api/search", params={"q": query, "mode": mode})).json()["results"]
        current = (
            await api.get("/api/search", params={"q": query, "mode": mode, "include_superseded": "false"})
        ).json()["results"]
        assert old["id"] in [i["id"] for i in every], mode
        assert next(i for i in every if i["id"] == old["id"])["metadata"]["superseded_by"] == new["id"]
        assert old["id"] not in [i["id"] for i in current] and new["id"] in [i["id"] for i in current], mode

    audit = (await api.get("/api/audit", params={"memory_id": old["id"]})).json()["items"]
    assert [(e["action"], e["authority"]) for e in audit][0] == ("supersede", "human")
    again = await api.post(f"/api/memories/{old['id']}/supersede", json={"superseded_by": new["id"]})
    assert again.status_code == 400 and "已被" in again.json()["detail"]
    undone = await api.post(f"/api/memories/{old['id']}/unsupersede")
    assert undone.status_code == 200 and undone.json()["was_superseded_by"] == new["id"]
    assert (await api.get(f"/api/memories/{old['id']}")).json()["item"]["metadata"]["superseded_by"] == ""
    assert (await api.post(f"/api/memories/{old['id']}/unsupersede")).status_code == 400
    assert (
        await api.post(f"/api/memories/{old['id']}/supersede", json={"superseded_by": old["id"]})
    ).status_code == 400

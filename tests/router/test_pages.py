"""The HTML pages against a real store: rendering, escaping, forms (with CSRF), history and trash."""

from __future__ import annotations

import re

import booku_memory
from booku_memory.router.rendering import build_environment

from .conftest import create_memory, csrf_field

XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


async def test_script_in_memory_renders_as_text_everywhere(api, browser):
    item = await create_memory(api, title=XSS, content=f"{XSS} 第一版")
    await api.put(f"/api/memories/{item['id']}", json={"content": f"{XSS} 第二版"})
    pages = [
        "/memories",
        f"/memories/{item['id']}",
        f"/memories/{item['id']}/edit",
        "/search?q=alert&mode=keyword",
        "/search?q=alert",
        "/stats",
    ]
    for path in pages:
        html = (await browser.get(path)).text
        assert XSS not in html, path
        assert "<script" not in html, path
    detail = (await browser.get(f"/memories/{item['id']}")).text
    assert ESCAPED in detail
    assert f'<div class="remove">{ESCAPED} 第一版</div>' in detail
    await api.delete(f"/api/memories/{item['id']}")
    trash = (await browser.get("/trash")).text
    assert ESCAPED in trash and XSS not in trash


async def test_every_page_renders_for_a_logged_in_user(api, browser, memory):
    item = await create_memory(api)
    await memory.get_service(booku_memory.MEMORY_SERVICE).create_temporary_memo(content="记得买牛奶", stream_id="s1")
    for path, marker in [
        ("/memories", "记忆列表"),
        ("/memories/new", "新建记忆"),
        (f"/memories/{item['id']}", "历史版本"),
        (f"/memories/{item['id']}/edit", "编辑记忆"),
        ("/search", "像机器人一样搜索"),
        ("/trash", "回收站"),
        ("/memos", "记得买牛奶"),
        ("/stats", "按月份"),
    ]:
        response = await browser.get(path)
        assert response.status_code == 200, path
        assert marker in response.text, path
        assert 'lang="zh-CN"' in response.text and 'name="viewport"' in response.text


async def test_unauthenticated_page_redirects_to_login_and_back(anon):
    response = await anon.get("/trash?page=2")
    assert response.status_code == 303
    login_page = await anon.get(response.headers["location"])
    assert 'name="next" value="/trash?page=2"' in login_page.text


async def test_create_form_success_and_error_keeps_input(browser, api):
    token = csrf_field((await browser.get("/memories/new")).text)
    form = {
        "csrf_token": token,
        "title": "新朋友",
        "content": "在读书会认识的李四",
        "memory_type": "person",
        "status": "active",
        "person_id": "qq:42",
        "core_tags": "朋友",
        "diffusion_tags": "读书会",
        "opposing_tags": "",
    }
    refused = await browser.post("/memories/new", data=form)
    assert refused.status_code == 400
    assert "opposing_tags" in refused.text
    assert 'value="在读书会认识的李四"' not in refused.text and "在读书会认识的李四</textarea>" in refused.text
    created = await browser.post("/memories/new", data={**form, "opposing_tags": "陌生人"})
    assert created.status_code == 303
    memory_id = re.search(r"/memories/([^?]+)\?notice=created", created.headers["location"]).group(1)
    item = (await api.get(f"/api/memories/{memory_id}")).json()["item"]
    assert item["metadata"]["person_id"] == "qq:42" and item["metadata"]["opposing_tags"] == ["陌生人"]


async def _edit_form(browser, memory_id: str) -> dict[str, str]:
    html = (await browser.get(f"/memories/{memory_id}/edit")).text
    fields = dict(
        re.findall(r'<input type="(?:text|datetime-local)" id="f-[^"]+" name="([^"]+)" value="([^"]*)"', html)
    )
    fields["content"] = re.search(r"<textarea[^>]*>(.*?)</textarea>", html, re.S).group(1)
    for name in ("memory_type", "status", "knowledge_type", "procedure_type", "disposition_status"):
        select = re.search(rf'<select id="f-{name}" name="{name}">(.*?)</select>', html, re.S).group(1)
        chosen = re.search(r'<option value="([^"]*)" selected>', select)
        fields[name] = chosen.group(1) if chosen else ""
    fields["csrf_token"] = csrf_field(html)
    return fields


async def test_edit_form_changes_tags_and_only_what_changed(browser, api):
    item = await create_memory(api)
    form = await _edit_form(browser, item["id"])
    assert form["core_tags"] == "朋友, 同学"
    unchanged = await browser.post(f"/memories/{item['id']}/edit", data=form)
    assert unchanged.headers["location"].endswith("notice=unchanged")
    assert len((await api.get(f"/api/memories/{item['id']}")).json()["history"]) == 1

    form.update(core_tags="篮球, 运动", diffusion_tags="体育馆", opposing_tags="足球")
    saved = await browser.post(f"/memories/{item['id']}/edit", data=form)
    assert saved.status_code == 303 and saved.headers["location"].endswith("notice=saved")
    detail = (await api.get(f"/api/memories/{item['id']}")).json()
    meta = detail["item"]["metadata"]
    assert (meta["core_tags"], meta["diffusion_tags"], meta["opposing_tags"]) == (
        ["篮球", "运动"],
        ["体育馆"],
        ["足球"],
    )
    assert detail["item"]["content"] == item["content"]
    assert len(detail["history"]) == 2


async def test_edit_form_rejects_partial_triplet_without_writing(browser, api):
    item = await create_memory(api)
    form = await _edit_form(browser, item["id"])
    form.update(diffusion_tags="", opposing_tags="")
    response = await browser.post(f"/memories/{item['id']}/edit", data=form)
    assert response.status_code == 400
    assert "diffusion_tags" in response.text or "三元组" in response.text
    assert len((await api.get(f"/api/memories/{item['id']}")).json()["history"]) == 1


async def test_revert_button_restores_previous_version(browser, api):
    item = await create_memory(api, content="原来的说法")
    await api.put(f"/api/memories/{item['id']}", json={"content": "改错了的说法"})
    html = (await browser.get(f"/memories/{item['id']}")).text
    assert html.count("回滚到此版本") == 1
    response = await browser.post(f"/memories/{item['id']}/revert", data={"csrf_token": browser.csrf, "version": "1"})
    assert response.status_code == 303
    assert (await api.get(f"/api/memories/{item['id']}")).json()["item"]["content"] == "原来的说法"
    page = (await browser.get(response.headers["location"])).text
    assert "已回滚" in page and "v3" in page


async def test_delete_restore_and_purge_through_forms(browser, api):
    item = await create_memory(api)
    url = f"/memories/{item['id']}"
    await browser.post(f"{url}/delete", data={"csrf_token": browser.csrf})
    assert item["id"] in (await browser.get("/trash")).text
    await browser.post(f"{url}/restore", data={"csrf_token": browser.csrf})
    assert item["id"] not in (await browser.get("/trash")).text

    refused = await browser.post(f"{url}/purge", data={"csrf_token": browser.csrf, "confirm": "确定"})
    assert refused.status_code == 400 and "ID" in refused.text
    assert (await api.get(f"/api/memories/{item['id']}")).status_code == 200
    purged = await browser.post(f"{url}/purge", data={"csrf_token": browser.csrf, "confirm": item["id"]})
    assert purged.headers["location"] == "/trash?notice=purged"
    assert (await api.get(f"/api/memories/{item['id']}")).status_code == 404


async def test_bulk_form_from_the_list(browser, api):
    first, second = await create_memory(api, title="甲"), await create_memory(api, title="乙", content="另一条")
    response = await browser.post(
        "/memories/bulk",
        data={
            "csrf_token": browser.csrf,
            "action": "delete",
            "memory_ids": [first["id"], second["id"]],
            "return_to": "/memories?memory_type=knowledge",
        },
    )
    assert response.headers["location"] == "/memories?memory_type=knowledge&notice=bulk"
    assert len((await api.get("/api/trash")).json()["items"]) == 2
    evil = await browser.post(
        "/memories/bulk",
        data={
            "csrf_token": browser.csrf,
            "action": "restore",
            "memory_ids": [first["id"]],
            "return_to": "https://evil.example/",
        },
    )
    assert evil.headers["location"] == "/memories?notice=bulk"


async def test_list_page_filters_and_paginates(browser, api):
    for n in range(7):
        await create_memory(api, title=f"第{n}条", content=f"内容 {n}")
    first = (await browser.get("/memories")).text
    assert first.count('class="card"') == 5
    assert 'href="/memories?page=2"' in first
    second = (await browser.get("/memories?page=2")).text
    assert second.count('class="card"') == 2
    filtered = (await browser.get("/memories?keyword=%E7%AC%AC3%E6%9D%A1")).text
    assert filtered.count('class="card"') == 1


async def test_memos_page_cancel(browser, memory):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    memo = await service.create_temporary_memo(content="十分钟后开会", stream_id="s9")
    response = await browser.post(f"/memos/{memo['memo_id']}/cancel", data={"csrf_token": browser.csrf})
    assert response.status_code == 303
    assert "十分钟后开会" not in (await browser.get("/memos")).text


async def test_stats_page_draws_one_bar_per_type(browser, api):
    await create_memory(api, memory_type="event", title="事件一")
    await create_memory(api, memory_type="event", title="事件二", content="另一件事")
    await create_memory(api, memory_type="place", title="地点", content="某个地方")
    html = (await browser.get("/stats")).text
    type_chart = html.split('aria-label="各类型记忆数量"')[1].split("</svg>")[0]
    assert type_chart.count('<rect class="bar"') == 2
    assert "<title>事件：2</title>" in type_chart and "<title>地点：1</title>" in type_chart


def test_search_template_shows_score_parts_escaped():
    """The score breakdown is rendered from whatever parts the service reports, names translated, text escaped."""
    env = build_environment()
    html = env.get_template("search.html").render(
        root="",
        csrf_token="t",
        logged_in=True,
        nav="search",
        notice="",
        error="",
        url=lambda p, **k: p,
        stores=None,
        selector_return_to="",
        q="篮球",
        mode="semantic",
        top_k=5,
        max_score=0.8123,
        include_archived=False,
        include_knowledge=False,
        core_tags="",
        diffusion_tags="",
        opposing_tags="",
        searched=True,
        part_labels={"vector": "向量相似度"},
        result={"logic_depth": 0.5, "resonance": 0.1, "beta": 0.3},
        items=[
            {
                "id": "mem-1",
                "title": XSS,
                "content_snippet": "打篮球",
                "is_truncated": False,
                "score": 0.8123,
                "score_parts": {"vector": 0.7, "keyword": 0.1123},
                "metadata": {"memory_type": "person"},
            }
        ],
    )
    assert "0.812" in html and "向量相似度 0.700" in html and "keyword 0.112" in html
    assert ESCAPED in html and XSS not in html


async def test_knowledge_upload_form_document_page_and_delete(browser):
    html = (await browser.get("/knowledge")).text
    token = csrf_field(html)
    content = "# 咖啡手册\n\n## 器具\n\n手冲壶与滤杯。\n\n## 步骤\n\n<b>闷蒸</b>三十秒，然后分段注水。\n"
    uploaded = await browser.post(
        "/knowledge/upload",
        data={"csrf_token": token, "title": ""},
        files={"file": ("咖啡手册.md", content.encode("utf-8"), "text/markdown")},
    )
    assert uploaded.status_code == 303, uploaded.text
    document_page = await browser.get(uploaded.headers["location"])
    assert "《咖啡手册》" in document_page.text and "文档已入库" in document_page.text
    assert "&lt;b&gt;闷蒸&lt;/b&gt;" in document_page.text and "<b>闷蒸" not in document_page.text
    assert "咖啡手册" in (await browser.get("/knowledge")).text

    no_token = await browser.post(uploaded.headers["location"].split("?")[0] + "/delete", data={})
    assert no_token.status_code == 403
    deleted = await browser.post(
        uploaded.headers["location"].split("?")[0] + "/delete", data={"csrf_token": browser.csrf}
    )
    assert deleted.headers["location"] == "/knowledge?notice=document_deleted"
    assert "知识库里还没有文档" in (await browser.get("/knowledge")).text


async def test_upload_form_without_csrf_token_is_refused(browser):
    response = await browser.post(
        "/knowledge/upload", files={"file": ("x.md", b"# x\n\nbody", "text/markdown")}, data={"title": "x"}
    )
    assert response.status_code == 403
    assert "还没有文档" in (await browser.get("/knowledge")).text


async def test_forms_return_to_the_filtered_list_without_stacking_notices(browser, api):
    await create_memory(api)
    html = (await browser.get("/memories?memory_type=knowledge&notice=bulk")).text
    assert 'name="return_to" value="/memories?memory_type=knowledge"' in html


async def test_a_new_memory_form_without_fields_is_shown_again_not_a_500(browser):
    token = csrf_field((await browser.get("/memories/new")).text)
    response = await browser.post("/memories/new", data={"csrf_token": token})
    assert response.status_code == 400
    assert 'id="e-content"' in response.text and "<form" in response.text  # the form again, errors by the fields


async def test_stats_page_says_which_time_zone_reads_dates_and_where_it_came_from(browser, api):
    zone = (await api.get("/api/status")).json()["time_zone"]
    html = (await browser.get("/stats")).text
    shown = re.search(r'id="time-zone">(.*?)</p>', html, re.S)
    assert shown is not None
    assert zone["name"] in shown.group(1) and zone["label"] in shown.group(1)


async def test_detail_pages_link_a_supersession_both_ways_and_undo_it_only_with_the_csrf_token(browser, api):
    old = await create_memory(api, title="旧住址", content="我住在北京朝阳区的望京")
    new = await create_memory(api, title="新住址", content="我搬到上海浦东了")
    await api.post(f"/api/memories/{old['id']}/supersede", json={"superseded_by": new["id"]})
    old_page = (await browser.get(f"/memories/{old['id']}")).text
    new_page = (await browser.get(f"/memories/{new['id']}")).text
    assert f'已被 <a href="/memories/{new["id"]}">{new["id"]}</a> 取代' in old_page
    assert f'取代了 <a href="/memories/{old["id"]}">{old["id"]}</a>' in new_page and "撤销取代" not in new_page
    assert "<dt>生效于</dt>" in old_page and "标记为过时（被新记忆取代）" in old_page  # in its history
    refused = await browser.post(f"/memories/{old['id']}/unsupersede", data={})
    assert refused.status_code == 403
    assert (await api.get(f"/api/memories/{old['id']}")).json()["item"]["metadata"]["superseded_by"] == new["id"]
    done = await browser.post(f"/memories/{old['id']}/unsupersede", data={"csrf_token": csrf_field(old_page)})
    assert done.status_code == 303 and done.headers["location"].endswith("?notice=unsuperseded")
    assert (await api.get(f"/api/memories/{old['id']}")).json()["item"]["metadata"]["superseded_by"] == ""
    assert "已被" not in (await browser.get(f"/memories/{old['id']}")).text

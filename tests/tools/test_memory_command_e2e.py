"""Every memory_command sub-command end to end against a real store: the exact effect and the output shape."""

from __future__ import annotations

from datetime import datetime

from booku_memory.tools.memory_command import run_memory_command

from .tool_support import run, seed, step

SEARCH_ITEM_KEYS = {"id", "title", "type", "score", "snippet"}


async def test_help_returns_the_manual_and_topic_help(svc):
    envelope = await run(svc, "help")
    assert envelope["ok"] and envelope["executed"] == 1
    assert step(envelope)["action"] == "help"
    assert "search" in step(envelope)["content"] and "create" in step(envelope)["content"]
    topic = step(await run(svc, "help grep"))["content"]
    assert topic.startswith("# grep") and "-regex" in topic


async def test_create_stores_every_given_field_and_says_created(svc):
    envelope = await run(
        svc,
        'create -type event -title 毕业典礼 -content "- 在大礼堂\n- 张三致辞" -triple_tags "毕业,典礼|学校|工作" '
        "-start_at 2024-06-20 -end_at '2024-06-20 18:00' -related_people 张三,李四 -folder 校园",
    )
    result = step(envelope)
    assert result["action"] == "create" and result["result"] == "created"
    assert result["message"] == f"已创建记忆 {result['id']}《毕业典礼》"
    item = (await svc.get_memory_detail(memory_id=result["id"]))["item"]
    metadata = item["metadata"]
    assert item["content"] == "- 在大礼堂\n- 张三致辞"
    assert metadata["memory_type"] == "event"
    assert (metadata["core_tags"], metadata["diffusion_tags"], metadata["opposing_tags"]) == (
        ["毕业", "典礼"],
        ["学校"],
        ["工作"],
    )
    assert metadata["event_start_at"] == datetime(2024, 6, 20).astimezone().timestamp()
    assert metadata["event_end_at"] == datetime(2024, 6, 20, 18).astimezone().timestamp()
    assert metadata["related_people"] == ["张三", "李四"]
    assert metadata["folder_id"] == "校园"


async def test_create_near_duplicate_says_which_id_it_merged_into(svc):
    first = step(
        await run(svc, 'create -title 张三的生日 -content "张三的生日是五月一日" -triple_tags "张三,生日|朋友|工作"')
    )
    second = step(
        await run(svc, 'create -title 张三的生日 -content "张三的生日是五月一日" -triple_tags "张三,生日|朋友|工作"')
    )
    assert second["result"] == "merged"
    assert second["id"] == first["id"]
    assert "已合并进这条记忆" in second["message"] and first["id"] in second["message"]
    assert (await svc.get_status())["counts"]["metadata"]["memory"] == 1


async def test_search_returns_compact_ranked_items(svc):
    target = await seed(svc, "张三", "张三是我的大学同学，喜欢打篮球。" * 20, memory_type="person", person_id="qq:1")
    await seed(svc, "做饭笔记", "红烧肉要先焯水再炒糖色")
    result = step(await run(svc, 'search -q "张三 大学同学" -n 5'))
    assert result["action"] == "search" and result["total"] >= 1
    top = result["items"][0]
    assert top["id"] == target
    assert set(top) == SEARCH_ITEM_KEYS
    assert top["type"] == "person"
    assert len(top["snippet"]) <= svc.runtime.config.tools.search_snippet_chars
    assert top["snippet"].endswith("…")


async def test_search_filters_by_type_and_reports_empty_results(svc):
    await seed(svc, "做饭笔记", "红烧肉要先焯水")
    result = step(await run(svc, "search -q 红烧肉 -type person"))
    assert result["total"] == 0 and result["items"] == []
    assert "没有找到匹配的记忆" in result["hint"]


async def test_search_without_query_lists_recent_and_respects_top_n(svc):
    for index in range(4):
        await seed(svc, f"记忆{index}", f"第 {index} 条完全不同的内容 {'甲乙丙丁'[index]}")
    result = step(await run(svc, "search -topn 3"))
    assert result["total"] == 3 and len(result["items"]) == 3


async def test_search_with_tag_triplet_finds_tagged_memory(svc):
    target = await seed(
        svc, "篮球队", "周六下午打比赛", core_tags=["篮球"], diffusion_tags=["运动"], opposing_tags=["学习"]
    )
    result = step(await run(svc, 'search -triple_tags "篮球|运动|学习"'))
    assert target in [item["id"] for item in result["items"]]


async def test_read_returns_full_text_tags_and_fields_and_lists_missing(svc):
    memory_id = await seed(svc, "张三", "张三住在北京", memory_type="person", person_id="qq:10001")
    result = step(await run(svc, f"read -ids {memory_id},mem-nope"))
    assert result["action"] == "read" and result["total"] == 1
    item = result["items"][0]
    assert item["content"] == "张三住在北京"
    assert item["tags"] == "测试|样例|无关"
    assert item["person_id"] == "qq:10001"
    assert item["type"] == "person" and item["status"] == "active"
    assert result["missing"] == ["mem-nope"]


async def test_read_with_offset_continues_a_long_body(svc):
    memory_id = await seed(svc, "长文", "".join(f"{i:04d}" for i in range(500)))
    result = step(await run(svc, f"read -id {memory_id} -offset 1000"))
    assert result["items"][0]["content"].startswith("0250")
    assert result["items"][0]["offset"] == 1000


async def test_update_changes_only_given_fields_and_names_them(svc):
    memory_id = await seed(svc, "张三", "张三住在北京")
    result = step(await run(svc, f'update -id {memory_id} -title "张三（老同学）" -status ARCHIVED'))
    assert result["action"] == "update"
    assert sorted(result["updated_fields"]) == ["status", "title"]
    assert result["message"].startswith(f"已更新 {memory_id} 的 ")
    item = (await svc.get_memory_detail(memory_id=memory_id))["item"]
    assert item["title"] == "张三（老同学）"
    assert item["metadata"]["status"] == "archived"
    assert item["content"] == "张三住在北京"
    assert item["metadata"]["core_tags"] == ["测试"]


async def test_update_replaces_tags_as_a_whole_triplet(svc):
    memory_id = await seed(svc, "张三", "张三住在北京")
    step(await run(svc, f'update -id {memory_id} -triple_tags "北京|城市|乡村"'))
    metadata = (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]
    assert (metadata["core_tags"], metadata["diffusion_tags"], metadata["opposing_tags"]) == (
        ["北京"],
        ["城市"],
        ["乡村"],
    )


async def test_delete_soft_then_restore_then_hard(svc):
    memory_id = await seed(svc, "张三", "张三住在北京")
    deleted = step(await run(svc, f"delete -id {memory_id}"))
    assert deleted == {
        "action": "delete",
        "mode": "soft",
        "deleted": 1,
        "message": f"已删除 1 条记忆（软删除，可用 restore -ids {memory_id} 恢复）",
    }
    assert (await svc.get_memory_detail(memory_id=memory_id, include_deleted=False))["found"] is False
    restored = step(await run(svc, f"restore -id {memory_id}"))
    assert restored["restored"] == 1 and restored["message"] == "已恢复 1 条记忆"
    assert (await svc.get_memory_detail(memory_id=memory_id, include_deleted=False))["found"] is True
    hard = step(await run(svc, f"delete -id {memory_id} -hard true"))
    assert hard["mode"] == "hard" and hard["deleted"] == 1
    assert (await svc.get_memory_detail(memory_id=memory_id))["found"] is False


async def test_archive_hides_from_default_search_but_not_with_include_archived(svc):
    memory_id = await seed(svc, "旧地址", "以前住在上海浦东")
    result = step(await run(svc, f"archive -id {memory_id}"))
    assert result["archived"] == 1
    assert (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]["status"] == "archived"
    hidden = step(await run(svc, "search -q 上海浦东"))
    assert memory_id not in [item["id"] for item in hidden["items"]]
    shown = step(await run(svc, "search -q 上海浦东 -include_archived"))
    found = [item for item in shown["items"] if item["id"] == memory_id]
    assert found and found[0]["status"] == "archived"


async def test_move_changes_folder(svc):
    memory_id = await seed(svc, "周报", "每周五交周报")
    result = step(await run(svc, f"move -id {memory_id} -to_folder 工作"))
    assert result["moved"] == 1 and result["message"] == "已把 1 条记忆移到文件夹 工作"
    assert (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]["folder_id"] == "工作"
    folders = step(await run(svc, "folders"))
    assert folders["items"][0] == "default" and "工作" in folders["items"]


async def test_grep_matches_literal_text_and_regex(svc):
    phone = await seed(svc, "电话", "张三的电话是 138-0000-1234")
    await seed(svc, "地址", "张三住在北京")
    literal = step(await run(svc, 'grep -q "138-0000" -fields content'))
    assert [item["id"] for item in literal["items"]] == [phone]
    assert "score" not in literal["items"][0]
    regex = step(await run(svc, r'grep -q "\d{3}-\d{4}-\d{4}" -regex'))
    assert [item["id"] for item in regex["items"]] == [phone]


async def test_status_counts_memories_and_this_streams_memos(svc):
    await seed(svc, "张三", "张三住在北京")
    await svc.create_temporary_memo(content="这里的便签", stream_id="stream-a")
    await svc.create_temporary_memo(content="别处的便签", stream_id="stream-b")
    result = step(await run(svc, "status", stream_id="stream-a"))
    assert result["memories"] == 1 and result["knowledge_chunks"] == 0
    assert result["memos_here"] == 1
    assert result["recent"][0]["title"] == "张三"


async def test_history_and_revert(svc):
    memory_id = await seed(svc, "张三", "张三住在北京")
    step(await run(svc, f'update -id {memory_id} -content "张三搬到了上海"'))
    history = step(await run(svc, f"history -id {memory_id}"))
    assert history["total"] == 2
    assert [entry["version"] for entry in history["items"]] == [2, 1]
    assert history["items"][1]["snippet"] == "张三住在北京"
    reverted = step(await run(svc, f"revert -id {memory_id} -version 1"))
    assert reverted["reverted_to"] == 1 and "第 1 版" in reverted["message"]
    assert (await svc.get_memory_detail(memory_id=memory_id))["item"]["content"] == "张三住在北京"
    assert step(await run(svc, f"history -id {memory_id} -n 1"))["items"][0]["version"] == 3


async def test_chain_runs_steps_in_order_and_reports_each(svc):
    memory_id = await seed(svc, "张三", "张三住在北京")
    envelope = await run(svc, f"search -q 张三 && read -id {memory_id} && archive -id {memory_id}")
    assert envelope["ok"] and envelope["executed"] == 3
    assert [entry["result"]["action"] for entry in envelope["results"]] == ["search", "read", "archive"]
    assert (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]["status"] == "archived"


async def test_help_works_without_a_service():
    envelope = await run_memory_command(None, "help && help read")
    assert envelope["ok"] and envelope["executed"] == 2
    failing = await run_memory_command(None, "status")
    assert failing["ok"] is False and "只能执行 help" in failing["error"]


async def test_read_and_search_show_which_memory_is_current(svc):
    old = await seed(svc, "旧住址", "我住在北京朝阳区的望京")
    new = await seed(svc, "新住址", "我搬到上海浦东的世纪公园旁边了")
    await svc.supersede_memory(memory_id=old, superseded_by=new)
    old_read, new_read = step(await run(svc, f"read -ids {old},{new}"))["items"]
    assert old_read["superseded_by"] == new and f"已过时：已被 {new} 取代" in old_read["outdated"]
    assert new_read["supersedes"] == [old] and "superseded_by" not in new_read
    assert old_read["valid_from"] and new_read["valid_from"]  # when each fact became true
    every = step(await run(svc, "search -q 住址 -n 5"))["items"]
    current = step(await run(svc, "search -q 住址 -n 5 -include_superseded false"))["items"]
    assert {i["id"] for i in every} == {old, new}
    assert next(i for i in every if i["id"] == old)["superseded_by"] == new
    assert [i["id"] for i in current] == [new]

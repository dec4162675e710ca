"""One test per bug or gap of the original plugin's tool layer, pinned as fixed.

Each test is named after the bug (what the original did is in the docstring) and runs against a real store wherever
the bug is observable there.
"""

from __future__ import annotations

import re

import pytest

from booku_memory.tools.command_lexer import CommandError, parse_segment
from booku_memory.tools.memory_command import run_memory_command

from .tool_support import run, seed, step


async def test_bug_and_and_inside_quotes_split_the_command(svc):
    """`-query 'a&&b'` was split into two broken segments."""
    memory_id = await seed(svc, "快捷键", "复制粘贴用 ctrl+c&&ctrl+v 完成")
    envelope = await run(svc, "grep -q 'ctrl+c&&ctrl+v'")
    assert envelope["ok"] and envelope["executed"] == 1
    assert [item["id"] for item in step(envelope)["items"]] == [memory_id]


async def test_bug_quoted_markdown_bullet_value_became_true(svc):
    """`-content "- item one"` stored content "true" and made a junk key."""
    result = step(await run(svc, 'create -title 清单 -content "- item one\n- item two" -triple_tags "清单|购物|工作"'))
    item = (await svc.get_memory_detail(memory_id=result["id"]))["item"]
    assert item["content"] == "- item one\n- item two"


async def test_bug_negative_number_value_became_true():
    """`-event_start_at -5` gave "true"; now the value is kept (and then judged on its merits)."""
    assert parse_segment("create -content -5 -title t").get("content") == "-5"
    with pytest.raises(CommandError, match="-event_start_at 不能早于 1970-01-01"):
        parse_segment("update -id m1 -event_start_at -5")


async def test_bug_unknown_flags_were_silently_ignored(svc, write_counter):
    """`-tittle` was dropped silently, surfacing later as "missing -title"."""
    before = await write_counter.snapshot()
    envelope = await run(svc, 'create -tittle 张三 -content x -triple_tags "a|b|c"')
    assert envelope["ok"] is False and envelope["executed"] == 0
    assert "create 不支持参数 -tittle，你可能想用 -title" in envelope["error"]
    assert "create 可用参数：-title、-content" in envelope["error"]
    assert await write_counter.snapshot() == before


async def test_bug_stray_positional_words_were_silently_ignored(svc):
    """A word not consumed as a value was ignored; `search 张三` searched for nothing."""
    envelope = await run(svc, "search 张三")
    assert envelope["ok"] is False
    assert "多出了「张三」" in envelope["error"] and "-query" in envelope["error"]


async def test_bug_unparsable_int_fell_back_to_default(svc):
    """`-topn 5.5` and `-topn abc` silently became 10."""
    for raw in ("5.5", "abc"):
        envelope = await run(svc, f"search -topn {raw}")
        assert envelope["ok"] is False and "-topn 必须是整数" in envelope["error"]


async def test_bug_topn_had_no_upper_bound(svc):
    """`top_n` was unbounded."""
    maximum = svc.runtime.config.retrieval.max_top_k
    envelope = await run(svc, f"search -n {maximum + 1}")
    assert envelope["ok"] is False and f"最多 {maximum}" in envelope["error"]
    assert (await run(svc, f"search -n {maximum}"))["ok"] is True


async def test_bug_update_without_tags_deleted_all_tags(svc):
    """`update -id X -status archived` wiped every tag group."""
    memory_id = await seed(svc, "张三", "张三住在北京")
    step(await run(svc, f"update -id {memory_id} -status archived"))
    metadata = (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]
    assert (metadata["core_tags"], metadata["diffusion_tags"], metadata["opposing_tags"]) == (
        ["测试"],
        ["样例"],
        ["无关"],
    )


async def test_bug_update_treated_comma_ids_as_one_id_and_ignored_ids_flag(svc):
    """`-id a,b` was one id "a,b" and `-ids` was not read."""
    first = await seed(svc, "甲", "甲的内容")
    second = await seed(svc, "乙", "乙的内容完全不同")
    envelope = await run(svc, f"update -id {first},{second} -status archived")
    assert envelope["ok"] is False and "需要恰好一个记忆 id" in envelope["error"]
    assert step(await run(svc, f"update -ids {first} -status archived"))["updated_fields"] == ["status"]


async def test_bug_update_stored_type_and_status_without_lower_casing(svc):
    """`-status Archived` was stored as "Archived" and later filters missed it."""
    memory_id = await seed(svc, "张三", "张三住在北京")
    step(await run(svc, f"update -id {memory_id} -status Archived -type PERSON -person_id qq:1"))
    metadata = (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]
    assert metadata["status"] == "archived" and metadata["memory_type"] == "person"


async def test_bug_update_of_missing_record_reported_ok(svc):
    """A missing id gave `ok:true, updated:0`."""
    envelope = await run(svc, "update -id mem-does-not-exist -title 新标题")
    assert envelope["ok"] is False and envelope["executed"] == 1
    assert "找不到这些记忆" in envelope["error"] and "mem-does-not-exist" in envelope["error"]


async def test_bug_update_of_soft_deleted_record_succeeded_silently(svc, write_counter):
    """A soft-deleted record must not be updatable silently."""
    memory_id = await seed(svc, "张三", "张三住在北京")
    step(await run(svc, f"delete -id {memory_id}"))
    before = await write_counter.snapshot()
    envelope = await run(svc, f"update -id {memory_id} -title 复活")
    assert envelope["ok"] is False and "找不到" in envelope["error"]
    assert await write_counter.snapshot() == before


async def test_bug_delete_of_unknown_ids_reported_ok(svc):
    """Unknown ids gave `deleted:0` with `ok:true`."""
    envelope = await run(svc, "delete -ids mem-x,mem-y")
    assert envelope["ok"] is False and "mem-x" in envelope["error"]


async def test_bug_read_silently_dropped_unknown_ids(svc):
    """Unknown or soft-deleted ids vanished from the answer without a word."""
    memory_id = await seed(svc, "张三", "张三住在北京")
    result = step(await run(svc, f"read -ids {memory_id},mem-ghost"))
    assert result["missing"] == ["mem-ghost"]
    envelope = await run(svc, "read -id mem-ghost")
    assert envelope["ok"] is False and "mem-ghost" in envelope["error"]


async def test_bug_errors_leaked_internal_exception_text():
    """Raw exception text (paths, SQL) reached the model."""

    class BrokenService:
        async def search_memory_entries(self, **kwargs):
            raise RuntimeError("sqlite3.OperationalError: database is locked at /srv/secret/booku.db")

    envelope = await run_memory_command(BrokenService(), "search -q 张三")
    assert envelope["ok"] is False
    text = str(envelope)
    assert "/srv/secret" not in text and "sqlite3" not in text and "Traceback" not in text
    assert "记忆服务出错（RuntimeError）" in envelope["error"]


async def test_bug_search_hits_had_no_snippet_or_score_but_29_metadata_keys(svc):
    """Hits carried ~29 metadata keys and no content snippet or score."""
    await seed(svc, "张三", "张三是我的大学同学，喜欢打篮球")
    item = step(await run(svc, "search -q 大学同学"))["items"][0]
    assert set(item) == {"id", "title", "type", "score", "snippet"}
    assert "metadata" not in item


async def test_bug_invalid_step_after_valid_write_still_wrote(svc, write_counter):
    """A chain ran its valid prefix before reaching an unparsable step; now nothing runs."""
    before = await write_counter.snapshot()
    envelope = await run(svc, 'create -title 甲 -content 内容 -triple_tags "a|b|c" && unknown -x 1 && delete -id m1')
    assert envelope["ok"] is False and envelope["executed"] == 0
    assert "第 2 步「unknown -x 1」有误" in envelope["error"] and "整条命令都没有执行" in envelope["error"]
    assert await write_counter.snapshot() == before


async def test_bug_chain_failure_did_not_say_earlier_steps_took_effect(svc):
    """Completed segments were not rolled back, and the answer did not say so."""
    memory_id = await seed(svc, "张三", "张三住在北京")
    envelope = await run(svc, f"archive -id {memory_id} && read -id mem-ghost && delete -id {memory_id}")
    assert envelope["ok"] is False and envelope["executed"] == 2
    assert [entry["success"] for entry in envelope["results"]] == [True, False]
    assert re.search(
        r"第 2 步「read -id mem-ghost」失败：.*前 1 步已经生效（不会撤销）；后面 1 步没有执行", envelope["error"]
    )
    metadata = (await svc.get_memory_detail(memory_id=memory_id))["item"]["metadata"]
    assert metadata["status"] == "archived" and metadata["is_deleted"] is False


async def test_bug_event_times_only_accepted_epoch_seconds(svc):
    """There was no date parsing; unparsable values became 0.0 silently."""
    result = step(
        await run(
            svc,
            'create -type event -title 开会 -content 周会 -triple_tags "会议|工作|休假" '
            "-start_at 2024-05-01 -end_at 1714600000",
        )
    )
    metadata = (await svc.get_memory_detail(memory_id=result["id"]))["item"]["metadata"]
    assert metadata["event_start_at"] > 1714400000 and metadata["event_end_at"] == 1714600000.0
    envelope = await run(svc, "update -id x -start_at 下周")
    assert envelope["ok"] is False and "需要时间" in envelope["error"]


async def test_bug_update_empty_title_silently_kept_the_old_title(svc):
    """An empty `-title` silently kept the old title; now it is an explicit error."""
    memory_id = await seed(svc, "张三", "张三住在北京")
    envelope = await run(svc, f"update -id {memory_id} -title ''")
    assert envelope["ok"] is False and "-title 不能为空" in envelope["error"]


async def test_bug_bare_triple_tags_and_wrong_shape(svc):
    """A bare `-triple_tags` became "true"; a two-part value must be rejected with the shorthand shown."""
    bare = await run(svc, "search -triple_tags")
    assert bare["ok"] is False and "-triple_tags 缺少值" in bare["error"]
    shape = await run(svc, 'search -triple_tags "a|b"')
    assert shape["ok"] is False and "核心|扩散|对立" in shape["error"]
    partial = await run(svc, 'search -triple_tags "a||c"')
    assert partial["ok"] is False and "禁止只传一组或两组" in partial["error"]


async def test_bug_unclosed_quote_answered_with_shlex_english(svc):
    """An unbalanced quote answered "No closing quotation"."""
    envelope = await run(svc, 'search -q "张三')
    assert envelope["ok"] is False and "No closing" not in envelope["error"]
    assert '引号 " 没有闭合' in envelope["error"]


async def test_bug_folder_flags_were_accepted_and_dropped(svc):
    """`-folder` on create was dropped; now it files the memory, and search rejects it."""
    result = step(await run(svc, 'create -title 周报 -content 周五交 -triple_tags "周报|工作|休假" -folder 工作'))
    assert (await svc.get_memory_detail(memory_id=result["id"]))["item"]["metadata"]["folder_id"] == "工作"
    envelope = await run(svc, "search -q 周报 -folder_id 工作")
    assert envelope["ok"] is False and "search 不支持参数 -folder_id" in envelope["error"]


async def test_bug_help_required_building_a_service():
    """Every call built (and leaked) a service; `help` must never touch storage."""

    class Exploding:
        def __getattr__(self, name):
            raise AssertionError(f"help touched the service: {name}")

    envelope = await run_memory_command(Exploding(), "help")
    assert envelope["ok"] is True and envelope["results"][0]["result"]["action"] == "help"

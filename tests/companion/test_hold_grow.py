"""hold and grow: verbatim saving, speaker lines, explicit fields, neutral metadata, feel, pinned, the raw-source
layer, grow's splitting / items / merging paths, quotes limits, and validation before anything is written."""

from __future__ import annotations

import sqlite3

import pytest

from booku_memory.services.companion.extensions import (
    TagSuggestion,
    register_write_observer,
)
from booku_memory.services.errors import NotFoundError, ValidationError

from .support import row

MOMENT = "  今天在海边散步，风很大。\n@阿青：你看那只海鸥\n我没有回答，只是笑了。  \n"


async def count(runtime, table: str) -> int:
    return int(await runtime.db.fetch_value(f"SELECT COUNT(*) FROM {table}", (), 0))


# --------------------------------------------------------------------- hold
async def test_hold_saves_content_verbatim_and_returns_it_verbatim(companion, memory) -> None:
    held = await companion.hold(MOMENT)
    assert held["mode"] == "created"
    assert (await row(memory.runtime, held["id"]))["content"] == MOMENT
    found = await companion.breath_search("海边 散步")
    assert found["items"][0]["id"] == held["id"] and found["items"][0]["content"] == MOMENT


async def test_speaker_lines_come_back_as_json_entries_with_their_speaker(companion) -> None:
    held = await companion.hold(MOMENT)
    assert held["speakers"] == [{"speaker": "阿青", "text": "你看那只海鸥", "line": 2}]
    text = (await companion.breath())["text"]
    assert '{"speaker": "阿青", "text": "你看那只海鸥"}' in text
    assert "@阿青" not in text and "我没有回答，只是笑了。" in text


async def test_explicit_title_and_domain_win_over_the_tagging_model(memory) -> None:
    from booku_memory.services.companion.service import BookuCompanionService

    class Tagger:
        async def suggest(self, content: str) -> TagSuggestion:
            return TagSuggestion(
                title="模型标题", domains=("模型域",), tags=("模型标签",), importance=8, valence=0.9, arousal=0.8
            )

    companion = BookuCompanionService(memory.runtime, tagger=Tagger())
    explicit = await companion.hold("第一次自己做饭，糊了。", title="做饭", domain="生活,成长")
    assert explicit["item"]["title"] == "做饭" and explicit["item"]["domains"] == ["生活", "成长"]
    assert explicit["item"]["importance"] == 8 and explicit["item"]["tags"] == ["模型标签"]
    suggested = await companion.hold("第二次做饭，成功了。")
    assert suggested["item"]["title"] == "模型标题" and suggested["item"]["domains"] == ["模型域"]
    assert not any("中性值" in n for n in suggested["notices"])


async def test_without_a_tagging_model_hold_saves_neutral_metadata_and_says_so(companion) -> None:
    held = await companion.hold("下雨天在家看书。\n很安静。", importance=7)
    item = held["item"]
    assert (item["title"], item["importance"], item["valence"], item["arousal"], item["domains"]) == (
        "下雨天在家看书。",
        7,
        0.5,
        0.3,
        [],
    )
    assert any("未配置打标模型" in n and "valence 0.5" in n and "重要度" not in n for n in held["notices"])
    assert "未配置打标模型" in held["text"]


async def test_a_failing_tagging_model_never_loses_the_memory(memory) -> None:
    from booku_memory.services.companion.service import BookuCompanionService

    class BrokenTagger:
        async def suggest(self, content: str) -> TagSuggestion:
            raise RuntimeError("模型超时")

    held = await BookuCompanionService(memory.runtime, tagger=BrokenTagger()).hold("今天学会了骑车。")
    assert held["mode"] == "created" and any("模型超时" in n for n in held["notices"])


async def test_pinned_locks_importance_ten(companion) -> None:
    held = await companion.hold("永远先问用户的感受，再给建议。", pinned=True, importance=3)
    assert held["item"]["pinned"] and held["item"]["importance"] == 10
    assert any("锁定 importance=10" in n for n in held["notices"])


async def test_feel_fixes_the_domain_to_feel(companion) -> None:
    held = await companion.hold("想起那天还是有点难过。", feel=True, domain="家庭")
    assert held["item"]["kind"] == "feel" and held["item"]["domains"] == ["feel"]
    assert any("domain 固定为 feel" in n for n in held["notices"])


async def test_hold_never_merges_and_holding_the_same_text_twice_returns_the_first(companion, memory) -> None:
    first = await companion.hold("和妈妈通了电话。")
    similar = await companion.hold("和妈妈通了电话！")
    same = await companion.hold("和妈妈通了电话。")
    assert similar["mode"] == "created" and similar["id"] != first["id"]
    assert same["mode"] == "duplicate" and same["id"] == first["id"]
    assert await count(memory.runtime, "booku_memory_records") == 2


async def test_quotes_are_stored_and_only_returned_when_asked(companion) -> None:
    held = await companion.hold("毕业那天在操场上拍了合照。", quotes=[{"text": "以后也要常联系", "speaker": "班长"}])
    plain = await companion.breath_search("毕业 操场")
    assert "quotes" not in plain["items"][0] and "以后也要常联系" not in plain["text"]
    asked = await companion.breath_search("毕业 操场", quotes=True)
    assert asked["items"][0]["id"] == held["id"]
    assert asked["items"][0]["quotes"] == [{"text": "以后也要常联系", "speaker": "班长"}]
    assert "原话：「以后也要常联系」——班长" in asked["text"]


async def test_hold_rejects_too_many_or_too_long_quotes_before_writing(companion, memory) -> None:
    with pytest.raises(ValidationError, match="最多 3 句"):
        await companion.hold("一次长谈。", quotes=["一", "二", "三", "四"])
    with pytest.raises(ValidationError, match="每句最多 100 个字"):
        await companion.hold("一次长谈。", quotes=["话" * 101])
    assert await count(memory.runtime, "booku_memory_records") == 0


async def test_over_long_content_is_rejected_not_truncated(companion, memory) -> None:
    with pytest.raises(ValidationError, match="不会截断"):
        await companion.hold("长" * 20001)
    assert await count(memory.runtime, "booku_memory_records") == 0


# ---------------------------------------------------------- source layer
async def test_source_content_goes_to_the_immutable_layer_and_never_into_breath(companion, memory) -> None:
    source = "第一行：早餐\n第二行：午饭时的对话\n第三行：晚上散步"
    held = await companion.hold("中午和朋友聊到了搬家的事。", source_content=source, source_ranges=[[2, 2]])
    evidence = await companion.source_evidence(held["id"])
    assert evidence["sources"][0]["content"] == source and evidence["sources"][0]["excerpt"] == "第二行：午饭时的对话"
    assert "早餐" not in (await companion.breath())["text"]
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        async with memory.runtime.db.transaction() as conn:
            await conn.execute("UPDATE booku_memory_sources SET content = 'x'")
    with pytest.raises(sqlite3.IntegrityError, match="immutable"):
        async with memory.runtime.db.transaction() as conn:
            await conn.execute("DELETE FROM booku_memory_source_links")
    assert await count(memory.runtime, "booku_memory_sources") == 1


async def test_omitted_ranges_mean_the_whole_source_belongs_to_the_event(companion) -> None:
    held = await companion.hold("读完了一本书。", source_content="整本书的读书笔记\n第二页")
    link = (await companion.source_evidence(held["id"]))["sources"][0]
    assert link["ranges"] == [] and link["excerpt"] == "整本书的读书笔记\n第二页"


async def test_source_ranges_need_a_source_and_must_fit_it(companion) -> None:
    with pytest.raises(ValidationError, match="需要同时提供 source_content"):
        await companion.hold("一件事。", source_ranges=[[1, 1]])
    with pytest.raises(ValidationError, match="原文共 1 行"):
        await companion.hold("一件事。", source_content="只有一行", source_ranges=[[1, 2]])


async def test_a_feeling_for_a_source_bucket_digests_that_bucket(companion, memory) -> None:
    moment = await companion.hold("面试没过，有点失落。")
    feeling = await companion.hold(
        "现在回头看，那次失败让我更清楚自己想要什么。", feel=True, source_bucket=moment["id"]
    )
    assert (await row(memory.runtime, moment["id"]))["digested"] == 1
    assert any("已标记为已消化" in n for n in feeling["notices"])
    link = (await companion.source_evidence(feeling["id"]))["sources"][0]
    assert link["source_bucket"] == moment["id"]
    history = await memory.runtime.memory_service().get_memory_history(memory_id=moment["id"])
    assert [v["action"] for v in history["versions"]] == ["hold", "digest"]


async def test_an_unknown_source_bucket_is_refused(companion) -> None:
    with pytest.raises(NotFoundError, match="source_bucket"):
        await companion.hold("感受。", feel=True, source_bucket="mem-nope")


# --------------------------------------------------------------------- grow
async def test_grow_under_thirty_characters_takes_the_hold_path(companion) -> None:
    grown = await companion.grow("今天很开心，吃到了想吃的蛋糕。")
    assert grown["path"] == "hold" and len(grown["items"]) == 1 and "未拆分" in grown["text"]


async def test_grow_splits_a_long_text_into_two_to_six_verbatim_memories(companion, memory) -> None:
    text = "\n\n".join(f"第{i}件事：今天做了第{i}件很值得记住的事情，感觉不错。" for i in range(1, 9))
    grown = await companion.grow(text)
    assert grown["path"] == "split" and 2 <= grown["total"] <= 6
    contents = [(await row(memory.runtime, i))["content"] for i in grown["ids"]]
    assert "\n\n".join(contents) == text
    assert any("本地规则" in n for n in grown["notices"])
    first = (await companion.source_evidence(grown["ids"][0]))["sources"][0]
    assert first["content"] == text and first["excerpt"] == contents[0]
    assert await count(memory.runtime, "booku_memory_sources") == 1  # the shared source is stored once


async def test_grow_uses_the_host_splitter_when_configured(memory) -> None:
    from booku_memory.services.companion.service import BookuCompanionService

    class Splitter:
        async def split(self, content: str) -> list[str]:
            return ["上午：开会讨论了新项目。", "下午：和同事一起调试到很晚。"]

    grown = await BookuCompanionService(memory.runtime, splitter=Splitter()).grow(
        "上午开会讨论了新项目，下午和同事一起调试到很晚，晚上回家累得直接睡了。"
    )
    assert [i["content"] for i in grown["items"]] == ["上午：开会讨论了新项目。", "下午：和同事一起调试到很晚。"]
    link = (await BookuCompanionService(memory.runtime).source_evidence(grown["ids"][0]))["sources"][0]
    assert link["ranges"] == [] and link["excerpt"].startswith("上午开会")  # model pieces link the whole source


async def test_grow_items_are_stored_as_given_with_their_fields(companion, memory) -> None:
    grown = await companion.grow(
        content="行1 早上\n行2 中午\n行3 晚上",
        items=[
            {
                "title": "早饭",
                "content": "早上吃了豆浆油条。",
                "tags": ["早餐"],
                "importance": 3,
                "domain": ["生活"],
                "valence": 0.8,
                "arousal": 0.2,
                "why_remembered": "想记住平常的日子",
                "source_ranges": [[1, 1]],
                "quotes": ["老板说今天的油条刚出锅"],
            },
            "晚上一个人看了场电影。",
        ],
    )
    first, second = grown["items"]
    assert (first["title"], first["importance"], first["domains"], first["tags"]) == ("早饭", 3, ["生活"], ["早餐"])
    assert (first["valence"], first["arousal"], first["why_remembered"]) == (0.8, 0.2, "想记住平常的日子")
    assert (await row(memory.runtime, second["id"]))["content"] == "晚上一个人看了场电影。"
    evidence = await companion.source_evidence(first["id"])
    assert evidence["sources"][0]["excerpt"] == "行1 早上"
    asked = await companion.breath_search("豆浆 油条", quotes=True)
    assert asked["items"][0]["quotes"] == [{"text": "老板说今天的油条刚出锅"}]


async def test_grow_items_fold_into_a_near_identical_memory_without_losing_text(companion, memory) -> None:
    original = await companion.hold("周末去爬了香山，红叶很好看。", why_remembered="第一次和她爬山")
    grown = await companion.grow(
        items=[
            {"content": "周末去爬了香山，红叶很好看。", "importance": 8, "why_remembered": "新的理由"},
            "周日晚上包了饺子。",
        ]
    )
    assert grown["modes"] == ["merged", "created"] and grown["ids"][0] == original["id"]
    merged = await row(memory.runtime, original["id"])
    assert merged["content"] == "周末去爬了香山，红叶很好看。" and merged["importance"] == 8
    assert merged["why_remembered"] == "第一次和她爬山" and merged["activation_count"] == 1
    history = await memory.runtime.memory_service().get_memory_history(memory_id=original["id"])
    assert [v["action"] for v in history["versions"]] == ["hold", "merge"]


async def test_grow_validates_every_item_before_writing_anything(companion, memory) -> None:
    with pytest.raises(ValidationError, match=r"items\[2\]\.quotes.*最多 3 句"):
        await companion.grow(items=["第一条正常。", {"content": "第二条", "quotes": ["1", "2", "3", "4"]}])
    with pytest.raises(ValidationError, match="未知字段"):
        await companion.grow(items=[{"content": "x", "mood": "好"}])
    with pytest.raises(ValidationError, match="需要同时传 content"):
        await companion.grow(items=[{"content": "x", "source_ranges": [[1, 1]]}])
    assert await count(memory.runtime, "booku_memory_records") == 0


async def test_write_observers_add_notices_to_hold_and_grow(companion) -> None:
    async def observer(service, records):
        return [f"观察到 {len(records)} 条新记忆"]

    remove = register_write_observer("test-observer", observer)
    try:
        held = await companion.hold("一个普通的周二。")
    finally:
        remove()
    assert "观察到 1 条新记忆" in held["notices"]
    assert "观察到" not in " ".join((await companion.hold("一个普通的周三。"))["notices"])


async def test_a_splitter_answer_outside_two_to_six_falls_back_to_the_local_rule(memory) -> None:
    from booku_memory.services.companion.service import BookuCompanionService

    class OnePiece:
        async def split(self, content: str) -> list[str]:
            return [content]

    text = "第一段：上午去了医院复查，医生说恢复得不错。\n\n第二段：下午在家休息，读完了一本小说。"
    grown = await BookuCompanionService(memory.runtime, splitter=OnePiece()).grow(text)
    assert grown["total"] == 2 and any("应为 2~6 条" in n for n in grown["notices"])


async def test_mechanical_authority_cannot_author_memories(memory) -> None:
    from booku_memory.services.companion.service import BookuCompanionService

    scope = memory.runtime.default_scope.acting(authority="mechanical", actor="maintenance", cause="test")
    with pytest.raises(ValidationError, match="mechanical"):
        await BookuCompanionService(memory.runtime, scope).hold("不该由维护任务写下的内容。")

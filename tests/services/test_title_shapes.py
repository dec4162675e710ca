"""How a client titles its memories must not change what retrieval finds: a title that adds nothing (the day of a
chat log, the speaker's name, the turn's own first words) is embedded as if no title had been given, on every
path that embeds a memory; a title that names what the body does not still frames the memory's vector."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np

from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.logic.text import SHARED_TITLE_MIN, compose_embedding_text, extract_title
from booku_memory.services.scope import SHARED_STORE, Scope
from booku_memory.services.storage.shared_titles import title_crossing_plan
from booku_memory.services.storage.write_plans import run_plan

from .memory_support import MEMORY_SERVICE, TRIPLET, Probe, open_store

ZONE = ZoneInfo("Asia/Shanghai")
CONFIG = {"retrieval": {"timezone": "Asia/Shanghai"}}

# A week of chat, turn by turn: (day, text). Written by a live archiver with the chat's time as event time.
CHAT = (
    (3, "用户：我今天去动物园看了大熊猫，它们一直在吃竹子\nAI：听起来很可爱！你最喜欢哪只？"),
    (3, "用户：晚上我和妹妹一起做了番茄炒蛋\nAI：自己做饭很有成就感，味道怎么样？"),
    (3, "用户：最近工作压力有点大，总是加班到很晚\nAI：注意休息，可以试试睡前散散步。"),
    (4, "用户：我报名了下个月的半程马拉松\nAI：太棒了！你平时每周跑几次？"),
    (4, "用户：我想学吉他，有什么入门建议吗\nAI：可以先从简单的和弦开始，每天练二十分钟。"),
    (5, "用户：今天读完了《活着》，心情很沉重\nAI：这本书确实很感人，你最触动的是哪一段？"),
    (5, "用户：周末打算去杭州西湖玩两天\nAI：春天的西湖很美，记得去苏堤走走。"),
    (5, "用户：我的猫最近不爱吃饭，有点担心\nAI：可以带它去宠物医院检查一下。"),
    (6, "用户：今天面试了一家游戏公司，感觉还不错\nAI：祝你好运！面试官问了哪些问题？"),
    (6, "用户：我妈妈下周过生日，不知道送什么礼物\nAI：可以送一条围巾，或者带她去吃顿好的。"),
)
QUESTIONS = (
    "我在动物园看了什么动物？",
    "我最近读了哪本书？",
    "我打算去哪里旅游？",
    "我想学什么乐器？",
    "我妈妈什么时候过生日？",
    "我的宠物怎么了？",
    "我5月3日和谁一起做了饭？",
)


def said_at(day: int, turn: int) -> float:
    return datetime(2024, 5, day, 20, turn, tzinfo=ZONE).timestamp()


def day_title(day: int) -> str:
    """A chat log's label: the same for every turn of a day."""
    return f"5月{day}日 聊天记录"


async def _ranked_contents(path: Path, e5, title_of) -> list[list[str]]:
    """Write ``CHAT`` with ``title_of(day, text)`` as each turn's title; the contents each question finds, best
    first."""
    async with open_store(path, embedder=e5, config=CONFIG) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        for turn, (day, text) in enumerate(CHAT):
            await svc.upsert_memory(text, title=title_of(day, text), event_start_at=said_at(day, turn))
        await handle.runtime.flush_vectors()  # the vectors a title's crossing re-frames, as a moment later
        answers = [
            await svc.retrieve_memories(question, top_k=5, min_score=0, record_activation=False)
            for question in QUESTIONS
        ]
    return [[item["content_snippet"] for item in answer["results"]] for answer in answers]


async def test_a_shared_day_title_or_a_redundant_title_does_not_reorder_results(tmp_path: Path, e5) -> None:
    untitled = await _ranked_contents(tmp_path / "untitled", e5, lambda day, text: None)
    by_day = await _ranked_contents(tmp_path / "by-day", e5, lambda day, text: day_title(day))
    first_words = await _ranked_contents(
        tmp_path / "first-words", e5, lambda day, text: text.removeprefix("用户：").split("，")[0][:12]
    )
    speaker = await _ranked_contents(tmp_path / "speaker", e5, lambda day, text: "用户")
    assert [ranked[0] for ranked in untitled] == [CHAT[i][1] for i in (0, 5, 6, 4, 9, 7, 1)]
    assert by_day == untitled
    assert first_words == untitled
    assert speaker == untitled


async def test_a_title_naming_what_the_body_does_not_leads_its_memory_to_the_question(tmp_path: Path, e5) -> None:
    notes = (
        ("李四", "高中同桌，现在住在杭州，做外贸生意"),
        ("王五", "大学室友，现在住在成都，是中学老师"),
        ("赵六", "前同事，现在住在深圳，做产品经理"),
    )
    async with open_store(tmp_path, embedder=e5, config=CONFIG) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = [(await svc.upsert_memory(body, title=title))["id"] for title, body in notes]
        found = [
            (await svc.retrieve_memories(f"{title}住在哪里？", top_k=3, min_score=0))["results"][0]["id"]
            for title, _ in notes
        ]
    assert found == ids


def _vector(text: str) -> np.ndarray:
    return DeterministicTestEmbedder().embed_sync([text])[0]


LOG_TURN = ("2024-05-03 对话", "用户：我今天去动物园看了大熊猫\nAI：听起来很可爱！")
TOPIC = ("李四", "高中同桌，现在住在杭州")


async def test_every_path_that_embeds_a_memory_frames_it_by_the_same_rule(tmp_path: Path) -> None:
    label_text = compose_embedding_text(extract_title(LOG_TURN[1]), LOG_TURN[1])  # as if untitled
    topic_text = "# 李四\n高中同桌，现在住在杭州"
    assert compose_embedding_text(*LOG_TURN) == label_text and compose_embedding_text(*TOPIC) == topic_text
    expected = {LOG_TURN[0]: _vector(label_text), TOPIC[0]: _vector(topic_text)}

    async def stored(handle, ids: dict[str, str]) -> None:
        probe = Probe(handle.runtime)
        await handle.runtime.flush_vectors()
        for title, memory_id in ids.items():
            np.testing.assert_allclose(await probe.vector(memory_id), expected[title], atol=1e-6)

    async with open_store(tmp_path / "written") as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        upserted = {title: (await svc.upsert_memory(body, title=title))["id"] for title, body in (LOG_TURN, TOPIC)}
        await stored(handle, upserted)
        created = {
            title: (await svc.create_memory(title=title, content=body, folder_id="created", **TRIPLET))["id"]
            for title, body in (LOG_TURN, TOPIC)
        }
        await stored(handle, created)
        await handle.reindex()
        await stored(handle, upserted)
        await handle.export_jsonl(tmp_path / "export.jsonl")
    async with open_store(tmp_path / "imported") as handle:
        await handle.import_jsonl(tmp_path / "export.jsonl")
        await stored(handle, upserted)


async def test_a_speaker_name_on_every_turn_ranks_as_no_title(tmp_path: Path, e5) -> None:
    # The name is not in the turns, so each title alone would add information; on every turn of the store it
    # labels the chat, not one turn's topic.
    assert len(CHAT) >= SHARED_TITLE_MIN and all("小明" not in text for _, text in CHAT)
    untitled = await _ranked_contents(tmp_path / "untitled", e5, lambda day, text: None)
    named = await _ranked_contents(tmp_path / "named", e5, lambda day, text: "小明")
    assert named == untitled


SPEAKER = "王小明"
TURNS = [
    f"第{i}次聊天：今天聊到了{topic}" for i, topic in enumerate("天气 电影 猫 跑步 咖啡 旅行 音乐 书 工作 家人".split())
]


async def _stored_vectors(handle, ids: list[str]) -> list[np.ndarray]:
    probe = Probe(handle.runtime)
    await handle.runtime.flush_vectors()
    return [await probe.vector(memory_id) for memory_id in ids]


def _assert_vectors(found: list[np.ndarray], texts: list[str]) -> None:
    for vector, text in zip(found, texts, strict=True):
        np.testing.assert_allclose(vector, _vector(text), atol=1e-6)


async def test_a_title_crossing_the_shared_line_reframes_every_memory_carrying_it(tmp_path: Path) -> None:
    titled = [f"# {SPEAKER}\n{body}" for body in TURNS]
    untitled = [compose_embedding_text(extract_title(body), body) for body in TURNS]  # as if written untitled
    async with open_store(tmp_path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        ids = [(await svc.upsert_memory(body, title=SPEAKER))["id"] for body in TURNS[: SHARED_TITLE_MIN - 1]]
        topic = (await svc.upsert_memory(TOPIC[1], title=TOPIC[0]))["id"]
        _assert_vectors(await _stored_vectors(handle, ids), titled[: SHARED_TITLE_MIN - 1])
        ids.append((await svc.upsert_memory(TURNS[SHARED_TITLE_MIN - 1], title=SPEAKER))["id"])
        # The write that makes the title common re-frames the memories written with it before.
        _assert_vectors(await _stored_vectors(handle, ids), untitled[:SHARED_TITLE_MIN])
        _assert_vectors(await _stored_vectors(handle, [topic]), ["# 李四\n高中同桌，现在住在杭州"])
        await handle.reindex()
        _assert_vectors(await _stored_vectors(handle, ids), untitled[:SHARED_TITLE_MIN])
        # Past the line a write re-embeds only itself, not the whole series again.
        extra = (await svc.upsert_memory("第十次聊天：今天聊到了园艺", title=SPEAKER))["id"]
        await handle.runtime.flush_vectors()
        async with handle.runtime.db.transaction() as conn:
            await run_plan(conn, title_crossing_plan(SHARED_STORE, SPEAKER, 0.0, added=True))
        assert await Probe(handle.runtime).pending() == 0
        # Removing memories for good makes the title rare again: the others get it back.
        await svc.delete_memories(memory_ids=[extra, ids[-1]], hard=True)
        _assert_vectors(await _stored_vectors(handle, ids[:-1]), titled[: SHARED_TITLE_MIN - 1])


async def test_a_title_counts_only_in_its_own_store(tmp_path: Path) -> None:
    async with open_store(tmp_path) as handle:
        svc = handle.get_service(MEMORY_SERVICE)
        other = handle.runtime.memory_service(
            Scope(owner_uid="bob", readable_store_keys=("bob",), writable_store_key="bob")
        )
        for body in TURNS[: SHARED_TITLE_MIN - 1]:
            await other.upsert_memory(body, title=SPEAKER)
        memory_id = (await svc.upsert_memory(TURNS[0], title=SPEAKER))["id"]
        _assert_vectors(await _stored_vectors(handle, [memory_id]), [f"# {SPEAKER}\n{TURNS[0]}"])

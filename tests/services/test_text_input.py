"""Text that cannot be encoded, and queries that are too long, are refused by every public service with a
``ValidationError`` (a Chinese message naming the argument) before anything runs or is written.

Before the gate, a lone surrogate reached SQLite or jieba and came back as a ``UnicodeEncodeError`` (an HTTP 500
on the dashboard), and a 100k-character query held every read path for minutes.
"""

from __future__ import annotations

import inspect

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import booku_memory
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.errors import ValidationError
from booku_memory.services.evidence.service import EvidenceService
from booku_memory.services.knowledge_service import BookuKnowledgeService
from booku_memory.services.memory_service import BookuMemoryService

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
BROKEN = "生日\ud800快乐"
TAGS = {"core_tags": ["生日"], "diffusion_tags": ["蛋糕"], "opposing_tags": ["葬礼"]}


@pytest.fixture
async def memory(tmp_path):
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as handle:
        yield handle


def services(memory):
    runtime = memory.runtime
    return {
        "memory": memory.get_service(booku_memory.MEMORY_SERVICE),
        "knowledge": memory.get_service(booku_memory.KNOWLEDGE_SERVICE),
        "companion": BookuCompanionService(runtime),
        "evidence": EvidenceService(runtime),
    }


# (service, method, arguments): each call is valid as written; the test breaks one string at a time.
CALLS = [
    ("memory", "create_memory", {"title": "生日", "content": "小明的生日是五月二日", "memory_type": "event", **TAGS}),
    ("memory", "upsert_memory", {"content": "小明喜欢吃蛋糕", "title": "蛋糕", "tags": ["甜食"]}),
    ("memory", "retrieve_memories", {"query_text": "小明 生日"}),
    ("memory", "search_memory_entries", {"query_text": "生日", **TAGS}),
    ("memory", "grep_memories", {"query": "生日", "search_fields": ["content"]}),
    ("memory", "list_memory_entries", {"keyword": "生日", "tag": "生日"}),
    ("memory", "create_temporary_memo", {"content": "明天买蛋糕", "stream_id": "s1"}),
    ("memory", "recall", {"query": "小明的生日", "quotas": {"events": 3}}),
    ("knowledge", "ingest_document", {"title": "蛋糕手册", "content": "# 做蛋糕\n\n先打发奶油。"}),
    ("companion", "hold", {"content": "今天和小明一起吃了蛋糕", "title": "蛋糕"}),
    ("companion", "breath_search", {"query": "蛋糕"}),
    ("companion", "feel", {"query": "开心"}),
    ("evidence", "search", {"query": "蛋糕"}),
]


def broken_variants(arguments: dict) -> list[tuple[str, dict]]:
    """One copy of ``arguments`` per string in it (nested ones included) with that string made unencodable."""
    variants = []
    for key, value in arguments.items():
        if isinstance(value, str):
            variants.append((key, {**arguments, key: value + "\udc80"}))
        elif isinstance(value, list):
            variants.append((key, {**arguments, key: [*value, BROKEN]}))
        elif isinstance(value, dict):
            variants.append((key, {**arguments, key: {**value, BROKEN: 1}}))
    return variants


async def stored_rows(memory) -> int:
    db = memory.runtime.db
    return sum(
        [
            await db.fetch_value("SELECT COUNT(*) FROM booku_memory_records", (), 0),
            await db.fetch_value("SELECT COUNT(*) FROM booku_temporary_memos", (), 0),
            await db.fetch_value("SELECT COUNT(*) FROM booku_memory_revisions", (), 0),
        ]
    )


@pytest.mark.parametrize("service_name, method, arguments", CALLS, ids=[f"{s}.{m}" for s, m, _ in CALLS])
async def test_unencodable_text_in_any_argument_is_a_validation_error(memory, service_name, method, arguments):
    service = services(memory)[service_name]
    before = await stored_rows(memory)
    for key, broken in broken_variants(arguments):
        with pytest.raises(ValidationError) as caught:
            await getattr(service, method)(**broken)
        assert key in str(caught.value) and "UTF-8" in str(caught.value)
    assert await stored_rows(memory) == before, "a refused call must not write anything"
    await getattr(service, method)(**arguments)  # the same call with clean text works


@pytest.mark.parametrize("cls", [BookuMemoryService, BookuKnowledgeService, BookuCompanionService, EvidenceService])
async def test_every_public_method_is_behind_the_gate(memory, cls):
    """A method added later is covered too: each public coroutine refuses a broken first text argument."""
    service = cls(memory.runtime)
    for name, member in inspect.getmembers(cls, inspect.iscoroutinefunction):
        if name.startswith("_"):
            continue
        parameters = list(inspect.signature(member).parameters.values())[1:]
        if not parameters:
            continue
        with pytest.raises(ValidationError):
            await getattr(service, name)(**{parameters[0].name: "\ud83d"})


@pytest.mark.parametrize(
    "service_name, method, key, extra, fill",
    [
        ("memory", "retrieve_memories", "query_text", {}, "记"),
        ("memory", "recall", "query", {}, "记"),
        ("memory", "search_memory_entries", "query_text", {}, "记"),
        ("memory", "grep_memories", "query", {"search_fields": ["content"]}, "记"),
        # A regex also meets the engine's program cap (3 instructions per CJK character); ASCII stays under it.
        ("memory", "grep_memories", "query", {"search_fields": ["content"], "use_regex": True}, "a"),
        ("memory", "list_memory_entries", "keyword", {}, "记"),
        ("evidence", "search", "query", {}, "记"),
    ],
)
async def test_queries_longer_than_the_limit_are_refused_naming_it(memory, service_name, method, key, extra, fill):
    service = services(memory)[service_name]
    limit = memory.runtime.config.retrieval.max_query_chars
    await getattr(service, method)(**{key: fill * limit, **extra})  # at the limit: answered
    with pytest.raises(ValidationError) as caught:
        await getattr(service, method)(**{key: fill * (limit + 1), **extra})
    assert str(limit) in str(caught.value) and "max_query_chars" in str(caught.value)


async def test_query_limit_follows_the_config(tmp_path):
    config = {**QUIET, "retrieval": {"max_query_chars": 50}}
    async with booku_memory.open(tmp_path / "data", config, embedder=DeterministicTestEmbedder()) as handle:
        service = handle.get_service(booku_memory.MEMORY_SERVICE)
        await service.retrieve_memories("生" * 50)
        with pytest.raises(ValidationError, match="最多 50 个"):
            await service.retrieve_memories("生" * 51)


def test_query_limit_is_validated_in_the_config():
    from booku_memory.config import load_config
    from booku_memory.services.errors import BookuError

    with pytest.raises(BookuError, match="max_query_chars"):
        load_config({"retrieval": {"max_query_chars": 5}})


text_with_surrogates = st.text(
    alphabet=st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), max_size=40
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=text_with_surrogates)
async def test_arbitrary_text_gets_an_answer_or_a_validation_error(memory, text):
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    for call in (
        lambda: service.retrieve_memories(text),
        lambda: service.grep_memories(query=text, search_fields=["title", "content", "tags"]),
        lambda: service.upsert_memory(text, title=text, tags=[text]),
    ):
        try:
            await call()
        except ValidationError:
            pass

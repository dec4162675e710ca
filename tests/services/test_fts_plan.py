"""The keyword planner bounds an FTS5 search's work without changing what a caller may see.

``choose_terms`` keeps the rarest terms within a posting budget; the planner leaves the store clause out of the
MATCH only when the caller's stores hold nearly every indexed row, and the SQL around the MATCH still filters by
store, so a caller never sees another owner's rows either way.
"""

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.logic.inflection import with_inflections
from booku_memory.services.logic.segmentation import build_fts_query, query_terms
from booku_memory.services.memory_search import searchable_filter
from booku_memory.services.storage.fts_plan import choose_terms
from booku_memory.services.storage.keyword_rows import store_token

# The planner serves the FTS5 route; the in-memory index (tests/services/test_keyword_mirror.py) ranks every term.
QUIET = {
    "maintenance": {"enabled": False},
    "startup_ingest": {"enabled": False},
    "scope": {"mode": "per_chat"},
    "retrieval": {"in_memory_keyword_index": False},
}
SECTION = load_config(QUIET).scope
ALICE = scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="1001", stream_id="s-alice")
BOB = scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="2002", stream_id="s-bob")


def test_choose_terms_keeps_the_rarest_terms_within_the_budget_in_query_order() -> None:
    frequencies = {"common": 900, "usual": 300, "rare": 3, "unique": 1}
    kept, dropped = choose_terms(["common", "rare", "usual", "unique", "absent"], frequencies, budget=310)
    assert kept == ["rare", "usual", "unique", "absent"]
    assert dropped == ["common"]


def test_choose_terms_always_keeps_the_rarest_term_even_over_budget() -> None:
    kept, dropped = choose_terms(["a", "b"], {"a": 5_000, "b": 7_000}, budget=10)
    assert kept == ["a"] and dropped == ["b"]


async def test_small_store_keeps_every_term_and_ranks_like_plain_bm25(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        for text in ("周末去西湖边喝绿茶", "绿茶比咖啡清淡", "西湖的荷花开了", "昨天下雨没有出门"):
            await service.upsert_memory(text)
        records = memory.runtime.records
        flt = searchable_filter(ALICE, include_archived=False, include_knowledge=False)
        query = "西湖 绿茶 荷花"
        planned = await records.search_terms(query_terms(query), flt, limit=10)
        plain = await records.keyword_search(build_fts_query(query), flt, limit=10)
        assert planned == plain and len(planned) == 3


async def test_the_posting_budget_comes_from_the_retrieval_config(tmp_path) -> None:
    assert load_config(QUIET).retrieval.keyword_posting_budget == 4000
    config = {**QUIET, "retrieval": {**QUIET["retrieval"], "keyword_posting_budget": 250}}
    async with booku_memory.open(tmp_path / "data", config, embedder=UnavailableEmbedder()) as memory:
        assert memory.runtime.records.keyword_planner.posting_budget == 250


async def test_common_terms_are_dropped_once_they_exceed_the_budget_and_rare_matches_still_rank(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        for day in range(30):
            await service.upsert_memory(f"第{day}天 今天心情不错 天气晴朗 记录编号{day * 7919}")
        target = (await service.upsert_memory("今天心情不错 去看了萤火虫"))["id"]
        records = memory.runtime.records
        records.keyword_planner.posting_budget = 5
        flt = searchable_filter(ALICE, include_archived=False, include_knowledge=False)
        tokens = [store_token(key) for key in ALICE.readable_store_keys]
        plan = await records.keyword_planner.plan(query_terms("心情 萤火虫"), ALICE.readable_store_keys, tokens)
        assert plan is not None and "萤火虫" in plan.terms and plan.dropped == ("心情",)
        hits = await records.search_terms(query_terms("心情 萤火虫"), flt, limit=5)
        assert [memory_id for memory_id, _ in hits] == [target]


async def test_store_clause_is_skipped_only_for_a_store_that_owns_nearly_every_row_and_never_leaks(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        bob = memory.get_service(booku_memory.MEMORY_SERVICE, scope=BOB)
        mine = {(await alice.upsert_memory("我喜欢在西湖边喝龙井绿茶"))["id"]}
        theirs = set()
        for index in range(5):
            theirs.add((await bob.upsert_memory(f"绿茶 绿茶 西湖 第{index}次 龙井"))["id"])
        records = memory.runtime.records
        planner = records.keyword_planner
        terms = query_terms("龙井 绿茶 西湖")

        def tokens(scope):
            return [store_token(key) for key in scope.readable_store_keys]

        alice_plan = await planner.plan(terms, ALICE.readable_store_keys, tokens(ALICE))
        bob_plan = await planner.plan(terms, BOB.readable_store_keys, tokens(BOB))
        assert alice_plan.scope_in_index is True  # Alice owns 1 of 6 rows: the clause filters
        assert bob_plan.scope_in_index is True  # 5 of 6 is under the 90 % share
        for index in range(200):
            theirs.add((await bob.upsert_memory(f"第{index}条 绿茶 龙井"))["id"])
        planner.forget()
        bob_plan = await planner.plan(terms, BOB.readable_store_keys, tokens(BOB))
        assert bob_plan.scope_in_index is False  # 205 of 206 rows: the clause would filter nothing

        for scope, own, other in ((ALICE, mine, theirs), (BOB, theirs, mine)):
            flt = searchable_filter(scope, include_archived=False, include_knowledge=False)
            found = {memory_id for memory_id, _ in await records.search_terms(terms, flt, limit=500)}
            assert found and found <= own and not found & other
        assert {
            m
            for m, _ in await records.search_terms(
                terms, searchable_filter(ALICE, include_archived=False, include_knowledge=False), limit=5
            )
        } == mine


async def test_planner_recreates_its_vocabulary_table_after_the_database_reopens(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        target = (await service.upsert_memory("周末去西湖边喝绿茶"))["id"]
        runtime = memory.runtime
        flt = searchable_filter(ALICE, include_archived=False, include_knowledge=False)
        assert [m for m, _ in await runtime.records.search_terms(query_terms("西湖"), flt, limit=5)] == [target]
        await runtime.db.close()
        await runtime.db.open()
        runtime.records.keyword_planner.forget()
        assert [m for m, _ in await runtime.records.search_terms(query_terms("绿茶"), flt, limit=5)] == [target]


async def test_an_inflected_query_word_finds_the_other_forms_and_its_prefix_cost_counts_every_form(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        hobby = (await service.upsert_memory("Painting is my favourite hobby"))["id"]
        hobbies = (await service.upsert_memory("Evan has many hobbies"))["id"]
        await service.upsert_memory("Evan went to the lake")
        records = memory.runtime.records
        flt = searchable_filter(ALICE, include_archived=False, include_knowledge=False)
        exact = {memory_id for memory_id, _ in await records.search_terms(["hobbies"], flt, limit=10)}
        assert exact == {hobbies}
        terms = with_inflections(query_terms("What hobbies?"))
        assert terms == ["hobb*"]
        found = {memory_id for memory_id, _ in await records.search_terms(terms, flt, limit=10)}
        assert found == {hobby, hobbies}
        frequencies = await records.keyword_planner.document_frequencies(["hobb*", "hobby", "hobbies"])
        assert frequencies["hobb*"] == frequencies["hobby"] + frequencies["hobbies"] == 2
        tokens = [store_token(key) for key in ALICE.readable_store_keys]
        plan = await records.keyword_planner.plan(['say"*', "evan"], ALICE.readable_store_keys, tokens)
        assert plan is not None and plan.expression.startswith('"say"""*')

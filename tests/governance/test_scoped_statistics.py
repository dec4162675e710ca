"""Keyword scores depend only on the reader's own visible stores: another store's writes never move them.

The attack: 40 private memories containing "giraffe" in Alice's store changed the keyword score Bob (another
store) was shown from 0.709 to 0.607, because bm25's N, document frequencies and average length were counted over
every store. Checked on both keyword routes: the in-memory index and FTS5 (the index off or still loading).
"""

import pytest

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.memory_search import searchable_filter

SECTION = load_config({"scope": {"mode": "per_chat"}}).scope
ALICE = scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="s-alice")
BOB = scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="s-bob")
ROUTES = {"in_memory": True, "fts5": False}
BOB_TEXTS = [
    "The giraffe at the city zoo is called Lulu",
    "Bob visited the zoo with his niece on Sunday",
    "Lulu the giraffe likes acacia leaves",
    "Bob's niece wants a giraffe plush toy",
    "The aquarium next to the zoo opens at nine",
    "Bob bought tickets for the zoo online",
]
QUERIES = [["giraffe"], ["giraffe", "zoo"], ["zoo", "niece", "lulu"], ["acacia", "giraffe", "tickets"]]


def config(in_memory: bool) -> dict:
    return {
        "maintenance": {"enabled": False},
        "startup_ingest": {"enabled": False},
        "scope": {"mode": "per_chat"},
        "retrieval": {"in_memory_keyword_index": in_memory},
    }


async def bob_sees(memory) -> tuple[list[list[tuple[str, float]]], list[tuple[str, float]]]:
    """Bob's keyword-route hits for QUERIES, and what Bob's retrieval shows (id, score), with fresh counts."""
    records = memory.runtime.records
    records.keyword_planner.forget()  # no cached count may hide a change
    records.scoped_statistics.forget()
    flt = searchable_filter(BOB, include_archived=False, include_knowledge=False)
    hits = [await records.search_terms(terms, flt, limit=10) for terms in QUERIES]
    bob = memory.get_service(booku_memory.MEMORY_SERVICE, scope=BOB)
    shown = await bob.retrieve_memories("giraffe zoo", top_k=5, record_activation=False)
    # What the keyword challenge and the speaker step weigh the query's terms with.
    weights = await records.term_statistics(["giraffe", "zoo", "acacia"], BOB.readable_store_keys)
    return hits, [(item["id"], item["score"]) for item in shown["results"]], weights


def assert_same(before, after) -> None:
    for mine, theirs in zip(before[0], after[0]):
        assert [memory_id for memory_id, _ in mine] == [memory_id for memory_id, _ in theirs]
        assert [score for _, score in mine] == pytest.approx([score for _, score in theirs], rel=1e-12)
    assert [memory_id for memory_id, _ in before[1]] == [memory_id for memory_id, _ in after[1]]
    assert [score for _, score in before[1]] == pytest.approx([score for _, score in after[1]], rel=1e-12)
    assert before[2] == after[2]


@pytest.mark.parametrize("route", ROUTES)
async def test_forty_memories_in_another_store_do_not_move_a_readers_scores(tmp_path, route):
    async with booku_memory.open(tmp_path / "data", config(ROUTES[route]), embedder=UnavailableEmbedder()) as memory:
        assert memory.runtime.records.memory_keywords.ready is ROUTES[route]
        bob = memory.get_service(booku_memory.MEMORY_SERVICE, scope=BOB)
        alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
        for text in BOB_TEXTS:
            await bob.upsert_memory(text)
        await alice.upsert_memory("Alice keeps a diary about her garden")
        before = await bob_sees(memory)
        assert before[0][0] and before[1], "the test must see keyword hits"
        for n in range(40):
            await alice.upsert_memory(f"Alice private note {n}: a giraffe, a zoo keeper and acacia number {n * 7}")
        assert_same(before, await bob_sees(memory))
        # Alice's hard deletes do not move them either.
        listed = await alice.list_memory_entries(limit=20)
        await alice.delete_memories(memory_ids=[item["id"] for item in listed["items"]], hard=True)
        assert_same(before, await bob_sees(memory))
        # The check can fail: Bob's own writes do change Bob's statistics.
        await bob.upsert_memory("Another giraffe arrived at the zoo from Kenya")
        changed = await bob_sees(memory)
        assert changed[0][0][0][1] != pytest.approx(before[0][0][0][1], rel=1e-9)
        assert changed[2] != before[2]


async def test_both_routes_give_a_reader_the_same_scoped_scores(tmp_path):
    results = {}
    for route, in_memory in ROUTES.items():
        async with booku_memory.open(tmp_path / "data", config(in_memory), embedder=UnavailableEmbedder()) as memory:
            if not results:
                bob = memory.get_service(booku_memory.MEMORY_SERVICE, scope=BOB)
                alice = memory.get_service(booku_memory.MEMORY_SERVICE, scope=ALICE)
                for text in BOB_TEXTS:
                    await bob.upsert_memory(text)
                for n in range(12):
                    await alice.upsert_memory(f"Alice saw a giraffe and went to the zoo, note {n}")
            assert memory.runtime.records.memory_keywords.ready is in_memory
            results[route] = (await bob_sees(memory))[0]
    for mine, theirs in zip(results["in_memory"], results["fts5"]):
        assert [memory_id for memory_id, _ in mine] == [memory_id for memory_id, _ in theirs]
        assert [score for _, score in mine] == pytest.approx([score for _, score in theirs], rel=1e-9)

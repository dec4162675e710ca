"""The in-memory keyword index ranks exactly as FTS5's bm25 does, and follows every change to the FTS5 table.

Parity is checked against FTS5 itself, on the same SQLite file: the scores of ``KeywordIndex.search`` equal
``-bm25()`` of the same rows, for exact and prefix terms, after writes, edits, soft and hard deletes, a compaction,
and writes by another runtime (another connection, as another process would be).
"""

import asyncio
import sqlite3
import threading

import numpy as np
import pytest

import booku_memory
from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.logic.segmentation import fts_expression
from booku_memory.services.memory_search import searchable_filter
from booku_memory.services.scope import DEFAULT_SCOPE
from booku_memory.services.storage.keyword_rows import TEXT_FTS_COLUMNS
from booku_memory.services.storage.mirrors import bm25_postings as keyword_index_module
from booku_memory.services.storage.mirrors import keyword_mirror
from booku_memory.services.storage.mirrors.bm25_postings import (
    BM25_SQL_WEIGHTS,
    KeywordIndex,
    fold_token,
)
from booku_memory.services.storage.record_filter import RecordFilter, Visible

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}}
FTS_OFF = {**QUIET, "retrieval": {"in_memory_keyword_index": False}}
TEXTS = [
    "周末去西湖边喝绿茶",
    "绿茶比咖啡清淡，西湖的龙井最有名",
    "西湖的荷花开了",
    "昨天下雨没有出门，在家喝咖啡",
    "Caroline went to the café near the lake",
    "Melanie painted a sunrise over the lake last summer",
    "Caroline's painting class starts on Monday",
    "会议改到周三下午三点，地点在三号会议室",
    "Running every morning keeps Melanie calm",
    "她最喜欢的电影是千与千寻",
    "Résumé sent to the museum in May",
]
QUERIES = [
    ["西湖", "绿茶"],
    ["咖啡"],
    ["lake", "caroline"],
    ["paint*", "melanie"],
    ["cafe"],
    ["résumé"],
    ["会议", "三点", "周三"],
    ["run*", "morning", "absentword"],
    ["千与千寻", "电影", "西湖"],
]


def fts_scores(path, terms: list[str]) -> dict[int, float]:
    """rowid → -bm25 for an OR of ``terms`` over the text columns, from FTS5 itself."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(
            f"SELECT rowid, bm25(booku_memory_fts, {BM25_SQL_WEIGHTS}) FROM booku_memory_fts "
            f"WHERE booku_memory_fts MATCH ?",
            [f"{TEXT_FTS_COLUMNS} : ({fts_expression(terms)})"],
        ).fetchall()
    finally:
        conn.close()
    return {rid: -score for rid, score in rows}


def index_from_table(path) -> KeywordIndex:
    conn = sqlite3.connect(path)
    try:
        return KeywordIndex.build(row[:5] for row in conn.execute(*keyword_mirror.rows_sql(None)).fetchall())
    finally:
        conn.close()


def assert_same_states(states, path) -> None:
    """``states`` (``RecordStates``) holds each keyword row's record as the table does."""
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(*keyword_mirror.rows_sql(None)).fetchall()
    finally:
        conn.close()
    assert states.memory_ids == {row[0]: row[5] for row in rows if row[5] is not None}
    for row in rows:
        expected = (row[6], row[7], bool(row[8])) if row[5] is not None else None
        held = states._state[row[0]]
        assert (None if held < 0 else next(key for key, code in states._codes.items() if code == held)) == expected


def assert_same_scores(index: KeywordIndex, path) -> None:
    for terms in QUERIES:
        top = index.search(terms, depth=100)
        mine = dict(zip(top.rids.tolist(), top.scores.tolist()))
        theirs = fts_scores(path, terms)
        assert mine.keys() == theirs.keys(), terms
        for rid, score in theirs.items():
            assert mine[rid] == pytest.approx(score, rel=1e-12, abs=1e-12), (terms, rid)


async def write_corpus(memory) -> list[str]:
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    ids = []
    for number, text in enumerate(TEXTS):
        tags = (
            {"tags": ["湖"], "core_tags": ["lake"], "diffusion_tags": ["旅行"], "opposing_tags": ["沙漠"]}
            if number % 3 == 0
            else {}
        )
        ids.append((await service.upsert_memory(text, **tags))["id"])
    return ids


def test_fold_token_removes_latin_diacritics_only() -> None:
    assert fold_token("café") == "cafe" and fold_token("résumé") == "resume"
    assert fold_token("西湖") == "西湖" and fold_token("がっこう") == "がっこう"


async def test_bulk_built_index_scores_every_query_exactly_as_fts5_bm25(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        await write_corpus(memory)
        path = memory.runtime.db.path
    index = index_from_table(path)
    assert index.rows == len(TEXTS)
    assert_same_scores(index, path)
    top = index.search(["paint*", "melanie"], depth=100)
    assert top.frequencies["melanie"] == 2
    assert top.frequencies["paint*"] == 2  # painted, painting: one row each


async def test_index_follows_edits_and_deletes_and_still_matches_fts5(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        ids = await write_corpus(memory)
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        keywords = memory.runtime.records.memory_keywords
        assert keywords.ready
        await service.update_memory_by_id(memory_id=ids[0], content="周末去西湖边喝龙井，绿茶真香")
        await service.delete_memories(memory_ids=[ids[1]])  # soft: the row stays in FTS5 (and here)
        await service.delete_memories(memory_ids=[ids[2]], hard=True)  # hard: the row leaves both
        await service.upsert_memory("Caroline and Melanie went painting by the lake")
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        hits = await memory.runtime.records.search_terms(["西湖", "lake", "paint*"], flt, limit=50)
        index = keywords._loaded.index
        assert_same_scores(index, memory.runtime.db.path)
        assert ids[1] not in dict(hits) and ids[2] not in dict(hits) and ids[0] in dict(hits)


async def test_memory_route_returns_what_the_fts5_route_returns(tmp_path) -> None:
    queries = [["西湖", "绿茶"], ["lake", "caroline"], ["paint*", "melanie", "summer"], ["咖啡", "出门"]]
    results = {}
    for config in (QUIET, FTS_OFF):
        async with booku_memory.open(tmp_path / "data", config, embedder=UnavailableEmbedder()) as memory:
            if not results:
                await write_corpus(memory)
            assert memory.runtime.records.memory_keywords.ready is (config is QUIET)
            flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
            results[id(config)] = [await memory.runtime.records.search_terms(terms, flt, limit=3) for terms in queries]
    for mine, theirs in zip(results[id(QUIET)], results[id(FTS_OFF)]):
        assert [memory_id for memory_id, _ in mine] == [memory_id for memory_id, _ in theirs]
        assert [score for _, score in mine] == pytest.approx([score for _, score in theirs], rel=1e-12)


async def test_a_write_by_another_runtime_reaches_this_runtimes_index(tmp_path, lock_ignored) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as first:
        await write_corpus(first)
        with lock_ignored():  # a second runtime beside the owner, as a lock-ignoring process would be
            async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as second:
                written = await second.get_service(booku_memory.MEMORY_SERVICE).upsert_memory("独角兽在彩虹下奔跑")
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        hits = await first.runtime.records.search_terms(["独角兽"], flt, limit=5)
        assert [memory_id for memory_id, _ in hits] == [written["id"]]
        assert first.runtime.records.memory_keywords.loads == 1  # followed through the journal, not reloaded


async def test_a_gap_in_the_journal_reloads_and_fts5_answers_meanwhile(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        await write_corpus(memory)
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        keywords = memory.runtime.records.memory_keywords
        written = await service.upsert_memory("独角兽在彩虹下奔跑")
        await memory.runtime.db.writer.execute(f"DELETE FROM {keyword_mirror.JOURNAL_TABLE}")  # trimmed unseen
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        hits = await memory.runtime.records.search_terms(["独角兽"], flt, limit=5)
        assert [memory_id for memory_id, _ in hits] == [written["id"]]  # the FTS5 route, while reloading
        assert await keywords.wait_ready() and keywords.loads >= 2
        assert_same_scores(keywords._loaded.index, memory.runtime.db.path)


async def test_a_rebuilt_keyword_table_reloads_the_index(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        await write_corpus(memory)
        records = memory.runtime.records
        async with memory.runtime.db.transaction() as conn:
            await records.rebuild_keyword_index(conn)  # journals the reset marker: the next search reloads
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        before = await records.search_terms(["西湖"], flt, limit=5)  # the FTS5 route, while reloading
        assert before
        assert await records.memory_keywords.wait_ready() and records.memory_keywords.loads == 2
        after = await records.search_terms(["西湖"], flt, limit=5)
        assert [memory_id for memory_id, _ in after] == [memory_id for memory_id, _ in before]
        assert [score for _, score in after] == pytest.approx([score for _, score in before], rel=1e-12)
        assert_same_scores(records.memory_keywords._loaded.index, memory.runtime.db.path)


async def test_compaction_keeps_the_scores(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(keyword_index_module, "COMPACT_MIN_POSTINGS", 10)
    monkeypatch.setattr(keyword_index_module, "COMPACT_SHARE", 0.0)
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        ids = await write_corpus(memory)  # each write past the threshold compacts the delta into the base
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        await service.update_memory_by_id(memory_id=ids[4], content="Caroline went to the museum instead of the lake")
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        await memory.runtime.records.search_terms(["lake"], flt, limit=5)
        index = memory.runtime.records.memory_keywords._loaded.index
        assert index._delta_postings <= 10
        assert_same_scores(index, memory.runtime.db.path)


async def test_maintenance_trims_the_journal_to_its_newest_entries(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(
        keyword_mirror,
        "TRIM_JOURNAL_SQL",
        keyword_mirror.TRIM_JOURNAL_SQL.replace(str(keyword_mirror.JOURNAL_KEEP), "3"),
    )
    from booku_memory.services.storage import keyword_rows

    monkeypatch.setattr(keyword_rows, "TRIM_JOURNAL_SQL", keyword_mirror.TRIM_JOURNAL_SQL)
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        await write_corpus(memory)
        journal = f"SELECT COUNT(*), MAX(seq) FROM {keyword_mirror.JOURNAL_TABLE}"
        written, newest = await memory.runtime.db.fetch_one(journal)
        assert written >= len(TEXTS)
        report = await memory.runtime.run_maintenance()
        assert report["keyword_journal_trimmed"] == written - 3
        assert tuple(await memory.runtime.db.fetch_one(journal)) == (3, newest)


async def test_writes_made_while_the_index_loads_are_picked_up_from_the_journal(tmp_path) -> None:
    """The load reads a snapshot (rows and the journal's last seq in one read transaction): whatever is committed
    after it, while the index is being built, comes in through the journal at the next search."""
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        ids = await write_corpus(memory)
        keywords = memory.runtime.records.memory_keywords
        snapshot = keyword_mirror.load_index(memory.runtime.db.path, threading.Event())  # the loader's work
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        written = await service.upsert_memory("独角兽在彩虹下奔跑")  # committed after the snapshot
        await service.delete_memories(memory_ids=[ids[0]], hard=True)
        keywords._loaded = snapshot  # handed over afterwards
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        assert [memory_id for memory_id, _ in await memory.runtime.records.search_terms(["独角兽"], flt, limit=5)] == [
            written["id"]
        ]
        assert keywords.loads == 1 and keywords._loaded is snapshot  # followed, not reloaded
        assert_same_scores(snapshot.index, memory.runtime.db.path)


async def test_concurrent_writes_edits_deletes_and_searches_leave_the_index_equal_to_fts5(
    tmp_path, monkeypatch
) -> None:
    """Writers (group-committed), editors, deleters and searchers interleaved, with compactions along the way: at
    the end the in-memory index scores every query exactly as FTS5 scores the table."""
    monkeypatch.setattr(keyword_index_module, "COMPACT_MIN_POSTINGS", 40)
    monkeypatch.setattr(keyword_index_module, "COMPACT_SHARE", 0.2)
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        records = memory.runtime.records
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        ids = await write_corpus(memory)

        async def write(number: int) -> None:
            written = await service.upsert_memory(f"{TEXTS[number % len(TEXTS)]}，第{number}次记录 lake{number % 7}")
            ids.append(written["id"])

        async def search(number: int) -> None:
            await records.search_terms(QUERIES[number % len(QUERIES)], flt, limit=10)

        for round_number in range(4):
            await asyncio.gather(*(write(round_number * 20 + n) for n in range(20)), *(search(n) for n in range(10)))
            await service.update_memory_by_id(memory_id=ids[round_number], content=f"改写后的内容 {round_number} 咖啡")
            await service.delete_memories(memory_ids=[ids[-1]], hard=round_number % 2 == 0)
        await search(0)
        index = records.memory_keywords._loaded.index
        assert records.memory_keywords.loads == 1
        assert_same_scores(index, memory.runtime.db.path)
        conn = sqlite3.connect(memory.runtime.db.path)
        try:
            assert index.rows == conn.execute("SELECT COUNT(*) FROM booku_memory_fts").fetchone()[0]
        finally:
            conn.close()


async def test_record_state_changes_by_another_runtime_filter_the_memory_route_as_sql_does(
    tmp_path, lock_ignored
) -> None:
    """Archive, soft delete, restore and hard delete change no keyword row; a trigger journals them (migration
    0012), so the index's copy of each record's state follows them, whoever made them, and the in-memory filter
    keeps exactly the rows the SQL filter keeps."""
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as first:
        ids = await write_corpus(first)
        records = first.runtime.records
        everything = searchable_filter(DEFAULT_SCOPE, include_archived=True, include_knowledge=True)
        await records.search_terms(["西湖"], everything, limit=5)  # the index holds the corpus from here on
        with lock_ignored():  # a second runtime beside the owner, as a lock-ignoring process would be
            async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as second:
                other = second.get_service(booku_memory.MEMORY_SERVICE)
                await other.archive_memories(memory_ids=[ids[0], ids[4]])
                await other.delete_memories(memory_ids=[ids[1], ids[5]])
                await other.restore_memories(memory_ids=[ids[5]])
                await other.delete_memories(memory_ids=[ids[6]], hard=True)
        queries = [["西湖", "绿茶", "咖啡"], ["lake", "caroline", "paint*"], ["melanie", "sunrise", "morning"]]
        for include_archived in (False, True):
            flt = searchable_filter(DEFAULT_SCOPE, include_archived=include_archived, include_knowledge=True)
            assert flt.state_test() is not None
            for terms in queries:
                in_memory = await records.search_terms(terms, flt, limit=20)
                records.memory_keywords.enabled = False
                fts5 = await records.search_terms(terms, flt, limit=20)
                records.memory_keywords.enabled = True
                assert [memory_id for memory_id, _ in in_memory] == [memory_id for memory_id, _ in fts5]
                assert [score for _, score in in_memory] == pytest.approx([score for _, score in fts5], rel=1e-12)
        found = dict(await records.search_terms(["西湖", "lake", "caroline"], flt, limit=20))
        assert ids[0] in found and ids[4] in found  # archived: seen with include_archived
        assert ids[1] not in found and ids[6] not in found  # deleted (soft, hard) never
        live = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        found = dict(await records.search_terms(["西湖", "lake", "caroline"], live, limit=20))
        assert ids[0] not in found and ids[4] not in found and ids[5] in found
        assert records.memory_keywords.loads == 1  # followed through the journal, not reloaded
        assert_same_states(records.memory_keywords._loaded.states, first.runtime.db.path)
        assert_same_scores(records.memory_keywords._loaded.index, first.runtime.db.path)


async def test_a_filter_beyond_record_states_is_checked_in_sql_on_the_memory_route(tmp_path) -> None:
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=UnavailableEmbedder()) as memory:
        service = memory.get_service(booku_memory.MEMORY_SERVICE)
        await write_corpus(memory)
        person = await service.create_memory(
            title="Caroline",
            content="Caroline likes the lake at dawn",
            memory_type="person",
            person_id="qq:10001",
            tags=["朋友"],
            core_tags=["Caroline"],
            diffusion_tags=["湖"],
            opposing_tags=["沙漠"],
        )
        flt = searchable_filter(DEFAULT_SCOPE, include_archived=False, include_knowledge=False)
        flt.memory_types = ("person",)
        assert flt.state_test() is None
        hits = await memory.runtime.records.search_terms(["lake", "caroline"], flt, limit=10)
        assert [memory_id for memory_id, _ in hits] == [person["id"]]


@pytest.mark.parametrize(
    "flt",
    [
        RecordFilter(store_keys=None, buckets=None, visible=[Visible("memory", ("active",)), Visible("knowledge")]),
        RecordFilter(buckets=("memory",), statuses=("active", "archived")),
        RecordFilter(buckets=None, visible=[]),
        RecordFilter(buckets=None, include_deleted=True),
        RecordFilter(buckets=("knowledge", "memory"), only_deleted=True),
    ],
)
def test_a_filters_state_test_admits_exactly_the_rows_its_sql_admits(flt) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE TABLE booku_memory_records (rid INTEGER PRIMARY KEY, bucket TEXT, status TEXT, is_deleted INTEGER)"
    )
    kinds = [
        (bucket, status, deleted)
        for bucket in ("memory", "knowledge", "emergent")
        for status in ("active", "archived", "expired")
        for deleted in (0, 1)
    ]
    conn.executemany("INSERT INTO booku_memory_records (bucket, status, is_deleted) VALUES (?, ?, ?)", kinds)
    where, params = flt.where()
    by_sql = {
        tuple(row)
        for row in conn.execute(f"SELECT bucket, status, is_deleted FROM booku_memory_records r WHERE {where}", params)
    }
    test = flt.state_test()
    assert {kind for kind in kinds if test(kind[0], kind[1], bool(kind[2]))} == by_sql


def test_a_filter_with_any_other_condition_has_no_state_test() -> None:
    for extra in (
        {"memory_types": ("person",)},
        {"folder_id": "f"},
        {"person_id": "qq:1"},
        {"tag": "x"},
        {"extra_sql": ["r.pinned = 0"]},
        {"created_before": 1.0},
        {"exclude_memory_types": ("plan",)},
        {"relation_of": "m"},
    ):
        assert RecordFilter(**extra).state_test() is None


def test_rows_tied_at_the_cut_go_to_the_oldest() -> None:
    """Three score levels (one, two or three hits of the term, same row length), shuffled over the rids: whatever
    the depth, the rows kept are the best, and among those tied at the cut, the oldest."""
    texts = ["绿茶 西湖 西湖", "绿茶 绿茶 西湖", "绿茶 绿茶 绿茶"]
    order = np.random.default_rng(7).permutation(np.arange(1, 121) % 3)
    rows = [(rid, None, texts[level], None, "s0") for rid, level in enumerate(order.tolist(), start=1)]
    index = KeywordIndex.build(rows)
    expected = [
        rid for level in (2, 1, 0) for rid, row_level in enumerate(order.tolist(), start=1) if row_level == level
    ]
    for depth in (1, 5, 17, 39, 40, 41, 77, 119):
        assert index.search(["绿茶"], depth=depth).rids.tolist() == expected[:depth]


def test_a_search_scores_the_same_whichever_way_it_sums_postings_by_row(monkeypatch) -> None:
    """Postings summed by a sort (few of them) and by a dense count over every row id (many) give the same rows and
    scores, prefix terms included."""
    words = ["绿茶", "西湖", "龙井", "walking", "walked", "walks", "tea"]
    rng = np.random.default_rng(11)
    rows = [
        (rid, None, " ".join(rng.choice(words, size=int(rng.integers(1, 6))).tolist()), "tea", f"s{rid % 3}")
        for rid in range(1, 301)
    ]
    index = KeywordIndex.build(rows)
    queries = (["绿茶", "西湖"], ["walk*", "tea"], ["龙井", "walk*", "绿茶", "tea"])
    by_count = [index.search(terms, depth=40, stores=["s0", "s1"]) for terms in queries]
    monkeypatch.setattr(keyword_index_module, "DENSE_SUM_RATIO", 0)  # never dense: always sort
    by_sort = [index.search(terms, depth=40, stores=["s0", "s1"]) for terms in queries]
    for counted, sorted_ in zip(by_count, by_sort):
        assert len(counted.rids) and counted.rids.tolist() == sorted_.rids.tolist()
        assert counted.scores.tolist() == sorted_.scores.tolist()
        assert counted.matched == sorted_.matched

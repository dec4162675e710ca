"""Every read of the memory service: hybrid EPA retrieval, structured search, grep, listings and status.

Retrieval runs two routes inside the caller's scope: the vector route (EPA: pass 1 gathers evidence, the query is
reshaped by the tag triplet, pass 2 re-queries and scores with tag bonuses) and the FTS5 keyword route over
jieba-segmented text, plus a time route when the query names definite days (``logic.time_anchor``).
``logic.fusion.fuse_routes`` weighs them by how confident each is for this query and adds the date, write-order and
text-shape steps, the keyword route's sure best may then take rank 1 (``logic.fusion.keyword_challenge``), the
memories of the person the query names rise behind it (``logic.speaker``), and
``logic.dedup.select_distinct`` drops near-copies while keeping relevance order. Soft-deleted records have no vector
and are filtered out of the keyword route before its best rows are taken, so they never take a result slot.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

import numpy as np

from .embedding.base import Embedder
from .errors import (
    EmbeddingUnavailableError,
    ValidationError,
    VectorIndexUnavailableError,
)
from .logic.blas import single_threaded_blas
from .logic.dedup import select_distinct
from .logic.epa import (
    EpaParams,
    QueryTags,
    compute_beta,
    has_resonance,
    logic_depth,
    reshape_query_detailed,
    tag_bonus,
)
from .logic.fusion import (
    FusedHit,
    FusionParams,
    best_by_routes,
    fuse_routes,
    keyword_challenge,
    order_by_currency,
    settle_keyword_challenge,
)
from .logic.inflection import with_inflections
from .logic.neighbours import answers_to_questions, write_neighbours
from .logic.relevance import (
    WORD_COVERAGE,
    background_similarity,
    effective_margin,
    relevant_hits,
    small_talk_lines,
)
from .logic.safe_regex import compile_safe_regex
from .logic.segmentation import (
    CoverageWeigher,
    document_idf,
    query_terms,
    terms_reliability,
)
from .logic.shape import TextShape
from .logic.speaker import content_coverage, plan_speaker_lift, speaker_lift
from .logic.supersession import asks_about_the_past, asks_when_it_happened, says_now, without_now_words
from .logic.tags import CandidateTags, TagTriplet, stored_tags
from .logic.time_anchor import ZONE_SLACK_SECONDS, Anchor, parse_time_anchors, time_matches, time_windows
from .memory_fields import record_item
from .scope import Scope
from .storage.record_filter import RecordFilter, Visible
from .storage.rows import CandidateRow, RecordRow
from .storage.vector_index import VectorHit

if TYPE_CHECKING:
    from .runtime import BookuRuntime

GREP_FIELDS = ("title", "summary", "content", "tags", "metadata", "name", "why_remembered")


@dataclass
class RankedHit:
    memory_id: str
    score: float
    parts: dict[str, float] = field(default_factory=dict)
    tier: str = ""


@dataclass
class RankingResult:
    hits: list[RankedHit]
    records: dict[str, RecordRow]
    logic_depth: float = 0.0
    resonance: bool = False
    beta: float = 0.0
    degraded: str = ""


@dataclass
class RetrievalState:
    """What one retrieval knows so far: the steps of ``MemorySearch.rank`` read it and fill it in turn, so that
    each step names what it needs instead of passing the routes' containers from hand to hand."""

    query_text: str
    triplet: TagTriplet
    limit: int
    pool: int  # how many hits each route returns
    flt: RecordFilter
    tiers: list[str]  # the vector partitions the query may see
    zone: tzinfo
    anchors: list[Anchor]  # the dates the query names
    all_terms: list[str]
    search_terms: list[str]  # the query's terms without "now" words, with their inflections
    reliability: float  # how far the keyword route can be trusted for these terms
    fusion: FusionParams
    query_vec: np.ndarray | None = None
    keyword_hits: dict[str, float] = field(default_factory=dict)  # id → BM25 of the keyword route
    time_ids: list[str] = field(default_factory=list)  # the time route's memories the keyword route missed
    # memories written next to a strong hit that no route returned: they rank by their neighbours alone
    context_ids: list[str] = field(default_factory=list)
    candidates: dict[str, CandidateRow] = field(default_factory=dict)  # slim rows of every route's hits
    dense: dict[str, float] = field(default_factory=dict)  # id → cosine plus tag bonus
    searched_vec: np.ndarray | None = None  # the unit vector the vector hits' cosines are to (reshaped by pass 2)
    embeddings: dict[str, np.ndarray] = field(default_factory=dict)
    # id → stored vector read from Chroma in this retrieval (None: not readable), so no step reads one twice
    stored_vectors: dict[str, np.ndarray | None] = field(default_factory=dict)
    tiers_by_id: dict[str, str] = field(default_factory=dict)  # id → partition of its vector
    time_matches: dict[str, float] = field(default_factory=dict)
    answers: dict[str, str] = field(default_factory=dict)  # id of an answer → id of the question before it
    result: RankingResult = field(default_factory=lambda: RankingResult(hits=[], records={}))

    @property
    def sql_hit_ids(self) -> list[str]:
        """The keyword and time routes' hits, which passed every filter in SQL."""
        return [*self.keyword_hits, *self.time_ids]

    def ranked_candidates(self) -> dict[str, CandidateRow]:
        """The rows of every route's hits, in route order (vector, keyword, time), then the context memories."""
        ranked = dict.fromkeys([*self.dense, *self.keyword_hits, *self.time_ids, *self.context_ids])
        return {memory_id: row for memory_id in ranked if (row := self.candidates.get(memory_id)) is not None}

    def routed_rows(self) -> dict[str, CandidateRow]:
        """``candidates`` narrowed to the ranked memories, in the order they were read."""
        ranked = set(self.dense).union(self.keyword_hits, self.time_ids, self.context_ids)
        return {memory_id: row for memory_id, row in self.candidates.items() if memory_id in ranked}

    def content_heads(self) -> dict[str, str | None]:
        """id → the start of each routed candidate's text, where a speaker label stands."""
        return {memory_id: row.get("content_head") for memory_id, row in self.routed_rows().items()}

    def forget_vector_route(self) -> None:
        """Drops what the vector route gathered, when the vector index broke after the first pass."""
        for partial in (self.candidates, self.dense, self.embeddings, self.tiers_by_id):
            partial.clear()


def searchable_filter(
    scope: Scope, *, include_archived: bool, include_knowledge: bool, include_memories: bool = True
) -> RecordFilter:
    """Filter twin of the vector partitions a query may see."""
    visible = []
    if include_memories:
        visible.append(Visible("memory", ("active", "archived", "expired") if include_archived else ("active",)))
    if include_knowledge:
        visible.append(Visible("knowledge"))
    return RecordFilter(store_keys=scope.readable_store_keys, buckets=None, visible=visible)


def memories_only(flt: RecordFilter) -> RecordFilter:
    """``flt`` narrowed to memories: a knowledge chunk's time is when its document was ingested, not a time the
    user lived, so a date in the query never lifts or fetches knowledge chunks."""
    return replace(flt, buckets=("memory",), extra_sql=list(flt.extra_sql), extra_params=list(flt.extra_params))


def tiers_for(*, include_archived: bool, include_knowledge: bool, include_memories: bool = True) -> list[str]:
    tiers = []
    if include_memories:
        tiers.append("live")
        if include_archived:
            tiers.append("archive")
    if include_knowledge:
        tiers.append("knowledge")
    return tiers


# Small-talk vectors per (model, dimension): fixed texts, so one copy per process serves every runtime.
_SMALL_TALK_VECTORS: dict[tuple[str, int | None], np.ndarray] = {}


def calibration(order, dense: dict[str, float]) -> float:
    """Factor that maps fused scores onto the familiar similarity scale.

    Fused scores are relative (standardised per query), but clients of the original Booku filter on
    ``score >= threshold`` with cosine-like values. So the best hit's fused score is mapped to the best dense score
    (cosine plus tag bonus) and the rest scale with it: the order is the fused order, the top value means what it
    meant before. Keyword-only answers (no vectors) top out at 1.0.
    """
    top = max((hit.score for hit in order), default=0.0)
    if top <= 0:
        return 0.0
    anchor = max(dense.values()) if dense else 1.0
    return max(anchor, 0.0) / top


def candidate_tags(record: CandidateRow | None) -> CandidateTags | None:
    if record is None:
        return None
    return stored_tags(
        record.get("core_tags"), record.get("diffusion_tags"), record.get("opposing_tags"), record.get("tags")
    )


class MemorySearch:
    def __init__(self, runtime: BookuRuntime, scope: Scope) -> None:
        self.rt = runtime
        self.scope = scope

    @property
    def epa_params(self) -> EpaParams:
        r = self.rt.config.retrieval
        return EpaParams(
            base_beta=r.base_beta,
            logic_depth_scale=r.logic_depth_scale,
            core_boost_min=r.core_boost_min,
            core_boost_max=r.core_boost_max,
            diffusion_boost=r.diffusion_boost,
            opposing_penalty=r.opposing_penalty,
            energy_cutoff=self.rt.config.write_conflict.energy_cutoff,
        )

    # ---------------------------------------------------------------- ranking
    async def rank(
        self,
        query_text: str,
        *,
        limit: int,
        include_archived: bool,
        include_knowledge: bool,
        triplet: TagTriplet,
        flt_extra: RecordFilter | None = None,
        include_memories: bool = True,
        count_activation: bool = False,
        min_score: float | None = 0.0,
    ) -> RankingResult:
        """The hybrid EPA ranking shared by retrieve_memories, search_memory_entries and the dashboard.

        Each step reads and fills one ``RetrievalState``: the routes gather candidates, the vector hits are scored
        by meaning, the routes are fused and reordered, the irrelevant dropped, near-copies left out and the full
        rows of the kept hits read.

        ``count_activation``: bump the activation of the memories returned (``records.bump_activation``), on the
        writer's thread while the reader reads their rows: every retrieval ended with the two one after the other.
        ``min_score``: the relevance floor (``logic.relevance``); ``None`` = ``retrieval.min_score``, 0 = off. Off
        unless asked: the retrieval surfaces (``retrieve``, ``search_entries``) ask for the configured floor, while
        callers that rank for their own purposes (recall's budget with its own score floor, the companion's reads,
        evidence) keep every hit.
        """
        state = self._begin(
            query_text,
            limit=limit,
            triplet=triplet,
            flt_extra=flt_extra,
            include_archived=include_archived,
            include_knowledge=include_knowledge,
            include_memories=include_memories,
        )
        pass1 = await self._run_routes(state)
        await self._score_by_meaning(state, pass1)
        await self._read_route_candidates(state)
        await self._read_time_matches(state)
        await self._read_write_neighbours(state)
        fused = self._fuse(state)
        fused = await self._settle_keyword_challenge(fused, state.search_terms, state.reliability, state.fusion)
        fused = await self._lift_speakers(fused, query_text, state.search_terms, state.content_heads(), state.fusion)
        fused = self._order_by_currency(state, fused)
        fused = await self._drop_irrelevant(state, fused, min_score)
        if fused:
            await self._keep_distinct(state, fused, count_activation)
        return state.result

    def _begin(
        self,
        query_text: str,
        *,
        limit: int,
        triplet: TagTriplet,
        flt_extra: RecordFilter | None,
        include_archived: bool,
        include_knowledge: bool,
        include_memories: bool,
    ) -> RetrievalState:
        """The state a retrieval starts from: its filter, partitions, pool size, query terms and time anchors.

        A date the query names ("5月2日", "昨天") lifts the memories of that time (``logic.time_anchor``); when it
        names definite days, those days' memories are read as a third route, so they compete even when neither
        the words nor the meaning of the query found them."""
        flt = searchable_filter(
            self.scope,
            include_archived=include_archived,
            include_knowledge=include_knowledge,
            include_memories=include_memories,
        )
        if flt_extra is not None:
            flt.memory_types = flt_extra.memory_types
            flt.statuses = flt_extra.statuses
            flt.person_id = flt_extra.person_id
            flt.relation_of = flt_extra.relation_of
            flt.folder_id = flt_extra.folder_id
            flt.extra_sql = [*flt.extra_sql, *flt_extra.extra_sql]
            flt.extra_params = [*flt.extra_params, *flt_extra.extra_params]
        tiers = tiers_for(
            include_archived=include_archived, include_knowledge=include_knowledge, include_memories=include_memories
        )
        zone = self.rt.time_zone.zone
        time_weight = self.rt.config.retrieval.time_anchor_weight
        anchors = parse_time_anchors(query_text, datetime.now(zone)) if time_weight > 0 else []
        all_terms = query_terms(query_text)
        terms = without_now_words(all_terms)
        return RetrievalState(
            query_text=query_text,
            triplet=triplet,
            limit=limit,
            pool=max(limit * 3, self.rt.config.retrieval.candidate_pool),
            flt=flt,
            tiers=tiers,
            zone=zone,
            anchors=anchors,
            all_terms=all_terms,
            search_terms=with_inflections(terms),
            reliability=terms_reliability(terms),
            fusion=FusionParams(time_weight=time_weight),
        )

    async def _run_routes(self, state: RetrievalState) -> list[VectorHit]:
        """Runs the keyword and time routes and the first vector pass side by side; fills ``keyword_hits``,
        ``time_ids``, ``query_vec`` and ``degraded``, and returns the first pass's hits.

        The keyword route (SQLite thread) runs while the query is embedded and the first vector pass runs (model and
        Chroma threads): on two cores the shorter of the two is hidden behind the longer. The vector task is created
        first so that it runs first: its query-vector lookup in the embedding cache (on the reader connection, before
        any model call) is queued ahead of the keyword search on that connection's thread, not behind it, where it
        would wait for the whole search and hold back the vector route."""
        try:
            async with asyncio.TaskGroup() as group:
                first_task = group.create_task(self._first_pass(state.query_text, state.tiers, state.pool))
                keyword_task = group.create_task(
                    self.rt.records.search_terms(state.search_terms, state.flt, limit=state.pool)
                )
                time_task = group.create_task(
                    self.rt.records.rows_in_time_windows(
                        time_windows(state.anchors, state.zone, ZONE_SLACK_SECONDS),
                        memories_only(state.flt),
                        limit=state.pool,
                    )
                )
        except BaseExceptionGroup as failed:  # callers expect the route's own error, not a group
            raise failed.exceptions[0] from None
        state.keyword_hits = dict(keyword_task.result())
        # The windows were widened to every zone's calendar; each memory's own day decides (``time_anchor``).
        on_the_day = time_matches(state.anchors, {row["memory_id"]: row for row in time_task.result()}, state.zone)
        state.time_ids = [memory_id for memory_id in on_the_day if memory_id not in state.keyword_hits]
        state.query_vec, pass1, state.result.degraded = first_task.result()
        return pass1

    async def _score_by_meaning(self, state: RetrievalState, pass1: list[VectorHit]) -> None:
        """The vector route (EPA) and the cosine of the keyword and time routes' memories it missed, when a query
        vector could be had. When the vector index breaks after the first pass, what they gathered is dropped and
        the keyword route answers alone."""
        if state.query_vec is None:
            return
        try:
            await self._vector_route(state, state.query_vec, pass1)
        except VectorIndexUnavailableError as exc:
            state.forget_vector_route()
            state.result.degraded = str(exc)

    async def _read_route_candidates(self, state: RetrievalState) -> None:
        """The slim rows of the keyword and time routes' hits when the vector route did not read them.

        Keyword and time-route hits passed every filter in SQL; vector hits passed ``_passes``. All are ranked
        without their full rows, which are read for the kept results only."""
        if not state.candidates and state.sql_hit_ids:
            state.candidates = await self.rt.records.candidates(state.sql_hit_ids, with_tags=False)

    async def _read_write_neighbours(self, state: RetrievalState) -> None:
        """The memories written next to the best ``limit`` candidates that no route returned (``context_ids``).

        Why: a candidate rises toward a strong hit written beside it (``logic.neighbours``): the answer turn after
        the turn that repeats the question's words. In a small store both are usually among the routes' candidates;
        among many other memories the answer, which shares neither the question's words nor much of its meaning, is
        seldom one of them, and a neighbour outside the candidates cannot be lifted. They enter the fusion with no
        route score, so they rank by their neighbours (and their time and shape) alone. Only when the vector route
        answered: without it (no model, or the model is down) the candidates are exactly the memories that hold the
        query's words, and a memory that holds none of them would be returned on its position alone."""
        radius = state.fusion.neighbour_radius
        if radius < 1 or not state.candidates or not state.dense:
            return
        rows = state.ranked_candidates()
        # The strong hits by the routes and the date alone: the lifts and the shape prior only reorder them.
        by_routes = best_by_routes(
            state.dense,
            state.keyword_hits,
            keyword_reliability=state.reliability,
            params=state.fusion,
            time_matches=state.time_matches,
            limit=state.limit,
        )
        seeds = [
            (row["store_key"], row["bucket"], int(row["rid"]))
            for memory_id in by_routes
            if (row := rows.get(memory_id)) is not None
        ]
        found = await self.rt.records.written_beside(seeds, radius, state.flt, exclude=rows)
        if not found:
            return
        unread = [memory_id for memory_id in found if memory_id not in state.candidates]
        if unread:
            state.candidates.update(await self.rt.records.candidates(unread, with_tags=False))
        state.context_ids = [memory_id for memory_id in found if memory_id in state.candidates]
        await self._read_time_matches(state, state.context_ids)

    def _fuse(self, state: RetrievalState) -> list[FusedHit]:
        """The routes fused (``logic.fusion.fuse_routes``) with the date, write-order and text-shape steps.

        Memories written next to a strong hit rise toward it (``logic.neighbours``): rid is the write order. The
        memory written right after one that ends with a question is usually its answer: it follows it; and a
        memory's own text shape (asking or telling, short or long) weighs in (``logic.shape``)."""
        ranked = state.ranked_candidates()
        positions = {memory_id: ((row["store_key"], row["bucket"]), row["rid"]) for memory_id, row in ranked.items()}
        asking = [memory_id for memory_id, row in ranked.items() if row["question_share"] is not None]
        shapes = {
            memory_id: TextShape(row["question_share"] or 0.0, int(row["content_chars"] or 0))
            for memory_id, row in ranked.items()
        }
        state.answers = answers_to_questions(positions, asking, state.fusion.neighbour_radius)
        return fuse_routes(
            state.dense,
            state.keyword_hits,
            keyword_reliability=state.reliability,
            params=state.fusion,
            neighbours=write_neighbours(positions, state.fusion.neighbour_radius),
            time_matches=state.time_matches,
            answers=state.answers,
            shapes=shapes,
            context=state.context_ids,
        )

    async def _read_time_matches(self, state: RetrievalState, memory_ids: Sequence[str] | None = None) -> None:
        """How well each ranked memory's time matches the dates the query names, weighed in its own time zone; only
        ``memory_ids`` when given (the memories ranked since the last call), added to what is known."""
        if not state.anchors:
            return
        rows = (
            state.ranked_candidates()
            if memory_ids is None
            else {i: row for i in memory_ids if (row := state.candidates.get(i)) is not None}
        )
        dated = {memory_id: row for memory_id, row in rows.items() if row["bucket"] == "memory"}
        zones = await self.rt.records.time_zones(dated)
        state.time_matches.update(
            time_matches(
                state.anchors,
                {memory_id: {**row, "time_zone": zones.get(memory_id, "")} for memory_id, row in dated.items()},
                state.zone,
            )
        )

    @staticmethod
    def _order_by_currency(state: RetrievalState, fused: list[FusedHit]) -> list[FusedHit]:
        """A memory a later one replaced stands below it, or above it when the question asks about the past; a
        question that asks when something happened, with no word for now or before, keeps the fused order."""
        successor_of = {
            memory_id: row["superseded_by"]
            for memory_id, row in state.routed_rows().items()
            if row.get("superseded_by")
        }
        if not successor_of:
            return fused
        past, now = asks_about_the_past(state.query_text), says_now(state.all_terms)
        if not (past or now) and asks_when_it_happened(state.query_text):
            return fused
        return order_by_currency(fused, successor_of, past=past, now=now)

    async def _drop_irrelevant(
        self, state: RetrievalState, fused: list[FusedHit], min_score: float | None
    ) -> list[FusedHit]:
        """Last, what matches by none of meaning, words, time or context is dropped instead of filling ``limit``."""
        margin = effective_margin(
            min_score, self.rt.config.retrieval.min_score, getattr(self.rt.embedder, "model_id", None)
        )
        if margin <= 0:
            return fused
        return await self._relevant(state, fused[: max(state.limit * 3, 1)], margin)

    async def _keep_distinct(self, state: RetrievalState, fused: list[FusedHit], count_activation: bool) -> None:
        """Fills ``state.result`` with the best ``limit`` hits that are no near-copy of a better one
        (``logic.dedup.select_distinct``), their full rows and their scores on the similarity scale."""
        scale = calibration(fused, state.dense)
        ids = [hit.id for hit in fused]
        dim = self.rt.vectors.dimension or 1
        matrix = np.zeros((len(ids), dim), dtype=np.float32)
        for row, memory_id in enumerate(ids):
            if memory_id in state.embeddings:
                matrix[row] = state.embeddings[memory_id]
        scores = np.array([hit.score for hit in fused], dtype=np.float64)
        # found in SQL like keyword hits: eligible even without a vector
        found_in_sql = {*state.time_ids, *state.context_ids}
        keep = select_distinct(
            scores,
            matrix,
            state.limit,
            self.rt.config.retrieval.deduplication_threshold,
            keyword_mask=np.array([memory_id in state.keyword_hits or memory_id in found_in_sql for memory_id in ids]),
        )
        state.result.records = await self._read_kept(state, [ids[index] for index in keep], count_activation)
        for index in keep:
            hit = fused[index]
            record = state.result.records.get(hit.id)
            if record is None:  # deleted since it was ranked
                continue
            tier = state.tiers_by_id.get(hit.id) or (
                "knowledge"
                if record["bucket"] == "knowledge"
                else "live"
                if record["status"] == "active"
                else "archive"
            )
            parts = {**hit.parts, "fused": float(hit.score)}
            state.result.hits.append(RankedHit(hit.id, float(hit.score) * scale, parts, tier))

    async def _read_kept(
        self, state: RetrievalState, kept_ids: list[str], count_activation: bool
    ) -> dict[str, RecordRow]:
        """The full rows of the kept hits; with ``count_activation``, their memories' activation is bumped on the
        writer's thread while the reader reads them."""
        reading = self.rt.records.get_many(kept_ids)
        if not count_activation:
            return await reading
        recalled = [
            memory_id
            for memory_id in kept_ids
            if (row := state.candidates.get(memory_id)) is not None and row["bucket"] == "memory"
        ]
        records, _ = await asyncio.gather(reading, self.rt.records.bump_activation(recalled))
        return records

    async def _settle_keyword_challenge(
        self, fused: list[FusedHit], terms: Sequence[str], reliability: float, params: FusionParams
    ) -> list[FusedHit]:
        """``fused`` with the keyword route's best hit moved to rank 1 when it wins its challenge
        (``fusion.keyword_challenge``, step 7): it must also cover the query's ``terms``, weighed by their idf in
        the keyword index, better than the fused best does (a tie keeps the fused order). Reads the two rows'
        keyword-index text in one query; the terms' document frequencies were counted when the keyword search was
        planned. Returns the (possibly reordered) hits."""
        challenge = keyword_challenge(fused, reliability, params)
        if challenge is None:
            return fused
        texts = await self.rt.records.keyword_texts([challenge.challenger, challenge.incumbent])
        frequencies, documents = await self.rt.records.term_statistics(terms, self.scope.readable_store_keys)
        return settle_keyword_challenge(fused, challenge, terms, texts, document_idf(frequencies, documents))

    async def _lift_speakers(
        self,
        fused: list[FusedHit],
        query_text: str,
        terms: Sequence[str],
        heads: dict[str, str | None],
        params: FusionParams,
    ) -> list[FusedHit]:
        """``fused`` with the memories of the person the query names lifted (``speaker.speaker_lift``, step 8).
        ``heads``: id → the start of each candidate's text. When a lift could pass a rival, reads the keyword-index
        text of the ``speaker.contested`` rows in one query (13 rows at the median on LoCoMo, 46 at most) to
        weigh their coverage of the query's content terms; the terms' document frequencies were counted when the
        keyword search was planned."""
        plan = plan_speaker_lift(query_text, terms, fused, heads, params.speaker_weight)
        coverage = None
        if plan.needs_coverage:
            texts = await self.rt.records.keyword_texts(plan.contested)
            frequencies, documents = await self.rt.records.term_statistics(
                plan.content_terms, self.scope.readable_store_keys
            )
            coverage = content_coverage(
                plan.content_terms,
                {memory_id: texts.get(memory_id) for memory_id in plan.contested},
                document_idf(frequencies, documents),
            )
        return speaker_lift(fused, plan.speakers, params.speaker_weight, coverage)

    async def _relevant(self, state: RetrievalState, fused: list[FusedHit], margin: float) -> list[FusedHit]:
        """``fused`` without the hits that match the query by none of meaning, words, time or context
        (``logic.relevance``). Every hit is judged by its cosine with the query's vector, the one the background is
        measured with: the vectors the vector route read are at hand, those of the hits only the other routes found
        are read once. Reads the keyword-index text of the keyword hits among them in one query, to weigh how much
        of the query's terms each holds (the terms' document frequencies were counted when the keyword search was
        planned)."""
        query_vec, terms, keyword_hits = state.query_vec, state.search_terms, state.keyword_hits
        background = None
        cosines: dict[str, float] = {}
        embedder = self.rt.embedder
        if query_vec is not None and embedder is not None:
            background = background_similarity(query_vec, await self._small_talk_vectors(embedder))
            vectors = {hit.id: state.embeddings[hit.id] for hit in fused if hit.id in state.embeddings}
            unread = [hit.id for hit in fused if hit.id not in vectors]
            try:
                vectors.update(await self._stored_vectors(state, unread) if unread else {})
            except VectorIndexUnavailableError:  # the index broke since the vector route: judged by the rest
                pass
            cosines = {memory_id: float(np.dot(vector, query_vec)) for memory_id, vector in vectors.items()}
        word_matches: list[str] = []
        matched = [hit.id for hit in fused if hit.id in keyword_hits]
        if matched and terms:
            texts = await self.rt.records.keyword_texts(matched)
            frequencies, documents = await self.rt.records.term_statistics(terms, self.scope.readable_store_keys)
            weigh = CoverageWeigher(terms, document_idf(frequencies, documents))
            word_matches = [memory_id for memory_id in matched if weigh(texts.get(memory_id)) >= WORD_COVERAGE]
        return relevant_hits(
            fused,
            margin=margin,
            background=background,
            cosines=cosines,
            word_matches=word_matches,
            answers=state.answers,
            keyword_best=next(iter(keyword_hits), None),
        )

    async def _small_talk_vectors(self, embedder: Embedder) -> np.ndarray:
        """The vectors of ``relevance.small_talk_lines()`` under this runtime's embedder, embedded once per model (a
        model's vectors of fixed texts never change; the embedding cache keeps them across restarts)."""
        key: tuple[str, int | None] = (embedder.model_id, self.rt.vectors.dimension)
        vectors = _SMALL_TALK_VECTORS.get(key)
        if vectors is None:
            vectors = np.asarray(await embedder.embed_documents(small_talk_lines()), dtype=np.float32)
            _SMALL_TALK_VECTORS[key] = vectors
        return vectors

    async def _score_missed_hits(self, state: RetrievalState, query_tags: QueryTags, params: EpaParams) -> None:
        """Exact cosine (with the vector the search used, and the same tag bonus) of the keyword and time routes'
        memories that the vector search did not return.

        Why: in a big store the approximate (HNSW) search misses memories whose words the keyword route found, and
        a candidate without a dense score stood at the vector route's floor, below every memory that merely
        resembled the query. A keyword candidate keeps its score only when it beats that floor, so it ranks exactly
        as before when the search missed nothing (it was simply beyond the pool); a time-route candidate always
        keeps it, having no words to rank by. Reading the stored vectors is exact and bounded by the other routes'
        pools. A memory whose vector is not readable yet (still staged by the write-behind flusher) keeps no dense
        score and ranks on its words or time alone.
        """
        searched = state.query_vec if state.searched_vec is None else state.searched_vec
        if searched is None:
            return
        missed = [
            memory_id
            for memory_id in dict.fromkeys(state.sql_hit_ids)
            if memory_id in state.candidates and memory_id not in state.dense
        ]
        with_tags = not state.triplet.is_empty
        untagged = [memory_id for memory_id in missed if "tags" not in state.candidates[memory_id]]
        if with_tags and untagged:  # pass 2 read them when it ran; without it they were read without tags
            state.candidates.update(await self.rt.records.candidates(untagged, with_tags=True, as_of_last_read=True))
        floor = min(state.dense.values(), default=-np.inf)
        time_ids = set(state.time_ids)
        for memory_id, vector in (await self._stored_vectors(state, missed)).items():
            bonus = (
                tag_bonus(candidate_tags(state.candidates.get(memory_id)), query_tags, params, state.result.beta)
                if with_tags
                else 0.0
            )
            score = float(np.dot(vector, searched)) + bonus
            if score > floor or memory_id in time_ids:
                state.embeddings[memory_id] = vector
                state.dense[memory_id] = score

    async def _stored_vectors(self, state: RetrievalState, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """id → stored vector of ``ids`` (those with a candidate row), read once per retrieval
        (``state.stored_vectors``: the missed-hit scoring and the relevance floor ask for the same keyword hits).

        The vector the index holds (the passage vector of the text the drain indexed) is taken from the copy held
        in memory (``MemoryKeywordIndex.held_vectors``), else read from SQLite
        (``SqliteEmbeddingCache.indexed_vectors``), and from Chroma, store by store, only for the rest (a text whose
        cached vector was retracted). A vector not readable yet (still staged by the write-behind flusher) is
        absent, like a missing one."""
        unread = [
            memory_id
            for memory_id in dict.fromkeys(ids)
            if memory_id in state.candidates and memory_id not in state.stored_vectors
        ]
        model, dimension = self.rt.vectors.model_id, self.rt.vectors.dimension
        held = self.rt.records.memory_keywords.held_vectors(unread) if unread else None
        if held is not None:
            found, not_held = held
            state.stored_vectors.update(found)
        else:
            not_held = unread
        if not_held and model and dimension:
            state.stored_vectors.update(await self.rt.embedding_cache.indexed_vectors(not_held, model, dimension))
        by_store: dict[str, list[str]] = {}
        for memory_id in not_held:
            if memory_id not in state.stored_vectors:
                by_store.setdefault(state.candidates[memory_id]["store_key"], []).append(memory_id)
        for store_key, group in by_store.items():
            found = await self.rt.vectors.get_embeddings(store_key, group, tiers=state.tiers)
            for memory_id in group:
                vector = found.get(memory_id)
                state.stored_vectors[memory_id] = None if vector is None else np.asarray(vector, dtype=np.float32)
        return {
            memory_id: vector
            for memory_id in ids
            if memory_id in state.candidates and (vector := state.stored_vectors.get(memory_id)) is not None
        }

    async def _first_pass(
        self, query_text: str, tiers: list[str], pool: int
    ) -> tuple[np.ndarray | None, list[VectorHit], str]:
        """The query vector and the first vector pass, or ``(None, [], why)`` when no vector can be had."""
        if not self.rt.embedding_available():
            return None, [], self.rt.degraded_reason()
        try:
            query_vec = (await self.rt.embed_queries([query_text]))[0]
            pass1 = await self.rt.query_vectors(
                query_vec,
                store_keys=list(self.scope.readable_store_keys),
                tiers=tiers,
                limit=max(pool, self.rt.config.write_conflict.top_n),
                with_embeddings=True,
                index_embeddings=not self.rt.records.memory_keywords.holds_vectors(),
            )
        except EmbeddingUnavailableError as exc:  # the model, or the vector index (a subclass), is down
            return None, [], str(exc)
        return query_vec, pass1, ""

    async def _vector_route(self, state: RetrievalState, query_vec: np.ndarray, pass1: list[VectorHit]) -> None:
        """EPA over the first pass's hits, then the memories of the other routes it missed (``_score_missed_hits``);
        fills the state's ``dense``, ``embeddings``, ``tiers_by_id``,
        ``candidates`` (the slim rows of the vector hits and of the keyword and time routes' hits, read in one
        query) and the result's ``logic_depth``, ``resonance`` and ``beta``."""
        params = self.epa_params
        result, candidates, triplet = state.result, state.candidates, state.triplet
        with_tags = not triplet.is_empty
        vector_ids = [h.memory_id for h in pass1]
        candidates.update(
            await self.rt.records.candidates(
                [*vector_ids, *state.sql_hit_ids], with_tags=with_tags, tags_only_for=vector_ids
            )
        )
        pass1 = [h for h in await self._with_stored_vectors(state, pass1) if h.embedding is not None]
        evidence = (
            np.stack([h.embedding for h in pass1 if h.embedding is not None])
            if pass1
            else np.zeros((0, len(query_vec)))
        )
        with single_threaded_blas():
            result.logic_depth = logic_depth(query_vec, evidence)
        result.resonance = has_resonance(state.query_text, triplet)
        result.beta = compute_beta(params, result.logic_depth, result.resonance)
        # Each hit's tags as sets, built once: pass 2 mostly finds the pass-1 hits again, and reshaping and the tag
        # bonus would otherwise each build their own.
        tags_by_id = {h.memory_id: candidate_tags(candidates.get(h.memory_id)) for h in pass1} if with_tags else {}
        query_tags = QueryTags.of(triplet)  # the query's groups as sets, for the reshaping and the tag bonus
        hits = (
            await self._second_pass(state, query_vec, evidence, pass1, tags_by_id, query_tags, params)
            if with_tags and pass1
            else pass1
        )
        for hit in hits:
            record = candidates.get(hit.memory_id)
            if record is None or hit.embedding is None or not self._passes(record, state.flt):
                continue
            if with_tags:
                tags = tags_by_id[hit.memory_id] if hit.memory_id in tags_by_id else candidate_tags(record)
                bonus = tag_bonus(tags, query_tags, params, result.beta)
            else:
                bonus = 0.0
            state.dense[hit.memory_id] = float(hit.similarity) + bonus
            state.embeddings[hit.memory_id] = hit.embedding
            state.tiers_by_id[hit.memory_id] = hit.tier
        await self._score_missed_hits(state, query_tags, params)

    async def _second_pass(
        self,
        state: RetrievalState,
        query_vec: np.ndarray,
        evidence: np.ndarray,
        pass1: list[VectorHit],
        tags_by_id: dict[str, CandidateTags | None],
        query_tags: QueryTags,
        params: EpaParams,
    ) -> list[VectorHit]:
        """The query reshaped by the tag triplet and searched again (EPA pass 2), or ``pass1`` when the evidence
        does not reshape it. Reads the tags of the hits new to this pass into ``state.candidates``."""
        with single_threaded_blas():
            reshaped = reshape_query_detailed(
                query_vec,
                evidence,
                [tags_by_id[h.memory_id] for h in pass1],
                query_tags,
                [h.similarity for h in pass1],
                params,
                state.result.beta,
            )
        if not reshaped.reshaped:
            return pass1
        hits = await self.rt.query_vectors(
            reshaped.vector,
            store_keys=list(self.scope.readable_store_keys),
            tiers=state.tiers,
            limit=state.pool,
            with_embeddings=True,
            index_embeddings=not self.rt.records.memory_keywords.holds_vectors(),
        )
        state.searched_vec = reshaped.vector / max(float(np.linalg.norm(reshaped.vector)), 1e-12)
        # Hits new to this pass, or keyword candidates read without tags, need their tags now; so do the keyword
        # and time candidates this pass missed, which ``_score_missed_hits`` scores with the tag bonus.
        found_here = {h.memory_id for h in hits}
        fresh = [h.memory_id for h in hits if "tags" not in state.candidates.get(h.memory_id, {})]
        fresh += [
            memory_id
            for memory_id in dict.fromkeys(state.sql_hit_ids)
            if memory_id not in found_here
            and memory_id in state.candidates
            and "tags" not in state.candidates[memory_id]
        ]
        if fresh:
            # As of the first read a few milliseconds ago: one moment for every candidate of this retrieval, and
            # no hop to the reader on the critical path unless some are not held.
            state.candidates.update(await self.rt.records.candidates(fresh, with_tags=True, as_of_last_read=True))
        return await self._with_stored_vectors(state, hits)

    async def _with_stored_vectors(self, state: RetrievalState, hits: list[VectorHit]) -> list[VectorHit]:
        """``hits`` with a candidate row, each with its vector: the vector index's or the staged one it came with,
        else the stored one (``_stored_vectors``; None when there is none)."""
        hits = [hit for hit in hits if hit.memory_id in state.candidates]
        unread = [hit.memory_id for hit in hits if hit.embedding is None]
        if not unread:
            return hits
        vectors = await self._stored_vectors(state, unread)
        return [
            hit if hit.embedding is not None else replace(hit, embedding=vectors.get(hit.memory_id)) for hit in hits
        ]

    @staticmethod
    def _passes(record: CandidateRow, flt: RecordFilter) -> bool:
        """Structured filters for vector hits (the partitions already enforce store, tier and deletion)."""
        if flt.memory_types is not None and record["memory_type"] not in flt.memory_types:
            return False
        if flt.statuses is not None and record["status"] not in flt.statuses:
            return False
        if flt.person_id is not None and record.get("person_id") != flt.person_id:
            return False
        if flt.folder_id is not None and record["folder_id"] != flt.folder_id:
            return False
        if flt.relation_of is not None and flt.relation_of not in (record.get("relation_memory_ids") or []):
            return False
        return True

    # ------------------------------------------------------------- retrieve
    async def retrieve(
        self,
        query_text: str,
        *,
        top_k: int,
        include_archived: bool,
        include_knowledge: bool,
        triplet: TagTriplet,
        record_activation: bool = True,
        include_superseded: bool = True,
        min_score: float | None = None,
    ) -> dict[str, Any]:
        # Left-out superseded memories must not leave the list short: rank deeper, keep ``top_k``.
        ranking = await self.rank(
            query_text,
            limit=top_k if include_superseded else top_k * 2,
            include_archived=include_archived,
            include_knowledge=include_knowledge,
            triplet=triplet,
            count_activation=record_activation,
            min_score=min_score,
        )
        hits = (
            ranking.hits
            if include_superseded
            else [hit for hit in ranking.hits if not ranking.records[hit.memory_id].get("superseded_by")][:top_k]
        )
        results = []
        for hit in hits:
            item = record_item(ranking.records[hit.memory_id], snippet_chars=self.rt.config.retrieval.snippet_chars)
            item["score"] = round(hit.score, 6)
            item["collection"] = hit.tier
            item["score_parts"] = {k: (None if v is None else round(float(v), 6)) for k, v in hit.parts.items()}
            results.append(item)
        response = {
            "query": query_text,
            "logic_depth": float(ranking.logic_depth),
            "resonance": float(ranking.resonance),
            "beta": float(ranking.beta),
            "total": len(results),
            "results": results,
        }
        if ranking.degraded:
            response["degraded"] = f"向量检索不可用，结果仅来自关键词检索：{ranking.degraded}"
        return response

    # --------------------------------------------------------------- search
    async def search_entries(
        self,
        *,
        top_n: int,
        query_text: str | None,
        memory_type: str | None,
        status: str | None,
        person_id: str | None,
        relation_of: str | None,
        include_archived: bool,
        include_knowledge: bool,
        include_related: bool,
        triplet: TagTriplet,
    ) -> dict[str, Any]:
        structured = RecordFilter(
            memory_types=(memory_type,) if memory_type else None,
            statuses=(status,) if status else None,
            person_id=person_id or None,
            relation_of=relation_of or None,
        )
        if status in ("archived", "expired"):
            include_archived = True
        semantic_query = (query_text or "").strip() or " ".join(triplet.core + triplet.diffusion)
        entries: list[dict[str, Any]] = []
        degraded = ""
        seen: set[str] = set()
        if semantic_query:
            ranking = await self.rank(
                semantic_query,
                limit=top_n,
                include_archived=include_archived,
                include_knowledge=include_knowledge,
                triplet=triplet,
                flt_extra=structured,
                count_activation=True,
                min_score=None,
            )
            degraded = ranking.degraded
            for hit in ranking.hits:
                item = record_item(ranking.records[hit.memory_id], snippet_chars=self.rt.config.retrieval.snippet_chars)
                item["score"] = round(hit.score, 6)
                entries.append(item)
                seen.add(hit.memory_id)
        if len(entries) < top_n and triplet.is_complete:
            for record in await self._by_triplet(triplet, structured, include_archived, include_knowledge, top_n * 3):
                if record["memory_id"] not in seen and len(entries) < top_n:
                    entries.append(record_item(record, snippet_chars=self.rt.config.retrieval.snippet_chars))
                    seen.add(record["memory_id"])
        if not semantic_query:
            flt = searchable_filter(self.scope, include_archived=include_archived, include_knowledge=include_knowledge)
            flt.memory_types, flt.statuses = structured.memory_types, structured.statuses
            flt.person_id, flt.relation_of = structured.person_id, structured.relation_of
            for record in await self.rt.records.list_records(
                flt, limit=top_n, order_by="r.last_activated_at DESC, r.updated_at DESC"
            ):
                if record["memory_id"] not in seen:
                    entries.append(record_item(record, snippet_chars=self.rt.config.retrieval.snippet_chars))
                    seen.add(record["memory_id"])
        if include_related and len(entries) < top_n:
            related_ids = [
                rid for item in entries for rid in item["metadata"]["relation_memory_ids"] or [] if rid not in seen
            ]
            related = await self.rt.records.get_many(related_ids)
            for rid in related_ids:
                related_record = related.get(rid)
                if (
                    related_record
                    and related_record["store_key"] in self.scope.readable_store_keys
                    and rid not in seen
                    and len(entries) < top_n
                ):
                    item = record_item(related_record, snippet_chars=self.rt.config.retrieval.snippet_chars)
                    item["related"] = True
                    entries.append(item)
                    seen.add(rid)
        response = {"action": "search_memory_entries", "total": len(entries[:top_n]), "items": entries[:top_n]}
        if degraded:
            response["degraded"] = f"向量检索不可用，结果仅来自关键词检索：{degraded}"
        return response

    async def _by_triplet(
        self, triplet: TagTriplet, structured: RecordFilter, include_archived: bool, include_knowledge: bool, limit: int
    ) -> list[dict[str, Any]]:
        flt = searchable_filter(self.scope, include_archived=include_archived, include_knowledge=include_knowledge)
        flt.memory_types, flt.statuses = structured.memory_types, structured.statuses
        flt.person_id, flt.relation_of = structured.person_id, structured.relation_of
        for tag_type, values in (
            ("core", triplet.core),
            ("diffusion", triplet.diffusion),
            ("opposing", triplet.opposing),
        ):
            flt.extra_sql.append(
                f"EXISTS (SELECT 1 FROM booku_memory_tags t WHERE t.memory_id = r.memory_id AND t.tag_type = ? "
                f"AND lower(t.tag_value) IN ({', '.join('?' for _ in values)}))"
            )
            flt.extra_params.extend([tag_type, *values])
        return await self.rt.records.list_records(
            flt, limit=limit, order_by="r.last_activated_at DESC, r.updated_at DESC"
        )

    # ----------------------------------------------------------------- grep
    async def grep(
        self,
        *,
        query: str,
        search_fields: Sequence[str],
        folder_id: str | None,
        include_archived: bool,
        top_k: int,
        use_regex: bool,
    ) -> dict[str, Any]:
        text = str(query or "")
        if not text.strip():
            raise ValidationError("grep 的 query 不能为空")
        fields = [str(f).strip().lower() for f in (search_fields or [])]
        unknown = [f for f in fields if f not in GREP_FIELDS]
        if not fields or unknown:
            raise ValidationError(f"search_fields 无效：{unknown or '空列表'}，可选：{'、'.join(GREP_FIELDS)}")
        flt = RecordFilter(
            store_keys=self.scope.readable_store_keys,
            buckets=("memory",),
            folder_id=folder_id,
            statuses=None if include_archived else ("active",),
        )
        if use_regex:
            records = await self.rt.records.grep_regex(
                text,
                compile_safe_regex(text),
                fields,
                flt,
                limit=top_k,
                budget_seconds=self.rt.config.retrieval.grep_regex_budget_seconds,
            )
        else:
            records = await self.rt.records.grep_like(text.strip(), fields, flt, limit=top_k)
        items = [record_item(r, snippet_chars=self.rt.config.retrieval.snippet_chars) for r in records]
        return {"action": "grep_memories", "query": text, "total": len(items), "items": items}

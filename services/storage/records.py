"""The record store: one object (``RecordRepository``) over ``booku_memory_records`` and its satellites, composed of
its reads (``record_reads``), keyword search and grep (``record_search``), writes (``record_writes``) and keyword-index
upkeep (``keyword_rows``); the filter, row codec and write-plan runner they share live in ``record_filter``,
``record_rows`` and ``write_plans``.
"""

from __future__ import annotations

from .database import Database
from .fts_plan import KeywordPlanner
from .fts_store_stats import ScopedKeywordStatistics
from .keyword_rows import KeywordMaintenance
from .mirrors.keyword_mirror import MemoryKeywordIndex
from .record_search import RecordSearch
from .record_writes import RecordWrites


class RecordRepository(RecordSearch, RecordWrites, KeywordMaintenance):
    """All SQL touching ``booku_memory_records`` and its satellites."""

    def __init__(
        self,
        db: Database,
        *,
        posting_budget: int,
        in_memory_keywords: bool = False,
        in_memory_candidates: bool = True,
        in_memory_vectors: bool = True,
    ) -> None:
        """``posting_budget``: the keyword planner's (``retrieval.keyword_posting_budget``), for the FTS5 route;
        ``in_memory_keywords``: rank keyword hits from the in-memory index once loaded
        (``retrieval.in_memory_keyword_index``, ``storage.mirrors.keyword_mirror``); ``in_memory_candidates``: with it,
        read candidate rows from its copy of them (``retrieval.in_memory_candidates``,
        ``storage.mirrors.candidate_rows``); ``in_memory_vectors``: with those, read stored vectors from its copy of
        them (``retrieval.in_memory_vectors``, ``storage.mirrors.stored_vectors``)."""
        self.db = db
        # The deployment's zone name (``services.time_zone``), kept with every new record; the runtime sets it.
        self.write_zone = ""
        self.keyword_planner = KeywordPlanner(db, posting_budget=posting_budget)
        self.scoped_statistics = ScopedKeywordStatistics(db)
        self.memory_keywords = MemoryKeywordIndex(
            db, enabled=in_memory_keywords, keep_candidates=in_memory_candidates, keep_vectors=in_memory_vectors
        )

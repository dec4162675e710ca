"""BookuCompanionService: the companion memory tools as an async service (breath … pulse; plan, letters, feel, I).

One method per tool; every method returns a dict with the data and a compact Chinese ``text`` rendering meant for an
LLM. The LLM tools, ``memory_command`` and the MCP server all call these methods (their parameter tables live in
``tool_table.py``). Like the memory service, this is a cheap view on the runtime: build one per call if you like.
Reads live in ``reads.py``, writes in ``writes.py``; part 2 in ``plans.py``, ``letters.py``, ``feel.py`` and
``self_knowledge.py``; see docs/COMPANION.md for every rule.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..errors import ValidationError
from ..scope import Scope
from ..text_input import guarded_text_inputs
from .extensions import (
    GrowSplitter,
    MemoryTagger,
    register_dream_section,
    register_write_observer,
)
from .feel import feel as feel_search
from .fields import checked_bucket_id, checked_flag
from .letter_store import LetterStore
from .letters import LetterBook, checked_side
from .plans import PlanBook, plan_completion_notices, plans_dream_section
from .reads import CompanionReader
from .self_knowledge import SelfKnowledge, self_dream_section
from .settings import CompanionSettings, companion_settings
from .store import CompanionStore
from .writes import CompanionWriter

if TYPE_CHECKING:
    from ..runtime import BookuRuntime

Clock = Callable[[], float]


class _Reader(CompanionReader):
    """The part-1 reader, with pulse counting letters (they live in their own table, not among the records)."""

    async def _pulse_counts(self) -> dict[str, Any]:
        counts = await super()._pulse_counts()
        counts["kinds"]["letter"] = await LetterStore(self.rt.db).count(store_keys=self.scope.readable_store_keys)
        return counts


@guarded_text_inputs
class BookuCompanionService:
    """Companion memory: surfacing (breath), verbatim keeping (hold/grow), editing (trace), review (dream),
    coordinates (anchor/release), status (pulse), plans, letters, feelings (feel) and the self-knowledge "I".
    All tool methods are async.

    ``side`` is who this interface speaks for in letters: ``"ai"`` for the LLM tools and the MCP server, ``"user"``
    for the dashboard and the user-facing API. It is fixed here by the code that builds the service, never by a tool
    argument; left out, it follows the scope's authority (``human`` = the user's side, anything else = the AI's).
    ``clock`` (seconds since the epoch) decides when timed letter locks open and which date a dream witnesses; tests
    inject one.
    """

    service_name = "booku_companion"
    service_description = (
        "Booku 陪伴记忆：breath 浮现、hold/grow 逐字保存、trace 修改、dream 回顾、anchor 坐标、pulse 状态、"
        "plan 计划、letter 信件、feel 感受、I 自我认知"
    )

    def __init__(
        self,
        runtime=None,
        scope: Scope | None = None,
        *,
        plugin: Any = None,
        tagger: MemoryTagger | None = None,
        splitter: GrowSplitter | None = None,
        side: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        self._runtime: BookuRuntime | None = runtime if runtime is not None else getattr(plugin, "runtime", None)
        self._scope = scope
        self.tagger = tagger
        self.splitter = splitter
        self._side = None if side is None else checked_side(side)
        self.clock: Clock = clock or time.time

    # ------------------------------------------------------------ plumbing
    @property
    def runtime(self) -> BookuRuntime:
        if self._runtime is None:
            raise RuntimeError("Booku 运行时尚未启动")
        return self._runtime

    @property
    def scope(self) -> Scope:
        return self._scope or self.runtime.default_scope

    @property
    def settings(self) -> CompanionSettings:
        return companion_settings(self.runtime.config)

    @property
    def side(self) -> str:
        """``"user"`` or ``"ai"``: whose letters this interface writes and which locks it holds the key to."""
        if self._side is not None:
            return self._side
        return "user" if self.scope.authority == "human" else "ai"

    @property
    def folder_id(self) -> str:
        """The folder new companion records go to."""
        return self._writer().folder_id

    def _reader(self) -> CompanionReader:
        return _Reader(self.runtime, self.scope, self.settings, service=self)

    def _writer(self) -> CompanionWriter:
        return CompanionWriter(
            self.runtime, self.scope, self.settings, tagger=self.tagger, splitter=self.splitter, service=self
        )

    # -------------------------------------------------------------- reads
    async def breath(self, domain: str | list[str] | None = None, max_results: int | None = None) -> dict:
        """Open the eyes: every pinned core principle, then the highest-weighted memories that are neither resolved
        nor digested (anchors and feelings stay out unless their domain is asked for).

        Returns ``{"action": "breath", "mode": "surfacing", "pinned": [item], "items": [item], "total", "omitted":
        [ids left out by the token budget], "text"}``; an item is ``rendering.memory_item`` (full ``content``).
        """
        return await self._reader().breath(domain, max_results)

    async def breath_search(
        self,
        query: str,
        domain: str | list[str] | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
        max_results: int | None = None,
        quotes: bool = False,
    ) -> dict:
        """Hybrid keyword + vector search, verbatim bodies, optional creation-date bounds, quotes when asked.

        Returns ``{"action": "breath_search", "mode": "search", "query", "total", "items", "omitted", "text"}``
        (+ ``"degraded"`` when it fell back to keywords). Items carry ``"quotes"`` only with ``quotes=True``.
        """
        return await self._reader().breath_search(query, domain, date_from, date_to, max_results, quotes)

    async def breath_advanced(
        self,
        query: str | None = None,
        max_tokens: int | None = None,
        domain: str | list[str] | None = None,
        valence: float | None = None,
        arousal: float | None = None,
        max_results: int | None = None,
        importance_min: int | None = None,
        tags: str | list[str] | None = None,
        catalog: bool = False,
        date_from: str | None = None,
        date_to: str | None = None,
    ) -> dict:
        """breath with every knob: search (query), catalog, importance, emotion or surfacing mode.

        Returns ``{"action": "breath_advanced", "mode": "search"|"catalog"|"importance"|"emotion"|"surfacing",
        "total", "items", "omitted", "text"}`` (catalog adds ``"lines"``; items there have no content).
        """
        return await self._reader().breath_advanced(
            query=query,
            domain=domain,
            tags=tags,
            importance_min=importance_min,
            valence=valence,
            arousal=arousal,
            catalog=catalog,
            date_from=date_from,
            date_to=date_to,
            max_results=max_results,
            max_tokens=max_tokens,
        )

    async def dream(self, window_hours: float = 48) -> dict:
        """Every memory changed (or recalled) in the last ``window_hours``, full text, at most 40 by decay score,
        followed by registered extra sections (e.g. active plans).

        Returns ``{"action": "dream", "window_hours", "since", "candidates", "total", "items", "sections", "text"}``.
        """
        return await self._reader().dream(window_hours)

    async def pulse(self, include_archive: bool = False) -> dict:
        """Counts by kind and state, storage used, the decay engine's state, one line per memory (anchors marked).

        Returns ``{"action": "pulse", "counts", "storage", "decay_engine", "items", "lines", "include_archive",
        "text"}``.
        """
        return await self._reader().pulse(include_archive)

    async def source_evidence(self, bucket_id: str) -> dict:
        """The immutable raw source a memory was made from (never shown by breath).

        Returns ``{"action": "source_evidence", "id", "sources": [{"source_id", "ranges", "source_bucket", "content",
        "excerpt", "created_at"}]}`` where ``excerpt`` holds only the linked line ranges (the whole source when the
        link has none).
        """
        memory_id = checked_bucket_id(bucket_id)
        links = await CompanionStore(self.runtime.db).source_links(memory_id, store_keys=self.scope.readable_store_keys)
        for link in links:
            lines = (link["content"] or "").splitlines()
            if link["content"] is None:
                link["excerpt"] = ""
            elif link["ranges"]:
                link["excerpt"] = "\n".join("\n".join(lines[start - 1 : end]) for start, end in link["ranges"])
            else:
                link["excerpt"] = link["content"]
        return {"action": "source_evidence", "id": memory_id, "sources": links}

    # ------------------------------------------------------------- writes
    async def hold(
        self,
        content: str,
        title: str | None = None,
        domain: str | list[str] | None = None,
        tags: str | list[str] | None = None,
        importance: int | None = None,
        pinned: bool = False,
        feel: bool = False,
        source_bucket: str | None = None,
        source_content: str | None = None,
        source_ranges: list[list[int]] | None = None,
        valence: float | None = None,
        arousal: float | None = None,
        why_remembered: str | None = None,
        quotes: list[str | dict] | None = None,
    ) -> dict:
        """Keep one moment verbatim (never merged, never shortened).

        Returns ``{"action": "hold", "mode": "created"|"duplicate", "id", "item", "speakers": [{"speaker", "text",
        "line"}], "notices", "text"}``.
        """
        return await self._writer().hold(
            content,
            title=title,
            domain=domain,
            tags=tags,
            importance=importance,
            pinned=pinned,
            feel=feel,
            source_bucket=source_bucket,
            source_content=source_content,
            source_ranges=source_ranges,
            valence=valence,
            arousal=arousal,
            why_remembered=why_remembered,
            quotes=quotes,
        )

    async def grow(self, content: str | None = None, items: list[str | dict] | None = None) -> dict:
        """Store a long text as 2–6 event memories (split by the host model or on paragraphs/sentences), or the
        caller's own ``items``; each item may fold into a near-identical memory. Under 30 characters: one hold.

        Returns ``{"action": "grow", "path": "split"|"items"|"hold", "total", "items", "modes", "ids", "notices",
        "text"}`` (the hold path returns hold's keys plus ``items``).
        """
        return await self._writer().grow(content, items)

    async def trace(
        self,
        bucket_id: str,
        name: str | None = None,
        title: str | None = None,
        content: str | None = None,
        domain: str | list[str] | None = None,
        tags: str | list[str] | None = None,
        importance: int | None = None,
        valence: float | None = None,
        arousal: float | None = None,
        resolved: int | None = None,
        pinned: int | None = None,
        protected: int | None = None,
        digested: int | None = None,
        why_remembered: str | None = None,
        status: str | None = None,
        quotes_replace: list[str | dict] | None = None,
        reinforce: bool = False,
    ) -> dict:
        """Change an existing memory (None = leave unchanged); every change is a new version in its history.

        Returns ``{"action": "trace", "id", "changed_fields", "notices", "item", "text"}``.
        """
        return await self._writer().trace(
            bucket_id,
            name=name,
            title=title,
            content=content,
            domain=domain,
            tags=tags,
            importance=importance,
            valence=valence,
            arousal=arousal,
            resolved=resolved,
            pinned=pinned,
            protected=protected,
            digested=digested,
            why_remembered=why_remembered,
            status=status,
            quotes_replace=quotes_replace,
            reinforce=reinforce,
        )

    async def anchor(self, bucket_id: str) -> dict:
        """Make a memory an anchor (a cold reference point; hard cap 24 per store).

        Returns ``{"action": "anchor", "id", "changed", "item", "anchors", "text"}``; the 25th raises
        ``ValidationError`` asking to release one first.
        """
        return await self._writer().anchor(bucket_id)

    async def release(self, bucket_id: str) -> dict:
        """Remove the anchor mark; the memory rejoins the default breath, pinned is kept.

        Returns ``{"action": "release", "id", "changed", "item", "text"}``.
        """
        return await self._writer().release(bucket_id)

    # ------------------------------------------------------------- plans
    async def plan(
        self,
        content: str,
        status: str = "active",
        related_bucket: str | None = None,
        weight: float = 0.5,
        why_remembered: str | None = None,
    ) -> dict:
        """Register a commitment or open loop (active / resolved / abandoned). Plans never decay, never surface in
        breath, and end every dream while active; only ``trace(bucket_id, status=...)`` closes them.

        Returns ``{"action": "plan", "mode": "created"|"duplicate", "id", "item", "text"}``; the item carries
        ``plan_status``, ``weight`` and ``related_bucket``.
        """
        return await PlanBook(self).create(content, status, related_bucket, weight, why_remembered)

    # ----------------------------------------------------------- letters
    def _letters(self) -> LetterBook:
        return LetterBook(self.runtime, self.scope, side=self.side, clock=self.clock)

    async def letter_write(
        self,
        author: str,
        content: str,
        title: str | None = None,
        date: str | None = None,
        user_name: str | None = None,
        ai_name: str | None = None,
        lock_type: str = "none",
        unlock_date: str | None = None,
    ) -> dict:
        """Write a letter, kept forever and verbatim, optionally locked (timed: opens to the other side at
        ``unlock_date``; permanent: nobody ever reads it). The writing side is this service's ``side``.

        Returns ``{"action": "letter_write", "id", "letter", "text"}``.
        """
        return await self._letters().write(
            author,
            content,
            title=title,
            date=date,
            user_name=user_name,
            ai_name=ai_name,
            lock_type=lock_type,
            unlock_date=unlock_date,
        )

    async def letter_lock_update(self, letter_id: str, lock_type: str, unlock_date: str | None = None) -> dict:
        """Change only the lock of a letter this side wrote (a permanent lock is final).

        Returns ``{"action": "letter_lock_update", "id", "changed", "letter", "text"}``.
        """
        return await self._letters().change_lock(letter_id, lock_type, unlock_date)

    async def letter_read(
        self,
        query: str | None = None,
        author: str | None = None,
        date_from: str | None = None,
        date_to: str | None = None,
        limit: int = 10,
    ) -> dict:
        """Letters, newest first, or the best matches of ``query`` among those this side may read; bodies whole.
        A letter this side may not read shows only its id, signature, date and lock.

        Returns ``{"action": "letter_read", "query", "total", "items", "text"}`` (+ ``"degraded"``); an item has
        ``title``/``content`` only when ``readable``.
        """
        return await self._letters().read(query, author, date_from, date_to, limit)

    # -------------------------------------------------------------- feel
    async def feel(self, query: str, max_tokens: int | None = None) -> dict:
        """Feelings about ``query``: semantic match (similarity ≥ 0.65) among feelings only, verbatim, no filler;
        literal keyword match with an explicit notice when the model is unavailable.

        Returns ``{"action": "feel", "query", "mode", "total", "items", "omitted", "text"}`` (+ ``"degraded"``).
        """
        return await feel_search(self, query, max_tokens)

    # ----------------------------------------------------------------- I
    async def self_knowledge(
        self,
        content: str | None = None,
        aspect: str | None = None,
        read: bool = False,
        limit: int = 20,
        promote: str | None = None,
        supersedes: str | None = None,
    ) -> dict:
        """The "I" tool: write a 「我觉得……」 candidate (optionally superseding a formal entry of the same aspect),
        promote a candidate witnessed by dreams on 3 different dates, or read (``read=True`` or nothing given).

        Returns ``{"action": "I", "mode": "candidate"|"duplicate"|"promote"|"read", ...}``: writes carry ``"id"`` and
        ``"item"``; read carries ``"formal"``, ``"candidates"``, ``"superseded"`` lists and ``"total"``.
        """
        reading = bool(checked_flag(read, "read"))
        book = SelfKnowledge(self)
        if promote not in (None, ""):
            if reading or supersedes not in (None, ""):
                raise ValidationError(
                    "promote 不能和 read 或 supersedes 同时使用：supersedes 在写候选时给出，promote 只升级已有候选"
                )
            return await book.promote(promote, content, aspect)
        if content not in (None, ""):
            if reading:
                raise ValidationError("read=True 是读取；要写下新的认识请只传 content（和 aspect），不要同时传 read")
            return await book.write(content, aspect, supersedes)
        if supersedes not in (None, ""):
            raise ValidationError("supersedes 要和 content 一起用：写下那条要取代它的新认识「我觉得……」")
        return await book.read(aspect, limit)

    async def latest_self_entries(self, limit: int = 3) -> dict:
        """The newest current formal self-knowledge entries, for the host's session start.

        Returns ``{"action": "latest_self_entries", "total", "items", "text"}`` (``text`` is empty when there is
        none, so the host can skip it).
        """
        return await SelfKnowledge(self).latest(limit)


# Part-2 behaviour rides on the part-1 extension points: the candidates' dream section, the active plans at the very
# end of dream, and the plan-completion hint after hold/grow. Registration replaces by key, so re-imports are harmless.
register_dream_section("self_candidates", self_dream_section, order=50)
register_dream_section("active_plans", plans_dream_section, order=1000)
register_write_observer("plan_completion", plan_completion_notices)

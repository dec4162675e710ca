"""BookuCompanionService: the companion memory tools as an async service (breath … pulse).

One method per tool; every method returns a dict with the data and a compact Chinese ``text`` rendering meant for an
LLM. The LLM tools, ``memory_command`` and the MCP server all call these methods (their parameter tables live in
``tool_specs.py``). Like the memory service, this is a cheap view on the runtime: build one per call if you like.
Reads live in ``reads.py``, writes in ``writes.py``; see docs/COMPANION.md for every rule.
"""

from __future__ import annotations

from typing import Any

from ..scope import Scope
from .extensions import GrowSplitter, MemoryTagger
from .fields import checked_bucket_id
from .reads import CompanionReader
from .settings import CompanionSettings, companion_settings
from .store import CompanionStore
from .writes import CompanionWriter


class BookuCompanionService:
    """Companion memory: surfacing (breath), verbatim keeping (hold/grow), editing (trace), review (dream),
    coordinates (anchor/release) and status (pulse). All methods are async."""

    service_name = "booku_companion"
    service_description = "Booku 陪伴记忆：breath 浮现、hold/grow 逐字保存、trace 修改、dream 回顾、anchor 坐标、pulse 状态"

    def __init__(self, runtime=None, scope: Scope | None = None, *, plugin: Any = None,
                 tagger: MemoryTagger | None = None, splitter: GrowSplitter | None = None) -> None:
        self._runtime = runtime if runtime is not None else getattr(plugin, "runtime", None)
        self._scope = scope
        self.tagger = tagger
        self.splitter = splitter

    # ------------------------------------------------------------ plumbing
    @property
    def runtime(self):
        if self._runtime is None:
            raise RuntimeError("Booku 运行时尚未启动")
        return self._runtime

    @property
    def scope(self) -> Scope:
        return self._scope or self.runtime.default_scope

    @property
    def settings(self) -> CompanionSettings:
        return companion_settings(self.runtime.config)

    def _reader(self) -> CompanionReader:
        return CompanionReader(self.runtime, self.scope, self.settings, service=self)

    def _writer(self) -> CompanionWriter:
        return CompanionWriter(self.runtime, self.scope, self.settings, tagger=self.tagger, splitter=self.splitter,
                               service=self)

    # -------------------------------------------------------------- reads
    async def breath(self, domain: str | list[str] | None = None, max_results: int | None = None) -> dict:
        """Open the eyes: every pinned core principle, then the highest-weighted memories that are neither resolved
        nor digested (anchors and feelings stay out unless their domain is asked for).

        Returns ``{"action": "breath", "mode": "surfacing", "pinned": [item], "items": [item], "total", "omitted":
        [ids left out by the token budget], "text"}``; an item is ``rendering.memory_item`` (full ``content``).
        """
        return await self._reader().breath(domain, max_results)

    async def breath_search(self, query: str, domain: str | list[str] | None = None, date_from: str | None = None,
                            date_to: str | None = None, max_results: int | None = None, quotes: bool = False) -> dict:
        """Hybrid keyword + vector search, verbatim bodies, optional creation-date bounds, quotes when asked.

        Returns ``{"action": "breath_search", "mode": "search", "query", "total", "items", "omitted", "text"}``
        (+ ``"degraded"`` when it fell back to keywords). Items carry ``"quotes"`` only with ``quotes=True``.
        """
        return await self._reader().breath_search(query, domain, date_from, date_to, max_results, quotes)

    async def breath_advanced(self, query: str | None = None, max_tokens: int | None = None,
                              domain: str | list[str] | None = None, valence: float | None = None,
                              arousal: float | None = None, max_results: int | None = None,
                              importance_min: int | None = None, tags: str | list[str] | None = None,
                              catalog: bool = False, date_from: str | None = None,
                              date_to: str | None = None) -> dict:
        """breath with every knob: search (query), catalog, importance, emotion or surfacing mode.

        Returns ``{"action": "breath_advanced", "mode": "search"|"catalog"|"importance"|"emotion"|"surfacing",
        "total", "items", "omitted", "text"}`` (catalog adds ``"lines"``; items there have no content).
        """
        return await self._reader().breath_advanced(
            query=query, domain=domain, tags=tags, importance_min=importance_min, valence=valence, arousal=arousal,
            catalog=catalog, date_from=date_from, date_to=date_to, max_results=max_results, max_tokens=max_tokens)

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
        links = await CompanionStore(self.runtime.db).source_links(memory_id,
                                                                   store_keys=self.scope.readable_store_keys)
        for link in links:
            lines = (link["content"] or "").splitlines()
            if link["content"] is None:
                link["excerpt"] = ""
            elif link["ranges"]:
                link["excerpt"] = "\n".join("\n".join(lines[start - 1:end]) for start, end in link["ranges"])
            else:
                link["excerpt"] = link["content"]
        return {"action": "source_evidence", "id": memory_id, "sources": links}

    # ------------------------------------------------------------- writes
    async def hold(self, content: str, title: str | None = None, domain: str | list[str] | None = None,
                   tags: str | list[str] | None = None, importance: int | None = None, pinned: bool = False,
                   feel: bool = False, source_bucket: str | None = None, source_content: str | None = None,
                   source_ranges: list[list[int]] | None = None, valence: float | None = None,
                   arousal: float | None = None, why_remembered: str | None = None,
                   quotes: list[str | dict] | None = None) -> dict:
        """Keep one moment verbatim (never merged, never shortened).

        Returns ``{"action": "hold", "mode": "created"|"duplicate", "id", "item", "speakers": [{"speaker", "text",
        "line"}], "notices", "text"}``.
        """
        return await self._writer().hold(
            content, title=title, domain=domain, tags=tags, importance=importance, pinned=pinned, feel=feel,
            source_bucket=source_bucket, source_content=source_content, source_ranges=source_ranges,
            valence=valence, arousal=arousal, why_remembered=why_remembered, quotes=quotes)

    async def grow(self, content: str | None = None, items: list[str | dict] | None = None) -> dict:
        """Store a long text as 2–6 event memories (split by the host model or on paragraphs/sentences), or the
        caller's own ``items``; each item may fold into a near-identical memory. Under 30 characters: one hold.

        Returns ``{"action": "grow", "path": "split"|"items"|"hold", "total", "items", "modes", "ids", "notices",
        "text"}`` (the hold path returns hold's keys plus ``items``).
        """
        return await self._writer().grow(content, items)

    async def trace(self, bucket_id: str, name: str | None = None, title: str | None = None,
                    content: str | None = None, domain: str | list[str] | None = None,
                    tags: str | list[str] | None = None, importance: int | None = None,
                    valence: float | None = None, arousal: float | None = None, resolved: int | None = None,
                    pinned: int | None = None, protected: int | None = None, digested: int | None = None,
                    why_remembered: str | None = None, status: str | None = None,
                    quotes_replace: list[str | dict] | None = None, reinforce: bool = False) -> dict:
        """Change an existing memory (None = leave unchanged); every change is a new version in its history.

        Returns ``{"action": "trace", "id", "changed_fields", "notices", "item", "text"}``.
        """
        return await self._writer().trace(
            bucket_id, name=name, title=title, content=content, domain=domain, tags=tags, importance=importance,
            valence=valence, arousal=arousal, resolved=resolved, pinned=pinned, protected=protected,
            digested=digested, why_remembered=why_remembered, status=status, quotes_replace=quotes_replace,
            reinforce=reinforce)

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

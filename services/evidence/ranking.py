"""Merging recall candidates of several sources into one labelled result list (pure logic, no I/O).

Why one joint fusion instead of merging per-source rankings: each source's own ranking is standardised over its
own candidates, so the best chat line and the best memory would both score "1" whatever their real similarity.
Every source here is embedded by the same model and searched with the same segmented keywords, so the raw cosine
and bm25 values of all candidates go through one ``fuse_routes`` call and become comparable.

Then time decay favours recent evidence: ``score = relevance × 0.5 ** (age_days / half_life_days)``. It is off when
the caller asked for an explicit time range (the range already says which time matters), and it never applies to
knowledge chunks, which are reference text, not evidence of something that happened. Finally the list is cut to a
budget of items and characters: a long item that does not fit is shortened rather than dropped when enough room is
left for it to still say something.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..logic.fusion import fuse_routes

SECONDS_PER_DAY = 86400.0
SOURCES = ("chat", "episode", "memory", "knowledge")
SOURCE_LABELS = {"chat": "聊天记录", "episode": "剧集摘要", "memory": "记忆", "knowledge": "知识库"}
UNDECAYED_SOURCES = frozenset({"knowledge"})
MIN_SHORTENED_CHARS = 40
ELLIPSIS = "…"
# Raw scores are rounded before fusion: standardising would otherwise blow float noise between two identical texts
# (cosines 0.9999998 and 0.9999999) up into a whole standard deviation of difference.
SCORE_DECIMALS = 4


@dataclass
class Candidate:
    """One recalled item before merging: raw route scores, its time and what will be shown."""

    source: str
    item_id: str
    text: str
    time: float = 0.0
    cosine: float | None = None
    bm25: float | None = None
    payload: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.source}:{self.item_id}"


@dataclass
class MergedItem:
    candidate: Candidate
    relevance: float
    decay: float
    score: float
    text: str
    shortened: bool = False


@dataclass
class MergeReport:
    items: list[MergedItem]
    considered: int
    dropped: int
    used_chars: int
    decay_applied: bool


def decay_factor(age_seconds: float, half_life_days: float | None) -> float:
    """``0.5 ** (age / half_life)``; 1 for ``half_life_days=None`` (decay off) and for items from the future."""
    if half_life_days is None or half_life_days <= 0 or not math.isfinite(age_seconds):
        return 1.0
    age_days = max(0.0, age_seconds) / SECONDS_PER_DAY
    return 0.5 ** (age_days / half_life_days)


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters including the ellipsis."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(ELLIPSIS))] + ELLIPSIS


def merge_candidates(
    candidates: Sequence[Candidate],
    *,
    keyword_reliability: float,
    now: float,
    half_life_days: float | None,
    max_items: int,
    max_chars: int,
) -> MergeReport:
    """Fuse, decay, rank and budget the candidates (method in the module docstring).

    ``half_life_days=None`` switches decay off. Items with no relevance at all (the weakest hit of every route)
    are still ranked, after the others. Returns the kept items best first and counts of what was left out.
    """
    unique: dict[str, Candidate] = {}
    for candidate in candidates:
        unique.setdefault(candidate.key, candidate)
    dense = {key: round(c.cosine, SCORE_DECIMALS) for key, c in unique.items() if c.cosine is not None}
    keyword = {key: round(c.bm25, SCORE_DECIMALS) for key, c in unique.items() if c.bm25 is not None}
    fused = fuse_routes(dense, keyword, keyword_reliability=keyword_reliability)
    ranked: list[MergedItem] = []
    for hit in fused:
        candidate = unique[str(hit.id)]
        factor = 1.0 if candidate.source in UNDECAYED_SOURCES else decay_factor(now - candidate.time, half_life_days)
        # A floor hit of both routes has relevance 0; a tiny epsilon keeps recent ones ahead of old ones.
        relevance = float(hit.score)
        ranked.append(MergedItem(candidate, relevance, factor, (relevance + 1e-6) * factor, candidate.text))
    ranked.sort(key=lambda item: (-item.score, -item.candidate.time, item.candidate.key))

    kept: list[MergedItem] = []
    used = 0
    for item in ranked:
        if len(kept) >= max_items:
            break
        room = max_chars - used
        if len(item.text) <= room:
            kept.append(item)
            used += len(item.text)
        elif room >= MIN_SHORTENED_CHARS:
            item.text = shorten(item.text, room)
            item.shortened = True
            kept.append(item)
            used += len(item.text)
    return MergeReport(kept, len(unique), len(unique) - len(kept), used, half_life_days is not None)

"""Choosing which old memory "flashes back" into a prompt (pure logic; the host adapter fetches candidates).

Knobs are the reference's (``flashback.*`` in the config): trigger probability per prompt, the chance of drawing
from the archived layer rather than the active one, a candidate limit, activation weighting (rarely recalled
memories come back more often) and a per-memory cooldown. Fixed here:

* the layer choice means something: ``candidate_filter`` gives the adapter the status filter for the chosen layer
  (the reference mapped both layers to the same candidate set), and knowledge-base chunks are never candidates;
* the cooldown is kept per chat stream, so one stream's flashback does not silence another's.

Randomness is injected (``random.random`` by default) so tests pin every decision.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..config.schema import FlashbackSection

T = TypeVar("T")

ARCHIVED_LAYER = "archived"
ACTIVE_LAYER = "emergent"


def clamp_probability(value: Any) -> float:
    """``value`` as a probability in [0, 1]; anything not a finite number counts as 0."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    if not math.isfinite(number):
        return 0.0
    return min(1.0, max(0.0, number))


def should_trigger(probability: Any, draw: float) -> bool:
    """True when the uniform ``draw`` falls strictly below the clamped probability (p=0 never, p=1 always)."""
    return draw < clamp_probability(probability)


def pick_layer(archived_probability: Any, draw: float) -> str:
    """``"archived"`` when ``draw`` < archived_probability, else ``"emergent"`` (the active layer)."""
    return ARCHIVED_LAYER if draw < clamp_probability(archived_probability) else ACTIVE_LAYER


def candidate_filter(layer: str, limit: int) -> dict[str, Any]:
    """Keyword arguments for ``list_memory_entries`` fetching up to ``limit`` candidates of ``layer``.

    Memories only (bucket ``memory``), newest first; the archived layer and the active layer are disjoint.
    """
    status = "archived" if layer == ARCHIVED_LAYER else "active"
    return {"status": status, "bucket": "memory", "include_archived": layer == ARCHIVED_LAYER, "limit": limit}


def activation_weight(activation_count: Any, exponent: Any) -> float:
    """``1 / (count + 1) ** exponent``: a memory recalled often is drawn less often. Negative counts count as 0,
    a non-positive exponent as 1."""
    try:
        count = max(0.0, float(activation_count or 0))
    except (TypeError, ValueError):
        count = 0.0
    try:
        power = float(exponent)
    except (TypeError, ValueError):
        power = 1.0
    if not math.isfinite(power) or power <= 0:
        power = 1.0
    return 1.0 / (count + 1.0) ** power


def weighted_choice(items: Sequence[T], weights: Sequence[float], draw: float) -> T | None:
    """The first item whose cumulative weight reaches ``draw × total`` (negative weights count as 0).

    ``None`` for no items; the last item when the total is not positive. Raises ``ValueError`` when the lengths
    differ.
    """
    if len(items) != len(weights):
        raise ValueError("items 与 weights 长度必须相同")
    if not items:
        return None
    cleaned = [max(0.0, float(weight)) for weight in weights]
    total = sum(cleaned)
    if total <= 0:
        return items[-1]
    target = draw * total
    cumulative = 0.0
    for item, weight in zip(items, cleaned):
        cumulative += weight
        if cumulative >= target and weight > 0:
            return item
    return items[-1]


@dataclass
class FlashbackPicker:
    """Decides, per prompt build, whether to flash back and which candidate, with a per-stream cooldown."""

    config: FlashbackSection
    rng: Callable[[], float] = random.random
    clock: Callable[[], float] = time.time
    _recent: dict[str, dict[str, float]] = field(default_factory=dict)

    def layer_for_prompt(self) -> str | None:
        """Draw the trigger and the layer: ``None`` when no flashback this time (or the feature is off)."""
        if not self.config.enabled:
            return None
        if not should_trigger(self.config.trigger_probability, self.rng()):
            return None
        return pick_layer(self.config.archived_probability, self.rng())

    def choose(self, stream_id: str, candidates: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
        """Pick one candidate (service items with ``id`` and ``metadata.activation_count``) for ``stream_id``.

        Candidates shown in this stream within ``cooldown_seconds`` are skipped; knowledge chunks never qualify.
        The pick is remembered for the cooldown. Returns ``None`` when nothing qualifies.
        """
        now = self.clock()
        cooldown = float(self.config.cooldown_seconds)
        recent = self._recent.setdefault(stream_id, {})
        if cooldown > 0:
            for memory_id in [mid for mid, at in recent.items() if now - at >= cooldown]:
                del recent[memory_id]
        else:
            recent.clear()
        pool = [
            item
            for item in candidates[: self.config.candidate_limit]
            if item.get("id") not in recent and (item.get("metadata") or {}).get("bucket") != "knowledge"
        ]
        if not pool:
            return None
        weights = [
            activation_weight(
                (item.get("metadata") or {}).get("activation_count"), self.config.activation_weight_exponent
            )
            for item in pool
        ]
        picked = weighted_choice(pool, weights, self.rng())
        if picked is not None and cooldown > 0:
            recent[str(picked.get("id"))] = now
        return picked


__all__ = [
    "ACTIVE_LAYER",
    "ARCHIVED_LAYER",
    "FlashbackPicker",
    "activation_weight",
    "candidate_filter",
    "clamp_probability",
    "pick_layer",
    "should_trigger",
    "weighted_choice",
]

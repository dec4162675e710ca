"""The decay score of a companion memory: how alive it is right now (pure logic, no I/O).

The score ranks what ``breath`` surfaces and what ``dream`` reviews first, and a companion memory whose score falls
below the archive threshold is archived by the maintenance pass (it can still be found by an explicit query)::

    score = importance × rehearsal × emotion × freshness × settled

    rehearsal = (1 + activation_count) ** activation_exponent       # recalled / reinforced memories weigh more
    emotion   = 1 + arousal × arousal_boost                          # intense moments weigh more (arousal in 0..1)
    freshness = 0.5 ** (days_since_activity / half_life_days)       # halves every half-life without activity
    settled   = resolved_factor if resolved else 1                  # a memory that was let go sinks

``days_since_activity`` counts from the later of creation and the last activation (a recall through retrieval, an
explicit reinforce, a merge of the same moment, a content edit). Reading a memory in ``breath`` is *not* activity:
otherwise what surfaces would keep itself alive just by surfacing.

Exempt memories never decay: pinned, protected and anchors (and kinds that the companion vocabulary marks as
non-decaying, such as feelings). For them ``freshness`` and ``settled`` are fixed at 1, so their score is their fresh
score forever and they are never archived.

With the defaults (half-life 14 days, threshold 0.3, arousal 0.3): an untouched importance-5 memory starts at 6.2
and is archived after about 61 days; importance 1 after about 28 days; a resolved importance-5 memory after about
14 days.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True)
class DecayParams:
    """Tunable constants of the formula (config section ``[decay]``)."""

    half_life_days: float = 14.0
    arousal_boost: float = 0.8
    activation_exponent: float = 0.3
    resolved_factor: float = 0.1
    archive_threshold: float = 0.3


def days_since_activity(created_at: float, last_activated_at: float, now: float) -> float:
    """Days from the last activity (creation or activation, whichever is later) to ``now``; never negative."""
    last = max(float(created_at or 0.0), float(last_activated_at or 0.0))
    return max(0.0, (now - last) / SECONDS_PER_DAY)


def decay_score(
    *,
    importance: float,
    days_since_activity: float,
    activation_count: int,
    arousal: float,
    resolved: bool,
    exempt: bool,
    params: DecayParams = DecayParams(),
) -> float:
    """The score defined in the module docstring. Inputs are clamped (importance 1..10, arousal 0..1, counts ≥ 0).

    Returns a non-negative float rounded to 6 decimals (stable for storage and comparison).
    """
    level = min(10.0, max(1.0, float(importance)))
    rehearsal = (1.0 + max(0, int(activation_count))) ** params.activation_exponent
    emotion = 1.0 + min(1.0, max(0.0, float(arousal))) * params.arousal_boost
    if exempt:
        return round(level * rehearsal * emotion, 6)
    half_life = max(params.half_life_days, 1e-6)
    freshness = math.pow(0.5, max(0.0, days_since_activity) / half_life)
    settled = params.resolved_factor if resolved else 1.0
    return round(level * rehearsal * emotion * freshness * settled, 6)


def archive_due(score: float, *, exempt: bool, params: DecayParams = DecayParams()) -> bool:
    """Whether a memory has faded enough to be archived (never for exempt memories)."""
    return not exempt and score < params.archive_threshold

"""Companion settings: the ``[surfacing]`` and ``[decay]`` config sections with their documented fallbacks.

The config schema may not carry these sections yet; every value falls back to the module constant below, so the
companion works with any config and picks the keys up as soon as they exist.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..logic.decay import DecayParams

BREATH_MAX_RESULTS = 20  # surfacing.breath_max_results
BREATH_RESULTS_CEILING = 50  # hard maximum of max_results (docs/COMPANION.md: 最大 50)
BREATH_MAX_TOKENS = 20000  # surfacing.breath_max_tokens
MAX_TOKENS_RANGE = (100, 200000)
DREAM_MAX_ITEMS = 40  # docs/COMPANION.md: 候选桶超过 40 时按衰减分排序取前 40
DREAM_WINDOW_HOURS = 48
DREAM_WINDOW_RANGE = (1, 24 * 365)
ANCHOR_LIMIT = 24  # docs/COMPANION.md: 硬上限 24
PULSE_MAX_LINES = 500  # one-line summaries listed by pulse before it points to catalog mode
EMOTION_RADIUS = 0.25  # valence/arousal filters keep memories within this distance on each axis
GROW_SHORT_CHARS = 30  # docs/COMPANION.md: 短内容(<30 字)走 hold 单条快速路径
GROW_MAX_ITEMS = 20  # caller-made items per grow call
SURFACING_POOL = 200  # candidates pre-selected by stored score before live re-scoring


@dataclass(frozen=True)
class CompanionSettings:
    breath_max_results: int = BREATH_MAX_RESULTS
    breath_max_tokens: int = BREATH_MAX_TOKENS
    decay: DecayParams = DecayParams()
    decay_auto_archive: bool = True


def _section_value(config: Any, section: str, key: str, default: Any) -> Any:
    value = getattr(getattr(config, section, None), key, None)
    return default if value is None else value


def companion_settings(config: Any) -> CompanionSettings:
    """Settings from a ``BookuConfig`` (missing sections or keys use the constants above)."""
    base = DecayParams()
    decay = DecayParams(
        half_life_days=float(_section_value(config, "decay", "half_life_days", base.half_life_days)),
        arousal_boost=float(_section_value(config, "decay", "arousal_boost", base.arousal_boost)),
        activation_exponent=float(_section_value(config, "decay", "activation_exponent", base.activation_exponent)),
        resolved_factor=float(_section_value(config, "decay", "resolved_factor", base.resolved_factor)),
        archive_threshold=float(_section_value(config, "decay", "archive_threshold", base.archive_threshold)),
    )
    return CompanionSettings(
        breath_max_results=min(
            BREATH_RESULTS_CEILING, int(_section_value(config, "surfacing", "breath_max_results", BREATH_MAX_RESULTS))
        ),
        breath_max_tokens=int(_section_value(config, "surfacing", "breath_max_tokens", BREATH_MAX_TOKENS)),
        decay=decay,
        decay_auto_archive=bool(_section_value(config, "decay", "auto_archive", True)),
    )

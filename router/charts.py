"""Geometry of the server-rendered SVG bar charts on the statistics page.

No chart library and no script: the page is drawn from the numbers computed here, which keeps it working under a
strict CSP and lets the tests check the bars without a browser.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    """One bar with its label, value and rectangle; ``label_x/label_y`` and ``value_x/value_y`` place the texts."""

    label: str
    value: int
    x: float
    y: float
    width: float
    height: float
    label_x: float
    label_y: float
    value_x: float
    value_y: float


@dataclass(frozen=True)
class Chart:
    """A whole chart: the SVG viewBox size, its bars, and the baseline the bars stand on."""

    width: float
    height: float
    bars: tuple[Bar, ...]
    baseline: float
    maximum: int


def horizontal_bars(
    entries: Sequence[tuple[str, int]],
    *,
    width: float = 420,
    bar_height: float = 24,
    gap: float = 10,
    label_width: float = 64,
    value_width: float = 44,
) -> Chart:
    """Bars growing to the right, one per entry, scaled to the largest value (labels on the left)."""
    maximum = max((value for _, value in entries), default=0)
    track = width - label_width - value_width
    bars = []
    for index, (label, value) in enumerate(entries):
        y = gap + index * (bar_height + gap)
        length = track * value / maximum if maximum else 0.0
        bars.append(
            Bar(
                label=label,
                value=value,
                x=label_width,
                y=y,
                width=round(length, 2),
                height=bar_height,
                label_x=label_width - 8,
                label_y=y + bar_height * 0.68,
                value_x=label_width + length + 6,
                value_y=y + bar_height * 0.68,
            )
        )
    height = gap + len(entries) * (bar_height + gap)
    return Chart(width=width, height=max(height, 2 * gap), bars=tuple(bars), baseline=label_width, maximum=maximum)


def vertical_bars(
    entries: Sequence[tuple[str, int]],
    *,
    plot_height: float = 180,
    slot_width: float = 44,
    bar_ratio: float = 0.7,
    top_margin: float = 24,
    label_height: float = 36,
) -> Chart:
    """Columns standing on a common baseline, one slot per entry (month labels under the columns)."""
    maximum = max((value for _, value in entries), default=0)
    baseline = top_margin + plot_height
    bar_width = slot_width * bar_ratio
    bars = []
    for index, (label, value) in enumerate(entries):
        column = plot_height * value / maximum if maximum else 0.0
        x = index * slot_width + (slot_width - bar_width) / 2
        center = x + bar_width / 2
        bars.append(
            Bar(
                label=label,
                value=value,
                x=round(x, 2),
                y=round(baseline - column, 2),
                width=round(bar_width, 2),
                height=round(column, 2),
                label_x=center,
                label_y=baseline + 16,
                value_x=center,
                value_y=round(baseline - column - 6, 2),
            )
        )
    width = max(len(entries), 1) * slot_width
    return Chart(width=width, height=baseline + label_height, bars=tuple(bars), baseline=baseline, maximum=maximum)


def month_series(by_month: Mapping[str, int], *, limit: int = 24) -> list[tuple[str, int]]:
    """``{"YYYY-MM": n}`` as a continuous, ordered series (empty months shown as 0), at most the last ``limit``."""
    months = sorted(key for key in by_month if _is_month(key))
    if not months:
        return []
    series: list[tuple[str, int]] = []
    year, month = (int(part) for part in months[0].split("-"))
    last_year, last_month = (int(part) for part in months[-1].split("-"))
    while (year, month) <= (last_year, last_month):
        key = f"{year:04d}-{month:02d}"
        series.append((key, int(by_month.get(key, 0))))
        year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    return series[-limit:]


def _is_month(key: str) -> bool:
    parts = key.split("-")
    return len(parts) == 2 and all(part.isdigit() for part in parts) and 1 <= int(parts[1]) <= 12

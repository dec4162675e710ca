"""``logic.relevance``: which ranked hits the floor keeps, given their cosines, the query's background and context.

The cosines are numbers here (the rule is pure logic); the service tests (tests/services/test_relevance_floor.py)
and bench/relevance_floor.py run it on the real model's vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from booku_memory.services.logic.relevance import (
    CALIBRATED_MODELS,
    DEFAULT_MARGIN,
    SMALL_TALK,
    background_similarity,
    effective_margin,
    relevant_hits,
    small_talk_lines,
    standing_out,
)

BACKGROUND = 0.80
MARGIN = 0.04


@dataclass
class Hit:
    id: str
    parts: dict[str, Any] = field(default_factory=dict)


def kept(above: dict[str, float | None], parts: dict[str, dict[str, Any]] | None = None, **kwargs: Any) -> list[str]:
    """The ids ``relevant_hits`` keeps of hits whose cosines are ``above`` the background (``None``: no vector);
    ``parts``: id → the fused parts of that hit."""
    hits = [Hit(memory_id, (parts or {}).get(memory_id, {})) for memory_id in above]
    arguments: dict[str, Any] = {
        "margin": MARGIN,
        "background": BACKGROUND,
        "cosines": {key: BACKGROUND + value for key, value in above.items() if value is not None},
        "word_matches": (),
        "answers": {},
        **kwargs,
    }
    return [item.id for item in relevant_hits(hits, **arguments)]


def test_only_hits_above_the_margin_stay() -> None:
    assert kept({"answer": 0.07, "no-vector": None, "unrelated": 0.02}) == ["answer"]
    assert kept({"at-the-margin": MARGIN, "just-below": MARGIN - 0.001}) == ["at-the-margin"]


def test_the_closest_memory_needs_three_quarters_of_the_margin_only_when_it_stands_out() -> None:
    # 0.032 = 0.8 of the margin: kept when it leads the next by a quarter of the margin (0.01) ...
    assert kept({"stands-out": 0.032, "next": 0.02}) == ["stands-out"]
    # ... not when the next one is as close: the best of unrelated memories sits among the others.
    assert kept({"among-others": 0.032, "next": 0.025}) == []
    # Standing out does not lower the bar below three quarters (0.03).
    assert kept({"far-ahead-but-low": 0.028, "next": 0.0}) == []
    # One memory alone has nothing to stand out from.
    assert kept({"alone": 0.032}) == []


def test_standing_out_names_the_leader_by_its_lead() -> None:
    assert standing_out({"a": 0.9, "b": 0.85, "c": 0.7}, 0.05) == "a"
    assert standing_out({"a": 0.9, "b": 0.86}, 0.05) is None
    assert standing_out({"a": 0.9}, 0.0) is None


def test_words_time_and_answers_keep_what_meaning_does_not() -> None:
    above = {"by-words": 0.0, "by-time": 0.0, "question": 0.08, "yes": -0.05, "other": -0.05}
    assert kept(above, {"by-time": {"time": 1.0}}, word_matches={"by-words"}, answers={"yes": "question"}) == [
        "by-words",
        "by-time",
        "question",
        "yes",
    ]


def test_without_a_query_vector_only_words_time_and_answers_count() -> None:
    assert kept({"close": 0.09, "by-words": None}, background=None, word_matches={"by-words"}) == ["by-words"]


def test_a_zero_margin_keeps_everything() -> None:
    assert kept({"a": -0.05, "b": None}, margin=0) == ["a", "b"]


def test_the_background_is_the_mean_over_the_small_talk_of_the_querys_own_language() -> None:
    lines = small_talk_lines()
    assert len(lines) == sum(len(group) for group in SMALL_TALK.values())
    # A query as close to every Chinese line as 0.9 and to every English line as 0.7 (any unit vectors with those
    # cosines would do: the background only reads small_talk @ query).
    query = np.array([1.0, 0.0])
    rows = []
    for language, group in SMALL_TALK.items():
        cosine = 0.9 if language == "zh" else 0.7
        rows += [[cosine, float(np.sqrt(1 - cosine**2))]] * len(group)
    small_talk = np.array(rows)
    assert background_similarity(query, small_talk) == pytest.approx(0.9)  # not the 0.82 of all lines' mean
    assert background_similarity(query, np.zeros((0, 2))) == 0.0


def test_the_default_margin_is_the_calibrated_models_only() -> None:
    model = next(iter(CALIBRATED_MODELS))
    assert effective_margin(None, -1.0, model) == DEFAULT_MARGIN
    assert effective_margin(None, -1.0, "openai/text-embedding-3-small") == 0.0  # never measured: off
    assert effective_margin(None, 0.1, "openai/text-embedding-3-small") == 0.1  # configured: applies to any model
    assert effective_margin(0.0, -1.0, model) == 0.0  # the caller's knob wins


def test_the_closest_memory_that_is_also_the_keyword_routes_best_needs_only_the_background() -> None:
    above = {"project": 0.013, "hike": 0.006, "cat": -0.012}  # "软件开发工作" over four memories, one sharing "开发"
    assert kept(above) == []
    assert kept(above, keyword_best="project") == ["project"]
    assert kept(above, keyword_best="hike") == []  # the routes disagree: neither is evidence enough
    assert kept({"project": -0.001, "hike": -0.01}, keyword_best="project") == []  # below the background

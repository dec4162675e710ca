"""``logic.relevance``: which ranked hits the floor keeps, given their cosines, the query's background and context.

The cosines are numbers here (the rule is pure logic); the service tests (tests/services/test_relevance_floor.py)
and bench/relevance_floor.py run it on the real model's vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from booku_memory.services.logic.relevance import (
    CALIBRATED_MODELS,
    DEFAULT_MARGIN,
    effective_margin,
    relevant_hits,
)

BACKGROUND = 0.80
MARGIN = 0.05


@dataclass
class Hit:
    id: str
    parts: dict[str, Any] = field(default_factory=dict)


def hit(memory_id: str, above: float | None, **parts: Any) -> Hit:
    """A hit whose cosine is ``above`` the background (``None``: the vector route did not score it)."""
    return Hit(memory_id, {"cosine": None if above is None else BACKGROUND + above, **parts})


def kept(hits: list[Hit], **kwargs: Any) -> list[str]:
    arguments: dict[str, Any] = {
        "margin": MARGIN,
        "background": BACKGROUND,
        "word_matches": (),
        "answers": {},
        **kwargs,
    }
    return [item.id for item in relevant_hits(hits, **arguments)]


def test_only_hits_above_the_margin_stay_and_the_closest_needs_half() -> None:
    hits = [hit("answer", 0.07), hit("closest-of-unrelated", None), hit("unrelated", 0.02)]
    assert kept(hits) == ["answer"]
    weak = [hit("closest", 0.03), hit("next", 0.02)]
    assert kept(weak) == ["closest"]  # 0.03 ≥ half the margin: one line is cheap
    assert kept([hit("below-half", 0.02)]) == []


def test_a_hit_only_the_keyword_route_found_is_judged_by_the_cosine_read_for_it() -> None:
    hits = [hit("vector", 0.09), hit("keyword-only", None), hit("keyword-only-unrelated", None)]
    cosines = {"keyword-only": BACKGROUND + 0.06, "keyword-only-unrelated": BACKGROUND + 0.01}
    assert kept(hits) == ["vector"]  # no cosine and too few words: dropped
    assert kept(hits, cosines=cosines) == ["vector", "keyword-only"]
    # The vector route's own cosine wins over one read later.
    assert kept([hit("vector", 0.09)], cosines={"vector": BACKGROUND}) == ["vector"]


def test_an_answer_follows_its_relevant_question_and_a_zero_margin_keeps_everything() -> None:
    hits = [hit("question", 0.08), hit("yes", -0.05), hit("other", -0.05)]
    assert kept(hits, answers={"yes": "question"}) == ["question", "yes"]
    assert kept(hits, margin=0) == ["question", "yes", "other"]


def test_the_default_margin_is_the_calibrated_models_only() -> None:
    model = next(iter(CALIBRATED_MODELS))
    assert effective_margin(None, -1.0, model) == DEFAULT_MARGIN
    assert effective_margin(None, -1.0, "openai/text-embedding-3-small") == 0.0  # never measured: off
    assert effective_margin(None, 0.1, "openai/text-embedding-3-small") == 0.1  # configured: applies to any model
    assert effective_margin(0.0, -1.0, model) == 0.0  # the caller's knob wins

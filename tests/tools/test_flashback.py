"""Flashback choice: reference probabilities and weighting, layers that really differ, per-stream cooldown."""

from __future__ import annotations

import pytest

from booku_memory.config.schema import FlashbackSection
from booku_memory.tools.flashback import (
    FlashbackPicker,
    activation_weight,
    candidate_filter,
    clamp_probability,
    pick_layer,
    should_trigger,
    weighted_choice,
)

from .tool_support import seed


def test_clamp_probability():
    assert [clamp_probability(v) for v in (-1, 0, 0.3, 1, 99, "x", float("nan"))] == [0, 0, 0.3, 1, 1, 0, 0]


def test_should_trigger_is_strictly_below():
    assert should_trigger(0, 0) is False
    assert should_trigger(1, 0.999) is True
    assert should_trigger(0.5, 0.49) is True
    assert should_trigger(0.5, 0.5) is False


def test_pick_layer():
    assert pick_layer(1, 0.999) == "archived"
    assert pick_layer(0, 0) == "emergent"
    assert pick_layer(0.8, 0.79) == "archived"
    assert pick_layer(0.8, 0.81) == "emergent"


def test_weighted_choice_and_activation_weight():
    assert weighted_choice(["a", "b", "c"], [3, 1, 6], 0) == "a"
    assert weighted_choice(["a", "b", "c"], [3, 1, 6], 0.35) == "b"
    assert weighted_choice(["a", "b", "c"], [3, 1, 6], 0.95) == "c"
    assert weighted_choice([], [], 0.5) is None
    assert weighted_choice(["a", "b"], [0, 0], 0.5) == "b"
    with pytest.raises(ValueError):
        weighted_choice(["a"], [1, 2], 0.5)
    assert activation_weight(0, 1) > activation_weight(3, 1)
    assert activation_weight(-5, 0) == 1.0


async def test_bug_flashback_layers_returned_the_same_candidates(svc):
    """Both layers mapped to one candidate set; now archived and active are disjoint."""
    active = await seed(svc, "还在用的", "每天都会用到的事")
    archived = await seed(svc, "旧事", "很久以前的事情")
    await svc.archive_memories([archived])
    emergent_ids = [i["id"] for i in (await svc.list_memory_entries(**candidate_filter("emergent", 50)))["items"]]
    archived_ids = [i["id"] for i in (await svc.list_memory_entries(**candidate_filter("archived", 50)))["items"]]
    assert emergent_ids == [active] and archived_ids == [archived]


def _config(**overrides) -> FlashbackSection:
    values = {"enabled": True, "trigger_probability": 1.0, "archived_probability": 1.0, "cooldown_seconds": 60}
    values.update(overrides)
    return FlashbackSection(**values)


def _candidate(memory_id: str, count: int = 0, bucket: str = "memory") -> dict:
    return {"id": memory_id, "metadata": {"activation_count": count, "bucket": bucket}}


def test_picker_respects_enabled_and_probabilities():
    draws = iter([0.0, 0.0])
    assert FlashbackPicker(_config(enabled=False), rng=lambda: 0.0).layer_for_prompt() is None
    assert FlashbackPicker(_config(), rng=lambda: next(draws)).layer_for_prompt() == "archived"
    assert FlashbackPicker(_config(trigger_probability=0.05), rng=lambda: 0.5).layer_for_prompt() is None


def test_bug_flashback_cooldown_was_global_not_per_stream():
    """The cooldown memory was one per handler, shared by every stream."""
    now = [1000.0]
    picker = FlashbackPicker(_config(), rng=lambda: 0.0, clock=lambda: now[0])
    candidates = [_candidate("m1")]
    assert picker.choose("group", candidates)["id"] == "m1"
    now[0] = 1030.0
    assert picker.choose("group", candidates) is None
    assert picker.choose("private", candidates)["id"] == "m1"
    now[0] = 1061.0
    assert picker.choose("group", candidates)["id"] == "m1"


def test_picker_weights_rarely_recalled_memories_and_skips_knowledge_chunks():
    picker = FlashbackPicker(_config(cooldown_seconds=0), rng=lambda: 0.3)
    candidates = [_candidate("often", count=9), _candidate("rare", count=0), _candidate("kb", bucket="knowledge")]
    # weights 0.1 and 1.0: a draw of 0.3 of the total lands on "rare"
    assert picker.choose("s", candidates)["id"] == "rare"
    assert picker.choose("s", [_candidate("kb", bucket="knowledge")]) is None

"""The [evidence] / [dreaming] settings: constants as fallbacks, config values checked against the same ranges."""

from __future__ import annotations

from dataclasses import fields
from types import SimpleNamespace

import pytest

from booku_memory.services.errors import ConfigError
from booku_memory.services.evidence import (
    CONFIG_KEYS,
    DreamingSettings,
    EvidenceSettings,
    dreaming_settings,
    evidence_settings,
)


def test_every_key_is_listed_once_with_the_dataclass_default():
    listed = {(k.section, k.name): k.default for k in CONFIG_KEYS}
    assert len(listed) == len(CONFIG_KEYS)
    for section, cls in (("evidence", EvidenceSettings), ("dreaming", DreamingSettings)):
        assert {f.name: f.default for f in fields(cls)} == {n: d for (s, n), d in listed.items() if s == section}


def test_config_sections_are_read_when_present_and_checked():
    config = SimpleNamespace(
        evidence=SimpleNamespace(retention_days=7, recall_channel_scope="current_channel"),
        dreaming=SimpleNamespace(enabled=True, stage_a_interval_seconds=120),
    )
    assert evidence_settings(config).retention_days == 7.0
    assert evidence_settings(config).recall_channel_scope == "current_channel"
    assert dreaming_settings(config).stage_a_interval_seconds == 120.0 and dreaming_settings(config).enabled
    assert evidence_settings(SimpleNamespace()) == EvidenceSettings()  # no section yet: the constants
    with pytest.raises(ConfigError, match="evidence.recall_half_life_days"):
        evidence_settings(SimpleNamespace(evidence=SimpleNamespace(recall_half_life_days=-1)))
    with pytest.raises(ConfigError, match="dreaming.chat_provider"):
        dreaming_settings(SimpleNamespace(), chat_provider="gpt")
    with pytest.raises(ConfigError, match="未知的配置项"):
        dreaming_settings(SimpleNamespace(), episode_minutes=3)
    with pytest.raises(ConfigError, match="true 或 false"):
        dreaming_settings(SimpleNamespace(dreaming=SimpleNamespace(enabled="yes")))

"""Settings of chat evidence and dreaming: the ``[evidence]`` and ``[dreaming]`` config sections.

The config schema may not carry these sections yet. Every key falls back to the module constant below, so the
package works with any ``BookuConfig`` and picks the keys up as soon as the schema has them (``CONFIG_KEYS`` lists
them with their ranges, for ``config/schema.py``). Values read from the config are checked against the same ranges,
so a bad value fails loudly at start-up instead of misbehaving later.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Any

from ..errors import ConfigError

# ------------------------------------------------------------------------------------------------ [evidence]
EVIDENCE_ENABLED = True  # evidence.enabled: record the chat messages the host passes to the plugin
RECORD_SENT = True  # evidence.record_sent: also record the bot's own messages (on_message_sent)
RETENTION_DAYS = 0.0  # evidence.retention_days: remove message text older than this; 0 = keep forever
MAX_MESSAGE_CHARS = 4000  # evidence.max_message_chars: longer messages are stored cut, with a marker
RECALL_HALF_LIFE_DAYS = 30.0  # evidence.recall_half_life_days: time decay of recalled evidence
RECALL_MAX_ITEMS = 12  # evidence.recall_max_items: result budget (items) of search
RECALL_MAX_CHARS = 4000  # evidence.recall_max_chars: result budget (characters of text) of search
RECALL_CANDIDATES = 40  # evidence.recall_candidates: candidates per route and source before merging
RECALL_CHANNEL_SCOPE = "stores"  # evidence.recall_channel_scope: "stores" | "current_channel"

# ------------------------------------------------------------------------------------------------ [dreaming]
DREAMING_ENABLED = False  # dreaming.enabled: run stage A (episodes) and stage B (proposals); costs model calls
CHAT_PROVIDER = "host"  # dreaming.chat_provider: "host" (light LLM profile of the host) | "openai" | "none"
HOST_TASK = "utils_small"  # dreaming.host_task: the host's model task used as the light profile
OPENAI_BASE_URL = "http://127.0.0.1:8080/v1"  # dreaming.openai_base_url
OPENAI_MODEL = "gpt-4o-mini"  # dreaming.openai_model
OPENAI_API_KEY_ENV = "BOOKU_DREAMING_API_KEY"  # dreaming.openai_api_key_env: name of the env variable with the key
OPENAI_TIMEOUT_SECONDS = 60.0  # dreaming.openai_timeout_seconds
TEMPERATURE = 0.2  # dreaming.temperature
MAX_OUTPUT_TOKENS = 1200  # dreaming.max_output_tokens
TICK_SECONDS = 60.0  # dreaming.tick_seconds: how often the scheduler wakes up
STAGE_A_INTERVAL_SECONDS = 300.0  # dreaming.stage_a_interval_seconds
STAGE_B_INTERVAL_SECONDS = 3600.0  # dreaming.stage_b_interval_seconds
EPISODE_MAX_MESSAGES = 30  # dreaming.episode_max_messages: a window is summarised at this size at the latest
EPISODE_IDLE_SECONDS = 900.0  # dreaming.episode_idle_seconds: a quiet gap this long closes a window
STAGE_A_MAX_WINDOWS = 20  # dreaming.stage_a_max_windows: windows summarised per run (bounds the cost of a run)
STAGE_B_MAX_EPISODES = 20  # dreaming.stage_b_max_episodes: episodes one owner's run reads
STAGE_B_MAX_PROPOSALS = 10  # dreaming.stage_b_max_proposals: proposals one owner's run may add
STAGE_B_CONTEXT_MEMORIES = 8  # dreaming.stage_b_context_memories: existing memories shown to the model

CHANNEL_SCOPES = ("stores", "current_channel")
CHAT_PROVIDERS = ("host", "openai", "none")


@dataclass(frozen=True)
class ConfigKey:
    """One key for ``config/schema.py``: section, name, default and range (numbers) or choices (strings)."""

    section: str
    name: str
    default: Any
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    doc: str = ""


CONFIG_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey("evidence", "enabled", EVIDENCE_ENABLED, doc="record chat messages as evidence"),
    ConfigKey("evidence", "record_sent", RECORD_SENT, doc="also record the bot's own messages"),
    ConfigKey("evidence", "retention_days", RETENTION_DAYS, 0.0, 36500.0, doc="0 = keep message text forever"),
    ConfigKey("evidence", "max_message_chars", MAX_MESSAGE_CHARS, 100, 100000),
    ConfigKey("evidence", "recall_half_life_days", RECALL_HALF_LIFE_DAYS, 0.01, 36500.0),
    ConfigKey("evidence", "recall_max_items", RECALL_MAX_ITEMS, 1, 200),
    ConfigKey("evidence", "recall_max_chars", RECALL_MAX_CHARS, 200, 200000),
    ConfigKey("evidence", "recall_candidates", RECALL_CANDIDATES, 5, 500),
    ConfigKey("evidence", "recall_channel_scope", RECALL_CHANNEL_SCOPE, choices=CHANNEL_SCOPES),
    ConfigKey("dreaming", "enabled", DREAMING_ENABLED, doc="episodes and proposals; costs model calls"),
    ConfigKey("dreaming", "chat_provider", CHAT_PROVIDER, choices=CHAT_PROVIDERS),
    ConfigKey("dreaming", "host_task", HOST_TASK),
    ConfigKey("dreaming", "openai_base_url", OPENAI_BASE_URL),
    ConfigKey("dreaming", "openai_model", OPENAI_MODEL),
    ConfigKey("dreaming", "openai_api_key_env", OPENAI_API_KEY_ENV),
    ConfigKey("dreaming", "openai_timeout_seconds", OPENAI_TIMEOUT_SECONDS, 1.0, 600.0),
    ConfigKey("dreaming", "temperature", TEMPERATURE, 0.0, 2.0),
    ConfigKey("dreaming", "max_output_tokens", MAX_OUTPUT_TOKENS, 64, 32000),
    ConfigKey("dreaming", "tick_seconds", TICK_SECONDS, 1.0, 3600.0),
    ConfigKey("dreaming", "stage_a_interval_seconds", STAGE_A_INTERVAL_SECONDS, 1.0, 86400.0),
    ConfigKey("dreaming", "stage_b_interval_seconds", STAGE_B_INTERVAL_SECONDS, 1.0, 7 * 86400.0),
    ConfigKey("dreaming", "episode_max_messages", EPISODE_MAX_MESSAGES, 2, 500),
    ConfigKey("dreaming", "episode_idle_seconds", EPISODE_IDLE_SECONDS, 0.0, 7 * 86400.0),
    ConfigKey("dreaming", "stage_a_max_windows", STAGE_A_MAX_WINDOWS, 1, 1000),
    ConfigKey("dreaming", "stage_b_max_episodes", STAGE_B_MAX_EPISODES, 1, 500),
    ConfigKey("dreaming", "stage_b_max_proposals", STAGE_B_MAX_PROPOSALS, 1, 100),
    ConfigKey("dreaming", "stage_b_context_memories", STAGE_B_CONTEXT_MEMORIES, 0, 50),
)


@dataclass(frozen=True)
class EvidenceSettings:
    """Resolved settings (attribute ``<section>_<key>`` without the section for ``[evidence]`` keys)."""

    enabled: bool = EVIDENCE_ENABLED
    record_sent: bool = RECORD_SENT
    retention_days: float = RETENTION_DAYS
    max_message_chars: int = MAX_MESSAGE_CHARS
    recall_half_life_days: float = RECALL_HALF_LIFE_DAYS
    recall_max_items: int = RECALL_MAX_ITEMS
    recall_max_chars: int = RECALL_MAX_CHARS
    recall_candidates: int = RECALL_CANDIDATES
    recall_channel_scope: str = RECALL_CHANNEL_SCOPE


@dataclass(frozen=True)
class DreamingSettings:
    """Resolved ``[dreaming]`` settings."""

    enabled: bool = DREAMING_ENABLED
    chat_provider: str = CHAT_PROVIDER
    host_task: str = HOST_TASK
    openai_base_url: str = OPENAI_BASE_URL
    openai_model: str = OPENAI_MODEL
    openai_api_key_env: str = OPENAI_API_KEY_ENV
    openai_timeout_seconds: float = OPENAI_TIMEOUT_SECONDS
    temperature: float = TEMPERATURE
    max_output_tokens: int = MAX_OUTPUT_TOKENS
    tick_seconds: float = TICK_SECONDS
    stage_a_interval_seconds: float = STAGE_A_INTERVAL_SECONDS
    stage_b_interval_seconds: float = STAGE_B_INTERVAL_SECONDS
    episode_max_messages: int = EPISODE_MAX_MESSAGES
    episode_idle_seconds: float = EPISODE_IDLE_SECONDS
    stage_a_max_windows: int = STAGE_A_MAX_WINDOWS
    stage_b_max_episodes: int = STAGE_B_MAX_EPISODES
    stage_b_max_proposals: int = STAGE_B_MAX_PROPOSALS
    stage_b_context_memories: int = STAGE_B_CONTEXT_MEMORIES


def _checked(key: ConfigKey, value: Any) -> Any:
    name = f"{key.section}.{key.name}"
    default = key.default
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise ConfigError(f"配置项 {name} 必须是 true 或 false")
        return value
    if isinstance(default, (int, float)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ConfigError(f"配置项 {name} 必须是 {key.low} 到 {key.high} 之间的数字")
        if isinstance(default, int) and int(value) != value:
            raise ConfigError(f"配置项 {name} 必须是整数")
        if key.low is not None and key.high is not None and not key.low <= value <= key.high:
            raise ConfigError(f"配置项 {name}={value} 超出范围，允许 {key.low} 到 {key.high}")
        return int(value) if isinstance(default, int) else float(value)
    if not isinstance(value, str):
        raise ConfigError(f"配置项 {name} 必须是字符串")
    if key.choices and value not in key.choices:
        raise ConfigError(f"配置项 {name}={value!r} 无效，可选: {', '.join(key.choices)}")
    return value


def _resolve(config: Any, section: str, target: type, overrides: dict[str, Any]) -> Any:
    keys = {k.name: k for k in CONFIG_KEYS if k.section == section}
    unknown = set(overrides) - set(keys)
    if unknown:
        raise ConfigError(f"未知的配置项 {section}.{', '.join(sorted(unknown))}，该段可用: {', '.join(sorted(keys))}")
    values: dict[str, Any] = {}
    source = getattr(config, section, None)
    for f in fields(target):
        key = keys[f.name]
        raw = overrides.get(f.name, getattr(source, f.name, None))
        values[f.name] = key.default if raw is None else _checked(key, raw)
    return target(**values)


def evidence_settings(config: Any, **overrides: Any) -> EvidenceSettings:
    """``[evidence]`` from a ``BookuConfig`` (missing keys use the constants above); ``overrides`` win (tests)."""
    return _resolve(config, "evidence", EvidenceSettings, overrides)


def dreaming_settings(config: Any, **overrides: Any) -> DreamingSettings:
    """``[dreaming]`` from a ``BookuConfig`` (missing keys use the constants above); ``overrides`` win (tests)."""
    return _resolve(config, "dreaming", DreamingSettings, overrides)

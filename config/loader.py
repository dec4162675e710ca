"""Load and validate a ``BookuConfig`` from TOML (or a plain dict).

Unknown sections or keys, wrong types and out-of-range values raise ``ConfigError`` naming the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import math
import tomllib
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..services.errors import ConfigError
from .schema import BookuConfig


def load_config(source: str | Path | Mapping[str, Any] | BookuConfig | None = None) -> BookuConfig:
    """Build a validated config from a TOML path, a mapping, an existing config or nothing (all defaults)."""
    if source is None:
        return validate_config(BookuConfig())
    if isinstance(source, BookuConfig):
        return validate_config(source)
    if isinstance(source, Mapping):
        return config_from_mapping(source)
    path = Path(source)
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"配置文件不存在: {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"配置文件 {path} 不是合法的 TOML: {exc}") from exc
    return config_from_mapping(raw)


def config_from_mapping(raw: Mapping[str, Any]) -> BookuConfig:
    config = BookuConfig()
    sections = {f.name: f for f in dataclasses.fields(BookuConfig)}
    for section_name, values in raw.items():
        if section_name not in sections:
            raise ConfigError(f"未知的配置段 [{section_name}]，可用: {', '.join(sorted(sections))}")
        if not isinstance(values, Mapping):
            raise ConfigError(f"配置段 [{section_name}] 必须是表（table）")
        section = getattr(config, section_name)
        fields = {f.name: f for f in dataclasses.fields(section)}
        hints = typing.get_type_hints(type(section))
        for key, value in values.items():
            if key not in fields:
                raise ConfigError(f"未知的配置项 {section_name}.{key}，该段可用: {', '.join(sorted(fields))}")
            setattr(section, key, _coerce(f"{section_name}.{key}", value, hints[key]))
    return validate_config(config)


def _coerce(name: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"配置项 {name} 必须是 true 或 false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"配置项 {name} 必须是整数")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"配置项 {name} 必须是数字")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"配置项 {name} 必须是字符串")
        return value
    if origin is list:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"配置项 {name} 必须是字符串列表")
        return list(value)
    return value


def validate_config(config: BookuConfig) -> BookuConfig:
    """Check every bounded and enumerated field; return the config unchanged when valid."""
    for section_field in dataclasses.fields(config):
        section = getattr(config, section_field.name)
        for f in dataclasses.fields(section):
            name = f"{section_field.name}.{f.name}"
            value = getattr(section, f.name)
            if "range" in f.metadata:
                low, high = f.metadata["range"]
                if (
                    isinstance(value, bool)
                    or not isinstance(value, (int, float))
                    or (isinstance(value, float) and not math.isfinite(value))
                ):
                    raise ConfigError(f"配置项 {name} 必须是 {low} 到 {high} 之间的数字")
                if not low <= value <= high:
                    raise ConfigError(f"配置项 {name}={value} 超出范围，允许 {low} 到 {high}")
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                raise ConfigError(f"配置项 {name}={value!r} 无效，可选: {', '.join(f.metadata['choices'])}")
    r = config.retrieval
    if r.core_boost_min > r.core_boost_max:
        raise ConfigError("配置项 retrieval.core_boost_min 不能大于 retrieval.core_boost_max")
    if r.timezone:
        try:
            ZoneInfo(r.timezone)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ConfigError(
                f"配置项 retrieval.timezone={r.timezone!r} 不是可识别的时区名，"
                '请用 IANA 名称（如 "Asia/Shanghai"）或留空'
            ) from exc
    if config.chunking.overlap_chars >= config.chunking.max_chunk_chars:
        raise ConfigError("配置项 chunking.overlap_chars 必须小于 chunking.max_chunk_chars")
    return config

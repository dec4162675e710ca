"""The host's config class, generated from ``BookuConfig``, and the way back to a validated ``BookuConfig``.

The host writes config/plugins/booku_memory/config.toml from this class, with comments. One model per section of
``BookuConfig`` is generated from the dataclass fields (defaults, ranges, choices), so a key added to the schema
appears in the host file without touching this module. Validation stays ours: ``load`` first checks the raw file
with ``config_from_mapping`` (the host would otherwise silently drop unknown keys and reset invalid values), and
the plugin validates the merged result again before starting.
"""

import dataclasses
import tomllib
import typing
from pathlib import Path
from typing import Any, ClassVar, Literal

import pydantic
from src.app.plugin_system.base import BaseConfig, Field, SectionBase, config_section

from ..config import BookuConfig, config_from_mapping, load_config
from ..config.example import SECTION_NOTES
from ..services.errors import ConfigError

HOST_DEFAULTS: dict[str, dict[str, Any]] = {"embedding": {"provider": "host"}}
"""Inside the host the embeddings come from the host's own embedding task unless the operator picks another."""


@config_section("host", title="宿主设置", tag="plugin")
class HostSection(SectionBase):
    """仅在 Neo-MoFox 宿主中生效的设置"""

    data_dir: str = Field(
        default="data/booku_memory",
        description=(
            "数据目录：SQLite 数据库、向量索引、管理后台密钥和知识库文件夹都放在这里；相对路径以宿主的工作目录为基准"
        ),
        tag="file",
    )


def _field_description(field: dataclasses.Field) -> str:
    """The comment the host writes above a key: its doc, range and choices (empty when it has none)."""
    notes = []
    if field.metadata.get("doc"):
        notes.append(str(field.metadata["doc"]))
    if "range" in field.metadata:
        low, high = field.metadata["range"]
        notes.append(f"范围 {low}–{high}")
    if "choices" in field.metadata:
        notes.append("可选 " + " / ".join(field.metadata["choices"]))
    return "；".join(notes)


def _section_model(section_name: str, section_type: type) -> type[SectionBase]:
    """A host ``SectionBase`` mirroring one ``BookuConfig`` section dataclass (host-side defaults applied)."""
    hints = typing.get_type_hints(section_type)
    instance = section_type()
    overrides = HOST_DEFAULTS.get(section_name, {})
    fields: dict[str, Any] = {}
    for field in dataclasses.fields(section_type):
        annotation: Any = hints[field.name]
        default = overrides.get(field.name, getattr(instance, field.name))
        extra: dict[str, Any] = {"description": _field_description(field)}
        if "range" in field.metadata:
            extra["ge"], extra["le"] = field.metadata["range"]
        if "choices" in field.metadata:
            annotation = Literal[tuple(field.metadata["choices"])]
            extra["choices"] = list(field.metadata["choices"])
        if isinstance(default, list):
            fields[field.name] = (annotation, Field(default_factory=lambda value=default: list(value), **extra))
        else:
            fields[field.name] = (annotation, Field(default=default, **extra))
    model = pydantic.create_model(
        f"Booku{section_type.__name__}",
        __base__=SectionBase,
        __doc__=SECTION_NOTES.get(section_name) or section_name,
        **fields,
    )
    return config_section(section_name)(model)


def _check_raw_config_file(path: Path) -> None:
    """Reject unknown sections/keys and invalid values before the host rewrites the file (naming the key)."""
    if not path.exists():
        return
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"插件配置 {path} 不是合法的 TOML：{exc}") from exc
    host = raw.pop("host", {})
    if not isinstance(host, dict):
        raise ConfigError(f"插件配置 {path} 的 [host] 必须是表")
    unknown = sorted(set(host) - set(HostSection.model_fields))
    if unknown:
        raise ConfigError(
            f"未知的配置项 host.{unknown[0]}，该段可用: {', '.join(sorted(HostSection.model_fields))}（文件 {path}）"
        )
    try:
        config_from_mapping(raw)
    except ConfigError as exc:
        raise ConfigError(f"{exc}（文件 {path}）") from exc


class _BookuHostConfigBase(BaseConfig):
    """Booku 记忆插件配置（未知键或越界值会让插件加载失败，并指出是哪一项）"""

    config_name: ClassVar[str] = "config"
    config_description: ClassVar[str] = "Booku 记忆插件配置"

    @classmethod
    def load(cls, path: str | Path, *, auto_update: bool = False) -> Any:
        """Check the raw file strictly, then let the host merge in new defaults and (re)write comments."""
        _check_raw_config_file(Path(path))
        return super().load(path, auto_update=auto_update)


def _host_config_class() -> type[BaseConfig]:
    section_types = typing.get_type_hints(BookuConfig)
    sections: dict[str, Any] = {"host": (HostSection, Field(default_factory=HostSection))}
    for section in dataclasses.fields(BookuConfig):
        model = _section_model(section.name, section_types[section.name])
        sections[section.name] = (model, Field(default_factory=model))
    return pydantic.create_model(
        "BookuHostConfig", __base__=_BookuHostConfigBase, __doc__=_BookuHostConfigBase.__doc__, **sections
    )


BookuHostConfig = _host_config_class()


def settings_from_host_config(config: Any) -> tuple[BookuConfig, Path]:
    """Our validated ``BookuConfig`` and the absolute data directory from the host's config object.

    ``None`` (no config file support) gives the host defaults. Raises ``ConfigError`` naming the offending key.
    """
    if config is None:
        config = BookuHostConfig()
    mapping = {
        section.name: getattr(config, section.name).model_dump()
        for section in dataclasses.fields(BookuConfig)
        if hasattr(config, section.name)
    }
    booku_config = load_config(mapping)
    host = getattr(config, "host", None) or HostSection()
    data_dir = Path(host.data_dir.replace("\\", "/")).expanduser()
    if not data_dir.is_absolute():
        data_dir = Path.cwd() / data_dir
    return booku_config, data_dir.resolve()

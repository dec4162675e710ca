"""Generate the host's ``manifest.json`` from ``plugin.toml``.

``plugin.toml`` is the one hand-edited description of the plugin; Neo-MoFox only reads ``manifest.json``
(docs/HOST_CONTRACT.md, Manifest). Keeping two hand-written copies would let them drift, so the JSON is always generated
(``python -m booku_memory manifest``) and a test fails when the committed file is stale.

The checks here catch what the host would reject silently or confusingly: a missing required key (the plugin is
dropped with one log line), a ``min_core_version`` that is absent (the host assumes "3.0.0") and component
signatures that do not belong to this plugin.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any

from .services.errors import ValidationError

PACKAGE_DIR = Path(__file__).resolve().parent
PLUGIN_TOML = PACKAGE_DIR / "plugin.toml"
MANIFEST_JSON = PACKAGE_DIR / "manifest.json"

COMPONENT_TYPES = (
    "action",
    "agent",
    "tool",
    "adapter",
    "chatter",
    "command",
    "config",
    "event_handler",
    "service",
    "router",
    "plugin",
)
"""The component types the host classifies (docs/HOST_CONTRACT.md, Components)."""

_REQUIRED_PLUGIN_KEYS = ("name", "version", "description", "author", "entry_point", "min_core_version")
_NAME_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_VERSION_PATTERN = re.compile(r"^\d+(\.\d+){1,2}([-.]?(a|b|rc|alpha|beta|dev|post)\.?\d*)?$", re.IGNORECASE)


def load_plugin_toml(plugin_toml_path: str | Path = PLUGIN_TOML) -> dict[str, Any]:
    """Parse ``plugin.toml``; raise ``ValidationError`` naming the file when it is missing or not TOML."""
    path = Path(plugin_toml_path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ValidationError(f"找不到插件清单 {path}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError(f"插件清单 {path} 不是合法的 TOML：{exc}") from exc


def build_manifest(plugin_toml_path: str | Path = PLUGIN_TOML) -> dict[str, Any]:
    """Return the ``manifest.json`` content described by ``plugin.toml``.

    Shape: ``{"name", "display_name", "version", "description", "author", "dependencies": {"plugins",
    "components"}, "include": [{"component_type", "component_name", "dependencies", "enabled"}],
    "entry_point", "min_core_version", "python_dependencies", "dependencies_required"}``.
    Raises ``ValidationError`` (Chinese message naming the key) when the TOML lacks something the host needs.
    """
    raw = load_plugin_toml(plugin_toml_path)
    plugin = raw.get("plugin")
    if not isinstance(plugin, dict):
        raise ValidationError("plugin.toml 缺少 [plugin] 表")
    for key in _REQUIRED_PLUGIN_KEYS:
        value = plugin.get(key)
        if not isinstance(value, str) or not value.strip():
            raise ValidationError(f"plugin.toml 的 [plugin].{key} 必须是非空字符串")
    name = plugin["name"]
    if not _NAME_PATTERN.match(name):
        raise ValidationError(f"[plugin].name={name!r} 必须是合法的 Python 标识符（宿主把插件文件夹当作同名包导入）")
    for key in ("version", "min_core_version"):
        if not _VERSION_PATTERN.match(plugin[key]):
            raise ValidationError(f"[plugin].{key}={plugin[key]!r} 不是版本号，应形如 2.0.0 或 1.2.0-alpha.3")

    python_dependencies = plugin.get("python_dependencies", [])
    if not isinstance(python_dependencies, list) or not all(
        isinstance(d, str) and d.strip() for d in python_dependencies
    ):
        raise ValidationError("[plugin].python_dependencies 必须是 pip 依赖字符串列表")

    dependencies = raw.get("dependencies", {})
    if not isinstance(dependencies, dict):
        raise ValidationError("plugin.toml 的 [dependencies] 必须是表")
    plugin_deps = _string_list(dependencies.get("plugins", []), "dependencies.plugins")
    component_deps = _string_list(dependencies.get("components", []), "dependencies.components")

    include = [_include_entry(name, entry, index) for index, entry in enumerate(raw.get("components", []))]
    if not include:
        raise ValidationError("plugin.toml 至少需要一个 [[components]] 条目")
    seen: set[tuple[str, str]] = set()
    for entry in include:
        component = (entry["component_type"], entry["component_name"])
        if component in seen:
            raise ValidationError(f"[[components]] 中重复的组件 {name}:{component[0]}:{component[1]}")
        seen.add(component)

    manifest: dict[str, Any] = {
        "name": name,
        "display_name": str(plugin.get("display_name", name)),
        "version": plugin["version"],
        "description": plugin["description"],
        "author": plugin["author"],
        "dependencies": {"plugins": plugin_deps, "components": component_deps},
        "include": include,
        "entry_point": plugin["entry_point"],
        "min_core_version": plugin["min_core_version"],
        "python_dependencies": list(python_dependencies),
        "dependencies_required": bool(plugin.get("dependencies_required", True)),
    }
    return manifest


def component_signatures(plugin_toml_path: str | Path = PLUGIN_TOML) -> list[str]:
    """The ``plugin:type:name`` signatures listed in ``plugin.toml``, in file order."""
    manifest = build_manifest(plugin_toml_path)
    return [f"{manifest['name']}:{e['component_type']}:{e['component_name']}" for e in manifest["include"]]


def render_manifest(manifest: dict[str, Any]) -> str:
    """The exact text written to ``manifest.json`` (stable key order, UTF-8 Chinese, trailing newline)."""
    return json.dumps(manifest, ensure_ascii=False, indent=4) + "\n"


def write_manifest(
    plugin_toml_path: str | Path = PLUGIN_TOML,
    manifest_path: str | Path | None = None,
) -> Path:
    """Regenerate ``manifest.json`` (next to ``plugin.toml`` unless ``manifest_path`` is given); return its path."""
    source = Path(plugin_toml_path)
    target = Path(manifest_path) if manifest_path is not None else source.with_name("manifest.json")
    text = render_manifest(build_manifest(source))
    target.write_text(text, encoding="utf-8")
    return target


def _string_list(value: Any, key: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ValidationError(f"plugin.toml 的 {key} 必须是字符串列表")
    return list(value)


def _include_entry(plugin_name: str, entry: Any, index: int) -> dict[str, Any]:
    where = f"[[components]] 第 {index + 1} 项"
    if not isinstance(entry, dict):
        raise ValidationError(f"{where} 必须是表")
    signature = entry.get("signature")
    if not isinstance(signature, str) or signature.count(":") != 2:
        raise ValidationError(f"{where} 的 signature 必须形如 {plugin_name}:<类型>:<名称>，实际为 {signature!r}")
    owner, component_type, component_name = signature.split(":")
    if owner != plugin_name:
        raise ValidationError(f"{where} 的 signature {signature!r} 不属于插件 {plugin_name}")
    if component_type not in COMPONENT_TYPES:
        raise ValidationError(f"{where} 的组件类型 {component_type!r} 无效，可选: {', '.join(COMPONENT_TYPES)}")
    if not _NAME_PATTERN.match(component_name):
        raise ValidationError(f"{where} 的组件名 {component_name!r} 必须是标识符（字母、数字、下划线）")
    return {
        "component_type": component_type,
        "component_name": component_name,
        "dependencies": _string_list(entry.get("dependencies", []), f"{where}.dependencies"),
        "enabled": bool(entry.get("enabled", True)),
    }

"""The committed manifest.json must be exactly what plugin.toml generates, and plugin.toml must agree with pyproject.

Neo-MoFox reads only manifest.json; a stale copy would load the plugin with the wrong version, dependencies or
minimum host version without anyone noticing. Fix a failure here with ``python -m booku_memory manifest``.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from booku_memory.manifest_tools import (
    MANIFEST_JSON,
    PACKAGE_DIR,
    PLUGIN_TOML,
    build_manifest,
    component_signatures,
    render_manifest,
    write_manifest,
)
from booku_memory.services.errors import ValidationError

PYPROJECT = PACKAGE_DIR / "pyproject.toml"
REFERENCE_HOST_VERSION = "1.2.0-rc.2"
"""CORE_VERSION of the Neo-MoFox release we target (docs/HOST_CONTRACT.md), compared as a packaging.Version."""


def _normalised(requirements: list[str]) -> dict[str, str]:
    """name -> specifier set, so formatting differences (spaces, case) do not count as disagreement."""
    parsed = {}
    for text in requirements:
        requirement = Requirement(text)
        parsed[requirement.name.lower().replace("_", "-")] = str(requirement.specifier)
    return parsed


def test_committed_manifest_matches_plugin_toml() -> None:
    assert MANIFEST_JSON.exists(), "manifest.json 缺失：运行 python -m booku_memory manifest"
    committed = MANIFEST_JSON.read_text(encoding="utf-8")
    assert json.loads(committed) == build_manifest(PLUGIN_TOML), (
        "manifest.json 与 plugin.toml 不一致：运行 python -m booku_memory manifest 重新生成"
    )
    assert committed == render_manifest(build_manifest(PLUGIN_TOML))


def test_python_dependencies_mirror_pyproject() -> None:
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    declared = _normalised(pyproject["project"]["dependencies"])
    manifest = build_manifest(PLUGIN_TOML)
    assert _normalised(manifest["python_dependencies"]) == declared
    pinned_exceptions = {"numpy"}  # numpy follows whatever the host already ships within a major-version range
    for name, specifier in declared.items():
        if name not in pinned_exceptions:
            assert specifier.startswith("=="), f"{name} 必须固定版本（==），实际为 {specifier!r}"


def test_manifest_is_accepted_by_the_reference_host_rules() -> None:
    manifest = build_manifest(PLUGIN_TOML)
    for key in ("name", "version", "description", "author", "dependencies", "entry_point"):
        assert key in manifest  # the host drops a plugin missing any of these
    # The host compares min_core_version with its own version via packaging.Version; "1.2.0" > "1.2.0rc2" would
    # reject us on the release candidate we target.
    assert Version(manifest["min_core_version"]) <= Version(REFERENCE_HOST_VERSION)
    assert manifest["name"] == "booku_memory"
    assert (PACKAGE_DIR / manifest["entry_point"]).is_file()
    pyproject = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))
    assert manifest["version"] == pyproject["project"]["version"]


def test_component_signatures_cover_the_public_surface() -> None:
    signatures = component_signatures(PLUGIN_TOML)
    for required in (
        "booku_memory:service:booku_memory",
        "booku_memory:service:booku_knowledge",
        "booku_memory:tool:memory_command",
        "booku_memory:tool:temporary_memo",
        "booku_memory:router:memory_admin",
    ):
        assert required in signatures
    assert len(signatures) == len(set(signatures))


def test_write_manifest_round_trip(tmp_path: Path) -> None:
    source = tmp_path / "plugin.toml"
    source.write_text(PLUGIN_TOML.read_text(encoding="utf-8"), encoding="utf-8")
    written = write_manifest(source)
    assert written == tmp_path / "manifest.json"
    assert json.loads(written.read_text(encoding="utf-8")) == build_manifest(source)

    # Changing plugin.toml without regenerating makes the committed JSON disagree: the guard above would fire.
    bumped = source.read_text(encoding="utf-8").replace('version = "2.0.0"', 'version = "2.0.1"')
    source.write_text(bumped, encoding="utf-8")
    assert json.loads(written.read_text(encoding="utf-8")) != build_manifest(source)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ('min_core_version = "1.2.0-alpha.3"\n', "", "min_core_version"),
        ('signature = "booku_memory:tool:temporary_memo"', 'signature = "other:tool:temporary_memo"', "不属于插件"),
        ('signature = "booku_memory:tool:temporary_memo"', 'signature = "booku_memory:widget:x"', "组件类型"),
        ('signature = "booku_memory:tool:temporary_memo"', 'signature = "booku_memory:tool:memory_command"', "重复"),
        ('name = "booku_memory"', 'name = "booku-memory"', "标识符"),
    ],
)
def test_broken_plugin_toml_is_rejected_with_the_key_named(tmp_path: Path, old: str, new: str, message: str) -> None:
    text = PLUGIN_TOML.read_text(encoding="utf-8")
    assert old in text
    source = tmp_path / "plugin.toml"
    source.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ValidationError, match=re.escape(message)):
        build_manifest(source)

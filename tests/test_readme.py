"""The README as a newcomer follows it: every block runs as written in a fresh copy of the repository.

Python blocks run with the repository's ``.venv`` python; shell blocks run with ``bash -e`` from the copy's root;
a block marked ``<!-- readme-test: server URL -->`` starts a long-running server, which must answer at URL before a
timeout and is then stopped; the block marked ``ci`` is what ``.ci/run`` runs (the whole suite, so not from within
it); TOML blocks must load as a configuration.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from booku_memory.config import load_config

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
BLOCK = re.compile(r"(?:<!-- readme-test: (?P<mark>[^>]*?) -->\n)?```(?P<lang>\w+)\n(?P<body>.*?)```", re.S)
SERVER_TIMEOUT = 240


@dataclass(frozen=True)
class Block:
    lang: str
    body: str
    mark: str
    line: int

    @property
    def name(self) -> str:
        return f"README.md:{self.line} ({self.lang}{', ' + self.mark.split()[0] if self.mark else ''})"


def readme_blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    return [
        Block(m["lang"], m["body"], (m["mark"] or "").strip(), text.count("\n", 0, m.start()) + 1)
        for m in BLOCK.finditer(text)
    ]


BLOCKS = readme_blocks()


def _blocks(lang: str, mark: str = "") -> list[Block]:
    return [b for b in BLOCKS if b.lang == lang and b.mark.split()[:1] == mark.split()[:1]]


@pytest.fixture(scope="module")
def checkout(tmp_path_factory) -> Path:
    """The repository's tracked files in a temp dir, with the installed ``.venv`` linked in (as after setup)."""
    target = tmp_path_factory.mktemp("readme") / "booku_memory"
    listed = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z"], capture_output=True, check=True).stdout
    for name in filter(None, listed.decode("utf-8").split("\0")):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    (target / ".venv").symlink_to(ROOT / ".venv")
    return target


def _env() -> dict[str, str]:
    return {key: value for key, value in os.environ.items() if not key.startswith(("PYTEST", "BOOKU_"))}


def test_readme_is_short_chinese_and_points_only_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith(("http://", "https://")):
            assert (ROOT / target).exists(), f"README 链接到仓库里不存在的 {target}"
    heading_words = re.findall(r"^#+ (.+)$", text, re.M)
    assert all(re.search(r"[\u4e00-\u9fff]", h) or h in ("Booku Memory",) for h in heading_words)


def test_ci_runs_exactly_the_readme_test_command():
    (block,) = _blocks("bash", "ci")
    command = block.body.strip()
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()]
    assert command in ci_lines


@pytest.mark.parametrize("block", _blocks("python"), ids=lambda b: b.name)
def test_python_example_runs_as_written(block, checkout):
    script = checkout / "example.py"
    script.write_text(block.body, encoding="utf-8")
    result = subprocess.run(
        [str(checkout / ".venv" / "bin" / "python"), "example.py"],
        cwd=checkout,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert re.match(r"(created|merged) mem-[0-9a-f]+$", lines[0]), result.stdout
    assert any("张三" in line for line in lines[1:]), result.stdout


@pytest.mark.parametrize("block", _blocks("bash"), ids=lambda b: b.name)
def test_command_block_runs_as_written(block, checkout):
    result = subprocess.run(
        ["bash", "-e", "-c", block.body], cwd=checkout, env=_env(), capture_output=True, text=True, timeout=900
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr


def _port_is_free(url: str) -> bool:
    parts = urlsplit(url)
    with socket.socket() as probe:
        return probe.connect_ex((parts.hostname, parts.port)) != 0


@pytest.mark.parametrize("block", _blocks("bash", "server"), ids=lambda b: b.name)
def test_server_block_comes_up(block, checkout):
    url = block.mark.split()[1]
    if not _port_is_free(url):
        pytest.skip(f"{url} 已被本机其他程序占用，无法按 README 原样启动")
    process = subprocess.Popen(
        ["bash", "-e", "-c", block.body],
        cwd=checkout,
        env=_env(),
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + SERVER_TIMEOUT
        answer = None
        while time.monotonic() < deadline and process.poll() is None:
            try:
                answer = httpx.get(url, timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.5)
        assert answer is not None, f"{url} 没有在 {SERVER_TIMEOUT} 秒内响应（退出码 {process.poll()}）"
        assert answer.status_code < 500
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGINT)
        try:
            output, _ = process.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            output, _ = process.communicate()
    assert "Traceback" not in output, output
    assert "Package would be ignored" not in output  # serve.sh prints no packaging noise


@pytest.mark.parametrize("block", _blocks("json"), ids=lambda b: b.name)
def test_client_configuration_is_valid_json_naming_the_venv_command(block):
    server = json.loads(block.body)["mcpServers"]["booku-memory"]
    assert server["command"].endswith("/.venv/bin/booku-memory") and server["args"][0] == "mcp"


@pytest.mark.parametrize("block", _blocks("toml"), ids=lambda b: b.name)
def test_configuration_example_loads(block, tmp_path):
    tomllib.loads(block.body)
    path = tmp_path / "booku.toml"
    path.write_text(block.body, encoding="utf-8")
    load_config(path)

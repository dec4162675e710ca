"""Boot script run by ``test_neomofox_host.py`` inside a Neo-MoFox venv (never imported by pytest).

It is copied into a scratch directory and run there with ``PYTHONPATH=<Neo-MoFox root>``; the host creates its
``config/``, ``data/`` and ``logs/`` in that directory. It loads booku_memory through the host's REAL
``PluginLoader`` (manifest, version and dependency checks) and ``PluginManager`` from a plugins directory holding a
``booku_memory`` symlink to the repository, drives the public surfaces the way the host and client plugins do, and
prints one line ``BOOKU_HOST_RESULT <json>`` that the test asserts on. Every step records its outcome; an exception
is recorded under ``"errors"`` instead of aborting, so one failure does not hide the others.

Usage: ``python neomofox_boot.py '<json args>'`` with ``{"mode": "full"|"bad-config", "plugins_dir", "http_port"}``.
"""

import asyncio
import dataclasses
import importlib
import json
import os
import subprocess
import sys
import time
import tomllib
import traceback
from pathlib import Path

RESULT_MARKER = "BOOKU_HOST_RESULT "
PLUGIN = "booku_memory"
MEMORY_SERVICE = "booku_memory:service:booku_memory"
KNOWLEDGE_SERVICE = "booku_memory:service:booku_knowledge"
STREAM_A = "stream-alpha"
STREAM_B = "stream-beta"
STREAM_C = "stream-gamma"
COMPANION_TOOLS = ("breath", "breath_search", "hold", "trace", "dream", "anchor", "release", "pulse", "recall")
SELF_STATEMENT = "我觉得我在意的是被认真对待。"

result: dict = {"errors": {}}


def prompt_params(stream_id: str) -> dict:
    """The shape default_chatter publishes for its user prompt (docs/HOST_CONTRACT.md)."""
    return {
        "name": "default_chatter_user_prompt",
        "template": "{extra}",
        "values": {
            "extra": "",
            "stream_id": stream_id,
            "chat_type": "group",
            "stream_name": "测试群",
            "history": "",
            "unreads": "",
        },
        "policies": {},
        "strict": False,
    }


async def step(name: str, coro_fn):
    """Run one step, store its return value under ``name`` (or the error), never raise."""
    try:
        value = await coro_fn()
        result[name] = value
        return value
    except Exception as exc:
        result["errors"][name] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=6)}"
        return None


def boot_core() -> None:
    from src.core.config import init_core_config, init_model_config
    from src.core.managers import initialize_event_manager, initialize_router_manager

    init_core_config("config/core.toml")
    init_model_config("config/model.toml")
    initialize_event_manager()
    initialize_router_manager()


async def plan_and_load(plugins_dir: str) -> dict:
    from src.core.components.loader import PluginLoader
    from src.core.managers import get_plugin_manager

    loader = PluginLoader()
    order, manifests = await loader.plan_plugins(plugins_dir)
    outcome = {"order": order, "loader_failed": {k: str(v) for k, v in loader.get_failed_plugins().items()}}
    manager = get_plugin_manager()
    for name in order:
        manifest = manifests[name]
        try:
            outcome[name] = await manager.load_plugin_from_manifest(manifest._source_path, manifest)
        except Exception as exc:
            outcome[name] = False
            outcome["load_error"] = f"{type(exc).__name__}: {exc}"
    return outcome


async def run_bad_config(args: dict) -> None:
    """A typo in the plugin config must refuse the plugin with a message naming the key, and keep the file."""
    config_file = Path("config/plugins/booku_memory/config.toml")
    boot_core()
    result["load"] = await plan_and_load(args["plugins_dir"])
    result["config_file_after"] = config_file.read_text(encoding="utf-8")


async def run_full(args: dict) -> None:
    import httpx
    from src.app.plugin_system.api.service_api import get_service
    from src.core.components.registry import get_global_registry
    from src.core.components.types import EventType
    from src.core.managers import get_plugin_manager
    from src.core.prompt import get_system_reminder_store
    from src.core.transport.router.http_server import get_http_server
    from src.kernel.event import get_event_bus

    boot_core()
    server = get_http_server(host="127.0.0.1", port=args["http_port"])
    await server.start()
    bus = get_event_bus()
    store = get_system_reminder_store()
    base_url = f"http://127.0.0.1:{args['http_port']}/booku-memory"

    started = time.monotonic()
    result["load"] = await plan_and_load(args["plugins_dir"])
    result["load_seconds"] = round(time.monotonic() - started, 2)
    result["signatures"] = sorted(get_global_registry().get_by_plugin(PLUGIN).keys())
    config_text = Path("config/plugins/booku_memory/config.toml").read_text(encoding="utf-8")
    result["host_config"] = tomllib.loads(config_text)
    plugin = get_plugin_manager().get_plugin(PLUGIN)
    runtime = plugin.runtime if plugin is not None else None
    result["runtime_started"] = bool(runtime is not None and runtime.started)
    result["startup_error"] = getattr(plugin, "startup_error", None)
    # A host-task embedder learns its dimension from a first call, which the runtime makes in the background so
    # plugin loading never waits for the model; give that probe a moment before using the memory service.
    deadline = time.monotonic() + 60
    while runtime is not None and not runtime.embedding_available() and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    result["degraded_reason"] = runtime.degraded_reason() if runtime is not None else None
    result["embedder_model"] = runtime.vectors.model_id if runtime is not None else None

    await bus.publish(EventType.ON_ALL_PLUGIN_LOADED, {})
    await bus.publish(EventType.ON_START, {})

    service = get_service(MEMORY_SERVICE)
    result["service_class"] = type(service).__name__ if service is not None else None
    result["service_mro"] = [c.__name__ for c in type(service).__mro__] if service is not None else []
    result["knowledge_service_class"] = type(get_service(KNOWLEDGE_SERVICE)).__name__

    async def create():
        created = await service.create_memory(
            title="Alice 的饮品偏好",
            content="Alice 最喜欢喝绿茶，尤其是龙井；她从不喝咖啡。",
            core_tags=["Alice", "绿茶"],
            diffusion_tags=["饮品", "龙井"],
            opposing_tags=["咖啡"],
            memory_type="event",
            status="active",
            event_start_at=1_700_000_000.0,
            event_end_at=1_700_000_000.0,
        )
        memory_id = created["items"][0]["id"]
        await service.update_activated(memory_id)
        return {"id": memory_id, "mode": created["mode"], "degraded": created.get("degraded")}

    created = await step("create", create)
    memory_id = created["id"] if created else "missing"

    async def create_without_tags():
        try:
            await service.create_memory(
                title="无标签", content="缺少三组标签的写入", core_tags=[], diffusion_tags=[], opposing_tags=[]
            )
        except ValueError as exc:
            return {"raised": type(exc).__name__, "message": str(exc)}
        return {"raised": None}

    await step("create_without_tags", create_without_tags)

    async def retrieve():
        found = await service.retrieve_memories("Alice 平时喜欢喝什么？", top_k=3)
        return {
            "ids": [r["id"] for r in found["results"]],
            "scores": [r.get("score") for r in found["results"]],
            "keys": sorted(found),
            "degraded": found.get("degraded"),
        }

    await step("retrieve", retrieve)

    async def listing():
        listed = await service.list_memory_entries(include_archived=True, limit=20)
        return {"ids": [i["id"] for i in listed["items"]], "keys": sorted(listed)}

    await step("list", listing)

    async def grep():
        hits = await service.grep_memories(query="龙井", search_fields=["title", "content", "tags"])
        return {"ids": [i["id"] for i in hits["items"]]}

    await step("grep", grep)

    async def read():
        full = await service.read_full_content(memory_ids=[memory_id, "mem-does-not-exist"])
        return {
            "ids": [i["id"] for i in full["items"]],
            "content": full["items"][0].get("content") if full["items"] else None,
            "missing": full.get("missing"),
        }

    await step("read", read)

    registry = get_global_registry()

    async def schemas():
        command_cls = registry.get("booku_memory:tool:memory_command")
        memo_cls = registry.get("booku_memory:tool:temporary_memo")
        schemas = {"memory_command": command_cls.to_schema(), "temporary_memo": memo_cls.to_schema()}
        for name in COMPANION_TOOLS:
            schemas[name] = registry.get(f"booku_memory:tool:{name}").to_schema()
        return schemas

    await step("schemas", schemas)

    async def run_tools():
        command_cls = registry.get("booku_memory:tool:memory_command")
        memo_cls = registry.get("booku_memory:tool:temporary_memo")
        tool = command_cls(plugin)
        tool._bind_runtime_context(stream_id=STREAM_A)
        search_ok, search_text = await tool.execute(command="search -q 绿茶 -n 3")
        bad_ok, bad_text = await tool.execute(command="search -nope 1")
        memo = memo_cls(plugin)
        memo._bind_runtime_context(stream_id=STREAM_A)
        memo_ok, memo_text = await memo.execute(content="今晚八点提醒 Alice 开会", expire_hours=1.0)
        return {
            "search_ok": search_ok,
            "search_text": search_text,
            "bad_ok": bad_ok,
            "bad_text": bad_text,
            "memo_ok": memo_ok,
            "memo_text": memo_text,
        }

    await step("tools", run_tools)

    def reminder_names() -> list[str]:
        return sorted(item.name for item in store.get_items("actor"))

    def reminder(name: str) -> str:
        items = store.get_items("actor", [name])
        return items[0].content if items else ""

    async def reminders_after_writes():
        return {
            "names": reminder_names(),
            "digest": reminder("活跃记忆速览"),
            "manual_chars": len(reminder("booku_memory")),
        }

    await step("reminders", reminders_after_writes)

    async def prompt_builds():
        # Warning threshold is 2 in the test config: two actor rounds without the tool arm one warning.
        for _ in range(2):
            await bus.publish(
                EventType.AFTER_CHATTER_STEP, {"stream_id": STREAM_A, "step_scope": "actor_round", "used_tools": []}
            )
        _, first = await bus.publish("on_prompt_build", prompt_params(STREAM_A))
        memo_for_a = reminder("临时备忘录")
        _, second = await bus.publish("on_prompt_build", prompt_params(STREAM_A))
        # Using the tool under the name the default chatter reports resets the count.
        await bus.publish(
            EventType.AFTER_CHATTER_STEP, {"stream_id": STREAM_B, "step_scope": "actor_round", "used_tools": []}
        )
        await bus.publish(
            EventType.AFTER_CHATTER_STEP,
            {"stream_id": STREAM_B, "step_scope": "actor_round", "used_tools": ["tool-memory_command"]},
        )
        await bus.publish(
            EventType.AFTER_CHATTER_STEP, {"stream_id": STREAM_B, "step_scope": "actor_round", "used_tools": []}
        )
        _, other = await bus.publish("on_prompt_build", prompt_params(STREAM_B))
        memo_for_b = reminder("临时备忘录")
        _, foreign = await bus.publish("on_prompt_build", {**prompt_params(STREAM_A), "name": "some_other_template"})
        return {
            "first_extra": first["values"]["extra"],
            "second_extra": second["values"]["extra"],
            "other_extra": other["values"]["extra"],
            "foreign_extra": foreign["values"]["extra"],
            "memo_for_a": memo_for_a,
            "memo_for_b": memo_for_b,
        }

    await step("prompt", prompt_builds)

    async def knowledge_guide():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not reminder("专业知识引导语"):
            await asyncio.sleep(0.5)
        titles = await get_service(KNOWLEDGE_SERVICE).export_document_titles()
        return {"guide": reminder("专业知识引导语"), "titles": titles}

    await step("knowledge", knowledge_guide)

    async def http_checks():
        key = (Path(plugin.data_dir) / "dashboard_api_key").read_text(encoding="utf-8").strip()
        async with httpx.AsyncClient(timeout=30) as client:
            anonymous = await client.get(f"{base_url}/api/status")
            authed = await client.get(f"{base_url}/api/status", headers={"X-API-Key": key})
            memories = await client.get(f"{base_url}/api/memories", headers={"X-API-Key": key})
            docs = await client.get(f"{base_url}/docs")
        return {
            "anonymous": anonymous.status_code,
            "authed": authed.status_code,
            "memories": memories.status_code,
            "memories_body": memories.text[:2000],
            "docs": docs.status_code,
        }

    await step("http", http_checks)

    async def companion_tools():
        from src.core.managers.tool_manager.tool_use import get_tool_use

        hold = registry.get("booku_memory:tool:hold")(plugin)
        hold._bind_runtime_context(stream_id=STREAM_A)
        hold_ok, hold_text = await hold.execute(content="Alice 说她下个月想去看海。", importance=7, domain="旅行")
        # breath through the host's own dispatcher, with the ``reason`` argument the chatter injects into every call
        breath_ok, breath_text = await get_tool_use().execute_tool(
            "booku_memory:tool:breath", plugin, None, reason="睁眼看看记得什么"
        )
        search = registry.get("booku_memory:tool:breath_search")(plugin)
        search._bind_runtime_context(stream_id=STREAM_A)
        search_ok, search_text = await search.execute(query="看海", max_results=3)
        missing_ok, missing_text = await search.execute()
        recall = registry.get("booku_memory:tool:recall")(plugin)
        recall._bind_runtime_context(stream_id=STREAM_A)
        recall_ok, recall_text = await recall.execute(query="Alice 喜欢喝什么")
        return {
            "hold_ok": hold_ok,
            "hold_text": hold_text,
            "breath_ok": breath_ok,
            "breath_text": breath_text,
            "search_ok": search_ok,
            "search_text": search_text,
            "missing_ok": missing_ok,
            "missing_text": missing_text,
            "recall_ok": recall_ok,
            "recall": json.loads(recall_text),
        }

    await step("companion_tools", companion_tools)

    async def session_self():
        package = type(plugin).__module__.rsplit(".", 1)[0]
        companion_cls = importlib.import_module(package + ".services.companion.service").BookuCompanionService
        if not hasattr(companion_cls, "latest_self_entries"):
            return {"supported": False}
        service = await plugin.memory_service_for_stream(STREAM_C)
        ai = companion_cls(service.runtime, service.scope, side="ai")
        candidate = await ai.self_knowledge(content=SELF_STATEMENT, aspect="values")
        for day in (1, 2, 3):  # witnessed by dreams on three different dates, then promoted
            moment = time.mktime((2031, 3, day, 21, 0, 0, 0, 0, -1))
            await companion_cls(service.runtime, service.scope, side="ai", clock=lambda m=moment: m).dream()
        await ai.self_knowledge(promote=candidate["id"])
        _, first = await bus.publish("on_prompt_build", prompt_params(STREAM_C))
        _, second = await bus.publish("on_prompt_build", prompt_params(STREAM_C))
        return {"supported": True, "first_extra": first["values"]["extra"], "second_extra": second["values"]["extra"]}

    await step("session_self", session_self)

    async def cli_client():
        # The plugin owns its data dir: a CLI run on it (another interpreter, the one running the tests) works
        # through the plugin's runtime, and what it writes is found by the plugin's own service at once.
        command = [
            args["cli_python"],
            "-m",
            "booku_memory",
            "command",
            "--json",
            "--data-dir",
            str(plugin.data_dir),
            'create -title 命令行写入 -content "命令行写给宿主的一条记忆：周五去看牙医" -triple_tags "牙医|周五|体检"',
        ]
        done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, timeout=300)
        record = json.loads((Path(plugin.data_dir) / "booku.lock").read_text(encoding="utf-8"))
        found = await get_service(MEMORY_SERVICE).retrieve_memories("周五 看牙医", record_activation=False)
        written = json.loads(done.stdout)["results"][0]["result"]["id"] if done.returncode == 0 else ""
        return {
            "returncode": done.returncode,
            "stderr": done.stderr[-2000:],
            "written": written,
            "first_found": found["results"][0]["id"] if found["results"] else "",
            "owner_entry": record["entry_point"],
            "owner_pid": record["pid"],
            "host_pid": os.getpid(),
        }

    await step("cli_client", cli_client)

    async def unknown_stream_scope():
        # In per_chat mode a stream id the host has no record of must fail closed: a private store of its own.
        saved = plugin.booku_config
        plugin.booku_config = dataclasses.replace(saved, scope=dataclasses.replace(saved.scope, mode="per_chat"))
        try:
            first = await plugin.scope_for_stream("booku-test-no-such-stream")
            other = await plugin.scope_for_stream("booku-test-another-unknown-stream")
        finally:
            plugin.booku_config = saved
        return {
            "writable": first.writable_store_key,
            "other_writable": other.writable_store_key,
            "readable": list(first.readable_store_keys),
            "default_store": runtime.default_scope.writable_store_key,
        }

    await step("unknown_stream_scope", unknown_stream_scope)

    async def unload():
        ok = await get_plugin_manager().unload_plugin(PLUGIN)
        async with httpx.AsyncClient(timeout=30) as client:
            after = await client.get(f"{base_url}/api/status")
        ours = {"booku_memory", "活跃记忆速览", "临时备忘录", "专业知识引导语"}
        return {
            "ok": ok,
            "runtime_started_after": runtime.started if runtime is not None else None,
            "plugin_runtime_after": plugin.runtime is None,
            "reminders_left": sorted(ours & set(reminder_names())),
            "http_after": after.status_code,
            "service_after": get_service(MEMORY_SERVICE) is None,
        }

    await step("unload", unload)
    await server.stop()


def main() -> None:
    args = json.loads(sys.argv[1])
    try:
        runner = run_full if args["mode"] == "full" else run_bad_config
        asyncio.run(runner(args))
    except Exception as exc:
        result["errors"]["boot"] = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    print(RESULT_MARKER + json.dumps(result, ensure_ascii=False, default=str), flush=True)


if __name__ == "__main__":
    main()

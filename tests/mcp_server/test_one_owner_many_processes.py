"""One data dir, many programs: ``serve`` on 127.0.0.1, the CLI, an MCP stdio server and ``booku_memory.open()``.

Every program here is a real process started as a user would start it (the servers and the CLI with the test-only
``BOOKU_TEST_EMBEDDER=deterministic``, so none loads the local model). ``serve`` owns the data dir; the others find
it owned and work through it. What a user would notice is checked: a memory written through any entry point is
found by every other one at once, at the rank a fresh process gives it; maintenance commands run while the server
keeps answering; a second owner is refused with a message naming the first; a killed owner's lock is taken over.
The workspace, the MCP stdio session and free ports come from this folder's ``kit`` (conftest.py).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from mcp import ClientSession

import booku_memory
from booku_memory.owner_client import RemoteMemoryHandle
from booku_memory.services.embedding.deterministic import TEST_EMBEDDER_ENV, DeterministicTestEmbedder
from booku_memory.services.ownership import read_owner
from booku_memory.standalone import MemoryHandle

START_TIMEOUT = 120.0  # generous: a cold interpreter imports chromadb and jieba, and five engineers share 2 cores


def program(space: Any, *command: str) -> list[str]:
    """``python -m booku_memory <command>`` on the workspace's data dir and quiet config."""
    return [
        sys.executable,
        "-m",
        "booku_memory",
        *command,
        "--data-dir",
        str(space.data_dir),
        "--config",
        str(space.config_path),
    ]


def env() -> dict[str, str]:
    return {**os.environ, TEST_EMBEDDER_ENV: "deterministic"}


def cli(space: Any, *command: str) -> subprocess.CompletedProcess:
    """Run one CLI command (``--json``, as a script would) from a ``work`` directory (not the server's), as a user in
    another terminal would."""
    work = space.root / "work"
    work.mkdir(exist_ok=True)
    return subprocess.run(
        program(space, *command, "--json"), capture_output=True, text=True, env=env(), cwd=work, timeout=START_TIMEOUT
    )


@dataclass(frozen=True)
class Dashboard:
    process: subprocess.Popen
    http: httpx.AsyncClient


@asynccontextmanager
async def serve(kit: Any, space: Any) -> AsyncIterator[Dashboard]:
    """``python -m booku_memory serve`` on a free port until the HTTP API answers; Ctrl+C after."""
    port = kit.free_port()
    with open(space.root / "serve.out", "w") as out, open(space.root / "serve.err", "w") as err:
        process = subprocess.Popen(
            program(space, "serve", "--port", str(port)), stdout=out, stderr=err, env=env(), cwd=space.root
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not (space.data_dir / "dashboard_api_key").exists() or not _record_ready(space):
            assert process.poll() is None and time.monotonic() < deadline, (space.root / "serve.err").read_text()
            await asyncio.sleep(0.1)
        key = (space.data_dir / "dashboard_api_key").read_text(encoding="utf-8").strip()
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers={"X-API-Key": key}, timeout=60, trust_env=False
        ) as http:
            while True:
                try:
                    if (await http.get("/api/status")).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert process.poll() is None and time.monotonic() < deadline, (space.root / "serve.err").read_text()
                await asyncio.sleep(0.1)
            yield Dashboard(process, http)
    finally:
        kit.interrupt(process)


def _record_ready(space: Any) -> bool:
    record = read_owner(space.data_dir) if (space.data_dir / "booku.lock").exists() else None
    return record is not None and record.ready


# ----- one way to write and one way to read per entry point --------------------------------------------------------

TOPICS = {
    "open": ("紫藤书店", "周六下午在紫藤书店参加读书会，读的是一本旧诗集", "书店|读书会|菜市场"),
    "cli": ("青石巷咖啡", "青石巷的咖啡馆手冲很好喝，老板养了一只橘猫", "咖啡|手冲|茶馆"),
    "mcp": ("南湖划船", "傍晚去南湖划船，湖面上的晚霞特别红", "南湖|划船|登山"),
    "http": ("老槐树下棋", "外公每天在老槐树下和邻居下象棋", "外公|象棋|围棋"),
}
# Memories that share words with the topics, so each query has a real ranking to get right.
BACKGROUND = [
    ("旧书摊", "周日在旧书摊淘到一本诗集，没去读书会", "书摊|诗集|书店"),
    ("公司咖啡", "公司楼下的咖啡不如手冲，猫也不让进", "咖啡|公司|手冲"),
    ("北湖散步", "在北湖边散步看晚霞，没有划船", "北湖|散步|划船"),
    ("爷爷的围棋", "爷爷喜欢下围棋，不下象棋", "爷爷|围棋|象棋"),
]


def create_command(title: str, content: str, triple: str) -> str:
    return f'create -title {title} -content "{content}" -triple_tags "{triple}"'


def query_of(writer: str) -> str:
    title, content, _ = TOPICS[writer]
    return f"{title} {content[:8]}"


def search_command(query: str) -> str:
    return f'search -q "{query}" -n 10'


def command_ids(answer: dict[str, Any]) -> list[str]:
    return [item["id"] for item in answer["results"][0]["result"]["items"]]


class Entrypoints:
    """The four programs, each writing and reading its own way."""

    def __init__(self, space: Any, dashboard: Dashboard, memory: Any, session: ClientSession) -> None:
        self.space, self.dashboard, self.memory, self.session = space, dashboard, memory, session

    async def write(self, writer: str) -> str:
        title, content, triple = TOPICS[writer]
        if writer == "open":
            core, diffusion, opposing = (part.split(",") for part in triple.split("|"))
            service = self.memory.get_service(booku_memory.MEMORY_SERVICE)
            return (
                await service.create_memory(
                    title=title, content=content, core_tags=core, diffusion_tags=diffusion, opposing_tags=opposing
                )
            )["id"]
        if writer == "cli":
            done = await asyncio.to_thread(cli, self.space, "command", create_command(title, content, triple))
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)["results"][0]["result"]["id"]
        if writer == "mcp":
            held = await self.session.call_tool("memory_command", {"command": create_command(title, content, triple)})
            assert not held.is_error, held.content[0].text
            return json.loads(held.content[0].text)["results"][0]["result"]["id"]
        core, diffusion, opposing = (part.split(",") for part in triple.split("|"))
        created = await self.dashboard.http.post(
            "/api/memories",
            json={
                "title": title,
                "content": content,
                "core_tags": core,
                "diffusion_tags": diffusion,
                "opposing_tags": opposing,
            },
        )
        assert created.status_code == 201, created.text
        return created.json()["item"]["id"]

    async def read(self, reader: str, query: str) -> list[str]:
        """The ids the reader's retrieval returns for ``query``, best first."""
        if reader == "open":
            service = self.memory.get_service(booku_memory.MEMORY_SERVICE)
            found = await service.retrieve_memories(query, top_k=10, record_activation=False)
            return [item["id"] for item in found["results"]]
        if reader == "cli":
            done = await asyncio.to_thread(cli, self.space, "command", search_command(query))
            assert done.returncode == 0, done.stderr
            return command_ids(json.loads(done.stdout))
        if reader == "mcp":
            found = await self.session.call_tool("memory_command", {"command": search_command(query)})
            assert not found.is_error, found.content[0].text
            return command_ids(json.loads(found.content[0].text))
        found = await self.dashboard.http.get("/api/search", params={"q": query, "top_k": 10})
        assert found.status_code == 200, found.text
        return [item["id"] for item in found.json()["results"]]


async def fresh_ranking(memory: MemoryHandle, reader: str, query: str) -> list[str]:
    """What a process that just opened the data dir ranks, the same way the reader asks."""
    if reader in ("cli", "mcp"):
        return command_ids(await memory.run_memory_command(search_command(query)))
    service = memory.get_service(booku_memory.MEMORY_SERVICE)
    found = await service.retrieve_memories(query, top_k=10, record_activation=False)
    return [item["id"] for item in found["results"]]


READERS = ("open", "http", "mcp", "cli")  # the quick ones first, so the one-second bound measures them


def rank(ids: list[str], memory_id: str) -> int | None:
    return ids.index(memory_id) + 1 if memory_id in ids else None


async def test_a_write_through_any_entry_point_is_found_by_every_other_at_a_fresh_rank(kit, workspace) -> None:
    """Each of the four writes once; right after its acknowledgement each of the four reads once (16 pairs)."""
    space = workspace
    seen: dict[tuple[str, str], int | None] = {}
    written: dict[str, str] = {}
    async with serve(kit, space) as dashboard:
        async with booku_memory.open(space.data_dir, space.config_path) as memory:
            assert isinstance(memory, RemoteMemoryHandle) and memory.owner.entry_point == "serve"
            for title, content, triple in BACKGROUND:
                assert (await memory.run_memory_command(create_command(title, content, triple)))["ok"]
            async with kit.stdio_session(space) as session:
                entry = Entrypoints(space, dashboard, memory, session)
                for writer in TOPICS:
                    written[writer] = await entry.write(writer)
                    acknowledged = time.monotonic()
                    for reader in READERS:
                        # One read, no retry: the reader sees the write the moment it is acknowledged.
                        seen[(writer, reader)] = rank(await entry.read(reader, query_of(writer)), written[writer])
                        if reader in ("open", "http"):  # in-process readers: well within a second of the ack
                            assert time.monotonic() - acknowledged < 1.0

    async with booku_memory.open(space.data_dir, space.config_path, embedder=DeterministicTestEmbedder()) as fresh:
        assert isinstance(fresh, MemoryHandle)  # serve is gone: this process owns the data dir now
        expected = {
            (writer, reader): rank(await fresh_ranking(fresh, reader, query_of(writer)), written[writer])
            for writer, reader in seen
        }
    print(
        "writer × reader rank (fresh process rank):",
        {f"{writer}→{reader}": f"{seen[(writer, reader)]} ({expected[(writer, reader)]})" for writer, reader in seen},
    )
    assert all(found is not None for found in seen.values()), seen
    assert seen == expected


async def test_maintenance_commands_run_through_the_serving_owner(kit, workspace) -> None:
    space = workspace
    async with serve(kit, space) as dashboard:
        for title, content, triple in [TOPICS["open"], *BACKGROUND]:
            done = await asyncio.to_thread(cli, space, "command", create_command(title, content, triple))
            assert done.returncode == 0, done.stderr
        before = (await dashboard.http.get("/api/search", params={"q": query_of("open")})).json()["results"]

        reindexed = await asyncio.to_thread(cli, space, "reindex")
        assert reindexed.returncode == 0, reindexed.stderr
        assert json.loads(reindexed.stdout)["vectors"] == 5 and "重建向量 [" in reindexed.stderr  # progress bar

        # Relative paths are the CLI's: resolved in its working directory, not the server's.
        exported = await asyncio.to_thread(cli, space, "export", "backup.jsonl")
        assert exported.returncode == 0, exported.stderr
        assert (space.root / "work" / "backup.jsonl").is_file()
        imported = await asyncio.to_thread(cli, space, "import", "backup.jsonl")
        assert imported.returncode == 0, imported.stderr
        (space.root / "work" / "园艺手册.md").write_text("# 月季\n\n月季要在早春修剪，夏天多浇水。\n", encoding="utf-8")
        ingested = await asyncio.to_thread(cli, space, "ingest", "园艺手册.md")
        assert ingested.returncode == 0, ingested.stderr

        # The server kept answering throughout, with the same ranking and the new document.
        after = await dashboard.http.get("/api/search", params={"q": query_of("open")})
        assert after.status_code == 200 and [i["id"] for i in after.json()["results"]] == [i["id"] for i in before]
        knowledge = await dashboard.http.get("/api/search", params={"q": "月季 修剪", "include_knowledge": True})
        assert knowledge.status_code == 200 and "月季" in knowledge.json()["results"][0]["content_snippet"]
        created = await dashboard.http.post(
            "/api/memories",
            json={
                "title": "维护之后",
                "content": "重建索引之后照常能写",
                "core_tags": ["维护"],
                "diffusion_tags": ["索引"],
                "opposing_tags": ["故障"],
            },
        )
        assert created.status_code == 201, created.text

        # A second serve cannot share: it is refused with the owner's name and what to do.
        second = await asyncio.to_thread(cli, space, "serve", "--port", str(kit.free_port()))
        assert second.returncode == 2
        assert f"进程 {dashboard.process.pid}（管理后台 serve" in second.stderr and "请先停止它" in second.stderr


async def test_a_plain_owner_makes_the_cli_refuse_and_a_killed_owner_is_taken_over(workspace) -> None:
    space = workspace
    async with booku_memory.open(space.data_dir, space.config_path, embedder=DeterministicTestEmbedder()) as owner:
        service = owner.get_service(booku_memory.MEMORY_SERVICE)
        title, content, triple = TOPICS["open"]
        await owner.run_memory_command(create_command(title, content, triple))
        refused = await asyncio.to_thread(
            cli, space, "command", 'create -title 不该写入 -content 不该写入 -triple_tags "a|b|c"'
        )
        assert refused.returncode == 2, refused.stdout
        assert f"正由进程 {os.getpid()}（程序内 booku_memory.open()" in refused.stderr
        assert "accept_clients=True" in refused.stderr
        assert (await service.memory_statistics())["total"] == 1

    # An owner that dies without closing anything: its lock goes with it, the next process owns the data dir.
    script = (
        "import asyncio, booku_memory, sys\n"
        "from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder\n"
        "async def main():\n"
        f"    async with booku_memory.open({str(space.data_dir)!r}, {str(space.config_path)!r}, accept_clients=True,"
        " embedder=DeterministicTestEmbedder()) as m:\n"
        '        r = await m.run_memory_command(\'create -title 临终之前 -content "被杀之前写下的最后一条" '
        '-triple_tags "告别|最后|开始"\')\n'
        "        print(r['results'][0]['result']['id'], flush=True)\n"
        "        await asyncio.sleep(600)\n"
        "asyncio.run(main())\n"
    )
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, env=env())
    try:
        last_id = await asyncio.to_thread(victim.stdout.readline)
        assert last_id.startswith("mem-"), last_id
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait()
    assert read_owner(space.data_dir).pid == victim.pid  # its record is still there, stale

    async with booku_memory.open(space.data_dir, space.config_path, embedder=DeterministicTestEmbedder()) as heir:
        assert isinstance(heir, MemoryHandle) and read_owner(space.data_dir).pid == os.getpid()
        service = heir.get_service(booku_memory.MEMORY_SERVICE)
        found = await service.retrieve_memories("被杀之前写下的最后一条", record_activation=False)
        assert found["results"][0]["id"] == last_id.strip()

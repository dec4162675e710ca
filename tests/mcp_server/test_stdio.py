"""The MCP server over stdio, started as a subprocess and driven by the official SDK client."""

from __future__ import annotations

import pytest

import booku_memory
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder


async def test_stdio_lists_tools_breathes_holds_and_finds(kit, workspace) -> None:
    async with kit.stdio_session(workspace) as session:
        await kit.check_memory_round_trip(session)


async def test_stdio_writes_and_reads_a_letter_with_a_lock(kit, workspace) -> None:
    reason = kit.letters_missing_reason()
    if reason:
        pytest.skip(reason)
    async with kit.stdio_session(workspace) as session:
        await kit.check_letter_with_lock(session)


async def test_connection_is_held_to_the_operators_owner_and_store(kit, workspace) -> None:
    shared_body = "共享库里的一段旧记忆：搬家那天下了很大的雨。"
    async with booku_memory.open(workspace.data_dir, kit.QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        seeded = await BookuCompanionService(memory.runtime).hold(shared_body)

    async with kit.stdio_session(workspace, "--owner", "alice", "--store", "private:mcp:alice") as session:
        search = await session.call_tool("breath_search", {"query": "搬家 下雨"})
        assert not search.is_error and shared_body not in kit.text_of(search)
        command = await session.call_tool("memory_command", {"command": "search -q 搬家"})
        assert seeded["id"] not in kit.text_of(command)

        # No argument can name another store, owner or authority: the call is refused and nothing is written.
        for smuggled in ({"store_key": "shared"}, {"owner_uid": "default"}, {"authority": "human"}):
            refused = await session.call_tool("hold", {"content": "越权写入的尝试", **smuggled})
            assert refused.is_error and next(iter(smuggled)) in kit.text_of(refused)

        held = await session.call_tool("hold", {"content": "alice 自己的记忆：她最爱吃桂花糕。"})
        memory_id = kit.MEMORY_ID.search(kit.text_of(held)).group(1)

    async with booku_memory.open(workspace.data_dir, kit.QUIET_CONFIG, embedder=DeterministicTestEmbedder()) as memory:
        record = await memory.runtime.records.get(memory_id)
        assert (record["owner_uid"], record["store_key"]) == ("alice", "private:mcp:alice")
        assert (record["authority"], record["author"]) == ("agent", "mcp")
        assert (await memory.runtime.records.get(seeded["id"]))["store_key"] == "shared"
        # The refused calls wrote nothing anywhere: the store holds the seeded memory and alice's, no more.
        assert await memory.runtime.db.fetch_value("SELECT COUNT(*) FROM booku_memory_records") == 2

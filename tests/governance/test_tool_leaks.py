"""Every memory_command sub-command, run for one owner, never shows the other owner's data.

Both owners hold memories, companion records, plans and letters with the same words; the check looks for the other
owner's ids and for a marker word only the other owner's texts contain, in hybrid and keyword-only modes.
"""

import pytest

import booku_memory
from booku_memory.config import load_config
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.companion.service import BookuCompanionService
from booku_memory.services.embedding.deterministic import (
    DeterministicTestEmbedder,
    UnavailableEmbedder,
)
from booku_memory.tools import render_for_llm, run_memory_command
from booku_memory.tools.command_spec import command_names

CONFIG = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "scope": {"mode": "per_chat"}}
SECTION = load_config(CONFIG).scope
OWNERS = {
    "alice": scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="1001", stream_id="s-alice"),
    "bob": scope_for_chat(SECTION, platform="qq", chat_type="private", user_id="2002", stream_id="s-bob"),
}
MARKERS = {"alice": "蓝莓", "bob": "榴莲"}


@pytest.fixture(params=["hybrid", "keyword_only"])
async def stores(request, tmp_path):
    embedder = DeterministicTestEmbedder() if request.param == "hybrid" else UnavailableEmbedder()
    async with booku_memory.open(tmp_path / "data", CONFIG, embedder=embedder) as memory:
        ids: dict[str, set[str]] = {}
        for name, scope in OWNERS.items():
            service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=scope)
            fruit = MARKERS[name]
            created = await service.create_memory(
                title=f"喜欢的水果{fruit}",
                content=f"周末去市场买了{fruit}，很好吃",
                core_tags=["水果", fruit],
                diffusion_tags=["市场"],
                opposing_tags=["蔬菜"],
            )
            companion = BookuCompanionService(memory.runtime, scope, side="ai")
            held = await companion.hold(content=f"今天一起吃了{fruit}，说好下周再去市场", domain="生活")
            await companion.plan(content=f"下周再去市场买{fruit}")
            await companion.letter_write(author="ai", content=f"记得你最爱的{fruit}", title="给你的信")
            ids[name] = {created["id"], held.get("id") or held.get("bucket_id") or ""} - {""}
        yield memory, ids


READ_COMMANDS = [
    "search -query 水果 市场 -include_archived true",
    'search -triple_tags "水果|市场|蔬菜"',
    "grep -query 市场",
    "status",
    "folders",
    "breath",
    "breath_search -query 市场 水果",
    "breath_advanced -catalog true",
    "dream",
    "pulse",
    "letter_read",
    "feel -query 市场",
    "recall -query 水果 市场",
    "I -read true",
]


async def test_no_sub_command_shows_the_other_owners_data(stores):
    memory, ids = stores
    covered = {command.split()[0] for command in READ_COMMANDS}
    for name, scope in OWNERS.items():
        other = "bob" if name == "alice" else "alice"
        service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=scope)
        commands = list(READ_COMMANDS)
        for memory_id in sorted(ids[other]):
            commands += [
                f"read -id {memory_id}",
                f"history -id {memory_id}",
                f"update -id {memory_id} -title 改",
                f"delete -id {memory_id}",
                f"archive -id {memory_id}",
                f"restore -id {memory_id}",
                f"move -id {memory_id} -folder x",
                f"revert -id {memory_id} -version 1",
                f"trace -bucket_id {memory_id} -resolved 1",
                f"anchor -bucket_id {memory_id}",
            ]
        seen_own_marker = False
        for command in commands:
            answer = render_for_llm(await run_memory_command(service, command, stream_id=scope.current_channel))
            assert MARKERS[other] not in answer, (command, answer)
            for memory_id in ids[other]:
                if (
                    not command.endswith(memory_id)
                    and f"-id {memory_id}" not in command
                    and f"-bucket_id {memory_id}" not in command
                ):
                    assert memory_id not in answer, (command, answer)
            seen_own_marker |= MARKERS[name] in answer
        assert seen_own_marker, "the reads must show the owner's own data, or the test proves nothing"
    # the other owner's records were not changed by any of the attempts above
    for name, scope in OWNERS.items():
        service = memory.get_service(booku_memory.MEMORY_SERVICE, scope=scope)
        read = await service.read_full_content(memory_ids=sorted(ids[name]))
        assert {item["id"] for item in read["items"]} == ids[name]
        assert all(item["title"] != "改" for item in read["items"])
    assert covered <= set(command_names())

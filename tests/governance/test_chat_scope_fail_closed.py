"""``scope_for_chat`` fails closed: a chat type the host does not send never lands in the shared store.

The host's streams carry ``private``, ``group`` or ``discuss`` (Neo-MoFox ``ChatType``); anything else (a platform
adapter's own ``channel``/``guild``/``dm``, an empty or missing type) gets a private store of its own per chat.
"""

import logging

import pytest

import booku_memory
from booku_memory.config import load_config
from booku_memory.services import chat_scope
from booku_memory.services.chat_scope import scope_for_chat
from booku_memory.services.embedding.deterministic import DeterministicTestEmbedder
from booku_memory.services.scope import SHARED_STORE

QUIET = {"maintenance": {"enabled": False}, "startup_ingest": {"enabled": False}, "scope": {"mode": "per_chat"}}
SECTION = load_config(QUIET).scope
UNKNOWN_TYPES = ["channel", "guild", "dm", "friend", "all", "", None, "  ", "Private-ish", "群聊"]


def test_host_chat_types_map_to_their_own_stores():
    private = scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="s1")
    group = scope_for_chat(SECTION, platform="qq", chat_type="group", stream_id="s2")
    discuss = scope_for_chat(SECTION, platform="qq", chat_type="DISCUSS", group_id="77", stream_id="s3")
    assert private.writable_store_key == "private:qq:s1"
    assert group.writable_store_key == "group:qq:s2"
    assert discuss.writable_store_key == "group:qq:77"
    for scope in (private, group, discuss):
        assert scope.readable_store_keys == (scope.writable_store_key, SHARED_STORE)


@pytest.mark.parametrize("chat_type", UNKNOWN_TYPES)
def test_unknown_chat_type_gets_a_private_store_per_stream(chat_type):
    one = scope_for_chat(SECTION, platform="qq", chat_type=chat_type, stream_id="stream-a")
    other = scope_for_chat(SECTION, platform="qq", chat_type=chat_type, stream_id="stream-b")
    for scope in (one, other):
        assert scope.writable_store_key != SHARED_STORE
        assert scope.writable_store_key.startswith("private:qq:")
        assert scope.owner_uid != SECTION.default_owner
    assert one.writable_store_key != other.writable_store_key
    assert other.writable_store_key not in one.readable_store_keys
    # Never the store of a real private chat or group with the same id.
    assert one.writable_store_key not in (
        scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="stream-a").writable_store_key,
        scope_for_chat(SECTION, platform="qq", chat_type="group", stream_id="stream-a").writable_store_key,
    )


def test_unknown_chat_type_keys_by_group_then_user_id():
    by_group = scope_for_chat(
        SECTION, platform="discord", chat_type="channel", group_id="g9", user_id="u1", stream_id="s"
    )
    by_user = scope_for_chat(SECTION, platform="discord", chat_type="dm", user_id="u1", stream_id="s")
    assert by_group.writable_store_key == "private:discord:channel:g9"
    assert by_user.writable_store_key == "private:discord:dm:u1"


def test_no_conversation_at_all_keeps_the_default_scope():
    scope = scope_for_chat(SECTION, platform=None, chat_type=None, stream_id="")
    assert scope.writable_store_key == SHARED_STORE and scope.owner_uid == SECTION.default_owner


def test_unknown_chat_type_warns_once_per_type(caplog, monkeypatch):
    monkeypatch.setattr(chat_scope, "_warned_types", set())
    with caplog.at_level(logging.WARNING, logger=chat_scope.__name__):
        for stream in ("a", "b", "c"):
            scope_for_chat(SECTION, platform="qq", chat_type="guild", stream_id=stream)
        scope_for_chat(SECTION, platform="qq", chat_type="channel", stream_id="a")
        scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="a")
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2
    assert any("guild" in w for w in warnings) and any("channel" in w for w in warnings)


@pytest.mark.parametrize("chat_type", ["channel", "dm", "", None])
async def test_memory_of_an_unknown_chat_stays_out_of_other_chats(tmp_path, chat_type):
    """What a user notices: a memory written in such a chat is not recalled in another person's private chat,
    nor in another chat of the same unknown type, but is in its own chat."""
    async with booku_memory.open(tmp_path / "data", QUIET, embedder=DeterministicTestEmbedder()) as memory:

        def service(scope):
            return memory.get_service(booku_memory.MEMORY_SERVICE, scope=scope)

        writer = service(scope_for_chat(SECTION, platform="qq", chat_type=chat_type, stream_id="secret-chat"))
        created = await writer.create_memory(
            title="银行卡密码",
            content="我的银行卡密码是 739154，别告诉别人",
            memory_type="asset",
            core_tags=["密码"],
            diffusion_tags=["银行"],
            opposing_tags=["公开"],
        )
        readers = [
            service(scope_for_chat(SECTION, platform="qq", chat_type="private", stream_id="bob")),
            service(scope_for_chat(SECTION, platform="qq", chat_type=chat_type, stream_id="other-chat")),
        ]
        for reader in readers:
            found = await reader.retrieve_memories("银行卡密码", top_k=10)
            assert created["id"] not in {hit["id"] for hit in found["results"]}
            listed = await reader.list_memory_entries()
            assert created["id"] not in {item["id"] for item in listed["items"]}
        own = await writer.retrieve_memories("银行卡密码", top_k=10)
        assert created["id"] in {hit["id"] for hit in own["results"]}

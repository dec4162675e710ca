"""Derive a Scope from trusted chat data (the host's chat stream), never from text anyone typed.

Mapping (config ``[scope]``, documented in docs/SCOPES.md):

* ``mode = "single"``: one owner (``scope.default_owner``) and the ``shared`` store, for every caller.
* ``mode = "per_chat"``:
  - private chat with user U on platform P: owner ``P:U``, writes to ``private:P:U``;
  - group G on platform P: owner ``group:P:G``, writes to ``group:P:G``;
  - any other chat type (``channel``, ``guild``, ``dm``, empty, ``None`` …: the host sends ``private``, ``group``
    and ``discuss`` only, so anything else is a chat this mapping does not understand): fails closed to a private
    store of its own, owner ``P:<type>:<id>`` writing to ``private:P:<type>:<id>``, where the id is the group id,
    else the user id, else the stream id; a warning is logged once per chat type;
  - reads: its own store, plus ``shared`` when ``shared_readable``, plus ``bot:P`` when ``bot_store_readable``;
  - no chat at all (no stream, user or group id: a plugin calling outside a conversation): the default owner and
    the ``shared`` store.
"""

from __future__ import annotations

import logging
from typing import Any

from ..config.schema import ScopeSection
from .scope import SHARED_STORE, Scope
from .store_keys import bot_store, group_owner, private_owner, private_store

logger = logging.getLogger(__name__)

# The chat types the host's streams carry (``ChatType`` of Neo-MoFox: private, group, discuss; ``all`` only
# filters components and is never a stream's type).
PRIVATE_TYPES = ("private",)
GROUP_TYPES = ("group", "discuss")
UNKNOWN_TYPE = "unknown"
_warned_types: set[str] = set()


def _clean(value: Any) -> str:
    return str(value or "").strip().replace(" ", "_")


def _warn_unknown_once(kind: str) -> None:
    """One warning per chat type and process: every message of such a chat would repeat it."""
    if kind in _warned_types:
        return
    _warned_types.add(kind)
    logger.warning(
        "未知的聊天类型 %r：该会话使用独立的私有存储（不读共享之外的其他会话）；宿主只应发送 private、group 或 discuss",
        kind,
    )


def scope_for_chat(
    section: ScopeSection,
    *,
    platform: str | None,
    chat_type: str | None,
    user_id: str | None = None,
    group_id: str | None = None,
    stream_id: str = "",
    authority: str = "agent",
    actor: str = "agent",
) -> Scope:
    """The scope of one conversation. Arguments must come from the host's stream object, not from message text."""
    if section.mode == "single":
        return Scope(owner_uid=section.default_owner, current_channel=stream_id, authority=authority, actor=actor)
    platform_key = _clean(platform)
    kind = _clean(chat_type).lower()
    group, user, stream = _clean(group_id), _clean(user_id), _clean(stream_id)
    if not (group or user or stream):
        return Scope(owner_uid=section.default_owner, current_channel=stream_id, authority=authority, actor=actor)
    # The host's stream id is itself derived from platform + group/user, so it identifies the chat when the ids
    # are not at hand.
    if kind in GROUP_TYPES and (group or stream):
        owner = group_owner(platform_key, group or stream)
        own_store = owner
    elif kind in PRIVATE_TYPES:
        owner = private_owner(platform_key, user or stream)
        own_store = private_store(owner)
    else:
        # Fail closed: a chat we cannot classify gets a store nobody else reads, never the shared one. The type
        # is part of the key so it cannot land in a real private chat's store either.
        kind = kind or UNKNOWN_TYPE
        _warn_unknown_once(kind)
        owner = private_owner(platform_key, f"{kind}:{group or user or stream}")
        own_store = private_store(owner)
    readable = [own_store]
    if section.shared_readable:
        readable.append(SHARED_STORE)
    if section.bot_store_readable:
        readable.append(bot_store(platform_key))
    return Scope(
        owner_uid=owner,
        readable_store_keys=tuple(readable),
        writable_store_key=own_store,
        current_channel=stream_id,
        authority=authority,
        actor=actor,
    )


def admin_scope(
    store_keys: list[str] | tuple[str, ...], *, write_store: str = SHARED_STORE, actor: str = "admin"
) -> Scope:
    """What a human administrator sees in the dashboard: the chosen stores, human authority."""
    stores = tuple(dict.fromkeys([write_store, *store_keys]))
    return Scope(
        owner_uid="admin", readable_store_keys=stores, writable_store_key=write_store, authority="human", actor=actor
    )

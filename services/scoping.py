"""Derive a Scope from trusted chat data (the host's chat stream), never from text anyone typed.

Mapping (config ``[scope]``, documented in docs/SCOPES.md):

* ``mode = "single"``: one owner (``scope.default_owner``) and the ``shared`` store, for every caller.
* ``mode = "per_chat"``:
  - private chat with user U on platform P: owner ``P:U``, writes to ``private:P:U``;
  - group G on platform P: owner ``group:P:G``, writes to ``group:P:G``;
  - reads: its own store, plus ``shared`` when ``shared_readable``, plus ``bot:P`` when ``bot_store_readable``;
  - no chat at all (a plugin calling outside a conversation): the default owner and the ``shared`` store.
"""

from __future__ import annotations

from typing import Any

from ..config.schema import ScopeSection
from .scope import SHARED_STORE, Scope


def _clean(value: Any) -> str:
    return str(value or "").strip().replace(" ", "_")


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
    # The host's stream id is itself derived from platform + group/user, so it identifies the chat when the ids
    # are not at hand.
    if kind in ("group", "discuss") and (_clean(group_id) or _clean(stream_id)):
        owner = f"group:{platform_key}:{_clean(group_id) or _clean(stream_id)}"
        own_store = owner
    elif _clean(user_id) or (kind == "private" and _clean(stream_id)):
        owner = f"{platform_key}:{_clean(user_id) or _clean(stream_id)}"
        own_store = f"private:{owner}"
    else:
        return Scope(owner_uid=section.default_owner, current_channel=stream_id, authority=authority, actor=actor)
    readable = [own_store]
    if section.shared_readable:
        readable.append(SHARED_STORE)
    if section.bot_store_readable:
        readable.append(f"bot:{platform_key}")
    return Scope(owner_uid=owner, readable_store_keys=tuple(readable), writable_store_key=own_store,
                 current_channel=stream_id, authority=authority, actor=actor)


def admin_scope(store_keys: list[str] | tuple[str, ...], *, write_store: str = SHARED_STORE,
                actor: str = "admin") -> Scope:
    """What a human administrator sees in the dashboard: the chosen stores, human authority."""
    stores = tuple(dict.fromkeys([write_store, *store_keys]))
    return Scope(owner_uid="admin", readable_store_keys=stores, writable_store_key=write_store,
                 authority="human", actor=actor)

"""The store-key format: how a chat's owner and store keys are built, and how a store key is read back.

One module owns both directions so the mapping of ``chat_scope.scope_for_chat`` (building keys from a chat) and the
dashboard's inverse (which memo owners belong to a store, how stores are ordered) cannot drift apart:

* ``private:P:U``: the store of the private chat with user U on platform P, owned by ``P:U``;
* ``group:P:G``: the store of group G on platform P, which is also its own owner;
* ``bot:P``: the bot's own store on platform P (no memos);
* ``shared``: the default store.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scope import SHARED_STORE

PRIVATE_PREFIX = "private:"
GROUP_PREFIX = "group:"
BOT_PREFIX = "bot:"


def private_owner(platform: str, user: str) -> str:
    """The owner of a private chat with ``user`` on ``platform``."""
    return f"{platform}:{user}"


def group_owner(platform: str, group: str) -> str:
    """The owner of a group chat; it is also the group's store key."""
    return f"{GROUP_PREFIX}{platform}:{group}"


def private_store(owner: str) -> str:
    """The store a private owner writes to."""
    return f"{PRIVATE_PREFIX}{owner}"


def bot_store(platform: str) -> str:
    """The bot's own store on ``platform``."""
    return f"{BOT_PREFIX}{platform}"


@dataclass(frozen=True)
class OwnerMap:
    """Between memo owners and stores, mirroring ``scope_for_chat``.

    ``private:P:U`` belongs to owner ``P:U``; a group store ``group:P:G`` is its own owner; the default store
    (normally ``shared``) belongs to the runtime's default owner and to the configured ``scope.default_owner``
    (single mode and "no conversation" scopes use the latter). ``bot:P`` stores have no memos.
    """

    default_store: str = SHARED_STORE
    default_owners: tuple[str, ...] = ("default",)

    def owners_of(self, store_key: str) -> tuple[str, ...]:
        """The memo owners whose memos belong to ``store_key`` (empty for stores without memos)."""
        if store_key == self.default_store:
            return self.default_owners
        if store_key.startswith(PRIVATE_PREFIX):
            return (store_key[len(PRIVATE_PREFIX) :],)
        if store_key.startswith(GROUP_PREFIX):
            return (store_key,)
        return ()

    def store_of(self, owner_uid: str) -> str:
        """The store a memo owner's memos are shown under."""
        if owner_uid in self.default_owners:
            return self.default_store
        if owner_uid.startswith(GROUP_PREFIX):
            return owner_uid
        return private_store(owner_uid)


def store_sort_key(store_key: str, default_store: str = SHARED_STORE) -> tuple[int, str]:
    """Default store first, then bot, group and private stores, each alphabetically."""
    if store_key == default_store:
        return (0, store_key)
    for rank, prefix in enumerate((BOT_PREFIX, GROUP_PREFIX, PRIVATE_PREFIX), start=1):
        if store_key.startswith(prefix):
            return (rank, store_key)
    return (4, store_key)

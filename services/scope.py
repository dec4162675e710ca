"""Who is asking: the owner and the stores a caller may read and write.

A scope is derived from trusted data only (the host's chat stream, or the standalone default), never from text the
LLM or a chat user typed. Every storage read filters by ``readable_store_keys`` inside the query.
"""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_OWNER = "default"
SHARED_STORE = "shared"


@dataclass(frozen=True)
class Scope:
    owner_uid: str = DEFAULT_OWNER
    readable_store_keys: tuple[str, ...] = (SHARED_STORE,)
    writable_store_key: str = SHARED_STORE
    current_channel: str = ""
    actor: str = "agent"
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.writable_store_key not in self.readable_store_keys:
            raise ValueError("writable_store_key 必须包含在 readable_store_keys 中")


DEFAULT_SCOPE = Scope()

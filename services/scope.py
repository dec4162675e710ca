"""Who is asking: the owner and the stores a caller may read and write.

A scope is derived from trusted data only (the host's chat stream, or the standalone default), never from text the
LLM or a chat user typed. Every storage read filters by ``readable_store_keys`` inside the query.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

DEFAULT_OWNER = "default"
SHARED_STORE = "shared"
AUTHORITIES = ("human", "agent", "dreaming", "source_learning", "mechanical")


@dataclass(frozen=True)
class WriteContext:
    """Who writes and with which authority; copied into every revision and audit row.

    ``mechanical`` writes (maintenance, lifecycle) cannot author content and must name their ``cause``.
    ``batch_id`` groups the writes of one run (e.g. one dreaming pass) so they can be undone together.
    """

    authority: str = "agent"
    actor: str = "agent"
    cause: str = ""
    batch_id: str = ""

    def __post_init__(self) -> None:
        if self.authority not in AUTHORITIES:
            raise ValueError(f"authority {self.authority!r} 无效，可选：{'、'.join(AUTHORITIES)}")
        if self.authority == "mechanical" and not self.cause.strip():
            raise ValueError("mechanical 写入必须提供明确的因果来源 cause")

    @classmethod
    def of(cls, actor: str | WriteContext) -> WriteContext:
        return actor if isinstance(actor, WriteContext) else cls(authority="agent", actor=str(actor or "agent"))


@dataclass(frozen=True)
class Scope:
    owner_uid: str = DEFAULT_OWNER
    readable_store_keys: tuple[str, ...] = (SHARED_STORE,)
    writable_store_key: str = SHARED_STORE
    current_channel: str = ""
    actor: str = "agent"
    authority: str = "agent"
    cause: str = ""
    batch_id: str = ""
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.writable_store_key not in self.readable_store_keys:
            raise ValueError("writable_store_key 必须包含在 readable_store_keys 中")
        WriteContext(self.authority, self.actor, self.cause, self.batch_id)

    @property
    def context(self) -> WriteContext:
        """The write context every change made through this scope carries."""
        return WriteContext(self.authority, self.actor, self.cause, self.batch_id)

    def acting(self, *, authority: str, actor: str | None = None, cause: str = "", batch_id: str = "") -> Scope:
        """The same owner and stores, writing with another authority (e.g. mechanical maintenance)."""
        return replace(self, authority=authority, actor=actor or self.actor, cause=cause, batch_id=batch_id)


DEFAULT_SCOPE = Scope()

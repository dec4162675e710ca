"""Extension points for later companion features (plans, letters, feel, I) without touching part 1.

* **Dream sections**: ``register_dream_section(key, provider, order=...)`` adds a section after dream's memories
  (e.g. the active plans). A provider gets the service and a ``DreamContext`` (window, time, the memories this
  dream returned — so a feature can record that dream "witnessed" them) and returns a ``DreamSection`` or None.
* **Write observers**: ``register_write_observer(key, observer)`` is called after every hold/grow with the records
  written; it returns notices that are appended to the answer (e.g. "this may complete plan X").
* **Tagging and splitting models**: ``BookuCompanionService(runtime, tagger=..., splitter=...)`` accept objects with
  ``async suggest(content) -> TagSuggestion`` and ``async split(content) -> list[str]`` (the host's LLM); without
  them hold uses neutral metadata and grow the deterministic splitter, and the answer says so.

Registrations are process-wide; each ``register_*`` returns a function that removes the registration.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass
class DreamContext:
    window_hours: float
    since: float
    now: float
    items: list[dict[str, Any]]


@dataclass
class DreamSection:
    key: str
    title: str
    items: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""


DreamSectionProvider = Callable[[Any, DreamContext], Awaitable[DreamSection | None]]
WriteObserver = Callable[[Any, list[dict[str, Any]]], Awaitable[Sequence[str]]]

_dream_sections: dict[str, tuple[int, DreamSectionProvider]] = {}
_write_observers: dict[str, WriteObserver] = {}


def register_dream_section(key: str, provider: DreamSectionProvider, *, order: int = 100) -> Callable[[], None]:
    """Add (or replace) a dream section; sections run in ``order`` after the memories."""
    _dream_sections[key] = (order, provider)
    return lambda: _dream_sections.pop(key, None) and None


def dream_sections() -> list[tuple[str, DreamSectionProvider]]:
    return [(key, provider) for key, (_, provider) in sorted(_dream_sections.items(), key=lambda kv: kv[1][0])]


def register_write_observer(key: str, observer: WriteObserver) -> Callable[[], None]:
    """Add (or replace) an observer of hold/grow writes."""
    _write_observers[key] = observer
    return lambda: _write_observers.pop(key, None) and None


def write_observers() -> list[WriteObserver]:
    return list(_write_observers.values())


@dataclass(frozen=True)
class TagSuggestion:
    """Metadata a tagging model proposes for a memory; explicit caller values always win over it."""

    title: str | None = None
    domains: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    importance: int | None = None
    valence: float | None = None
    arousal: float | None = None


class MemoryTagger(Protocol):
    async def suggest(self, content: str) -> TagSuggestion: ...


class GrowSplitter(Protocol):
    async def split(self, content: str) -> Sequence[str]: ...

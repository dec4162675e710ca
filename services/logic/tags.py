"""Tag normalisation and the core / diffusion / opposing tag triplet.

A memory written by the agent carries three tag groups:

* core      – what the memory is about;
* diffusion – related topics it should also be found under;
* opposing  – what it is explicitly *not* about (used to push look-alike memories away).

Creating a memory requires all three groups to be non-empty; anywhere else the groups are optional but, once one
is given, all three must be (a single group would silently turn a tag search into a different query).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from ..errors import ValidationError

TagInput = str | Iterable[object] | None

# ASCII and full-width commas both occur in chat input; a list given as a Python iterable is never re-split.
_CSV_SPLIT = re.compile(r"[,，]")

REQUIRED_TRIPLET_MESSAGE = "创建记忆必须同时提供完整且非空的 core_tags、diffusion_tags、opposing_tags 三元组。"
_FIELD_NAMES = ("core_tags", "diffusion_tags", "opposing_tags")


def normalise_tags(values: TagInput) -> list[str]:
    """Canonical tag list: stripped, lower-cased, empties dropped, duplicates removed keeping first occurrence.

    Accepts ``None`` (-> ``[]``), a comma-separated string (``,`` or ``，``) or any iterable of values (each
    converted with ``str``; ``None`` items skipped). Returns a new list.
    """
    return list(dict.fromkeys(_cleaned(values)))


def _cleaned(values: TagInput) -> Iterator[str]:
    """Each non-empty tag of ``values`` stripped and lower-cased, in order, duplicates included (see
    ``normalise_tags`` for what ``values`` may be)."""
    if values is None:
        return
    items: Iterable[object] = _CSV_SPLIT.split(values) if isinstance(values, str) else values
    for item in items:
        if item is not None and (tag := str(item).strip().lower()):
            yield tag


@dataclass(frozen=True)
class TagTriplet:
    """The three normalised tag groups of a write or of a query."""

    core: list[str] = field(default_factory=list)
    diffusion: list[str] = field(default_factory=list)
    opposing: list[str] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        """True when no group has a tag (the query or write carries no tag information at all)."""
        return not (self.core or self.diffusion or self.opposing)

    @property
    def is_complete(self) -> bool:
        """True when every group has at least one tag (what creating a memory requires)."""
        return bool(self.core and self.diffusion and self.opposing)

    @property
    def non_empty_groups(self) -> int:
        """How many of the three groups carry tags (0–3); retrieval treats ≥ 2 as a cross-topic query."""
        return sum(1 for group in (self.core, self.diffusion, self.opposing) if group)

    def missing_fields(self) -> list[str]:
        """Names of the empty groups, e.g. ``["opposing_tags"]``, for error messages."""
        groups = (self.core, self.diffusion, self.opposing)
        return [name for name, group in zip(_FIELD_NAMES, groups) if not group]


@dataclass(frozen=True)
class CandidateTags:
    """Tags stored on one candidate memory, as sets for fast overlap counting.

    ``generic`` are the free-form ``tags`` of a record; they are matched case-insensitively like the others.
    """

    core: frozenset[str] = frozenset()
    diffusion: frozenset[str] = frozenset()
    opposing: frozenset[str] = frozenset()
    generic: frozenset[str] = frozenset()

    @classmethod
    def from_lists(
        cls,
        core: TagInput = None,
        diffusion: TagInput = None,
        opposing: TagInput = None,
        generic: TagInput = None,
    ) -> CandidateTags:
        """Build from raw stored lists (normalising each, so mixed-case legacy tags still match)."""
        return cls(
            core=_tag_set(core),
            diffusion=_tag_set(diffusion),
            opposing=_tag_set(opposing),
            generic=_tag_set(generic),
        )


def _tag_set(values: TagInput) -> frozenset[str]:
    """``frozenset(normalise_tags(values))`` without building the ordered list first: retrieval builds the tag sets
    of every vector hit (~75 per tagged query), and order does not matter in a set."""
    return frozenset(_cleaned(values))


@functools.lru_cache(maxsize=4096)
def _stored_tags(
    core: tuple[str, ...], diffusion: tuple[str, ...], opposing: tuple[str, ...], generic: tuple[str, ...]
) -> CandidateTags:
    return CandidateTags.from_lists(core, diffusion, opposing, generic)


def stored_tags(
    core: Sequence[str] | None,
    diffusion: Sequence[str] | None,
    opposing: Sequence[str] | None,
    generic: Sequence[str] | None,
) -> CandidateTags:
    """``CandidateTags.from_lists`` of a stored record's four tag lists, remembered by their values.

    Why: a tagged retrieval builds the tag sets of its vector hits (dozens per call, normalising every tag), and the
    memories of a person or topic a bot asks about come back call after call, so most are cache hits. Keyed by the
    values, not by the memory id, so an edited record can never get its old tags back.
    """
    if isinstance(core, str) or isinstance(diffusion, str) or isinstance(opposing, str) or isinstance(generic, str):
        return CandidateTags.from_lists(core, diffusion, opposing, generic)  # comma-separated: normalised as given
    # Written out, not as generator expressions: this runs ~74 times per tagged retrieval, mostly as cache hits.
    return _stored_tags(
        tuple(core) if core else (),
        tuple(diffusion) if diffusion else (),
        tuple(opposing) if opposing else (),
        tuple(generic) if generic else (),
    )


def triplet_from_lists(
    core: TagInput,
    diffusion: TagInput,
    opposing: TagInput,
    *,
    required: bool,
    allow_partial: bool = False,
) -> TagTriplet:
    """Normalise three tag groups and enforce the three-groups rule.

    ``required=True`` (create): all three groups must be non-empty, else ``ValidationError`` with the reference
    message ``创建记忆必须同时提供完整且非空的 core_tags、diffusion_tags、opposing_tags 三元组``.
    ``required=False``: all empty is fine (returns an empty triplet); some but not all given raises a
    ``ValidationError`` mentioning ``三组标签`` and the missing groups, unless ``allow_partial=True`` (retrieval
    queries, where one axis alone is a legitimate filter).
    Returns the normalised ``TagTriplet``.
    """
    triplet = TagTriplet(
        core=normalise_tags(core),
        diffusion=normalise_tags(diffusion),
        opposing=normalise_tags(opposing),
    )
    if required:
        if not triplet.is_complete:
            missing = "、".join(triplet.missing_fields())
            raise ValidationError(f"{REQUIRED_TRIPLET_MESSAGE}缺少或为空：{missing}。")
        return triplet
    if triplet.is_empty or triplet.is_complete or allow_partial:
        return triplet
    missing = "、".join(triplet.missing_fields())
    raise ValidationError(
        "core_tags、diffusion_tags、opposing_tags 三组标签必须同时提供且均非空，禁止只传一组或两组；"
        f"缺少或为空：{missing}。"
    )


def parse_triple_tags(value: str) -> TagTriplet:
    """Parse the ``"core|diffusion|opposing"`` shorthand, e.g. ``"c1,c2|d1|o1"``.

    Each part is a comma list normalised like ``normalise_tags``. The value must split into exactly three parts on
    ``|`` (empty parts are allowed here; completeness is checked by ``triplet_from_lists``), otherwise
    ``ValidationError``. Returns the parsed ``TagTriplet``.
    """
    parts = (value or "").split("|")
    if len(parts) != 3:
        raise ValidationError(
            'triple_tags 格式错误：必须是用 | 分隔的三段 "核心|扩散|对立"（如 "c1,c2|d1|o1"），'
            f"当前得到 {len(parts)} 段；也可以分别提供 -core_tags、-diffusion_tags、-opposing_tags。"
        )
    core, diffusion, opposing = parts
    return TagTriplet(
        core=normalise_tags(core),
        diffusion=normalise_tags(diffusion),
        opposing=normalise_tags(opposing),
    )

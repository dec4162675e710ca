"""The one vocabulary of companion record kinds and what each kind takes part in.

A companion record is an ordinary memory record; its kind lives in ``extra["kind"]`` (absent = ``memory``, so every
memory written through ``memory_command`` or the dashboard is an ordinary companion memory too). Every rule that
depends on the kind (does it decay, does breath surface it, may it merge, which statuses does trace accept) reads
this table, so part 2 (plans, letters, I) only fills in behaviour, never a second list.

Letters are the exception to "a companion record is a memory record": they live in their own table
(``booku_companion_letters``, see ``letters.py``) so that a locked body can reach no other read path; the ``letter``
row here still gives them their label and their line in pulse.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ValidationError

# Records written by the companion tools carry this ``source``; the decay engine only archives these (other records
# keep the lifecycle of the memory service).
COMPANION_SOURCE = "companion"
KIND_KEY = "kind"
DEFAULT_KIND = "memory"
# SQL expression of a record's kind (alias ``r``), matching ``kind_of`` below.
KIND_SQL = "COALESCE(json_extract(r.extra, '$.kind'), 'memory')"


@dataclass(frozen=True)
class KindSpec:
    """What a kind of companion record takes part in."""

    key: str
    label: str  # Chinese name shown to users
    memory_type: str  # the memory-service type the record is stored with
    decays: bool  # False: never decays, never archived by the decay engine
    in_breath: bool  # surfaces in the default breath (no query)
    in_search: bool  # found by breath_search / breath_advanced queries, catalog, importance and emotion modes
    in_dream: bool  # listed among dream's changed memories
    mergeable: bool  # a fact: grow may fold a restatement into it and a later one of its kind may supersede it
    statuses: tuple[str, ...] = ()  # values trace(status=...) accepts; empty = the kind has no status


KINDS: dict[str, KindSpec] = {
    spec.key: spec
    for spec in (
        KindSpec("memory", "记忆", "event", decays=True, in_breath=True, in_search=True, in_dream=True, mergeable=True),
        KindSpec(
            "feel", "感受", "experience", decays=False, in_breath=False, in_search=True, in_dream=False, mergeable=False
        ),
        KindSpec(
            "plan",
            "计划",
            "event",
            decays=False,
            in_breath=False,
            in_search=False,
            in_dream=False,
            mergeable=False,
            statuses=("active", "resolved", "abandoned"),
        ),
        KindSpec(
            "letter",
            "信件",
            "experience",
            decays=False,
            in_breath=False,
            in_search=False,
            in_dream=False,
            mergeable=False,
        ),
        KindSpec(
            "self",
            "自我认知",
            "profile",
            decays=False,
            in_breath=False,
            in_search=False,
            in_dream=False,
            mergeable=False,
        ),
        # A self-knowledge candidate (「我觉得……」 written with I) lives like an ordinary memory until promoted to
        # ``self``, except that grow never folds other text into it: the statement must stay the one that was made.
        KindSpec(
            "self_candidate",
            "自我认知候选",
            "event",
            decays=True,
            in_breath=True,
            in_search=True,
            in_dream=True,
            mergeable=False,
        ),
    )
}
FEEL_DOMAIN = "feel"


def kind_of(record: Mapping[str, Any]) -> str:
    """The kind of a record (unknown or missing values read as ``memory``)."""
    value = (record.get("extra") or {}).get(KIND_KEY)
    return value if value in KINDS else DEFAULT_KIND


def spec_of(record: Mapping[str, Any]) -> KindSpec:
    return KINDS[kind_of(record)]


def kinds_where(flag: str) -> tuple[str, ...]:
    """Keys of the kinds whose boolean ``flag`` (e.g. ``"in_breath"``) is true."""
    return tuple(key for key, spec in KINDS.items() if getattr(spec, flag))


def checked_kind(value: str) -> KindSpec:
    if value not in KINDS:
        raise ValidationError(f"kind 取值 {value!r} 无效，可选：{'、'.join(KINDS)}")
    return KINDS[value]


def is_exempt(record: Mapping[str, Any]) -> bool:
    """Pinned, protected and anchor memories, and kinds that do not decay, never decay."""
    return bool(record.get("pinned") or record.get("protected") or record.get("anchor")) or not spec_of(record).decays

"""Vocabularies, input validation and the public item shape of memory records.

Validation happens here, before anything is written, and every error names the field and what is allowed
(the original plugin checked none of these).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ValidationError
from .logic.tags import TagTriplet, normalise_tags, triplet_from_lists
from .logic.text import extract_title, make_snippet, normalise_folder_id

MEMORY_TYPES = (
    "person",
    "event",
    "knowledge",
    "place",
    "asset",
    "procedure",
    "preference",
    "experience",
    "profile",
    "case",
    "trajectory",
)
STATUSES = ("active", "archived", "expired")
# Legacy layer names are still spoken by callers (create_memory defaults to "emergent"): all map to "memory".
BUCKET_ALIASES = {
    "memory": "memory",
    "knowledge": "knowledge",
    "emergent": "memory",
    "archived": "memory",
    "inherent": "memory",
}
KNOWLEDGE_TYPES = ("", "concept", "model", "quote", "counterintuitive")
PROCEDURE_TYPES = ("", "process", "tech", "deploy", "cooking")
DISPOSITION_STATUSES = ("", "in_use", "idle", "disposed")
PERSON_ID = re.compile(r"^[^:\s]+:\S+$")

MAX_TITLE_CHARS = 200
MAX_CONTENT_CHARS = 20000
MAX_TAG_CHARS = 64
MAX_TAGS_PER_GROUP = 32
MAX_LIST_ITEMS = 100

# Keys of the reference metadata dict (29) plus the fields this rewrite adds.
METADATA_KEYS = (
    "title",
    "folder_id",
    "bucket",
    "source",
    "memory_type",
    "status",
    "person_id",
    "relation_memory_ids",
    "relation_aliases",
    "event_start_at",
    "event_end_at",
    "related_people",
    "knowledge_type",
    "address_or_coord",
    "place_type",
    "asset_type",
    "disposition_status",
    "procedure_type",
    "novelty_energy",
    "created_at",
    "updated_at",
    "last_activated_at",
    "activation_count",
    "is_deleted",
    "deleted_at",
    "tags",
    "core_tags",
    "diffusion_tags",
    "opposing_tags",
    "version",
    "name",
    "importance",
    "valence",
    "arousal",
    "domains",
    "pinned",
    "protected",
    "anchor",
    "digested",
    "resolved",
    "why_remembered",
    "document_id",
    "chunk_index",
    "authority",
    "author",
    "valid_from",
    "superseded_at",
    "superseded_by",
)

TYPED_TEXT_FIELDS = (
    "knowledge_type",
    "address_or_coord",
    "place_type",
    "asset_type",
    "disposition_status",
    "procedure_type",
)


def choose(field_name: str, value: Any, allowed: Iterable[str], *, lower: bool = True) -> str:
    """Normalise a vocabulary value or raise a ValidationError listing the allowed values."""
    text = "" if value is None else str(value).strip()
    if lower:
        text = text.lower()
    options = tuple(allowed)
    if text not in options:
        shown = "、".join(o if o else '""' for o in options)
        raise ValidationError(f"{field_name} 取值 {value!r} 无效，可选：{shown}")
    return text


def normalise_bucket(value: Any) -> str:
    text = str(value or "memory").strip().lower()
    if text not in BUCKET_ALIASES:
        raise ValidationError(
            f"bucket 取值 {value!r} 无效，可选：memory、knowledge（旧名 emergent/archived/inherent 视为 memory）"
        )
    return BUCKET_ALIASES[text]


def clean_text_list(field_name: str, values: Any) -> list[str]:
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    try:
        items = [str(v).strip() for v in values]
    except TypeError as exc:
        raise ValidationError(f"{field_name} 必须是字符串列表") from exc
    items = list(dict.fromkeys(v for v in items if v))
    if len(items) > MAX_LIST_ITEMS:
        raise ValidationError(f"{field_name} 最多 {MAX_LIST_ITEMS} 项，当前 {len(items)} 项")
    return items


def check_tags(field_name: str, values: list[str]) -> list[str]:
    if len(values) > MAX_TAGS_PER_GROUP:
        raise ValidationError(f"{field_name} 最多 {MAX_TAGS_PER_GROUP} 个标签，当前 {len(values)} 个")
    for tag in values:
        if len(tag) > MAX_TAG_CHARS:
            raise ValidationError(f"{field_name} 中的标签 {tag[:20]!r}… 超过 {MAX_TAG_CHARS} 个字符")
    return values


def finite_timestamp(field_name: str, value: Any) -> float:
    try:
        number = float(value or 0.0)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{field_name} 必须是 Unix 时间戳（秒，数字）") from exc
    if not math.isfinite(number) or number < 0:
        raise ValidationError(f"{field_name} 必须是非负的有限数字（Unix 秒）")
    return number


def checked_content(content: Any) -> str:
    text = "" if content is None else str(content).strip()
    if not text:
        raise ValidationError("content 不能为空")
    if len(text) > MAX_CONTENT_CHARS:
        raise ValidationError(f"content 最多 {MAX_CONTENT_CHARS} 个字符，当前 {len(text)} 个")
    return text


def checked_title(title: Any, content: str) -> str:
    text = "" if title is None else str(title).strip()
    text = text or extract_title(content)
    if len(text) > MAX_TITLE_CHARS:
        raise ValidationError(f"title 最多 {MAX_TITLE_CHARS} 个字符，当前 {len(text)} 个")
    return text


def checked_person_id(memory_type: str, person_id: Any) -> str | None:
    text = None if person_id is None else str(person_id).strip() or None
    if memory_type == "person" and text is None:
        raise ValidationError("人物记忆（memory_type=person）必须提供 person_id，格式为 platform:id，如 qq:10001")
    if text is not None and not PERSON_ID.match(text):
        raise ValidationError(f"person_id {text!r} 格式无效，必须是 platform:id，如 qq:10001")
    return text


def checked_event_range(start: float, end: float) -> None:
    if start and end and end < start:
        raise ValidationError("event_end_at 不能早于 event_start_at")


@dataclass
class MemoryDraft:
    """A validated, normalised write request (everything ``upsert_memory`` accepts)."""

    title: str
    content: str
    bucket: str
    folder_id: str
    memory_type: str
    status: str
    person_id: str | None
    source: str
    tags: list[str]
    triplet: TagTriplet
    fields: dict[str, Any] = field(default_factory=dict)

    def as_record(self) -> dict[str, Any]:
        return {
            "title": self.title,
            "content": self.content,
            "bucket": self.bucket,
            "folder_id": self.folder_id,
            "memory_type": self.memory_type,
            "status": self.status,
            "person_id": self.person_id,
            "source": self.source,
            "tags": self.tags,
            "core_tags": self.triplet.core,
            "diffusion_tags": self.triplet.diffusion,
            "opposing_tags": self.triplet.opposing,
            **self.fields,
        }


def build_draft(
    content: Any,
    *,
    title: Any,
    bucket: Any,
    folder_id: Any,
    default_folder: str,
    tags: Any,
    core_tags: Any,
    diffusion_tags: Any,
    opposing_tags: Any,
    memory_type: Any,
    status: Any,
    person_id: Any,
    relation_memory_ids: Any,
    relation_aliases: Any,
    event_start_at: Any,
    event_end_at: Any,
    related_people: Any,
    knowledge_type: Any,
    address_or_coord: Any,
    place_type: Any,
    asset_type: Any,
    disposition_status: Any,
    procedure_type: Any,
    source: Any,
    require_triplet: bool,
) -> MemoryDraft:
    """Validate every field of a write. Raises ValidationError before anything touches storage."""
    raw_bucket = str(bucket or "memory").strip().lower()
    normalised_bucket = normalise_bucket(bucket)
    text = checked_content(content)
    kind = choose("memory_type", memory_type or "knowledge", MEMORY_TYPES)
    state = choose("status", status or "active", STATUSES)
    if raw_bucket == "archived" and state == "active":
        state = "archived"
    triplet = triplet_from_lists(core_tags, diffusion_tags, opposing_tags, required=require_triplet)
    for name, group in (
        ("core_tags", triplet.core),
        ("diffusion_tags", triplet.diffusion),
        ("opposing_tags", triplet.opposing),
    ):
        check_tags(name, group)
    start = finite_timestamp("event_start_at", event_start_at)
    end = finite_timestamp("event_end_at", event_end_at)
    checked_event_range(start, end)
    fields = {
        "relation_memory_ids": clean_text_list("relation_memory_ids", relation_memory_ids),
        "relation_aliases": clean_text_list("relation_aliases", relation_aliases),
        "related_people": clean_text_list("related_people", related_people),
        "event_start_at": start,
        "event_end_at": end,
        "knowledge_type": choose("knowledge_type", knowledge_type, KNOWLEDGE_TYPES),
        "address_or_coord": str(address_or_coord or "").strip(),
        "place_type": str(place_type or "").strip().lower(),
        "asset_type": str(asset_type or "").strip().lower(),
        "disposition_status": choose("disposition_status", disposition_status, DISPOSITION_STATUSES),
        "procedure_type": choose("procedure_type", procedure_type, PROCEDURE_TYPES),
    }
    return MemoryDraft(
        title=checked_title(title, text),
        content=text,
        bucket=normalised_bucket,
        folder_id=normalise_folder_id(folder_id, default_folder),
        memory_type=kind,
        status=state,
        person_id=checked_person_id(kind, person_id),
        source=str(source or "agent").strip() or "agent",
        tags=check_tags("tags", clean_text_list("tags", tags)),
        triplet=triplet,
        fields=fields,
    )


def record_item(record: Mapping[str, Any], *, full: bool = False, snippet_chars: int = 280) -> dict[str, Any]:
    """The standard output element: id, title, content_snippet, is_truncated, metadata (+ content when full)."""
    snippet, truncated = make_snippet(record.get("content", ""), snippet_chars)
    metadata = {key: record.get(key) for key in METADATA_KEYS}
    metadata["is_knowledge_chunk"] = record.get("bucket") == "knowledge"
    item = {
        "id": record["memory_id"],
        "title": record.get("title") or "未命名记忆",
        "content_snippet": snippet,
        "is_truncated": truncated,
        "metadata": metadata,
    }
    if full:
        item["content"] = record.get("content", "")
    return item


def checked_ids(memory_ids: Any, field_name: str = "memory_ids") -> list[str]:
    """A de-duplicated list of non-empty ids, or a ValidationError."""
    if memory_ids is None:
        raise ValidationError(f"{field_name} 不能为空，请提供记忆 ID 列表")
    if isinstance(memory_ids, str):
        memory_ids = [memory_ids]
    try:
        ids = [str(i).strip() for i in memory_ids]
    except TypeError as exc:
        raise ValidationError(f"{field_name} 必须是记忆 ID 列表") from exc
    ids = list(dict.fromkeys(i for i in ids if i))
    if not ids:
        raise ValidationError(f"{field_name} 不能为空，请提供记忆 ID 列表")
    return ids


def checked_min_score(value: Any) -> float | None:
    """A retrieval's relevance floor: ``None`` (the configured default) or a number from 0 (off) to 1."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise ValidationError("min_score 必须是 0 到 1 之间的数字（0 = 不设相关度下限），或不传以使用配置默认值")
    try:
        number = float(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(
            "min_score 必须是 0 到 1 之间的数字（0 = 不设相关度下限），或不传以使用配置默认值"
        ) from exc
    if not (math.isfinite(number) and 0.0 <= number <= 1.0):
        raise ValidationError(f"min_score={value} 超出范围，允许 0 到 1（0 = 不设相关度下限）")
    return number


def checked_limit(name: str, value: Any, *, default: int, maximum: int) -> int:
    if value is None:
        return default
    if isinstance(value, bool):
        raise ValidationError(f"{name} 必须是 1 到 {maximum} 的整数")
    try:
        number = int(value)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{name} 必须是 1 到 {maximum} 的整数") from exc
    if number != value and not isinstance(value, str) and float(value) != number:
        raise ValidationError(f"{name} 必须是 1 到 {maximum} 的整数")
    if not 1 <= number <= maximum:
        raise ValidationError(f"{name}={value} 超出范围，允许 1 到 {maximum}")
    return number


__all__ = [
    "MEMORY_TYPES",
    "STATUSES",
    "KNOWLEDGE_TYPES",
    "PROCEDURE_TYPES",
    "DISPOSITION_STATUSES",
    "MemoryDraft",
    "build_draft",
    "record_item",
    "checked_ids",
    "checked_limit",
    "choose",
    "normalise_bucket",
    "normalise_tags",
    "checked_content",
    "checked_title",
    "checked_person_id",
    "checked_event_range",
    "finite_timestamp",
    "clean_text_list",
    "check_tags",
    "TYPED_TEXT_FIELDS",
]

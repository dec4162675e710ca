"""Input shapes of the dashboard and the one translation from them to service keyword arguments.

The JSON API and the HTML forms accept the same memory fields; both end up in ``MemoryFields`` dicts built here,
so a rule (list splitting, what "keep" means, which fields go to ``move_memories`` instead of the update) lives in
one place. Unknown JSON fields are rejected rather than ignored, so a typo is an error and not a silent no-op.
"""

from __future__ import annotations

import datetime as _dt
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from fastapi import Request, UploadFile
from pydantic import BaseModel, ConfigDict, Field

from ..services.errors import ValidationError

TAG_GROUPS = ("core_tags", "diffusion_tags", "opposing_tags")
LIST_FIELDS = ("relation_memory_ids", "relation_aliases", "related_people")
TEXT_FIELDS = (
    "title",
    "content",
    "memory_type",
    "status",
    "person_id",
    "knowledge_type",
    "address_or_coord",
    "place_type",
    "asset_type",
    "disposition_status",
    "procedure_type",
)
TIME_FIELDS = ("event_start_at", "event_end_at")
# Fields both ``create_memory`` and ``update_memory_by_id`` accept.
MEMORY_FIELDS = TEXT_FIELDS + TAG_GROUPS + LIST_FIELDS + TIME_FIELDS + ("folder_id",)

_LIST_SPLIT = re.compile(r"[,，、\n]")


def split_list(value: str | Iterable[Any] | None) -> list[str]:
    """A list field from a form string (``,``/``，``/``、``/newline separated) or a JSON list: trimmed,
    de-duplicated."""
    if value is None:
        return []
    items: Iterable[Any] = _LIST_SPLIT.split(value) if isinstance(value, str) else value
    seen: set[str] = set()
    result: list[str] = []
    for item in items:
        text = str(item).strip()
        if text and text not in seen:
            seen.add(text)
            result.append(text)
    return result


def parse_datetime_local(value: str, field_name: str) -> float:
    """``YYYY-MM-DDTHH:MM`` (an ``<input type="datetime-local">``, server local time) as epoch seconds; blank = 0."""
    text = value.strip()
    if not text:
        return 0.0
    try:
        return _dt.datetime.fromisoformat(text).timestamp()
    except ValueError as exc:
        raise ValidationError(f"{field_name} 必须是日期时间，格式 YYYY-MM-DDTHH:MM，收到: {text!r}") from exc


class MemoryCreate(BaseModel):
    """``POST /api/memories``: a new memory. The three tag groups are required by the service."""

    model_config = ConfigDict(extra="forbid")

    title: str
    content: str
    folder_id: str | None = None
    memory_type: str = "knowledge"
    status: str = "active"
    person_id: str | None = None
    core_tags: list[str] = Field(default_factory=list)
    diffusion_tags: list[str] = Field(default_factory=list)
    opposing_tags: list[str] = Field(default_factory=list)
    relation_memory_ids: list[str] = Field(default_factory=list)
    relation_aliases: list[str] = Field(default_factory=list)
    related_people: list[str] = Field(default_factory=list)
    event_start_at: float = 0.0
    event_end_at: float = 0.0
    knowledge_type: str = ""
    address_or_coord: str = ""
    place_type: str = ""
    asset_type: str = ""
    disposition_status: str = ""
    procedure_type: str = ""


class MemoryUpdate(BaseModel):
    """``PUT``/``PATCH /api/memories/{id}``: only the fields present change; absent or ``null`` means keep.

    Tags change only as a whole triplet (all three groups), as the service requires.
    """

    model_config = ConfigDict(extra="forbid")

    title: str | None = None
    content: str | None = None
    folder_id: str | None = None
    memory_type: str | None = None
    status: str | None = None
    person_id: str | None = None
    core_tags: list[str] | None = None
    diffusion_tags: list[str] | None = None
    opposing_tags: list[str] | None = None
    relation_memory_ids: list[str] | None = None
    relation_aliases: list[str] | None = None
    related_people: list[str] | None = None
    event_start_at: float | None = None
    event_end_at: float | None = None
    knowledge_type: str | None = None
    address_or_coord: str | None = None
    place_type: str | None = None
    asset_type: str | None = None
    disposition_status: str | None = None
    procedure_type: str | None = None


class HardDeleteRequest(BaseModel):
    """Body of a permanent delete: ``confirm`` must repeat the memory id."""

    model_config = ConfigDict(extra="forbid")

    confirm: str = ""


class RevertRequest(BaseModel):
    """Body of ``POST /api/memories/{id}/revert``."""

    model_config = ConfigDict(extra="forbid")

    version: int = Field(ge=1)


class SupersedeRequest(BaseModel):
    """Body of ``POST /api/memories/{id}/supersede``: the id of the later memory that replaces this one."""

    model_config = ConfigDict(extra="forbid")

    superseded_by: str = Field(min_length=1, max_length=200)


BULK_PURGE_PHRASE = "永久删除"
BulkActionName = Literal["delete", "restore", "archive", "move", "purge"]


class BulkAction(BaseModel):
    """``POST /api/memories/bulk``: one action over many ids.

    ``move`` needs ``to_folder_id``; ``purge`` (permanent delete) needs ``confirm`` equal to ``永久删除``.
    """

    model_config = ConfigDict(extra="forbid")

    action: BulkActionName
    memory_ids: list[str] = Field(min_length=1, max_length=500)
    to_folder_id: str | None = None
    confirm: str = ""


class DocumentCreate(BaseModel):
    """``POST /api/knowledge/documents`` as JSON (the multipart form upload is the other way in)."""

    model_config = ConfigDict(extra="forbid")

    title: str
    content: str


def clean_memory_fields(raw: Mapping[str, Any], allowed: Iterable[str]) -> dict[str, Any]:
    """Service kwargs from a payload: ``None`` dropped (= keep), strings trimmed, lists split and de-duplicated."""
    fields: dict[str, Any] = {}
    for name in allowed:
        value = raw.get(name)
        if value is None:
            continue
        if name in TAG_GROUPS or name in LIST_FIELDS:
            fields[name] = split_list(value)
        elif name in TIME_FIELDS:
            number = float(value)
            if not math.isfinite(number) or number < 0:
                raise ValidationError(f"{name} 必须是非负的时间戳（秒），收到: {value!r}")
            fields[name] = number
        else:
            fields[name] = str(value).strip()
    if not fields.get("folder_id", "x"):
        del fields["folder_id"]  # a blank folder box means "default/keep", never "move to the folder named ''"
    return fields


def memory_fields_from_form(form: Mapping[str, Any]) -> dict[str, Any]:
    """Every memory field of the edit/create form, normalised like the JSON API (times from datetime-local)."""
    raw: dict[str, Any] = {}
    for name in MEMORY_FIELDS:
        value = form.get(name)
        if not isinstance(value, str):
            continue
        raw[name] = parse_datetime_local(value, name) if name in TIME_FIELDS else value
    return clean_memory_fields(raw, MEMORY_FIELDS)


def current_memory_fields(item: Mapping[str, Any]) -> dict[str, Any]:
    """The editable fields of a service item (``get_memory_detail``'s ``item``) in payload form."""
    metadata: Mapping[str, Any] = item.get("metadata") or {}
    values: dict[str, Any] = {"title": str(item.get("title") or ""), "content": str(item.get("content") or "")}
    for name in MEMORY_FIELDS:
        if name in values:
            continue
        value = metadata.get(name)
        if name in TAG_GROUPS or name in LIST_FIELDS:
            values[name] = split_list(value if isinstance(value, list) else None)
        elif name in TIME_FIELDS:
            values[name] = float(value or 0.0)
        else:
            values[name] = "" if value is None else str(value)
    return values


def _comparable(name: str, value: Any) -> Any:
    if name in TAG_GROUPS:
        return [str(tag).lower() for tag in value]  # the service lower-cases tags; case alone is not an edit
    return value


def changed_memory_fields(current: Mapping[str, Any], submitted: Mapping[str, Any]) -> dict[str, Any]:
    """The submitted fields that differ from the stored ones.

    A form always posts every field; sending only the differences keeps the history free of no-op revisions and
    avoids re-embedding when nothing embedded changed. If any tag group changed, all three are sent (the service
    only accepts complete triplets). Event times are compared at minute resolution, the form's precision.
    """
    changed: dict[str, Any] = {}
    for name, value in submitted.items():
        old = current.get(name)
        if name in TIME_FIELDS and old is not None and abs(float(old) - float(value)) < 60:
            continue
        if old is None or _comparable(name, old) != _comparable(name, value):
            changed[name] = value
    if any(group in changed for group in TAG_GROUPS):
        for group in TAG_GROUPS:
            changed[group] = submitted.get(group, current.get(group, []))
    return changed


class BatchRestoreRequest(BaseModel):
    """``POST /api/audit/restore-batch``: undo every change of one batch (e.g. one dreaming run)."""

    model_config = ConfigDict(extra="forbid")

    batch_id: str = Field(min_length=1, max_length=200)


RECALL_FIELDS = ("query", "quotas", "max_chars", "min_score", "peer_scope", "other_peer_penalty", "render")
RECALL_QUERY_MAX_CHARS = 2000


def _check_recall_query(query: Any) -> str:
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("query 必填，必须是非空字符串")
    if len(query) > RECALL_QUERY_MAX_CHARS:
        raise ValidationError(f"query 最多 {RECALL_QUERY_MAX_CHARS} 个字符，当前 {len(query)} 个")
    return query


def recall_arguments(body: Any) -> dict[str, Any]:
    """``recall`` keyword arguments from the JSON body of ``POST /api/v1/search/recall`` (only the
    fields docs/RECALL.md lists).

    Field types that JSON can get wrong are checked here; value ranges (quota names and sizes, budgets, peer scope,
    penalties) are the service's to judge, so the HTTP API and the tool reject the same things with the same words.
    ``null`` means "use the default".
    """
    if not isinstance(body, dict):
        raise ValidationError("请求体必须是 JSON 对象，字段：" + "、".join(RECALL_FIELDS))
    unknown = sorted(str(key) for key in body if key not in RECALL_FIELDS)
    if unknown:
        raise ValidationError(f"不支持的字段：{'、'.join(unknown)}；可用字段：{'、'.join(RECALL_FIELDS)}")
    arguments: dict[str, Any] = {"query": _check_recall_query(body.get("query"))}
    for name in RECALL_FIELDS[1:]:
        if body.get(name) is not None:
            arguments[name] = body[name]
    if "render" in arguments and not isinstance(arguments["render"], bool):
        raise ValidationError("render 必须是 true 或 false")
    if "peer_scope" in arguments and not isinstance(arguments["peer_scope"], str):
        raise ValidationError("peer_scope 必须是字符串：all 或 actor")
    return arguments


def _form_int(name: str, raw: str) -> int:
    try:
        return int(raw.strip())
    except ValueError as exc:
        raise ValidationError(f"{name} 必须是整数，收到: {raw!r}") from exc


def _form_float(name: str, raw: str) -> float:
    try:
        number = float(raw.strip())
    except ValueError as exc:
        raise ValidationError(f"{name} 必须是数字，收到: {raw!r}") from exc
    if not math.isfinite(number):
        raise ValidationError(f"{name} 必须是有限数字，收到: {raw!r}")
    return number


def recall_form_arguments(form: Mapping[str, str], categories: Iterable[str]) -> dict[str, Any]:
    """``recall`` keyword arguments from the preview page's query string.

    Quotas come as ``quota_<category>`` (blank = not asked for; all blank = the service's defaults),
    ``other_peer_penalty`` as one number for every type (blank = per-type defaults), ``render`` as a checkbox, and
    ``actor_peer_id`` names the speaker whose point of view is previewed (the administrator is trusted to pick one).
    """
    quotas = {
        category: _form_int(f"quotas.{category}", form[f"quota_{category}"])
        for category in categories
        if str(form.get(f"quota_{category}") or "").strip()
    }
    arguments: dict[str, Any] = {
        "query": _check_recall_query(str(form.get("query") or "")),
        "quotas": quotas or None,
        "max_chars": _form_int("max_chars", str(form.get("max_chars") or "6500")),
        "min_score": _form_float("min_score", str(form.get("min_score") or "0.1")),
        "peer_scope": str(form.get("peer_scope") or "all"),
        "render": form.get("render") == "true",
    }
    penalty = str(form.get("other_peer_penalty") or "").strip()
    if penalty:
        arguments["other_peer_penalty"] = _form_float("other_peer_penalty", penalty)
    speaker = str(form.get("actor_peer_id") or "").strip()
    if speaker:
        arguments["actor_peer_id"] = speaker
    return arguments


async def read_upload(request: Request, upload: UploadFile) -> bytes:
    """The uploaded file's bytes, at most ``settings.max_upload_bytes`` (its type and text are the knowledge
    service's business: ``ingest_upload`` reads it like a file on disk)."""
    limit = request.app.state.settings.max_upload_bytes
    data = await upload.read(limit + 1)
    if len(data) > limit:
        raise ValidationError(f"file 超过大小上限 {limit // 1024} KB")
    return data

"""Checks of the create/edit memory form that report every problem at once, each next to its field.

The service stops at the first invalid field, which suits a program but makes a person resubmit once per mistake.
Here each field is run through the service's own check on its own (``services.memory_fields``), so the rules stay
in one place, and the messages speak of the form: the field's Chinese label instead of its parameter name, and
"修改" instead of "创建" on the edit form.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from ..services.errors import BookuError
from ..services.memory_fields import (
    DISPOSITION_STATUSES,
    KNOWLEDGE_TYPES,
    MEMORY_TYPES,
    PROCEDURE_TYPES,
    STATUSES,
    check_tags,
    checked_content,
    checked_event_range,
    checked_person_id,
    checked_title,
    choose,
    clean_text_list,
)
from .payloads import LIST_FIELDS, TAG_GROUPS, TIME_FIELDS, parse_datetime_local, split_list

FIELD_LABELS: dict[str, str] = {
    "title": "标题",
    "content": "正文",
    "memory_type": "类型",
    "status": "状态",
    "folder_id": "文件夹",
    "core_tags": "核心标签",
    "diffusion_tags": "扩散标签",
    "opposing_tags": "对立标签",
    "person_id": "人物 ID",
    "related_people": "相关人物",
    "event_start_at": "事件开始时间",
    "event_end_at": "事件结束时间",
    "knowledge_type": "知识类型",
    "procedure_type": "流程类型",
    "disposition_status": "处置状态",
    "relation_memory_ids": "关联记忆 ID",
    "relation_aliases": "关联别名",
}
# Memory types whose person fields (person id, related people) the form shows; CSS reveals them for these types.
PERSON_TYPES = ("person", "profile", "event")
CHOICES: dict[str, tuple[str, ...]] = {
    "memory_type": MEMORY_TYPES,
    "status": STATUSES,
    "knowledge_type": KNOWLEDGE_TYPES,
    "procedure_type": PROCEDURE_TYPES,
    "disposition_status": DISPOSITION_STATUSES,
}


def _in_form_words(message: str) -> str:
    """A service message with each parameter name replaced by its field's label (``content 最多…`` → ``正文最多…``)."""
    for name in sorted(FIELD_LABELS, key=len, reverse=True):
        message = re.sub(rf"^{name}\s(?=[\u4e00-\u9fff])", FIELD_LABELS[name], message)  # "content 最多" → "正文最多"
        message = re.sub(rf"(?<![A-Za-z_]){name}(?![A-Za-z_])", FIELD_LABELS[name], message)
    return message


def memory_form_errors(form: Mapping[str, Any], *, editing: bool) -> dict[str, str]:
    """Field name → Chinese message for every invalid field of the submitted form (empty when all is well).

    ``editing`` words the tag rule for the edit form. Nothing is written here; the caller shows the form again
    with these messages and the submitted text when the result is not empty.
    """
    text = {name: str(value) for name, value in form.items() if isinstance(value, str)}
    errors: dict[str, str] = {}

    def check(field: str, run: Callable[[], Any]) -> Any:
        try:
            return run()
        except BookuError as exc:
            errors.setdefault(field, _in_form_words(str(exc)))
            return None

    content = text.get("content", "").strip()
    if check("content", lambda: checked_content(content)) is None and content:  # too long
        errors["content"] += "；较长的资料请拆成几条记忆，或作为文档上传到知识库"
    check("title", lambda: checked_title(text.get("title", ""), content or "-"))
    for field, options in CHOICES.items():
        default = {"memory_type": "knowledge", "status": "active"}.get(field, "")
        check(field, partial(choose, field, text.get(field, "") or default, options))
    kind = text.get("memory_type", "") or "knowledge"
    check("person_id", lambda: checked_person_id(kind, text.get("person_id")))
    if "person_id" in errors and not text.get("person_id", "").strip():
        errors["person_id"] = "人物类型的记忆必须填写人物 ID，格式 平台:账号，如 qq:10001"
    _tag_errors(text, errors, check, editing=editing)
    for field in LIST_FIELDS:
        check(field, partial(_listed, text, field))
    times = [check(field, partial(parse_datetime_local, text.get(field, ""), field)) for field in TIME_FIELDS]
    if all(value is not None for value in times):
        check("event_end_at", lambda: checked_event_range(times[0], times[1]))
    return errors


def _listed(text: Mapping[str, str], field: str) -> list[str]:
    """A list field of the form, split and cleaned (raises ``ValidationError`` like the other checks)."""
    return clean_text_list(field, split_list(text.get(field, "")))


def _tag_errors(
    text: Mapping[str, str], errors: dict[str, str], check: Callable[[str, Callable[[], Any]], Any], *, editing: bool
) -> None:
    """Each tag group on its own: a size problem, or blank while the three-groups rule needs it."""
    groups = {group: split_list(text.get(group, "")) for group in TAG_GROUPS}
    for group, tags in groups.items():
        check(group, partial(check_tags, group, tags))
    blank = [group for group, tags in groups.items() if not tags]
    if editing and len(blank) == len(TAG_GROUPS):
        return  # an edit that clears every tag group leaves the tags alone
    rule = "修改标签时三组须同时填写" if editing else "新建记忆须三组标签都填写"
    for group in blank:
        errors.setdefault(group, f"{FIELD_LABELS[group]}不能为空：{rule}（每组至少一个，逗号分隔）")

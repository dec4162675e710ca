"""Jinja2 environment and the small display helpers every page shares.

Autoescape is forced on for every template (not only ``*.html`` as Jinja's default selector does), and the
environment is strict about undefined names, so a typo in a template fails the tests instead of rendering blank.
Nothing in this package marks user data ``|safe``: memory text always reaches the browser escaped.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi import Request
from fastapi.responses import HTMLResponse

from ..services.evidence.audit_events import EVENT_ACTIONS, REVISION_ACTIONS
from ..services.memory_fields import (
    DISPOSITION_STATUSES,
    KNOWLEDGE_TYPES,
    MEMORY_TYPES,
    PROCEDURE_TYPES,
    STATUSES,
)
from ..services.scope import SHARED_STORE

PACKAGE_ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_DIR = PACKAGE_ROOT / "templates"
STATIC_DIR = PACKAGE_ROOT / "static"

# Display names for the service's vocabularies; the option lists themselves come from the service module, so a
# value the service accepts always appears in the forms (unknown ones are shown verbatim).
_MEMORY_TYPE_NAMES = {
    "person": "人物",
    "event": "事件",
    "knowledge": "知识",
    "place": "地点",
    "asset": "资产",
    "procedure": "流程",
    "preference": "偏好",
    "experience": "经历",
    "profile": "画像",
    "case": "案例",
    "trajectory": "轨迹",
}
_STATUS_NAMES = {"active": "活跃", "archived": "归档", "expired": "过期"}
_KNOWLEDGE_TYPE_NAMES = {"concept": "概念", "model": "模型", "quote": "引用", "counterintuitive": "反直觉"}
_PROCEDURE_TYPE_NAMES = {"process": "流程", "tech": "技术", "deploy": "部署", "cooking": "烹饪"}
_DISPOSITION_NAMES = {"in_use": "使用中", "idle": "闲置", "disposed": "已处置"}


def _labelled(options: tuple[str, ...], names: Mapping[str, str]) -> dict[str, str]:
    return {option: names.get(option, option) for option in options if option}


MEMORY_TYPE_LABELS = _labelled(MEMORY_TYPES, _MEMORY_TYPE_NAMES)
STATUS_LABELS = _labelled(STATUSES, _STATUS_NAMES)
KNOWLEDGE_TYPE_LABELS = _labelled(KNOWLEDGE_TYPES, _KNOWLEDGE_TYPE_NAMES)
PROCEDURE_TYPE_LABELS = _labelled(PROCEDURE_TYPES, _PROCEDURE_TYPE_NAMES)
DISPOSITION_LABELS = _labelled(DISPOSITION_STATUSES, _DISPOSITION_NAMES)
BUCKET_LABELS: dict[str, str] = {"memory": "记忆", "knowledge": "知识库"}
ACTION_LABELS: dict[str, str] = {
    "create": "创建",
    "created": "创建",
    "update": "修改",
    "merge": "合并",
    "merged": "合并",
    "delete": "软删除",
    "soft_delete": "软删除",
    "restore": "恢复",
    "revert": "回滚",
    "archive": "归档",
    "move": "移动",
    "expire": "过期",
    "hard_delete": "永久删除",
    "promote": "转入归档层",
    "undo": "审计恢复",
    "undo_create": "撤销创建",
    "undo_delete": "撤销永久删除",
    "knowledge_ingest": "知识入库",
    "knowledge_update": "知识更新",
    "knowledge_remove": "知识删除",
    "supersede": "标记为过时（被新记忆取代）",
    "unsupersede": "撤销取代",
    **EVENT_ACTIONS,
    **REVISION_ACTIONS,
}
# The actions the audit log records (``services/memory_writes.py``, ``storage/record_writes.py``), for its filter.
AUDIT_ACTIONS: tuple[str, ...] = (
    "create",
    "update",
    "merge",
    "delete",
    "restore",
    "revert",
    "archive",
    "move",
    "promote",
    "expire",
    "hard_delete",
    "undo",
    "undo_create",
    "undo_delete",
    "knowledge_ingest",
    "knowledge_update",
    "knowledge_remove",
    "supersede",
    "unsupersede",
    *EVENT_ACTIONS,
    *REVISION_ACTIONS,
)
AUTHORITY_LABELS: dict[str, str] = {
    "human": "人工",
    "agent": "机器人",
    "dreaming": "梦境整理",
    "source_learning": "资料学习",
    "mechanical": "自动维护",
}


ACTOR_LABELS: dict[str, str] = {"dashboard": "后台", "agent": "机器人", "booku-lifecycle": "生命周期维护"}


def store_label(value: Any) -> str:
    """A store key in words: ``shared`` → 共享库, ``private:qq:1001`` → 私聊 qq:1001, ``group:…`` → 群聊 …."""
    key = "" if value is None else str(value)
    if key == SHARED_STORE:
        return "共享库"
    for prefix, label in (("private:", "私聊"), ("group:", "群聊"), ("bot:", "机器人自有")):
        if key.startswith(prefix):
            return f"{label} {key[len(prefix) :]}"
    return key or "—"


def root_path(request: Request) -> str:
    """The prefix the app is mounted under (``""`` standalone, ``/booku-memory`` in the host)."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def app_url(request: Request, path: str, **params: Any) -> str:
    """An absolute path inside this app, honouring the mount prefix; ``None``/empty params are dropped."""
    query = {key: value for key, value in params.items() if value not in (None, "", False)}
    suffix = f"?{urlencode(query, doseq=True)}" if query else ""
    return f"{root_path(request)}{path}{suffix}"


def format_timestamp(value: Any) -> str:
    """Epoch seconds as local ``YYYY-MM-DD HH:MM``; ``0``/missing as ``—`` (the store uses 0 for "never")."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return "—"
    if seconds <= 0:
        return "—"
    return _dt.datetime.fromtimestamp(seconds).strftime("%Y-%m-%d %H:%M")


def datetime_local_value(value: Any) -> str:
    """Epoch seconds as the value of an ``<input type="datetime-local">`` (empty for 0)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return ""
    if seconds <= 0:
        return ""
    return _dt.datetime.fromtimestamp(seconds).strftime("%Y-%m-%dT%H:%M")


def _label(table: Mapping[str, str]) -> Any:
    def lookup(value: Any) -> str:
        text = "" if value is None else str(value)
        return table.get(text, text or "—")

    return lookup


def format_score(value: Any) -> str:
    """A ranking score with three decimals (``—`` when absent)."""
    try:
        return f"{float(value):.3f}"
    except (TypeError, ValueError):
        return "—"


def location_without(request: Request, names: tuple[str, ...]) -> str:
    """This page's path and query minus some parameters: where a form on it sends the user back to."""
    query = [(key, value) for key, value in request.query_params.multi_items() if key not in names]
    return request.url.path + (f"?{urlencode(query)}" if query else "")


def build_environment() -> jinja2.Environment:
    """The one template environment of the dashboard: autoescape everywhere, strict undefined names."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATE_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["datetime"] = format_timestamp
    env.filters["datetime_local"] = datetime_local_value
    env.filters["type_label"] = _label(MEMORY_TYPE_LABELS)
    env.filters["status_label"] = _label(STATUS_LABELS)
    env.filters["bucket_label"] = _label(BUCKET_LABELS)
    env.filters["action_label"] = _label(ACTION_LABELS)
    env.filters["actor_label"] = _label(ACTOR_LABELS)
    env.filters["authority_label"] = _label(AUTHORITY_LABELS)
    env.filters["store_label"] = store_label
    env.filters["score"] = format_score
    env.globals.update(
        MEMORY_TYPE_LABELS=MEMORY_TYPE_LABELS,
        STATUS_LABELS=STATUS_LABELS,
        KNOWLEDGE_TYPES=KNOWLEDGE_TYPE_LABELS,
        PROCEDURE_TYPES=PROCEDURE_TYPE_LABELS,
        DISPOSITION_STATUSES=DISPOSITION_LABELS,
    )
    return env


def degraded_banner(request: Request) -> str:
    """Why retrieval is keyword-only right now (vector index broken or being rebuilt, model down), for the banner
    every page shows; empty when the vector route works or no runtime is running."""
    runtime = request.app.state.runtime_provider()
    if runtime is None or not getattr(runtime, "started", False):
        return ""
    return runtime.degraded_reason()


def render(
    request: Request,
    template: str,
    context: Mapping[str, Any] | None = None,
    *,
    status_code: int = 200,
) -> HTMLResponse:
    """Render ``template`` with the values every page needs (mount prefix, CSRF token, active nav entry, the store
    selection for the selector)."""
    env: jinja2.Environment = request.app.state.templates
    auth = getattr(request.state, "auth", None)
    values: dict[str, Any] = {
        "stores": getattr(request.state, "stores", None),
        "selector_return_to": location_without(request, ("notice", "store", "page")),
        "root": root_path(request),
        "csrf_token": auth.csrf_token if auth is not None else "",
        "logged_in": auth is not None,
        "nav": "",
        "notice": "",
        "error": "",
        "url": lambda path, **params: app_url(request, path, **params),
    }
    values["degraded_banner"] = degraded_banner(request) if values["logged_in"] else ""
    values.update(context or {})
    html = env.get_template(template).render(values)
    return HTMLResponse(html, status_code=status_code)

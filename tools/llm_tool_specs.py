"""The LLM-facing operations beyond ``memory_command``'s own sub-commands: every companion tool plus typed recall.

One table serves three surfaces: the ``memory_command`` sub-commands (``command_spec``), the host tools
(``host_adapter/tools.py``) and the manual. The companion tools are ``services/companion/tool_table.COMPANION_TOOLS`` as
they are at import time, so a tool added there (plans, letters, feel, I …) becomes a sub-command and a host tool with no
change here. ``recall`` is described in the same ``ToolSpec`` shape, its defaults read from
``BookuMemoryService.recall`` itself so the description can never advertise a default the service does not use.
Nothing here imports a host framework: ``host_parameters`` gives plain Python types that the adapter wraps in
``Annotated[...]``.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import GenericAlias
from typing import Any, Literal

from ..services.companion import tool_table as companion_specs
from ..services.companion.tool_table import REQUIRED, ToolParam, ToolSpec
from ..services.memory_service import BookuMemoryService
from ..services.typed_recall import CATEGORIES, DEFAULT_QUOTAS, MAX_QUOTA, PEER_SCOPES

RECALL_MAX_CHARS = 200_000


@dataclass(frozen=True)
class ChoiceParam(ToolParam):
    """A string parameter restricted to ``choices`` (the host schema shows them as an enum)."""

    choices: tuple[str, ...] = ()


def _recall_default(name: str) -> Any:
    return inspect.signature(BookuMemoryService.recall).parameters[name].default


RECALL_SPEC = ToolSpec(
    "recall",
    "recall",
    (
        "分类型回忆：按记忆类别（画像、偏好、人物与事实、事件、核心准则、经验、技能等）分别检索，每类按配额取，"
        "再整体放进字符上限（超出时低分条目先降为摘要、再降为只留地址、最后省略），返回可直接参考的文本块和条目列表。"
        "适合对话开始时一次性想起与话题有关的各类记忆；要逐字浮现陪伴记忆用 breath / breath_search。"
    ),
    (
        ToolParam("query", "string", "要回忆的话题或问题，一句话即可", default=REQUIRED),
        ToolParam(
            "quotas",
            "object",
            f'每种类别最多取几条（0~{MAX_QUOTA}），JSON 对象如 {{"events": 5}}；类别：{"、".join(CATEGORIES)}；'
            f"不传按缺省 {'、'.join(f'{k}={v}' for k, v in DEFAULT_QUOTAS.items())}",
        ),
        ToolParam(
            "max_chars",
            "integer",
            "文本块的字符上限；超出时低分条目先降为摘要、再降为只留地址、最后省略（还受工具输出上限约束）",
            default=_recall_default("max_chars"),
            minimum=1,
            maximum=RECALL_MAX_CHARS,
        ),
        ToolParam("min_score", "number", "相关度下限，低于它的条目不返回", default=_recall_default("min_score")),
        ChoiceParam(
            "peer_scope",
            "string",
            "all=全部记忆（关于他人的略降分）；actor=只要关于当前说话人的",
            default=_recall_default("peer_scope"),
            choices=tuple(PEER_SCOPES),
        ),
        ToolParam(
            "other_peer_penalty",
            ("number", "object"),
            "关于他人的记忆扣多少分（0~1）：一个数字，或 JSON 对象 {类别: 数字}",
        ),
        ToolParam("render", "boolean", "是否给出可直接放进提示词的文本块", default=_recall_default("render")),
    ),
)


def llm_tool_specs() -> tuple[ToolSpec, ...]:
    """Every companion tool (table order) followed by ``recall``."""
    return (*companion_specs.COMPANION_TOOLS, RECALL_SPEC)


def is_companion(spec: ToolSpec) -> bool:
    """True for tools served by ``BookuCompanionService`` (everything but ``recall``)."""
    return spec is not RECALL_SPEC


def llm_tool_spec(name: str) -> ToolSpec:
    """The spec called ``name``; ``KeyError`` when there is none."""
    for spec in llm_tool_specs():
        if spec.name == name:
            return spec
    raise KeyError(name)


def param_types(param: ToolParam) -> tuple[str, ...]:
    """The JSON types a parameter accepts, as a tuple."""
    return param.type if isinstance(param.type, tuple) else (param.type,)


def item_types(param: ToolParam) -> tuple[str, ...]:
    """The JSON types of an array parameter's items (empty when unspecified)."""
    if param.items is None:
        return ()
    return param.items if isinstance(param.items, tuple) else (param.items,)


def param_choices(param: ToolParam) -> tuple[str, ...]:
    """Allowed values of a string parameter, when the table restricts them."""
    return tuple(getattr(param, "choices", None) or getattr(param, "enum", None) or ())


def is_comma_list(param: ToolParam) -> bool:
    """A string-or-list-of-strings parameter (domain, tags): written as a comma list on the command line."""
    kinds = param_types(param)
    return (
        "array" in kinds
        and item_types(param) in ((), ("string",))
        and ("string" in kinds or item_types(param) == ("string",))
    )


_ITEM_PYTHON = {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}


def python_type(param: ToolParam) -> Any:
    """The Python annotation a host tool declares for ``param`` (the host derives its JSON type from it).

    A union of JSON types is declared as its first member (``domain``: a comma-separated string; the service also
    takes a list, and the host does not validate), because the host turns any other union into a plain string.
    Arrays always name their item type: some model APIs reject an array schema without ``items``.
    """
    choices = param_choices(param)
    if choices:
        return Literal[choices]
    first = param_types(param)[0]
    if first == "array":
        inner = item_types(param)[:1]
        if inner == ("array",):
            return list[list[int]]
        return GenericAlias(list, (_ITEM_PYTHON.get(inner[0], str) if inner else str,))
    return {"string": str, "integer": int, "number": float, "boolean": bool, "object": dict}.get(first, str)


@dataclass(frozen=True)
class HostParameter:
    """One keyword parameter of a host tool's ``execute``: name, Python type, Chinese description, default."""

    name: str
    annotation: Any
    description: str
    required: bool
    default: Any = None


def host_parameters(spec: ToolSpec) -> list[HostParameter]:
    """The host tool parameters of ``spec``, in table order (optional ones default to the table's default)."""
    return [
        HostParameter(
            param.name, python_type(param), param.description, param.required, None if param.required else param.default
        )
        for param in spec.params
    ]


__all__ = [
    "ChoiceParam",
    "HostParameter",
    "RECALL_SPEC",
    "host_parameters",
    "is_comma_list",
    "is_companion",
    "item_types",
    "llm_tool_spec",
    "llm_tool_specs",
    "param_choices",
    "param_types",
    "python_type",
]

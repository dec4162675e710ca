"""Running the table-derived tools (companion memory and typed recall) for the LLM.

Both the ``memory_command`` sub-commands (breath, hold, …, recall) and the host tools of the same names end here, so
they behave identically: the companion tools act through ``BookuCompanionService`` built on the caller's runtime and
scope (as the AI side when the service distinguishes sides), and ``recall`` through ``BookuMemoryService.recall``.

What the model reads back:

* a companion tool: ``{"action": name, "text": …}``, the service's own ``text``. That text is verbatim memory
  content the service already fitted to its token limit by leaving whole memories out (never by cutting one), so the
  ``memory_command`` output budget does not cut it either (``formatting.fit_to_budget`` allows for it).
* ``recall``: the rendered block plus a compact entry list, fitted to the output budget: the block is requested with
  a ``max_chars`` small enough to fit (never above what the caller asked for) and the entry list loses its tail first.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..config import BookuConfig
from ..services.companion.service import BookuCompanionService
from ..services.companion.tool_table import ToolSpec
from ..services.errors import BookuError
from .command_lexer import CommandError, ParsedCommand
from .command_spec import FlagKind
from .formatting import fit_to_budget, one_line, render_for_llm, rendered_len
from .llm_tool_specs import RECALL_SPEC, is_companion, llm_tool_spec, param_types
from .service_config import config_of

logger = logging.getLogger("booku_memory.tools")

COMPANION_SIDE = "ai"
"""Letters and locks: whatever reaches the companion service through an LLM tool is the AI side, never the user."""
RECALL_RESERVE_CHARS = 500
"""Room kept next to the recall block for the entry list and the answer around it."""
RECALL_FIT_ATTEMPTS = 3
TITLE_CHARS = 60
INTERNAL_ERROR = "记忆服务出错，这次调用没有完成；请稍后重试或换个写法。"

Runner = Callable[[Any], Awaitable[dict[str, Any]]]


@functools.cache
def companion_service_for(service: Any) -> BookuCompanionService:
    """The companion service on ``service``'s runtime and scope (same owner, stores and write authority)."""
    return BookuCompanionService(service.runtime, service.scope, side=COMPANION_SIDE)


async def run_tool(
    service: Any, spec: ToolSpec, arguments: Mapping[str, Any], *, config: BookuConfig | None = None
) -> dict[str, Any]:
    """Run one table tool with already-checked ``arguments``; returns the result dict the model reads.

    Raises ``BookuError`` (a ``ValueError``, Chinese message) for input the service rejects.
    """
    if is_companion(spec):
        result = await getattr(companion_service_for(service), spec.method)(**arguments)
        return {"action": spec.name, "text": str(result.get("text") or "")}
    cfg = config_of(service, config)
    return await recall_for_llm(service, dict(arguments), budget=cfg.tools.output_char_budget)


# ----- recall ------------------------------------------------------------------------------------------------------


RECALL_DEFAULTS: dict[str, Any] = {param.name: param.default for param in RECALL_SPEC.params}


async def recall_for_llm(service: Any, arguments: dict[str, Any], *, budget: int) -> dict[str, Any]:
    """Typed recall shaped for the model within ``budget`` characters.

    Returns ``{"action": "recall", "rendered", "total", "dropped", "items": [{"id", "type", "mode", "score",
    "origin"?, "title"?}], "note"?, "degraded"?}``. ``rendered`` is requested with ``max_chars`` lowered to what fits
    the budget (measured as the model sees it, JSON escapes included); ``note`` says when it was lowered.
    """
    requested = arguments.get("max_chars", RECALL_DEFAULTS["max_chars"])
    render = arguments.get("render", RECALL_DEFAULTS["render"])
    room = max(budget // 2, budget - RECALL_RESERVE_CHARS)
    valid_number = isinstance(requested, int) and not isinstance(requested, bool) and requested > 0
    cap = min(requested, room) if valid_number and render else requested
    result = await service.recall(**{**arguments, "max_chars": cap})
    for _ in range(RECALL_FIT_ATTEMPTS - 1):
        # The service counts characters; the model sees JSON, where a newline or quote costs two. Shrink and ask again.
        over = rendered_len(result["rendered"]) - room
        if not (valid_number and render) or over <= 0 or cap <= 1:
            break
        cap = max(1, cap - over)
        result = await service.recall(**{**arguments, "max_chars": cap})
    stats = result.get("stats") or {}
    answer: dict[str, Any] = {"action": "recall"}
    if render:
        answer["rendered"] = result["rendered"]
    answer["total"] = stats.get("returned", len(result["entries"]))
    answer["dropped"] = stats.get("dropped", 0)
    shrunk = any(entry.get("mode") != "full" for entry in result["entries"]) or bool(stats.get("dropped"))
    if render and valid_number and cap < requested and shrunk:
        # Only worth saying when the lower cap actually cost something (an entry shortened or left out).
        answer["note"] = f"文本块按工具输出上限缩到 {cap} 字以内（要求 {requested} 字），部分条目降为摘要或省略"
    if stats.get("degraded"):
        answer["degraded"] = stats["degraded"]
    answer["items"] = [_recall_item(entry, with_title=not render) for entry in result["entries"]]
    return answer


def _recall_item(entry: Mapping[str, Any], *, with_title: bool) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": entry.get("id"),
        "type": entry.get("type"),
        "mode": entry.get("mode"),
        "score": entry.get("score"),
    }
    if entry.get("origin") and entry.get("origin") != "self":
        item["origin"] = entry["origin"]
    if with_title:
        item["title"] = one_line(entry.get("abstract"), TITLE_CHARS)
    return item


# ----- memory_command sub-commands ---------------------------------------------------------------------------------


def plan_tool_command(parsed: ParsedCommand, config: BookuConfig) -> Runner:
    """Check one table-derived step (required flags) and return the coroutine that runs it later.

    Only the flags that were written are passed, so every default is the service's own. 0/1 switches (trace's
    ``-resolved`` …) are parsed as booleans and handed over as the integers the table declares.
    """
    command = parsed.spec
    spec = command.tool
    if spec is None:
        raise CommandError(f"{command.name} 不是工具子命令。")
    missing = [flag for flag in command.flags if flag.required and not parsed.has(flag.key)]
    if missing:
        flag = missing[0]
        raise CommandError(f"{command.name} 需要 {flag.shown}：{flag.help}。例：{command.example}")
    params = {param.name: param for param in spec.params}
    arguments: dict[str, Any] = {}
    for flag in command.flags:
        if not parsed.has(flag.key):
            continue
        value = parsed.get(flag.key)
        if flag.kind is FlagKind.BOOL and "integer" in param_types(params[flag.key]):
            value = int(value)
        arguments[flag.key] = value

    async def run(service: Any) -> dict[str, Any]:
        return await run_tool(service, spec, arguments, config=config)

    return run


# ----- session start -----------------------------------------------------------------------------------------------

SESSION_SELF_ENTRIES = 3
"""How many formal self-knowledge ("I") entries a new session starts with (docs/COMPANION.md)."""


async def session_self_entries(service: Any, limit: int = SESSION_SELF_ENTRIES) -> str:
    """The latest ``limit`` formal self-knowledge entries as the text to put in front of a new session, or ``""``
    when there are none or the companion service has no self-knowledge yet (``latest_self_entries`` absent)."""
    latest = getattr(companion_service_for(service), "latest_self_entries", None)
    if latest is None:
        return ""
    result = await latest(limit)
    return str(result.get("text") or "") if isinstance(result, Mapping) else ""


# ----- host tools --------------------------------------------------------------------------------------------------


def checked_host_arguments(spec: ToolSpec, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """A host tool call's arguments: ``None`` means "not given" (hosts send it for every optional parameter),
    unknown names and missing required ones are refused with a Chinese sentence (``ValidationError``)."""
    names = [param.name for param in spec.params]
    given = {name: value for name, value in arguments.items() if value is not None}
    unknown = sorted(set(given) - set(names))
    if unknown:
        allowed = "、".join(names) or "（无）"
        raise CommandError(f"{spec.name} 不支持参数 {'、'.join(unknown)}；可用参数：{allowed}。")
    missing = [param.name for param in spec.params if param.required and param.name not in given]
    if missing:
        raise CommandError(f"{spec.name} 缺少必填参数 {'、'.join(missing)}。")
    return given


async def run_host_tool(
    service: Any, name: str, arguments: Mapping[str, Any], *, config: BookuConfig | None = None
) -> tuple[bool, str]:
    """Run the host tool ``name`` for the model and never raise.

    Returns ``(ok, text)``: a companion tool's ``text``; recall's compact answer as JSON within the output budget;
    on failure the service's Chinese message (or a generic sentence for internal errors, which are logged).
    """
    spec = llm_tool_spec(name)
    try:
        given = checked_host_arguments(spec, arguments)
        result = await run_tool(service, spec, given, config=config)
    except BookuError as exc:
        return False, one_line(str(exc), 500)
    except Exception:  # store/vector internals: logged for the operator, one sentence for the model
        logger.exception("host tool %s failed", name)
        return False, INTERNAL_ERROR
    if is_companion(spec):
        return True, result["text"]
    budget = config_of(service, config).tools.output_char_budget
    return True, render_for_llm(fit_to_budget(result, budget))


__all__ = [
    "COMPANION_SIDE",
    "checked_host_arguments",
    "companion_service_for",
    "plan_tool_command",
    "recall_for_llm",
    "run_host_tool",
    "run_tool",
    "session_self_entries",
]

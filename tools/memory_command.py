"""The ``memory_command`` tool: parse a CLI-style command chain, check all of it, run it against the service.

Two phases, so that an invalid command never writes anything:

1. **Plan**: every step of the chain is parsed (``command_lexer``) and validated (required flags, the tag-triplet
   rule, person ids, id counts, ranges). If any step is wrong, nothing runs and the answer names that step.
2. **Run**: steps run in order; the first step that fails at run time (unknown id, a rule only the store can
   check) stops the chain, and the answer says which step failed, that earlier steps did take effect, and that
   later ones did not run.

The answer keeps the reference envelope (``{"action": "memory_command", "ok", "executed", "results": [{"command",
"success", "result"|"error"}]}`` plus ``error`` when not ok) so existing prompts and tests keep working, but every
``result`` is the compact form from ``formatting`` and the whole answer fits ``tools.output_char_budget``.
Errors are one Chinese sentence; Python tracebacks and internal messages never reach the model.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from ..config import BookuConfig
from ..services.errors import BookuError
from ..services.logic.tags import normalise_tags, parse_triple_tags
from ..services.memory_fields import checked_person_id
from .command_lexer import CommandError, ParsedCommand, parse_segment, split_chain
from .command_spec import (
    MAX_BATCH_IDS,
    MAX_READ_IDS,
    MEMORY_COMMANDS,
    TAG_KEYS,
    TOOL_COMMANDS,
    TYPED_FIELD_FLAGS,
    CommandSpec,
)
from .companion_commands import plan_tool_command
from .formatting import (
    COMMAND_ECHO_CHARS,
    fit_to_budget,
    format_archive,
    format_create,
    format_delete,
    format_folders,
    format_history,
    format_move,
    format_read,
    format_restore,
    format_revert,
    format_search,
    format_status,
    format_update,
    one_line,
)
from .manual import build_command_help, build_manual
from .service_config import config_of

logger = logging.getLogger("booku_memory.tools")

TOOL_NAME = "memory_command"
DEFAULT_TOP_N = 10
DEFAULT_HISTORY_VERSIONS = 10
MAX_REGEX_CHARS = 200
DEFAULT_GREP_FIELDS = ["title", "content", "tags"]
ERROR_CHARS = 300
# How much of a command a log line quotes: a command can be tens of kB, and the log must stay readable.
LOG_COMMAND_CHARS = 200

Runner = Callable[[Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class _Context:
    config: BookuConfig
    stream_id: str


# ----- public API --------------------------------------------------------------------------------------------------


async def run_memory_command(
    service: Any,
    command: str | None,
    *,
    stream_id: str | None = None,
    config: BookuConfig | None = None,
) -> dict[str, Any]:
    """Run one ``memory_command`` call and return the answer for the model (never raises).

    ``service`` is a ``BookuMemoryService`` (``help`` never touches it, so ``None`` works for ``help`` only);
    ``stream_id`` is the caller's chat stream (used by ``status`` to count this chat's memos); ``config`` overrides
    the limits, which otherwise come from ``service.runtime.config``.
    Returns ``{"action": "memory_command", "ok": bool, "executed": int, "results": [...], "error"?: str}``:
    ``executed`` counts the steps that ran (the failing one included; 0 when the command was invalid and nothing
    ran), each ``results`` entry is ``{"command", "success": True, "result"}`` or ``{"command", "success": False,
    "error"}``, and ``error`` is one sentence saying which step failed and what already took effect.
    """
    try:
        cfg = config_of(service, config)
        return fit_to_budget(
            await _run_chain(service, command, _Context(cfg, str(stream_id or "").strip())),
            cfg.tools.output_char_budget,
        )
    except Exception:  # last line of defence: the model must always get an answer, never a traceback
        logger.exception("memory_command crashed on %r", one_line(command, LOG_COMMAND_CHARS))
        message = "记忆工具内部出错，这条命令没有完成；请换个写法重试，或先执行 help。"
        return _envelope(False, 0, [_failure(command or "", message)], message)


def parameter_descriptions() -> dict[str, str]:
    """Chinese description of each ``memory_command`` parameter, for ``Annotated[...]`` in the host adapter."""
    return {
        "command": (
            '一条记忆命令，如 search -q "张三 生日" -n 5；多步用 && 串联，如 search -q 张三 && read -id mem-…；'
            "含空格的值加引号；不确定写法先执行 help 或 help <子命令>"
        )
    }


def tool_description() -> str:
    """The tool description the model sees: what it is for, every sub-command, and when to use it."""
    names = "、".join(spec.name for spec in MEMORY_COMMANDS)
    companion = "、".join(spec.name for spec in TOOL_COMMANDS)
    return (
        "长期记忆工具（命令行风格）。子命令：" + names + "。"
        "聊到人、事、偏好、约定时先 search 看看记得什么；得到新的、以后还用得上的信息就 create 记下；"
        "事实变了（搬家、换工作或号码、改时间、不再做某事）也用 create 记新事实：旧记录自动标记为过时、原文保留，"
        "回复会写明；同一件事换个说法会与已有记忆合并。记错了才用 update，没用的 archive 或 delete（可 restore）。"
        "三组标签（核心|扩散|对立）是检索的关键。"
        "陪伴记忆与分类型回忆的子命令（参数与同名工具相同）：" + companion + "。"
        "不确定写法先执行 help。"
    )


def tool_schema(config: BookuConfig | None = None) -> dict[str, Any]:
    """The host-facing schema of ``memory_command``.

    Shape: ``{"name", "description", "parameters": {"command": {"type": "string", "description"}},
    "required": ["command"]}``; the adapter mirrors it in ``execute(command: Annotated[str, description])``.
    ``config`` is accepted like ``temporary_memo``'s so the adapter can build both the same way; no text here
    depends on it.
    """
    return {
        "name": TOOL_NAME,
        "description": tool_description(),
        "parameters": {"command": {"type": "string", "description": parameter_descriptions()["command"]}},
        "required": ["command"],
    }


# ----- chain execution ---------------------------------------------------------------------------------------------


async def _run_chain(service: Any, command: str | None, ctx: _Context) -> dict[str, Any]:
    try:
        segments = split_chain(command)
    except BookuError as exc:
        message = one_line(str(exc), ERROR_CHARS)
        return _envelope(False, 0, [_failure(command or "", message)], message)

    plans: list[tuple[str, str, Runner]] = []
    for index, segment in enumerate(segments, start=1):
        try:
            parsed = parse_segment(segment)
            runner = _planner(parsed.spec)(parsed, ctx)
        except BookuError as exc:
            message = one_line(str(exc), ERROR_CHARS)
            summary = message
            if len(segments) > 1:
                summary = (
                    f"第 {index} 步「{_echo(segment)}」有误：{message.rstrip('。')}。"
                    "整条命令都没有执行，改正后重新提交。"
                )
            return _envelope(False, 0, [_failure(segment, message)], summary)
        plans.append((segment, parsed.spec.name, runner))

    results: list[dict[str, Any]] = []
    for index, (segment, name, runner) in enumerate(plans, start=1):
        try:
            if service is None and name != "help":
                raise BookuError("记忆服务还没有启动，现在只能执行 help。")
            result = await runner(service)
        except BookuError as exc:
            message = one_line(str(exc), ERROR_CHARS)
        except Exception as exc:  # store/vector/embedding internals: log them, tell the model only what to do
            logger.exception("memory_command step %r failed", one_line(segment, LOG_COMMAND_CHARS))
            message = f"记忆服务出错（{type(exc).__name__}），这一步没有完成；请稍后重试或换个写法。"
        else:
            results.append({"command": _echo(segment), "success": True, "result": result})
            continue
        results.append(_failure(segment, message))
        return _envelope(False, index, results, _chain_failure(index, len(plans), segment, message))
    return _envelope(True, len(plans), results)


def _envelope(ok: bool, executed: int, results: list[dict[str, Any]], error: str | None = None) -> dict[str, Any]:
    envelope: dict[str, Any] = {"action": TOOL_NAME, "ok": ok, "executed": executed, "results": results}
    if error is not None:
        envelope["error"] = error
    return envelope


def _failure(segment: str, message: str) -> dict[str, Any]:
    return {"command": _echo(segment), "success": False, "error": message}


def _echo(segment: str) -> str:
    return one_line(segment, COMMAND_ECHO_CHARS)


def _chain_failure(index: int, total: int, segment: str, message: str) -> str:
    if total == 1:
        return message
    parts = [f"第 {index} 步「{_echo(segment)}」失败：{message.rstrip('。')}"]
    if index > 1:
        parts.append(f"前 {index - 1} 步已经生效（不会撤销）")
    if index < total:
        parts.append(f"后面 {total - index} 步没有执行")
    return "；".join(parts) + "。"


# ----- shared validation -------------------------------------------------------------------------------------------


def _tags(parsed: ParsedCommand, *, required: bool) -> dict[str, list[str]] | None:
    """The tag triplet of a step, or ``None`` when no tag flag was given (update then keeps the stored tags).

    Explicit groups win over the ``-triple_tags`` shorthand group by group. Once any tag flag appears (even with an
    empty value) all three groups must end up non-empty; ``create`` always needs them.
    """
    present = [key for key in (*TAG_KEYS, "triple_tags") if parsed.has(key)]
    if not present:
        if required:
            raise CommandError(
                f"{parsed.spec.name} 需要完整的三组标签：-core_tags、-diffusion_tags、-opposing_tags 都不能为空，"
                '或用简写 -triple_tags "核心|扩散|对立"。'
            )
        return None
    groups = {key: normalise_tags(parsed.get(key)) for key in TAG_KEYS if parsed.has(key)}
    if parsed.has("triple_tags"):
        shorthand = parse_triple_tags(parsed.get("triple_tags"))
        for key, values in zip(TAG_KEYS, (shorthand.core, shorthand.diffusion, shorthand.opposing)):
            groups.setdefault(key, values)
    missing = [key for key in TAG_KEYS if not groups.get(key)]
    if missing:
        absent = "、".join(f"-{key}" for key in missing)
        if required:
            raise CommandError(
                f"{parsed.spec.name} 需要完整的三组标签，缺少或为空：{absent}；"
                '也可用简写 -triple_tags "核心|扩散|对立"。'
            )
        raise CommandError(
            f"三组标签要么都不给，要么都给且都不能为空，禁止只传一组或两组；缺少或为空：{absent}"
            '（或用 -triple_tags "核心|扩散|对立"）。'
        )
    return {key: groups[key] for key in TAG_KEYS}


def _ids(parsed: ParsedCommand, maximum: int) -> list[str]:
    ids = list(parsed.get("memory_ids") or [])
    if not ids:
        raise CommandError(f"{parsed.spec.name} 命令需要提供 -id 或 -ids")
    if len(ids) > maximum:
        raise CommandError(f"{parsed.spec.name} 一次最多 {maximum} 个 id，当前 {len(ids)} 个，请分几次执行。")
    return ids


def _single_id(parsed: ParsedCommand) -> str:
    memory_id = parsed.get("memory_id")
    if not memory_id:
        raise CommandError(f"{parsed.spec.name} 命令需要 -id：要操作哪条记忆？可先用 search 找到 id。")
    return memory_id


def _limit(parsed: ParsedCommand, key: str, default: int, maximum: int) -> int:
    value = parsed.get(key, default)
    if value > maximum:
        raise CommandError(f"{parsed.flag(key)} 最多 {maximum}，当前 {value}。")
    return value


def _non_empty(parsed: ParsedCommand, key: str, message: str) -> str:
    value = parsed.get(key)
    if value is None or not str(value).strip():
        raise CommandError(message)
    return value


def _typed_fields(parsed: ParsedCommand) -> dict[str, Any]:
    fields = {flag.key: parsed.get(flag.key) for flag in TYPED_FIELD_FLAGS if parsed.has(flag.key)}
    start, end = fields.get("event_start_at"), fields.get("event_end_at")
    if start and end and end < start:
        raise CommandError(f"{parsed.flag('event_end_at')} 不能早于 {parsed.flag('event_start_at')}。")
    return fields


def _person_id(parsed: ParsedCommand, memory_type: str | None) -> str | None:
    """Check ``-person_id`` (``platform:id``); ``person`` memories must carry one when created."""
    person_id = parsed.get("person_id") or None
    if memory_type == "person" and person_id is None and parsed.spec.name == "create":
        raise CommandError("人物记忆必须提供 -person_id，格式为 platform:id（如 qq:10001）。")
    if person_id is not None:
        checked_person_id("", person_id)
    return person_id


# ----- one planner per sub-command: validate now, return the coroutine that runs later ------------------------------


def _plan_help(parsed: ParsedCommand, ctx: _Context) -> Runner:
    content = build_command_help(parsed.positional, ctx.config) if parsed.positional else build_manual(ctx.config)

    async def run(_service: Any) -> dict[str, Any]:
        return {"action": "help", "content": content}

    return run


def _plan_search(parsed: ParsedCommand, ctx: _Context) -> Runner:
    query = parsed.get("query_text")
    if query is not None and not query.strip():
        raise CommandError(f"{parsed.flag('query_text')} 不能为空：写上要找的内容，或去掉它按最近活跃列出。")
    kwargs: dict[str, Any] = {
        "top_n": _limit(parsed, "top_n", DEFAULT_TOP_N, ctx.config.retrieval.max_top_k),
        "query_text": query.strip() if query else None,
        "memory_type": parsed.get("memory_type") or None,
        "status": parsed.get("status") or None,
        "person_id": parsed.get("person_id") or None,
        "relation_of": parsed.get("relation_of"),
        "include_archived": parsed.get("include_archived", False),
        "include_knowledge": parsed.get("include_knowledge", True),
        "include_related": parsed.get("include_related", False),
    }
    if parsed.get("include_superseded") is False:  # only then: the reference service has no such argument
        kwargs["include_superseded"] = False
    kwargs.update(_tags(parsed, required=False) or {})
    snippet_chars = ctx.config.tools.search_snippet_chars

    async def run(service: Any) -> dict[str, Any]:
        return format_search(await service.search_memory_entries(**kwargs), snippet_chars=snippet_chars)

    return run


def _plan_read(parsed: ParsedCommand, ctx: _Context) -> Runner:
    ids = _ids(parsed, MAX_READ_IDS)
    offset = parsed.get("offset", 0)

    async def run(service: Any) -> dict[str, Any]:
        return format_read(await service.read_full_content(memory_ids=ids), offset=offset)

    return run


def _plan_create(parsed: ParsedCommand, ctx: _Context) -> Runner:
    title = _non_empty(parsed, "title", "create 命令缺少 -title：用一句话概括这条记忆。").strip()
    content = _non_empty(parsed, "content", "create 命令缺少 -content：写上这条记忆的正文。")
    memory_type = parsed.get("memory_type") or "knowledge"
    person_id = _person_id(parsed, memory_type)
    tags = _tags(parsed, required=True)
    kwargs: dict[str, Any] = {
        "title": title,
        "content": content,
        "memory_type": memory_type,
        "status": parsed.get("status") or "active",
        "person_id": person_id,
        **(tags or {}),
        **_typed_fields(parsed),
    }
    if parsed.get("folder_id"):
        kwargs["folder_id"] = parsed.get("folder_id")

    async def run(service: Any) -> dict[str, Any]:
        return format_create(await service.create_memory(**kwargs))

    return run


_UPDATABLE = ("title", "content", "memory_type", "status", "person_id")


def _plan_update(parsed: ParsedCommand, ctx: _Context) -> Runner:
    memory_id = _single_id(parsed)
    fields: dict[str, Any] = {key: parsed.get(key) for key in _UPDATABLE if parsed.has(key)}
    for key in ("title", "content", "memory_type", "status"):
        if key in fields and not str(fields[key]).strip():
            raise CommandError(f"{parsed.flag(key)} 不能为空；不想改这个字段就不要写它。")
    if "person_id" in fields:
        fields["person_id"] = _person_id(parsed, fields.get("memory_type")) or ""
    fields.update(_tags(parsed, required=False) or {})
    fields.update(_typed_fields(parsed))
    if not fields:
        raise CommandError("update 至少要给一个要修改的字段，如 -title、-content、-status 或三组标签。")

    async def run(service: Any) -> dict[str, Any]:
        return format_update(await service.update_memory_by_id(memory_id=memory_id, **fields), memory_id=memory_id)

    return run


def _plan_delete(parsed: ParsedCommand, ctx: _Context) -> Runner:
    ids = _ids(parsed, MAX_BATCH_IDS)
    hard = parsed.get("hard", False)

    async def run(service: Any) -> dict[str, Any]:
        return format_delete(await service.delete_memories(memory_ids=ids, hard=hard), requested=len(ids))

    return run


def _plan_archive(parsed: ParsedCommand, ctx: _Context) -> Runner:
    ids = _ids(parsed, MAX_BATCH_IDS)

    async def run(service: Any) -> dict[str, Any]:
        return format_archive(await service.archive_memories(memory_ids=ids), requested=len(ids))

    return run


def _plan_restore(parsed: ParsedCommand, ctx: _Context) -> Runner:
    ids = _ids(parsed, MAX_BATCH_IDS)

    async def run(service: Any) -> dict[str, Any]:
        return format_restore(await service.restore_memories(memory_ids=ids), requested=len(ids))

    return run


def _plan_move(parsed: ParsedCommand, ctx: _Context) -> Runner:
    ids = _ids(parsed, MAX_BATCH_IDS)
    target: dict[str, Any] = {}
    if parsed.has("to_folder_id"):
        target["to_folder_id"] = _non_empty(parsed, "to_folder_id", f"{parsed.flag('to_folder_id')} 不能为空。")
    if parsed.has("to_bucket"):
        target["to_bucket"] = _non_empty(parsed, "to_bucket", f"{parsed.flag('to_bucket')} 不能为空。")
    if not target:
        raise CommandError("move 需要 -to_folder 或 -to_bucket：要移到哪里？")

    async def run(service: Any) -> dict[str, Any]:
        return format_move(await service.move_memories(memory_ids=ids, **target), requested=len(ids))

    return run


def _plan_grep(parsed: ParsedCommand, ctx: _Context) -> Runner:
    query = _non_empty(parsed, "query", "grep 命令需要 -q：要精确匹配的文字。")
    use_regex = parsed.get("use_regex", False)
    if use_regex and len(query) > MAX_REGEX_CHARS:
        raise CommandError(f"正则表达式最长 {MAX_REGEX_CHARS} 个字符，请写得简单些。")
    fields = parsed.get("search_fields") or list(DEFAULT_GREP_FIELDS)
    kwargs: dict[str, Any] = {
        "query": query,
        "search_fields": fields,
        "folder_id": parsed.get("folder_id") or None,
        "include_archived": parsed.get("include_archived", False),
        "top_k": _limit(parsed, "top_n", DEFAULT_TOP_N, ctx.config.retrieval.max_top_k),
        "use_regex": use_regex,
    }
    snippet_chars = ctx.config.tools.search_snippet_chars

    async def run(service: Any) -> dict[str, Any]:
        return format_search(await service.grep_memories(**kwargs), snippet_chars=snippet_chars, action="grep")

    return run


def _plan_status(parsed: ParsedCommand, ctx: _Context) -> Runner:
    folder = parsed.get("folder_id") or None

    async def run(service: Any) -> dict[str, Any]:
        status = await service.get_status(folder_id=folder)
        memos = await service.list_temporary_memos(stream_id=ctx.stream_id)
        return format_status(status, memo_count=len(memos.get("items") or []))

    return run


def _plan_folders(parsed: ParsedCommand, ctx: _Context) -> Runner:
    async def run(service: Any) -> dict[str, Any]:
        return format_folders(await service.list_folder_ids())

    return run


def _plan_history(parsed: ParsedCommand, ctx: _Context) -> Runner:
    memory_id = _single_id(parsed)
    limit = parsed.get("limit", DEFAULT_HISTORY_VERSIONS)

    async def run(service: Any) -> dict[str, Any]:
        return format_history(await service.get_memory_history(memory_id=memory_id), limit=limit)

    return run


def _plan_revert(parsed: ParsedCommand, ctx: _Context) -> Runner:
    memory_id = _single_id(parsed)
    if not parsed.has("version"):
        raise CommandError(f"revert 需要 -version：要恢复到第几版？先用 history -id {memory_id} 查看。")
    version = parsed.get("version")

    async def run(service: Any) -> dict[str, Any]:
        return format_revert(await service.revert_memory(memory_id=memory_id, version=version))

    return run


def _plan_tool(parsed: ParsedCommand, ctx: _Context) -> Runner:
    return plan_tool_command(parsed, ctx.config)


def _planner(spec: CommandSpec) -> Callable[[ParsedCommand, _Context], Runner]:
    """The hand-written planner of a memory sub-command, or the generic one of a table-derived sub-command."""
    return _plan_tool if spec.tool is not None else _PLANNERS[spec.name]


_PLANNERS: dict[str, Callable[[ParsedCommand, _Context], Runner]] = {
    "help": _plan_help,
    "search": _plan_search,
    "read": _plan_read,
    "create": _plan_create,
    "update": _plan_update,
    "delete": _plan_delete,
    "archive": _plan_archive,
    "restore": _plan_restore,
    "move": _plan_move,
    "grep": _plan_grep,
    "status": _plan_status,
    "folders": _plan_folders,
    "history": _plan_history,
    "revert": _plan_revert,
}

__all__ = ["TOOL_NAME", "parameter_descriptions", "run_memory_command", "tool_description", "tool_schema"]

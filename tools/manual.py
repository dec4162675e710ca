"""The manual the LLM reads: the ``help`` answer and the standing system reminder.

Generated from ``command_spec.COMMANDS`` and the ``temporary_memo`` parameter table, so it can never drift from
what the parser accepts (a test checks that every sub-command and every flag spelling appears). It stays short:
flags shared by several sub-commands (the tag triplet, the type-specific fields) are explained once, the companion
and recall sub-commands list only their flag names (their meaning is the same-named tool's parameter description,
shown by ``help <子命令>``), and ``help <子命令>`` gives the full flag list of one sub-command.
"""

from __future__ import annotations

from ..config import BookuConfig
from ..services.errors import ValidationError
from .command_spec import (
    COMMANDS,
    IDS_FLAG,
    MEMORY_COMMANDS,
    SINGLE_ID_FLAG,
    STATUS_FLAG,
    TAG_FLAGS,
    TOOL_COMMANDS,
    TYPE_FLAG,
    TYPED_FIELD_FLAGS,
    CommandSpec,
    FlagKind,
    FlagSpec,
    command_by_name,
)
from .llm_tool_specs import param_types
from .temporary_memo import DEFAULT_EXPIRE_HOURS, MEMO_ACTIONS

_SHARED_GROUPS: tuple[tuple[str, tuple[FlagSpec, ...]], ...] = (
    ("id", (IDS_FLAG, SINGLE_ID_FLAG)),
    ("三组标签", TAG_FLAGS),
    ("类型专属字段", TYPED_FIELD_FLAGS),
)
# Their values are listed once in the "字段" section; the overview does not repeat them per sub-command.
_CHOICES_SHOWN_ONCE = (TYPE_FLAG, STATUS_FLAG)


def build_manual(config: BookuConfig | None = None) -> str:
    """The whole manual (Markdown, Chinese). ``config`` supplies the limits it quotes (max ``-n``, memo hours)."""
    cfg = config or BookuConfig()
    type_choices = TYPE_FLAG.choices
    status_choices = STATUS_FLAG.choices
    single_id_commands = "/".join(spec.name for spec in MEMORY_COMMANDS if SINGLE_ID_FLAG in spec.flags)
    lines = [
        "# Booku 记忆工具手册",
        "memory_command 管长期记忆（检索、读、写、改、删、归档、历史），也能执行陪伴记忆与分类型回忆（见文末）；"
        "temporary_memo 是短期便签，到期自动消失，只在当前聊天提醒。长期有用的事实用 create 记下，不要用便签代替。",
        "",
        "## 写法",
        "- 子命令 + 参数：search -q 张三 -n 5。参数名不分大小写，-x 与 --x 相同，也可写 -x=值。",
        '- 含空格、换行或引号的值要加引号；以 - 开头的值照常写，如 -content "- 第一条"、-q -5度'
        "（只有当值恰好是该子命令的参数名时才写成 -content=-title）。",
        "- 布尔参数单写就是 true，也可跟 true/false。",
        "- 多步用 && 串联：search -q 张三 && read -id mem-1。有一步写错则整条都不执行；"
        "某步执行失败就停下，前面完成的步骤不会撤销。",
        "- 未知参数或多余的词会报错并列出可用参数，不会被悄悄忽略。",
        "",
        "## 三组标签（检索的关键）",
        "；".join(_describe(flag) for flag in TAG_FLAGS) + "。",
        "create 必须给全三组；search/update 要么不给，要么三组都给且都不能为空。update 给标签就是整组替换，"
        "不给就保留原标签。",
        "",
        "## 字段",
        f"- id：{IDS_FLAG.shown} 指定记忆，多个用逗号分隔；{single_id_commands} 只收一个。",
        f"- type：{'/'.join(type_choices)}（默认 knowledge）；status：{'/'.join(status_choices)}（默认 active）。",
        "- person 必须带 -person_id，格式 platform:id（如 qq:10001）。时间写 Unix 秒或 2024-05-01 14:30。",
        "- 类型专属字段（create/update 可用）：" + "；".join(_describe(flag) for flag in TYPED_FIELD_FLAGS) + "。",
        "",
        "## 事实变了怎么记",
        "- 事实变了（搬家、换工作、换号码、改时间、不再做某事）就直接 create 新事实，写清“现在/已经/搬到/换成”；"
        "不要 update 改旧记忆。系统会把旧记录标记为过时（被新记录取代），旧原文保留，仍用来回答“以前/原来”的问题。",
        "- 只是补充（“也/还/另外”）不会取代任何记录；同一件事换个说法再说会与已有记忆合并。",
        "- 系统拿不准是更新还是重复时，两条都先保留，回复里会说“可能是它的更新/可能与它重复”，"
        "之后由模型或人工确认，你不用处理。",
        "- 结果里带 superseded_by 的记录已过时，回答“现在”的问题请用取代它的那条；判断错了用 history + revert 回退。"
        "search -include_superseded false 只看当前事实。hold/grow 写入时同样判断。",
        "",
        "## 子命令",
    ]
    for spec in MEMORY_COMMANDS:
        lines.extend(_command_block(spec, cfg))
    lines.extend(_tool_commands_section())
    lines.extend(
        [
            "",
            "## temporary_memo（便签）",
            f"参数：action（{'/'.join(MEMO_ACTIONS)}，默认 create）、content、"
            f"expire_hours（默认 {DEFAULT_EXPIRE_HOURS:g}，最多 {cfg.memo.max_expire_hours:g}）、memo_id（cancel 用）、"
            "allow_shorten（默认 false：同样内容再记一次只延长、不缩短过期时间）。便签不进入长期检索。",
            f'例：temporary_memo(content="小王晚上八点开会，提醒他", expire_hours={DEFAULT_EXPIRE_HOURS:g})；'
            'temporary_memo(action="list")；temporary_memo(action="cancel", memo_id="memo-…")',
        ]
    )
    return "\n".join(lines).strip() + "\n"


def build_command_help(name: str, config: BookuConfig | None = None) -> str:
    """Detailed help of one sub-command (``help search``): every flag with its spellings, meaning and values.

    Raises ``ValidationError`` listing the sub-commands when ``name`` is unknown.
    """
    spec = command_by_name(name)
    if spec is None:
        names = "、".join(command.name for command in COMMANDS)
        raise ValidationError(f"没有子命令 {name[:30]!r}，可用：{names}。")
    cfg = config or BookuConfig()
    lines = [f"# {spec.name}" + (f"（别名 {'/'.join(spec.aliases)}）" if spec.aliases else ""), spec.summary + "。"]
    if spec.flags:
        lines.append("参数：")
        lines.extend(f"- {_describe(flag, cfg)}" + ("（必填）" if flag.required else "") for flag in spec.flags)
    else:
        lines.append("没有参数。")
    lines.extend(f"注意：{note}。" for note in spec.notes)
    lines.append(f"例：{spec.example}")
    return "\n".join(lines) + "\n"


def _tool_commands_section() -> list[str]:
    """The companion and recall sub-commands: one summary, the flag names (``*`` = required), one example each."""
    json_flags = sorted({flag.shown for spec in TOOL_COMMANDS for flag in spec.flags if flag.kind is FlagKind.JSON})
    switches = sorted({flag.shown for spec in TOOL_COMMANDS for flag in spec.flags if _is_switch(spec, flag)})
    lines = [
        "",
        "## 陪伴记忆与分类型回忆（也是同名独立工具，参数相同）",
        "- 带 * 的参数必填；help <子命令> 看每个参数的说明。-domain/-tags 用逗号分隔；"
        + "、".join(json_flags)
        + " 写 JSON 并用单引号包住，如 -quotes '[\"原话\"]'"
        + ("；" + "、".join(switches) + " 单写即 1，也可写 0" if switches else "")
        + "。",
        "- 陪伴子命令逐字返回记忆正文，不受输出长度上限截断（放不下的整条省略并说明）；recall "
        "的文本块会缩到输出上限以内。",
    ]
    for spec in TOOL_COMMANDS:
        flags = " ".join(flag.shown + ("*" if flag.required else "") for flag in spec.flags)
        lines.append(f"### {spec.name}：{spec.summary}" + (f"。参数：{flags}" if flags else "。无参数"))
        lines.append(f"例：{spec.example}")
    return lines


def _is_switch(spec: CommandSpec, flag: FlagSpec) -> bool:
    """A 0/1 integer parameter written as a boolean flag (trace's -resolved, -pinned …)."""
    if flag.kind is not FlagKind.BOOL or spec.tool is None:
        return False
    return any(param.name == flag.key and "integer" in param_types(param) for param in spec.tool.params)


def _command_block(spec: CommandSpec, cfg: BookuConfig) -> list[str]:
    header = f"### {spec.name}" + (f"（别名 {'/'.join(spec.aliases)}）" if spec.aliases else "") + f"：{spec.summary}"
    own = [flag for flag in spec.flags if not _in_shared_group(flag)]
    parts = [_describe(flag, cfg, overview=True) for flag in own]
    for label, group in _SHARED_GROUPS:
        if any(flag in group for flag in spec.flags):
            parts.append(f"+{label}")
    block = [header]
    if parts:
        block.append("参数：" + "；".join(parts))
    block.extend(f"注意：{note}。" for note in spec.notes)
    block.append(f"例：{spec.example}")
    return block


def _describe(flag: FlagSpec, cfg: BookuConfig | None = None, *, overview: bool = False) -> str:
    text = f"{flag.shown} {flag.help}"
    if flag.choices and not (overview and flag in _CHOICES_SHOWN_ONCE):
        text += f"（{'/'.join(flag.choices)}）"
    if flag.kind is FlagKind.INT and flag.key in ("top_n",) and cfg is not None:
        text += f"，最多 {cfg.retrieval.max_top_k}"
    return text


def _in_shared_group(flag: FlagSpec) -> bool:
    return any(flag in group for _, group in _SHARED_GROUPS)


__all__ = ["build_command_help", "build_manual"]

"""The one table of ``memory_command`` sub-commands and their flags.

The lexer parses against it, the executor plans service calls from it, the manual and the host tool schema are
generated from it. Adding a flag here is the whole job of exposing it: a test checks that the manual mentions every
sub-command and every spelling the parser accepts, so the LLM is never told about a flag that does not exist or left
ignorant of one that does.

Flag spellings are kept from the reference (``-topn/-top_n/-n``, ``-type/-memory_type``, ``-triple_tags/-triplet`` …)
because existing prompts and model habits rely on them.

The companion sub-commands (breath … pulse, and whatever else ``COMPANION_TOOLS`` lists) and ``recall`` are not
written here: ``tool_command_spec`` derives each one from its ``ToolSpec`` in ``llm_tool_specs`` (flag per parameter,
kind from the JSON type, range, required), so the host tool, the sub-command and the manual share one description.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from ..services.companion.tool_table import ToolParam, ToolSpec
from ..services.memory_fields import (
    DISPOSITION_STATUSES,
    KNOWLEDGE_TYPES,
    MEMORY_TYPES,
    PROCEDURE_TYPES,
    STATUSES,
)
from ..services.memory_search import GREP_FIELDS
from .llm_tool_specs import is_comma_list, llm_tool_specs, param_choices, param_types


class FlagKind(str, Enum):
    """How a flag's raw text becomes a Python value (see ``command_lexer.coerce_value``)."""

    TEXT = "text"  # kept verbatim (content, query): leading/trailing spaces and inner newlines matter
    LINE = "line"  # trimmed single value (title, person_id, folder)
    WORD = "word"  # trimmed and lower-cased, optionally restricted to ``choices``
    ID = "id"  # exactly one memory id
    IDS = "ids"  # comma list of ids, every occurrence and alias merged, de-duplicated in order
    LIST = "list"  # comma list (ASCII or full-width comma), every occurrence merged
    INT = "int"  # whole number within [minimum, maximum]
    BOOL = "bool"  # true/false/yes/no/on/off/1/0; a bare flag means true
    TIME = "time"  # Unix seconds or a date such as 2024-05-01 / 2024-05-01 14:30
    NUMBER = "number"  # a finite decimal number within [minimum, maximum]
    JSON = "json"  # a JSON value whose type is one of ``json_types`` (lists of objects, quotas …)


@dataclass(frozen=True)
class FlagSpec:
    """One flag of a sub-command.

    ``key`` is the canonical name used in parsed results (and the service keyword unless ``param`` says otherwise);
    ``names`` are every accepted spelling without the dash, the first one is what the manual shows first.
    """

    key: str
    names: tuple[str, ...]
    kind: FlagKind
    help: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    required: bool = False  # only table-derived sub-commands check this generically; the others plan it by hand
    json_types: tuple[str, ...] = ()  # JSON kind: the accepted JSON types ("array", "object", "number" …)

    @property
    def shown(self) -> str:
        """All spellings as the manual prints them, e.g. ``-topn/-top_n/-n``."""
        return "/".join(f"-{name}" for name in self.names)


@dataclass(frozen=True)
class CommandSpec:
    """One sub-command: its name, aliases, flags, a one-line summary and a runnable example."""

    name: str
    summary: str
    example: str
    flags: tuple[FlagSpec, ...] = ()
    aliases: tuple[str, ...] = ()
    # Only ``help`` takes a bare word (the topic); every other stray word is an error.
    positional: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    # The companion/recall tool this sub-command runs (``None`` for the hand-written memory sub-commands).
    tool: ToolSpec | None = None

    def flag_by_name(self, name: str) -> FlagSpec | None:
        """The flag spelled ``name`` (already lower-cased, dashes stripped, ``-`` inside read as ``_``)."""
        return self._names().get(name)

    def _names(self) -> dict[str, FlagSpec]:
        return {spelling: flag for flag in self.flags for spelling in flag.names}

    def all_spellings(self) -> list[str]:
        """Every accepted flag spelling of this sub-command, without dashes, in table order."""
        return [spelling for flag in self.flags for spelling in flag.names]


def _choices(values: tuple[str, ...]) -> tuple[str, ...]:
    # The service vocabularies contain "" meaning "not set"; a flag is never given to set nothing.
    return tuple(value for value in values if value)


MAX_READ_IDS = 20
MAX_BATCH_IDS = 100
MAX_OFFSET = 1_000_000

# ----- shared flag groups (one definition each; create and update share the typed fields) ---------------------------

TAG_FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec("core_tags", ("core_tags", "core"), FlagKind.LIST, "核心：讲的是什么"),
    FlagSpec("diffusion_tags", ("diffusion_tags", "diffusion"), FlagKind.LIST, "扩散：相关、也该能搜到它的话题"),
    FlagSpec("opposing_tags", ("opposing_tags", "opposing"), FlagKind.LIST, "对立：明确不是什么"),
    FlagSpec("triple_tags", ("triple_tags", "triplet"), FlagKind.TEXT, '简写 "核心|扩散|对立"，组内用逗号'),
)
TAG_KEYS = ("core_tags", "diffusion_tags", "opposing_tags")

IDS_FLAG = FlagSpec("memory_ids", ("id", "ids", "memory_id", "memory_ids"), FlagKind.IDS, "记忆 id，多个用逗号分隔")
SINGLE_ID_FLAG = FlagSpec("memory_id", ("id", "memory_id", "ids", "memory_ids"), FlagKind.ID, "一条记忆的 id")
TOP_N_FLAG = FlagSpec("top_n", ("topn", "top_n", "n"), FlagKind.INT, "条数（默认 10）", minimum=1)
INCLUDE_ARCHIVED_FLAG = FlagSpec(
    "include_archived", ("include_archived",), FlagKind.BOOL, "也找已归档/过期的（默认 false）"
)
TYPE_FLAG = FlagSpec("memory_type", ("type", "memory_type"), FlagKind.WORD, "记忆类型", choices=_choices(MEMORY_TYPES))
STATUS_FLAG = FlagSpec("status", ("status",), FlagKind.WORD, "状态", choices=_choices(STATUSES))
PERSON_FLAG = FlagSpec("person_id", ("person_id",), FlagKind.LINE, "人物 id（platform:id）")
TITLE_FLAG = FlagSpec("title", ("title",), FlagKind.LINE, "标题")
CONTENT_FLAG = FlagSpec("content", ("content", "body"), FlagKind.TEXT, "正文")
FOLDER_FLAG = FlagSpec("folder_id", ("folder", "folder_id"), FlagKind.LINE, "文件夹（默认 default）")

TYPED_FIELD_FLAGS: tuple[FlagSpec, ...] = (
    FlagSpec("relation_memory_ids", ("relation_ids", "relation_memory_ids"), FlagKind.LIST, "关联记忆 id"),
    FlagSpec("relation_aliases", ("relation_aliases",), FlagKind.LIST, "别名/称呼"),
    FlagSpec("related_people", ("related_people",), FlagKind.LIST, "event：相关人物"),
    FlagSpec("event_start_at", ("event_start_at", "start_at"), FlagKind.TIME, "event：开始时间"),
    FlagSpec("event_end_at", ("event_end_at", "end_at"), FlagKind.TIME, "event：结束时间"),
    FlagSpec(
        "knowledge_type", ("knowledge_type",), FlagKind.WORD, "knowledge：知识类别", choices=_choices(KNOWLEDGE_TYPES)
    ),
    FlagSpec("address_or_coord", ("address_or_coord", "address"), FlagKind.LINE, "place：地址或坐标"),
    FlagSpec("place_type", ("place_type",), FlagKind.WORD, "place：地点类别"),
    FlagSpec("asset_type", ("asset_type",), FlagKind.WORD, "asset：物品类别"),
    FlagSpec(
        "disposition_status",
        ("disposition_status",),
        FlagKind.WORD,
        "asset：处置状态",
        choices=_choices(DISPOSITION_STATUSES),
    ),
    FlagSpec(
        "procedure_type", ("procedure_type",), FlagKind.WORD, "procedure：流程类别", choices=_choices(PROCEDURE_TYPES)
    ),
)

# ----- the sub-commands ----------------------------------------------------------------------------------------------

MEMORY_COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        name="help",
        summary="显示本手册；help <子命令> 只看该子命令的参数",
        example="help search",
        positional="topic",
    ),
    CommandSpec(
        name="search",
        summary="按语义+关键词检索记忆，返回 id、标题、类型、分数和摘要",
        example='search -q "张三 生日" -type person -n 5',
        flags=(
            FlagSpec("query_text", ("query", "q"), FlagKind.TEXT, "要找的内容"),
            TOP_N_FLAG,
            TYPE_FLAG,
            STATUS_FLAG,
            PERSON_FLAG,
            FlagSpec("relation_of", ("relation_of", "related_to"), FlagKind.ID, "只找与该 id 关联的记忆"),
            INCLUDE_ARCHIVED_FLAG,
            FlagSpec("include_knowledge", ("include_knowledge",), FlagKind.BOOL, "也找知识库文档片段（默认 true）"),
            FlagSpec("include_related", ("include_related", "related"), FlagKind.BOOL, "附带关联记忆"),
            FlagSpec(
                "include_superseded",
                ("include_superseded", "superseded"),
                FlagKind.BOOL,
                "也找已过时（被取代）的（默认 true）",
            ),
            *TAG_FLAGS,
        ),
        notes=(
            "不带 -q 也不带标签时，按最近活跃列出",
            '查询里可以写时间：-q "5月2日 博物馆"、-q "昨天聊了什么"、-q 上周；那段时间的记忆排在前面'
            "（记忆的时间是事件起止时间，没有则为记下的时间，所以记事件时请填 -start_at/-end_at）",
        ),
    ),
    CommandSpec(
        name="read",
        summary="读取记忆全文（以及完整标签，便于 update）",
        example="read -ids mem-1,mem-2",
        flags=(
            IDS_FLAG,
            FlagSpec(
                "offset", ("offset",), FlagKind.INT, "从正文第几个字开始读（长文分段）", minimum=0, maximum=MAX_OFFSET
            ),
        ),
    ),
    CommandSpec(
        name="create",
        summary="新建一条记忆；与已有记忆说的是同一件事时会合并进去，是旧事实的更新时把旧记录标记为过时，"
        "并告诉你涉及哪个 id",
        example=(
            'create -type person -title 张三 -person_id qq:10001 -content "- 大学同学，爱打篮球" '
            '-triple_tags "朋友,同学|学校,篮球|陌生人"'
        ),
        flags=(
            TITLE_FLAG,
            CONTENT_FLAG,
            TYPE_FLAG,
            STATUS_FLAG,
            PERSON_FLAG,
            *TAG_FLAGS,
            *TYPED_FIELD_FLAGS,
            FOLDER_FLAG,
        ),
        notes=("必须有 -title、-content 和完整三组标签；type 默认 knowledge，person 必须带 -person_id",),
    ),
    CommandSpec(
        name="update",
        summary="修改一条记忆，只改给出的字段；不给标签就保留原标签",
        example="update -id mem-1 -status archived",
        flags=(
            SINGLE_ID_FLAG,
            TITLE_FLAG,
            CONTENT_FLAG,
            TYPE_FLAG,
            STATUS_FLAG,
            PERSON_FLAG,
            *TAG_FLAGS,
            *TYPED_FIELD_FLAGS,
        ),
        notes=("改标签时三组要一起给（整组替换）",),
    ),
    CommandSpec(
        name="delete",
        summary="删除记忆；默认软删除，可用 restore 恢复",
        example="delete -id mem-1",
        flags=(IDS_FLAG, FlagSpec("hard", ("hard",), FlagKind.BOOL, "永久删除，无法恢复（默认 false）")),
    ),
    CommandSpec(
        name="archive",
        summary="把不再常用的记忆归档（默认搜索不再出现，加 -include_archived true 可找到）",
        example="archive -ids mem-1,mem-2",
        flags=(IDS_FLAG,),
    ),
    CommandSpec(
        name="restore",
        summary="恢复被软删除的记忆",
        example="restore -id mem-1",
        flags=(IDS_FLAG,),
        aliases=("undelete",),
    ),
    CommandSpec(
        name="move",
        summary="把记忆移到另一个文件夹或存储桶",
        example="move -ids mem-1,mem-2 -to_folder 工作",
        flags=(
            IDS_FLAG,
            FlagSpec("to_folder_id", ("to_folder", "to_folder_id", "folder", "folder_id"), FlagKind.LINE, "目标文件夹"),
            FlagSpec(
                "to_bucket", ("to_bucket", "bucket"), FlagKind.WORD, "目标存储桶", choices=("memory", "knowledge")
            ),
        ),
    ),
    CommandSpec(
        name="grep",
        summary="按字面关键词或正则精确匹配（找确切的词、号码、名字时用）",
        example='grep -q "生日" -fields title,content',
        flags=(
            FlagSpec("query", ("query", "q", "pattern"), FlagKind.TEXT, "要匹配的文字或正则"),
            FlagSpec(
                "search_fields",
                ("fields", "in"),
                FlagKind.LIST,
                "匹配哪些字段，逗号分隔（默认 title,content,tags）",
                choices=GREP_FIELDS,
            ),
            FlagSpec("use_regex", ("regex",), FlagKind.BOOL, "-q 是正则（默认 false）"),
            FlagSpec("folder_id", ("folder", "folder_id"), FlagKind.LINE, "只在这个文件夹里找"),
            INCLUDE_ARCHIVED_FLAG,
            TOP_N_FLAG,
        ),
    ),
    CommandSpec(
        name="status",
        summary="记忆库概况：各类数量、最近记忆、当前聊天的临时备忘数",
        example="status",
        flags=(FlagSpec("folder_id", ("folder", "folder_id"), FlagKind.LINE, "只看这个文件夹（默认全部）"),),
    ),
    CommandSpec(name="folders", summary="列出所有文件夹", example="folders"),
    CommandSpec(
        name="history",
        summary="查看一条记忆的历史版本（每次修改、合并都会留一版）",
        example="history -id mem-1",
        flags=(
            SINGLE_ID_FLAG,
            FlagSpec("limit", ("topn", "top_n", "n"), FlagKind.INT, "显示最近几版（默认 10）", minimum=1, maximum=100),
        ),
    ),
    CommandSpec(
        name="revert",
        summary="把记忆恢复到某个历史版本（当前内容也会留作一版）",
        example="revert -id mem-1 -version 2",
        flags=(
            SINGLE_ID_FLAG,
            FlagSpec("version", ("version", "v"), FlagKind.INT, "要恢复到的版本号（见 history）", minimum=1),
        ),
    ),
)

# ----- sub-commands derived from the LLM tool table -------------------------------------------------------------------

# A short manual line and a runnable example for the tools we know; a tool added to the table later gets its first
# sentence and an example generated from its required parameters instead, so it is never missing from the manual.
TOOL_SUMMARIES: dict[str, str] = {
    "breath": "睁眼看看记得什么：核心准则 + 权重最高的记忆，不带参数就行",
    "breath_search": "按关键词/语义检索陪伴记忆，正文逐字返回",
    "breath_advanced": "breath 的全参数版：目录、标签、重要度、情绪、日期、token 上限",
    "hold": "逐字保存一个已决定要长期记住的时刻（不合并；别人的话写成单独一行 @名字：原话）",
    "grow": "把一段长文逐字拆成 2~6 条事件记忆（也可自己用 -items 拆好）",
    "trace": "修改一条已有记忆，只改给出的字段（进入历史）",
    "dream": "回顾最近有变动的记忆（完整正文），用于消化",
    "anchor": "把记忆设为坐标：不主动浮现但可被检索，最多 24 条",
    "release": "解除坐标，回到默认浮现",
    "pulse": "记忆系统状态：各类数量、占用、衰减引擎、每条一行",
    "plan": "登记承诺/待办：不衰减，只在 dream 末尾出现，用 trace -status 关闭",
    "letter_write": "写一封永久保存的信，可加时间锁或永久封存",
    "letter_lock_update": "只改自己写的信的锁",
    "letter_read": "读信：不带 -q 按时间倒序，带 -q 语义检索；锁着的看不到正文",
    "feel": "按此刻在想的事找回以前留下的感受，逐字返回",
    "I": "写下（-content）或读取（-read）自我认知；-promote 升级候选，-supersedes 取代旧条目",
    "recall": "分类型回忆：按类别配额检索，放进字符上限内的文本块",
}
TOOL_EXAMPLES: dict[str, str] = {
    "breath": "breath",
    "breath_search": 'breath_search -q "第一次见面" -max_results 5',
    "breath_advanced": "breath_advanced -catalog -domain 工作",
    "hold": 'hold -content "她说下个月想去看海" -importance 7 -tags 旅行,约定',
    "grow": 'grow -content "上午陪她去医院复查，结果一切正常。晚上一起做了番茄炒蛋，她说比上次好吃。"',
    "trace": "trace -bucket_id mem-1 -resolved 1",
    "dream": "dream -window_hours 24",
    "anchor": "anchor -bucket_id mem-1",
    "release": "release -id mem-1",
    "pulse": "pulse -include_archive",
    "plan": 'plan -content "周六陪她去看牙医" -weight 0.8',
    "letter_write": 'letter_write -author ai -content "给一年后的你：……" -lock_type timed -unlock_date 2027-01-01',
    "letter_lock_update": "letter_lock_update -letter_id a0102c0f44e2 -lock_type none",
    "letter_read": "letter_read -author user -limit 3",
    "feel": 'feel -q "她搬家那天"',
    "I": 'I -content "我觉得我在意的是被认真对待" -aspect values',
    "recall": 'recall -q "周末去哪玩" -quotas \'{"events": 5, "preferences": 3}\'',
}
# Familiar short spellings (the memory sub-commands use -q and -id); added only where no parameter has that name.
PARAM_ALIASES: dict[str, tuple[str, ...]] = {"query": ("q",), "bucket_id": ("id",)}
_LINE_SUFFIXES = ("_id", "_bucket")
_SAMPLE_VALUES = {"integer": "1", "number": "0.5", "boolean": "true", "array": "'[]'", "object": "'{}'"}


def flag_kind(param: ToolParam) -> FlagKind:
    """How a table parameter is written on the command line.

    Text stays verbatim (bodies, queries, titles: never trimmed); ids and dates are trimmed; ``domain``/``tags`` are
    comma lists; 0/1 integers (trace's switches) are booleans so ``-resolved`` alone means 1; arrays of objects,
    objects and number-or-object values are JSON.
    """
    kinds = param_types(param)
    if is_comma_list(param):
        return FlagKind.LIST
    if "object" in kinds or "array" in kinds:
        return FlagKind.JSON
    kind = kinds[0]
    if kind == "boolean" or (kind == "integer" and param.minimum == 0 and param.maximum == 1):
        return FlagKind.BOOL
    if kind == "integer":
        return FlagKind.INT
    if kind == "number":
        return FlagKind.NUMBER
    if param_choices(param):
        return FlagKind.WORD
    if param.name.endswith(_LINE_SUFFIXES) or param.name.startswith("date_"):
        return FlagKind.LINE
    return FlagKind.TEXT


def _flag_from_param(param: ToolParam, taken: set[str]) -> FlagSpec:
    aliases = tuple(alias for alias in PARAM_ALIASES.get(param.name, ()) if alias not in taken)
    kind = flag_kind(param)
    return FlagSpec(
        key=param.name,
        names=(param.name.lower(), *aliases),
        kind=kind,
        help=param.description,
        choices=param_choices(param),
        minimum=param.minimum if kind in (FlagKind.INT, FlagKind.NUMBER) else None,
        maximum=param.maximum if kind in (FlagKind.INT, FlagKind.NUMBER) else None,
        required=param.required,
        json_types=param_types(param) if kind is FlagKind.JSON else (),
    )


def _generated_example(spec: ToolSpec) -> str:
    parts = [spec.name]
    for param in spec.params:
        if param.required:
            kind = param_types(param)[0]
            sample = "mem-1" if param.name.endswith(_LINE_SUFFIXES) else _SAMPLE_VALUES.get(kind, "示例")
            parts.append(f"-{param.name.lower()} {sample}")
    return " ".join(parts)


def _first_sentence(text: str, limit: int = 60) -> str:
    sentence = text.split("。")[0].strip()
    return sentence if len(sentence) <= limit else sentence[: limit - 1] + "…"


def tool_command_spec(spec: ToolSpec) -> CommandSpec:
    """The ``memory_command`` sub-command running ``spec`` (flags = its parameters, same names)."""
    taken = {param.name.lower() for param in spec.params}
    return CommandSpec(
        name=spec.name,
        summary=TOOL_SUMMARIES.get(spec.name) or _first_sentence(spec.description),
        example=TOOL_EXAMPLES.get(spec.name) or _generated_example(spec),
        flags=tuple(_flag_from_param(param, taken) for param in spec.params),
        tool=spec,
    )


TOOL_COMMANDS: tuple[CommandSpec, ...] = tuple(tool_command_spec(spec) for spec in llm_tool_specs())
"""The companion sub-commands and recall, in table order."""
COMMANDS: tuple[CommandSpec, ...] = (*MEMORY_COMMANDS, *TOOL_COMMANDS)
"""Every sub-command in manual order: the hand-written memory ones (help … revert), then the table-derived ones."""

# Looked up case-insensitively (``I`` is a valid sub-command name too).
_BY_NAME: dict[str, CommandSpec] = {
    spelling.lower(): spec for spec in COMMANDS for spelling in (spec.name, *spec.aliases)
}


def command_by_name(name: str) -> CommandSpec | None:
    """The sub-command called ``name`` (case-insensitive) or one of its aliases; ``None`` when unknown."""
    return _BY_NAME.get(name.strip().lower())


def command_names() -> list[str]:
    """Canonical sub-command names in manual order."""
    return [spec.name for spec in COMMANDS]


def all_command_spellings() -> list[str]:
    """Every name the parser accepts as a sub-command, aliases included, spelled as the manual shows them."""
    return [spelling for spec in COMMANDS for spelling in (spec.name, *spec.aliases)]


__all__ = [
    "COMMANDS",
    "CommandSpec",
    "FlagKind",
    "FlagSpec",
    "MAX_BATCH_IDS",
    "MAX_READ_IDS",
    "MEMORY_COMMANDS",
    "TAG_KEYS",
    "TOOL_COMMANDS",
    "all_command_spellings",
    "command_by_name",
    "command_names",
    "flag_kind",
    "tool_command_spec",
]

"""The one table of companion tools: name, Chinese description, parameters (type, default, Chinese description).

Part 1: breath … pulse; part 2: plan, letter_write, letter_lock_update, letter_read, feel and I (service method
``self_knowledge``: a method cannot well be called ``I``).

Host tools, ``memory_command`` sub-commands and the MCP server are all generated from ``COMPANION_TOOLS``; a test
checks that every parameter here exists on the service method with the same default, so a description can never
advertise a parameter the service does not take. ``json_schema(spec)`` gives the JSON Schema of a tool's arguments.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .feel import FEEL_MIN_SIMILARITY
from .fields import MAX_QUOTE_CHARS, MAX_QUOTES
from .letters import LETTER_READ_DEFAULT, LETTER_READ_MAX
from .rendering import PLAN_DEFAULT_WEIGHT
from .self_knowledge import SELF_READ_DEFAULT, SELF_READ_MAX, WITNESS_DATES_REQUIRED
from .settings import (
    ANCHOR_LIMIT,
    BREATH_MAX_RESULTS,
    BREATH_MAX_TOKENS,
    BREATH_RESULTS_CEILING,
    DREAM_MAX_ITEMS,
    DREAM_WINDOW_HOURS,
    GROW_SHORT_CHARS,
    MAX_TOKENS_RANGE,
)

REQUIRED = object()


@dataclass(frozen=True)
class ToolParam:
    """One parameter. ``type`` is a JSON Schema type; ``default`` is ``REQUIRED`` for required parameters."""

    name: str
    type: str | tuple[str, ...]
    description: str
    default: Any = None
    minimum: float | None = None
    maximum: float | None = None
    items: str | tuple[str, ...] | None = None  # JSON type(s) of array items

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


@dataclass(frozen=True)
class ToolSpec:
    name: str
    method: str  # BookuCompanionService method
    description: str
    params: tuple[ToolParam, ...] = field(default_factory=tuple)


DOMAIN = ToolParam("domain", ("string", "array"), "主题域，逗号分隔（或字符串列表）；只在这些域里找", items="string")
MAX_RESULTS = ToolParam(
    "max_results",
    "integer",
    f"返回条数上限，默认 config.surfacing.breath_max_results（缺省 {BREATH_MAX_RESULTS}），最大 "
    f"{BREATH_RESULTS_CEILING}",
    minimum=1,
    maximum=BREATH_RESULTS_CEILING,
)
DATE_FROM = ToolParam("date_from", "string", "按创建时间过滤的下界：YYYY-MM-DD（含当天全日）或 ISO 8601 时刻")
DATE_TO = ToolParam(
    "date_to", "string", "按创建时间过滤的上界：YYYY-MM-DD（含当天全日）或 ISO 8601 时刻；同日上下界=当天全天"
)
BUCKET_ID = ToolParam(
    "bucket_id", "string", "记忆桶 ID（如 mem-…），从 breath/breath_search 的结果里取，不要猜", default=REQUIRED
)
QUOTES_INPUT = ToolParam(
    "quotes",
    "array",
    f'写入那一刻决定要原样记住的原话：字符串，或 {{"text","speaker","at"}}；最多 {MAX_QUOTES} 句、每句 '
    f"{MAX_QUOTE_CHARS} 字，超限拒绝不截断。默认一句都不放，拿不准就别放",
    items=("string", "object"),
)

COMPANION_TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "breath",
        "breath",
        (
            "无参数，睁眼看看自己记得什么：返回所有置顶核心准则（pinned）+ 权重最高、未放下且未消化的记忆，正文逐字。"
            "digested 的记忆不会浮现，仍可用 breath_search(query=…) 找回；anchor 不主动浮现。"
            "按关键词找用 breath_search；目录/标签/重要度/情绪/token 上限等用 breath_advanced。"
            "domain 与 max_results 也认，但本意就是不带参数睁眼看看。"
        ),
        (DOMAIN, MAX_RESULTS),
    ),
    ToolSpec(
        "breath_search",
        "breath_search",
        (
            "按关键词/语义检索记忆，融合关键词（BM25）与向量检索；向量不可用时明确提示并退回关键词检索。"
            "命中后逐字返回当前正文，不摘要、不改写；也能找回已消化、已放下、已归档的记忆。"
            "quotes=True 时把写入那一刻留下的原话原样附在正文后（不是原文，没挑出来的话当时就没有留下）。"
            "更多过滤维度用 breath_advanced。"
        ),
        (
            ToolParam("query", "string", "要找的关键词或一句话", default=REQUIRED),
            DOMAIN,
            DATE_FROM,
            DATE_TO,
            MAX_RESULTS,
            ToolParam("quotes", "boolean", "想知道当时到底怎么说的才设 True；默认不附原话", default=False),
        ),
    ),
    ToolSpec(
        "breath_advanced",
        "breath_advanced",
        (
            "breath 的完整参数版（日常用 breath/breath_search 就够）。不传 query=按权重浮现；传 query=混合检索。"
            "正文逐字，max_tokens 不足时整条省略，绝不截断。catalog=True 目录模式：每条一行「名称 | 域 | 重要度」，"
            "anchor 行带 ⚓ [anchor]。importance_min=只看重要度不低于它的（按重要度降序）。valence/arousal=情绪坐标，"
            "只留每个轴相差不超过 0.25 的记忆。tags 逗号分隔、全部满足；tags=feel 等价于 domain=feel。"
        ),
        (
            ToolParam("query", "string", "检索词；不传则按权重浮现或按其他条件列出"),
            ToolParam(
                "max_tokens",
                "integer",
                f"单次返回总 token 上限，默认 config.surfacing.breath_max_tokens（缺省 {BREATH_MAX_TOKENS}）；"
                "放不下的整条省略，绝不截断",
                minimum=MAX_TOKENS_RANGE[0],
                maximum=MAX_TOKENS_RANGE[1],
            ),
            DOMAIN,
            ToolParam("valence", "number", "情绪效价 0~1（0 消极、1 积极）；只留相近的记忆", minimum=0, maximum=1),
            ToolParam("arousal", "number", "情绪唤醒度 0~1（0 平静、1 强烈）；只留相近的记忆", minimum=0, maximum=1),
            MAX_RESULTS,
            ToolParam("importance_min", "integer", "重要度下限 1~10；无 query 时按重要度降序", minimum=1, maximum=10),
            ToolParam("tags", ("string", "array"), "标签，逗号分隔，必须全部满足", items="string"),
            ToolParam("catalog", "boolean", "目录模式：每条只返回一行元数据，最省 token", default=False),
            DATE_FROM,
            DATE_TO,
        ),
    ),
    ToolSpec(
        "hold",
        "hold",
        (
            "仅在对话中已明确决定「这段内容值得成为长期记忆」时调用；不要因普通聊天或猜测自行调用。content 逐字保存，"
            "绝不压缩，也不与其他记忆合并。若它说明某条旧记忆的事实变了（搬家、换工作或号码、改时间、不再做某事），"
            "旧记录会被标记为过时（原文保留，仍回答“以前”的问题）；拿不准时两条都保留、留给模型或人工确认；回复都会写明。"
            "正文里凡是别人（不是用户、也不是我）说的话，写成单独一行 `@名字：原话`，"
            "以后会拆成带 speaker 的 JSON 返回，不会被读成用户说的话；用户和我自己的话照常写，不加 @。"
            "title/domain 显式传入时优先；其余元数据自动补全，没有打标模型时用本地中性值并说明。"
            "pinned=True 标记永久核心准则（importance 锁定 10）；feel=True 存为感受且 domain 固定为 feel。"
        ),
        (
            ToolParam("content", "string", "要记住的正文，逐字保存", default=REQUIRED),
            ToolParam("title", "string", "最终显式标题；不传取正文首行"),
            ToolParam(
                "domain",
                ("string", "array"),
                "主题域，逗号分隔；显式传入时优先（feel=True 时固定为 feel）",
                items="string",
            ),
            ToolParam("tags", ("string", "array"), "标签，逗号分隔", items="string"),
            ToolParam("importance", "integer", "重要度 1~10，不传为 5", minimum=1, maximum=10),
            ToolParam("pinned", "boolean", "标记为永久核心准则（每次 breath 都在场，不衰减）", default=False),
            ToolParam("feel", "boolean", "存为感受类记忆，domain 固定为 feel", default=False),
            ToolParam("source_bucket", "string", "正在消化的原始记忆桶 ID；与 feel=True 同用时把那条标记为已消化"),
            ToolParam("source_content", "string", "可选原文证据，存入不可变原文层，不参与 breath"),
            ToolParam(
                "source_ranges",
                "array",
                "原文行号区间 [[起,止], …]（1 起算闭区间）；省略时整份 source_content 属于这条记忆",
                items="array",
            ),
            ToolParam("valence", "number", "情绪效价 0~1，不传为 0.5", minimum=0, maximum=1),
            ToolParam("arousal", "number", "情绪唤醒度 0~1，不传为 0.3", minimum=0, maximum=1),
            ToolParam("why_remembered", "string", "第一人称：我为什么要留下这条"),
            QUOTES_INPUT,
        ),
    ),
    ToolSpec(
        "grow",
        "grow",
        (
            "仅在对话中已明确要求整理并写入长期记忆时调用。把一段长文本（一天的记录、日记、总结）拆成 2~6 条独立事件"
            f"记忆；同一件事换个说法的条目与已有记忆合并（不压缩，两段原文都保留），说明事实变了的条目把旧记录标记为过时"
            f"（原文保留），回复逐条写明；不足 {GROW_SHORT_CHARS} 字走 hold 单条路径。"
            "也可自己拆好传 items（字符串或对象：title/content/tags/importance/domain/valence/arousal/why_remembered/"
            "source_ranges/quotes），显式字段优先、正文逐字；同时传 content 时它是整批共享的原文证据，只存一次。"
            "quotes 只在 items 上有，多数 item 不该有。"
        ),
        (
            ToolParam("content", "string", "要整理的长文本；与 items 同传时作为共享原文证据"),
            ToolParam(
                "items", "array", "已拆好的条目：字符串，或含 title/content 等字段的对象", items=("string", "object")
            ),
        ),
    ),
    ToolSpec(
        "trace",
        "trace",
        (
            "仅在明确需要修改某条已存在记忆时调用，不要猜 bucket_id。只传要改的字段。resolved=1 放下、0 重新激活；"
            "pinned=1 标记核心准则并锁定 importance=10；protected=1 保护不衰减但不强制浮现，与 pinned/anchor 互斥，"
            "同样锁定 10；解除最后一层 pinned/protected 时必须同时传 importance=1..10。name 改桶名（显示名），"
            "title 改记忆自己的标题，互不影响。digested=1 从默认浮现和 dream 隐藏（对 pinned/anchor 不生效）。"
            "status 只用于 plan。quotes_replace 只能订正或删除原话，不能补录。reinforce=True 确认这条确实要紧"
            "（累加激活、刷新活跃时间，已归档的会恢复）。每次修改都进入历史版本。"
        ),
        (
            BUCKET_ID,
            ToolParam("name", "string", "桶名（显示名，优先于标题显示）；传空串清除"),
            ToolParam("title", "string", "这条记忆自己的标题"),
            ToolParam("content", "string", "完整替换正文（逐字保存）"),
            ToolParam("domain", ("string", "array"), "整体替换主题域，逗号分隔（feel 类固定为 feel）", items="string"),
            ToolParam("tags", ("string", "array"), "整体替换标签，逗号分隔", items="string"),
            ToolParam("importance", "integer", "重要度 1~10", minimum=1, maximum=10),
            ToolParam("valence", "number", "情绪效价 0~1", minimum=0, maximum=1),
            ToolParam("arousal", "number", "情绪唤醒度 0~1", minimum=0, maximum=1),
            ToolParam("resolved", "integer", "1=已放下（沉底），0=重新激活", minimum=0, maximum=1),
            ToolParam("pinned", "integer", "1=核心准则（锁定 importance=10），0=取消", minimum=0, maximum=1),
            ToolParam("protected", "integer", "1=受保护不衰减（与 pinned/anchor 互斥），0=取消", minimum=0, maximum=1),
            ToolParam("digested", "integer", "1=已消化（从默认浮现和 dream 隐藏），0=取消", minimum=0, maximum=1),
            ToolParam("why_remembered", "string", "为什么要留下这条"),
            ToolParam("status", "string", "仅 plan：active / resolved / abandoned"),
            ToolParam(
                "quotes_replace", "array", "整体替换原话（只能订正或删减；[] 删除全部）", items=("string", "object")
            ),
            ToolParam("reinforce", "boolean", "确认这条确实要紧：累加激活并刷新活跃时间", default=False),
        ),
    ),
    ToolSpec(
        "dream",
        "dream",
        (
            "读取最近 window_hours（默认 48）小时内有变动的记忆，用于回顾与消化；每条返回最新的完整正文，不截断。"
            f"超过 {DREAM_MAX_ITEMS} 条时按衰减权重取前 {DREAM_MAX_ITEMS} 条；已消化的不出现。"
            "可据此操作：放下的 → trace(resolved=1) 沉底；有沉淀的 → hold(feel=True, source_bucket=…) 记录；"
            "无沉淀则不操作。"
        ),
        (ToolParam("window_hours", "number", "回看多少小时", default=DREAM_WINDOW_HOURS, minimum=1, maximum=24 * 365),),
    ),
    ToolSpec(
        "anchor",
        "anchor",
        (
            "把指定记忆标记为 anchor（坐标系）：不主动出现在默认 breath，但 query/domain/情绪命中时仍返回，不衰减。"
            f"硬上限 {ANCHOR_LIMIT} 条，已满时拒绝并提示先 release。"
        ),
        (BUCKET_ID,),
    ),
    ToolSpec(
        "release",
        "release",
        ("解除指定记忆的 anchor 标记：恢复为普通状态，重新参与默认 breath；pinned 状态保留。"),
        (BUCKET_ID,),
    ),
    ToolSpec(
        "pulse",
        "pulse",
        (
            "返回记忆系统状态：固化/动态/归档/感受/计划/信件数量、总占用、衰减引擎状态，以及所有记忆的一行摘要"
            "（anchor 行带 ⚓ [anchor]）。include_archive=True 同时列出归档区。"
        ),
        (ToolParam("include_archive", "boolean", "同时列出归档区的记忆", default=False),),
    ),
    ToolSpec(
        "plan",
        "plan",
        (
            "登记一个待办/承诺/未闭环事项。status=active（默认）/resolved/abandoned。related_bucket 可选，"
            "关联到某条普通记忆。weight=承诺重量 0.0~1.0（默认 0.5），与 importance 区分：importance "
            "是「多重要」，weight 是「多重」。why_remembered=登记原因（可选，仅展示）。计划不衰减、不出现在 "
            "breath，只在 dream 末尾的「进行中的计划」段出现；之后 hold/grow 写到像是完成了它的事时系统只会提示，"
            '关闭必须明确调用 trace(bucket_id, status="resolved") 或 status="abandoned"。'
        ),
        (
            ToolParam("content", "string", "计划/承诺的内容，逐字保存", default=REQUIRED),
            ToolParam("status", "string", "active（默认）/ resolved / abandoned", default="active"),
            ToolParam("related_bucket", "string", "关联的普通记忆 ID（可选）"),
            ToolParam(
                "weight",
                "number",
                f"承诺重量 0.0~1.0，默认 {PLAN_DEFAULT_WEIGHT}；不是 importance",
                default=PLAN_DEFAULT_WEIGHT,
                minimum=0,
                maximum=1,
            ),
            ToolParam("why_remembered", "string", "登记原因（可选，仅展示）"),
        ),
    ),
    ToolSpec(
        "letter_write",
        "letter_write",
        (
            "写下一封信。想留给对方、或留给以后的自己的话，写在这里，不要写成普通记忆：信件原文永久保存，不压缩、"
            '不合并、不衰减。author 必填："user"=用户一方写的，"ai"（或等于 ai_name）=AI 一方写的，'
            "也可传任意署名。user_name、ai_name（默认取配置 plugin.ai_name）、title、date 可选。"
            '锁（要「过一段时间才能打开」时才用，默认不锁）：lock_type="none" 双方都能读；"timed" '
            "到期才对另一方打开，必须同时给未来的 unlock_date（日期 2027-01-01 或带时区的完整时刻 "
            '2027-01-01T09:00:00+08:00）；"permanent" 永久封存，谁都读不到正文，且不能再改。'
            "锁只有写信的这一方能改（letter_lock_update），另一方在打开前连标题和正文都看不到；"
            "署名是对方的代存信不能上锁。"
        ),
        (
            ToolParam("author", "string", "署名：user / ai / 任意署名", default=REQUIRED),
            ToolParam("content", "string", "信的正文，逐字永久保存", default=REQUIRED),
            ToolParam("title", "string", "标题（可选）"),
            ToolParam("date", "string", "信上的日期（可选）：YYYY-MM-DD 或 ISO 8601"),
            ToolParam("user_name", "string", "用户的名字（可选）"),
            ToolParam("ai_name", "string", "AI 的名字（可选，默认取配置 plugin.ai_name）"),
            ToolParam(
                "lock_type",
                "string",
                "none（默认）/ timed（到期打开）/ permanent（永久封存，不可再改）",
                default="none",
            ),
            ToolParam(
                "unlock_date", "string", "lock_type=timed 时必填，必须是未来：2027-01-01 或 2027-01-01T09:00:00+08:00"
            ),
        ),
    ),
    ToolSpec(
        "letter_lock_update",
        "letter_lock_update",
        (
            "改一封已有信件的锁。只动锁，不动标题、正文、署名和创建时间。letter_id 从 letter_read "
            '的返回里取——每封信开头方括号里那串就是（如 [a0102c0f44e2]）。lock_type="none" 解锁 / "timed" '
            '到期打开（必须同时给未来的 unlock_date）/ "permanent" 永久封存（终态，之后谁都不能再改）。'
            "只有写这封信的一方能改自己的锁：你改不了用户写的那封，用户也改不了你的。"
        ),
        (
            ToolParam("letter_id", "string", "信件 ID（letter_read 结果开头方括号里那串）", default=REQUIRED),
            ToolParam(
                "lock_type", "string", "none 解锁 / timed 到期打开 / permanent 永久封存（终态）", default=REQUIRED
            ),
            ToolParam(
                "unlock_date", "string", "lock_type=timed 时必填，必须是未来：2027-01-01 或 2027-01-01T09:00:00+08:00"
            ),
        ),
    ),
    ToolSpec(
        "letter_read",
        "letter_read",
        (
            '检索历史信件。query=语义检索（可选，只在你能读的信里找）；author 按署名过滤（"user"=用户一方，'
            '"ai"=AI 一方，也可传具体署名）；date_from/date_to=按信上的日期过滤（YYYY-MM-DD 或 ISO 8601）。无 '
            "query 时按时间倒序返回最近 limit 封。返回完整原文，不压缩；你还不能读的信只显示 ID、署名、日期和锁。"
        ),
        (
            ToolParam("query", "string", "要找的内容（可选）"),
            ToolParam("author", "string", "按署名过滤：user / ai / 具体署名"),
            DATE_FROM,
            DATE_TO,
            ToolParam(
                "limit",
                "integer",
                f"最多返回几封，默认 {LETTER_READ_DEFAULT}，最大 {LETTER_READ_MAX}",
                default=LETTER_READ_DEFAULT,
                minimum=1,
                maximum=LETTER_READ_MAX,
            ),
        ),
    ),
    ToolSpec(
        "feel",
        "feel",
        (
            "按关键词找回我以前留下的感受。query 必填——feel 不是列表，是「我此刻在想的这件事，我以前怎么感受的」，"
            f"先说在想什么才知道该翻哪一段。走向量检索（候选限定在感受内，相似度 ≥ {FEEL_MIN_SIMILARITY} "
            "才算命中），同一件事换个说法也能找回；向量不可用时退回关键词字面匹配并明确提示降级。"
            "命中后逐字返回完整正文，不截断、不摘要；不返回未命中的感受，也不用低相关的凑数。写入感受仍用 "
            "hold(content=…, feel=True, source_bucket=…)。"
        ),
        (
            ToolParam("query", "string", "我此刻在想的这件事", default=REQUIRED),
            ToolParam(
                "max_tokens",
                "integer",
                f"返回正文的 token 上限，默认 config.surfacing.breath_max_tokens（缺省 {BREATH_MAX_TOKENS}）；"
                "放不下的整条省略，只在一次要看很多条时才调大",
                minimum=MAX_TOKENS_RANGE[0],
                maximum=MAX_TOKENS_RANGE[1],
            ),
        ),
    ),
    ToolSpec(
        "I",
        "self_knowledge",
        (
            "写下或读取自我认知。I 是沉淀物不是日记：content=一个「我觉得……」，先落成一条普通记忆（候选），"
            "会浮现也会衰减，每次 dream 都跟相关记忆摆在一起碰撞。aspect=维度：nature（本质）/values（看重的）"
            "/patterns（规律）/limits（局限）/becoming（变化方向）/uncertainty（不确定的）/stance（立场）"
            f"（可选）。read=True 或全空=读正式条目+待沉淀候选。limit=返回条数上限（默认 {SELF_READ_DEFAULT}）。"
            f"promote=候选 ID，被 {WITNESS_DATES_REQUIRED} 个不同日期的 dream 见证后才能升级成正式条目（可同时传 "
            "content 用提炼后的措辞）。supersedes=正式条目 ID，表示这条新认识要取代它："
            "旧条目立刻不再作为当前信念读出（一个字不删，随时可查；撤回这条候选它就回来），"
            "而新的仍要照常攒够见证；只能在同一 aspect 内取代。正式条目不参与普通 breath/dream，"
            "会话开始时自动附最近 3 条。"
        ),
        (
            ToolParam("content", "string", "一个「我觉得……」（写候选；promote 时为提炼后的措辞）"),
            ToolParam(
                "aspect",
                "string",
                "维度：nature（本质）/ values（看重的）/ patterns（规律）/ limits（局限）/ "
                "becoming（变化方向）/ uncertainty（不确定的）/ stance（立场）",
            ),
            ToolParam("read", "boolean", "读取正式条目与待沉淀候选", default=False),
            ToolParam(
                "limit",
                "integer",
                f"读取时最多返回几条，默认 {SELF_READ_DEFAULT}",
                default=SELF_READ_DEFAULT,
                minimum=1,
                maximum=SELF_READ_MAX,
            ),
            ToolParam("promote", "string", "要升级为正式条目的候选 ID"),
            ToolParam("supersedes", "string", "要被这条新认识取代的正式条目 ID（同一 aspect）"),
        ),
    ),
)


def spec_by_name(name: str) -> ToolSpec:
    for spec in COMPANION_TOOLS:
        if spec.name == name:
            return spec
    raise KeyError(name)


def _type_schema(kind: str | tuple[str, ...]) -> dict[str, Any]:
    return {"type": list(kind)} if isinstance(kind, tuple) else {"type": kind}


def json_schema(spec: ToolSpec) -> dict[str, Any]:
    """JSON Schema (draft 2020-12 subset) of a tool's arguments, for host tools and MCP."""
    properties: dict[str, Any] = {}
    for param in spec.params:
        schema = {**_type_schema(param.type), "description": param.description}
        if param.items is not None:
            schema["items"] = _type_schema(param.items)
        if param.minimum is not None:
            schema["minimum"] = param.minimum
        if param.maximum is not None:
            schema["maximum"] = param.maximum
        if not param.required and param.default is not None:
            schema["default"] = param.default
        properties[param.name] = schema
    return {
        "type": "object",
        "properties": properties,
        "required": [p.name for p in spec.params if p.required],
        "additionalProperties": False,
    }

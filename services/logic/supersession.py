"""Is a new memory an update of an older one, the same fact told again, or a new fact? Decided without a model.

Why local cues and not a similarity threshold: the embedding puts "我住在北京" and "我搬到上海了" as close as
"我住在北京" and "我家在北京", and a fact that only adds ("小雨的宝宝四月出生" after "小雨怀孕了") sits in the
same band too. So each text is read for the cues that separate the three (``fact_cues``):

- the *slots* it speaks about (where one lives, works, a phone number, a partner, a schedule, a habit, a taste, a
  pet, a price, the body, health, a possession, a school, a diet, a hobby), from cue words;
- the *subject* it is about: the kin and role words ("我爸妈", "my sister", read longest first: "女朋友" is not
  also a "朋友"), and the first name it gives ("Oscar has a girlfriend now" is about Oscar): a fact about one's
  parents never replaces one about oneself;
- its *values*: numbers and Chinese amounts ("三百", "一米三五"), handles and addresses ("@sunny_trails", one value
  each), names, places, organisations (jieba's dictionary tags, and words its dictionary does not know, which are
  mostly names), capitalised English words; dates are kept apart (a bare "12号" is a house or line number, not a
  date), because a dated event stays what it was;
- the Chinese *nouns* it names ("猫" / "狗", "花生" / "芒果"), which conflict like values, and with the English
  words (by their first five letters, time words left out) the *things* both texts name;
- *change* words (搬到, 换成, 改成, 不再, 不学了, 已经, 现在, moved, switched, gave up, haven't … in …), of which
  the ones that only say "now" (现在, now …) do not keep a restatement apart; a sentence ending in 了 (a new state);
  *negation* (不, 没, not …), *additive* words (也, 还, 另外, also, another …) and *past* words (以前, used to …).

An update needs the same subject, something they are about in common (a slot, or else a thing or a name), no
additive or past framing, no date in the old text, and evidence of change: a change word, or a value each has that
the other lacks together with a sentence ending in 了 or in a slot that holds one value at a time (a weight). A
restatement needs the same subject, no conflicting value (names, numbers, places and dates alike: one text may name
more than the other, but not each a value the other lacks), most of the same things named, and no change word on
one side only. Precision comes first: a wrong supersession hides a true fact, so anything short of these
cues is a new fact (or, where the cues half agree, an unsure pair for a model or a reviewer).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum

from .segmentation import tokenize

SLOT_CUES: dict[str, tuple[str, ...]] = {
    "residence": (
        "住",
        "搬",
        "新家",
        "房子",
        "公寓",
        "居住",
        "定居",
        "移居",
        "宿舍",
        "live",
        "living",
        "moved",
        "move",
        "apartment",
        "house",
        "home",
        "relocat",
        "dorm",
    ),
    "work": (
        "工作",
        "上班",
        "公司",
        "职位",
        "跳槽",
        "辞职",
        "入职",
        "升职",
        "退休",
        "办公",
        "老师",
        "经理",
        "工程师",
        "编辑",
        "店",
        "兼职",
        "工资",
        "薪",
        "work",
        "job",
        "company",
        "engineer",
        "teach",
        "retire",
        "quit",
        "runs",
        "boss",
        "salary",
        "analyst",
        "store",
        "office",
        "employ",
        "hired",
        "position",
    ),
    "contact": (
        "手机号",
        "电话",
        "号码",
        "邮箱",
        "微信号",
        "宽带",
        "账号",
        "地址",
        "phone",
        "number",
        "email",
        "address",
    ),
    "partner": (
        "女朋友",
        "男朋友",
        "对象",
        "恋爱",
        "分手",
        "结婚",
        "离婚",
        "老公",
        "老婆",
        "伴侣",
        "单身",
        "dating",
        "boyfriend",
        "girlfriend",
        "partner",
        "married",
        "divorce",
        "broke up",
        "seeing",
        "single",
        "husband",
        "wife",
    ),
    "schedule": (
        "周一",
        "周二",
        "周三",
        "周四",
        "周五",
        "周六",
        "周日",
        "周天",
        "星期",
        "每周",
        "每月",
        "点",
        "上午",
        "下午",
        "晚上",
        "早上",
        "课",
        "周会",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        " am",
        " pm",
        "lesson",
        "class",
        "meet",
        "schedule",
    ),
    "habit": (
        "抽烟",
        "烟",
        "喝酒",
        "酒",
        "运动",
        "跑步",
        "晨跑",
        "健身",
        "游泳",
        "睡",
        "出门",
        "通勤",
        "smok",
        "drink",
        "coffee",
        "tea",
        "exercis",
        "run",
        "bike",
        "commute",
        "driv",
        "bed",
        "sleep",
    ),
    "taste": ("喜欢", "最爱", "爱吃", "爱喝", "爱看", "口味", "偏好", "辣", "favorite", "favourite", "prefer", "love"),
    "pet": (
        "养",
        "猫",
        "狗",
        "宠物",
        "柯基",
        "金鱼",
        "乌龟",
        "鱼缸",
        "dog",
        "cat",
        "pet",
        "puppy",
        "retriever",
        "beagle",
        "adopt",
    ),
    "price": ("元", "块钱", "钱", "价", "房租", "租金", "涨", "费", "$", "cost", "price", "rent", "fee", "membership"),
    "body": ("体重", "公斤", "斤", "身高", "米", "减肥", "胖", "瘦", "weigh", "kg", "pound", "height", "tall"),
    "health": (
        "血压",
        "药",
        "过敏",
        "病",
        "近视",
        "眼镜",
        "手术",
        "医生",
        "治疗",
        "allerg",
        "medicine",
        "insulin",
        "diabet",
        "doctor",
        "blood",
        "pill",
        "tablet",
    ),
    "possession": (
        "车",
        "开的是",
        "辆",
        "卖",
        "手机",
        "电脑",
        "笔记本",
        "car",
        "drive",
        "laptop",
        "phone",
        "civic",
        "bought",
        "sold",
    ),
    "school": (
        "上学",
        "学校",
        "幼儿园",
        "小学",
        "中学",
        "大学",
        "读",
        "念书",
        "转学",
        "年级",
        "本科",
        "研究生",
        "school",
        "college",
        "elementary",
        "grade",
        "kindergarten",
        "university",
        "academy",
    ),
    "learning": ("学习", "在学", "改学", "不学", "开始学", "learning", "language", "studying"),
    "diet": (
        "吃素",
        "素食",
        "纯素",
        "吃肉",
        "饮食",
        "早饭",
        "早餐",
        "午饭",
        "晚饭",
        "减脂",
        "diet",
        "vegetarian",
        "vegan",
        "breakfast",
        "lunch",
        "dinner",
    ),
    "hobby": ("爱好", "业余", "迷上", "hobby", "hobbies", "weekends", "spare time", "free time"),
}

# Phrases whose cue word is not about its slot: the way to work is not the job, a distance to the office or a place
# near it is not where one works, machine learning is not a language one learns.
NEUTRAL_PHRASES: tuple[str, ...] = (
    "to work",
    "before work",
    "after work",
    "from work",
    "machine learning",
    "离公司",
    "上班路上",
    "下班后",
    "公司楼下",
    "公司附近",
    "公司对面",
    "公司旁边",
    "家附近",
    "家楼下",
    "家对面",
    "家旁边",
)

# Who a fact is about: canonical kin or role word → the ways of writing it.
KIN_ALIASES: dict[str, tuple[str, ...]] = {
    "parents": ("爸妈", "父母", "parents"),
    "father": ("爸爸", "我爸", "父亲", "dad", "father"),
    "mother": ("妈妈", "我妈", "母亲", "mom", "mother", "mum"),
    "wife": ("老婆", "妻子", "爱人", "wife"),
    "husband": ("老公", "丈夫", "husband"),
    "daughter": ("女儿", "daughter"),
    "son": ("儿子", "son"),
    "younger_brother": ("弟弟", "我弟"),
    "elder_brother": ("哥哥", "我哥", "大哥"),
    "brother": ("brother",),
    "elder_sister": ("姐姐", "我姐"),
    "younger_sister": ("妹妹", "我妹"),
    "sister": ("sister",),
    "grandfather": ("爷爷", "外公", "姥爷", "grandfather", "grandpa"),
    "grandmother": ("奶奶", "外婆", "姥姥", "grandmother", "grandma"),
    "uncle": ("uncle",),
    "aunt": ("aunt",),
    "姑姑": ("姑姑", "姑妈"),
    "father_in_law": ("岳父", "公公"),
    "mother_in_law": ("岳母", "婆婆"),
    **{
        word: (word,)
        for word in ("舅舅", "舅妈", "叔叔", "婶婶", "伯伯", "姑父", "大姨", "小姨", "姨妈", "姨父", "阿姨")
    },
    "cousin": ("表哥", "表弟", "表姐", "表妹", "堂哥", "堂弟", "堂姐", "堂妹", "cousin"),
    "nephew": ("侄子", "外甥", "nephew"),
    "niece": ("侄女", "外甥女", "niece"),
    "grandparents": ("祖父母", "爷爷奶奶", "外公外婆", "grandparents"),
    "grandchild": ("孙子", "孙女", "外孙", "grandson", "granddaughter"),
    "girlfriend": ("女朋友", "女友", "girlfriend"),
    "boyfriend": ("男朋友", "男友", "boyfriend"),
    "friend": ("朋友", "闺蜜", "哥们", "friend"),
    "colleague": ("同事", "colleague", "coworker"),
    "classmate": ("同学",),
    "roommate": ("室友", "roommate"),
    "neighbour": ("邻居", "neighbor", "neighbour"),
    "boss": ("领导", "老板", "boss"),
    "children": ("孩子", "kids", "children"),
}
# Longest first: "女朋友" is a girlfriend, not also a friend; "爷爷奶奶" are grandparents, not a grandfather.
_KIN_HAN = tuple(
    sorted(
        ((kin, alias) for kin, aliases in KIN_ALIASES.items() for alias in aliases if not alias.isascii()),
        key=lambda item: -len(item[1]),
    )
)
_KIN_WORDS = frozenset(alias for aliases in KIN_ALIASES.values() for alias in aliases)
_KIN_EN = {alias: kin for kin, aliases in KIN_ALIASES.items() for alias in aliases if alias.isascii()}

CHANGE_WORDS: tuple[str, ...] = (
    "搬到",
    "搬进",
    "搬去",
    "换成",
    "换了",
    "改成",
    "改为",
    "改到",
    "调到",
    "不再",
    "已经",
    "现在",
    "如今",
    "目前",
    "开始",
    "戒",
    "辞职",
    "跳槽",
    "分手",
    "去世",
    "死了",
    "卖了",
    "涨",
    "降到",
    "升职",
    "退休",
    "停了",
    "不用",
    "变成",
    "换号",
    "换到",
    "成了",
    "辞掉",
    "不干了",
    "搬出",
    "搬家",
    "走丢",
    "丢了",
    "改了",
    "提到",
    "升到",
    "涨价",
    "降价",
    "转学",
    "转到",
    "挪到",
    "改学",
    "改喝",
    "改吃",
    "改用",
    "迷上",
    "爱上",
    "离婚",
    "分了",
    "送人",
    "被偷",
    "没了",
    "停掉",
    "再也不",
    "考上",
    "考进",
)
CHANGE_WORDS_EN: tuple[str, ...] = (
    "moved",
    "switched",
    "no longer",
    "now",
    "changed",
    "replaced",
    "quit",
    "stopped",
    "started",
    "sold",
    "retired",
    "passed away",
    "died",
    "broke up",
    "went up",
    "increased",
    "decreased",
    "down to",
    "new ",
    "these days",
    "anymore",
    "any more",
    "instead",
    "not anymore",
    "relocated",
    "moved out",
    "left",
    "got married",
    "got engaged",
    "got divorced",
    "divorced",
    "dropped",
    "gave up",
    "given up",
    "traded",
    "transferred",
    "upgraded",
    "became",
    "turned into",
    "pushed to",
    "ran away",
    "flew away",
    "got rid of",
    "no more",
    "split up",
    "ended",
    "joined",
    "promoted",
)
# Words that only say the time is now: a restatement may carry them ("…五年了" / "… for five years now"), so only
# the other change words keep two texts from merging.
TIME_ONLY_CHANGE = frozenset({"现在", "如今", "目前", "已经", "now", "these days"})
# Words that say something began: a new activity is as often added to one's life as put in place of an old one
# ("最近我开始学射击" replaces nothing), so alone they replace only what was not done or a value that differs.
BEGIN_WORDS = frozenset({"开始", "started"})
# "不学了" / "不干了" / "不抽了": a negated verb with 了 says something stopped.
# "不干流水线了" / "不算纯素了": a negation and a clause-final 了 say "no longer", with the object between.
_STOPPED = re.compile(r"不[\u4e00-\u9fff]{1,2}了|不[\u4e00-\u9fff]{3,5}了(?=[。！!，,；;]|$)")
# "I haven't had a cigarette in six months": not done for a while, so no longer done.
_STOPPED_EN = re.compile(r"\b(?:haven't|hasn't|have not|has not)\b[^.;!?]*\b(?:in|since)\b")
# A sentence that ends in 了 ("涨到四十五块了", "都八斤了") says a state is new; it is evidence of change only where
# a value differs too.
_SETTLED = re.compile(r"了(?:[。！!，,；;]|$)")
ADDITIVE_WORDS: tuple[str, ...] = ("也", "另外", "此外", "还有", "另一", "又多", "再加上")
ADDITIVE_WORDS_EN: tuple[str, ...] = ("also", "too", "as well", "another", "in addition", "additionally")
# "还" adds ("我还养了仓鼠"), except where it means "still" or "yet".
_ADDITIVE_HAI = re.compile(r"还(?![在是没不要会能得])")
PAST_WORDS: tuple[str, ...] = ("以前", "曾经", "小时候", "当年", "那时候", "原来", "从前")
PAST_WORDS_EN: tuple[str, ...] = ("used to", "when i was", "as a kid", "as a child", "back then", "years ago")

# Nouns that name nothing in particular: two texts sharing them are not about the same thing.
_GENERIC_NOUNS = frozenset(
    {
        "人",
        "事",
        "事情",
        "东西",
        "时候",
        "地方",
        "时间",
        "样子",
        "情况",
        "问题",
        "方面",
        "部分",
        "感觉",
        "感受",
        "建议",
        "方法",
        "办法",
        "想法",
        "意思",
        "计划",
        "有点",
        "会儿",
    }
)
# Characters that are words of their own (pronouns, adverbs, auxiliaries): a word jieba does not know that holds one
# is two such words it glued together ("我该", "很受", "再用"), not a name; a noun that opens with a pronoun
# ("我会") is the same mistake.
_FUNCTION_CHARS = frozenset("我你您他她它咱这那很会再不也就都还要该着了的是在有能可把被让给上过得些")
_PRONOUNS = frozenset("我你您他她它咱")
# A text that says something is not done ("不怎么运动", "I don't drink"): a later "started" replaces it.
# "不错" (good), "不过" (but), "没错" (right) negate nothing.
_NEGATED = re.compile(r"不(?![错过])|没(?!错)|\b(?:not|never|don't|doesn't|didn't|no)\b")

# jieba's dictionary tags of names, places, organisations and other proper nouns.
_PROPER_TAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt", "nz"})
_NUMBER = re.compile(r"\d+(?:[.:,]\d+)*")
_HAN_NUMERAL = re.compile(
    r"[一二两三四五六七八九]米[零〇一二三四五六七八九]+|(?:周|星期|礼拜)[一二三四五六日天]"
    r"|[零〇一二两三四五六七八九十百千万]+(?=[点岁斤公块元月号日年只条次天米层度个万千])"
    r"|[零〇一二两三四五六七八九]*[十百千万][零〇一二两三四五六七八九十百千万]*"
)
# Handles, account names and e-mail addresses ("@sunny_trails", "zw_1990", "a.b@qq.com"): one value each.
_IDENTIFIER = re.compile(r"@?[A-Za-z0-9][\w.+-]*(?:@|_)[\w.@+-]*[A-Za-z0-9]|@[A-Za-z0-9][\w.]*")
_HAS_DIGIT = re.compile(r"\d")
# "一个" / "一次" / "一天" / "一点儿" say "a", "once", "one day", "a bit": an article, not an amount ("凌晨一点" and
# "一个半小时" are amounts).
_ARTICLE = re.compile(r"一(?:[个次天](?![半多])|点(?=[儿点都也不没]))")
# A bare "12号" is as often a house, bus or line number as a day: only a month or a year makes it a date.
_DATE = re.compile(
    r"(?:\d{1,4}\s*年\s*)?\d{1,2}\s*月\s*\d{1,2}\s*[日号]|\d{1,4}\s*[年月日]"
    r"|[零〇一二三四五六七八九十]+月[零〇一二三四五六七八九十]+[日号]|[零〇一二三四五六七八九十]+[日月]"
    r"|(?:January|February|March|April|May|"
    r"June|July|August|September|October|November|December)\s+\d{1,2}\b"
)
# Capitalised words, and words with a capital inside ("iPad", "eBay"): names.
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9'&.-]*[A-Za-z0-9]\b|\b[A-Z]\b|\b[a-z]+[A-Z][A-Za-z0-9]*\b")
_EN_WORD = re.compile(r"[a-z][a-z']+")
# Capitalised words that open sentences or name time, not a value.
_NOT_NAMES = frozenset(
    {
        "I",
        "I'm",
        "I've",
        "I'll",
        "I'd",
        "My",
        "The",
        "We",
        "We're",
        "Our",
        "He",
        "She",
        "It",
        "They",
        "This",
        "That",
        "These",
        "There",
        "Last",
        "Now",
        "Since",
        "After",
        "Before",
        "In",
        "On",
        "At",
        "And",
        "But",
        "So",
        "When",
        "Every",
        "Each",
        "Today",
        "Yesterday",
        "A",
        "An",
        "Mr",
        "Mrs",
        "Ms",
        "Dr",
        "His",
        "Her",
        "Their",
        "Your",
    }
)
_EN_STOP = frozenset(
    """a an the i i'm i've me my mine we our you your he him his she her it its they them their is am
are was were be been being do does did have has had to of in on at for with by from and or but so as that this
these those there here now just very really also too not no yes one some any all up out about into over than then
when what who where which how will would can could should may might must get got gets s t re ve ll d m
every each day days daily week weeks month months year years morning mornings evening night today last next time
times once twice""".split()
)
_NOISE = re.compile(r"[\s\W_]+", re.UNICODE)

# Courtesy and filler formulae: "不用谢" is no "不用" (a change), "no problem" no negation, "谢谢" no thing named.
_COURTESY = re.compile(
    r"不用谢|不用客气|不客气|别客气|不谢|没关系|没事儿?|没问题|不好意思|对不起|不用担心|别担心|谢谢你?|多谢|感谢你?"
    r"|\b(?:no problem|no worries|you're welcome|you are welcome|not at all|don't mention it|never mind"
    r"|thank you|thanks|sorry|of course|sure thing)\b",
    re.IGNORECASE,
)
# Whom a greeting or thanks is said to ("你好，朋友！", "谢谢你，AI伴侣。", "Thanks, Evan!"): the listener, no fact
# about the speaker. A few characters up to the clause's end; "你好，我叫郝明" introduces the speaker and stays.
_VOCATIVE = re.compile(
    r"(?P<greeting>你好|您好|嗨|哈喽|早上好|晚上好|晚安|再见|谢谢你?|感谢你?|多谢)[啊呀呢哦吖]?[，,\s]*"
    r"(?![我咱])[^\s，,。.！!？?、]{1,4}(?=[，,。.！!？?]|$)"
    r"|\b(?P<english>[Hh]i|[Hh]ello|[Hh]ey|[Tt]hanks|[Tt]hank you|[Bb]ye)[,\s]+(?!I\b)[A-Z][\w'-]*(?=[,.!?]|$)",
    re.MULTILINE,
)
# A speaker label at the start of a line: "用户：", "Alice:", "User 1:", "[Bob]", "【客服】". Short, and no sentence
# inside it (no clause punctuation, at most three words).
_LABEL = re.compile(
    r"^[ \t]*(?:[\[【<](?P<bracketed>[^\]】>\n]{1,24})[\]】>][ \t]*[:：]?"
    r"|(?P<plain>[^\s:：，。,.!?！？;；\[【][^:：，。,.!?！？;；\n]{0,23}?)[ \t]*[:：])[ \t]*",
    re.MULTILINE,
)
# Labels that name a role, not a person: a text with one of them is a transcript line even alone.
_ROLE_LABELS = frozenset(
    {
        "用户",
        "我",
        "ai",
        "助手",
        "机器人",
        "客服",
        "系统",
        "问",
        "答",
        "user",
        "assistant",
        "bot",
        "system",
        "human",
        "me",
        "q",
        "a",
    }
)
_NAME_LABEL = re.compile(r"[A-Z][\w'.-]*(?: [A-Z0-9][\w'.-]*)?|[A-Za-z]+ ?\d{1,2}")


class Decision(StrEnum):
    """What a new memory is to one older memory."""

    ADD = "add"
    UPDATE = "update"
    DUPLICATE = "duplicate"
    MAYBE_UPDATE = "maybe_update"
    MAYBE_DUPLICATE = "maybe_duplicate"


@dataclass(frozen=True)
class FactCues:
    """The cues of one text (see the module docstring)."""

    slots: frozenset[str]
    cue_words: frozenset[str]
    kin: frozenset[str]
    values: frozenset[str]
    dates: frozenset[str]
    nouns: frozenset[str]
    things: frozenset[str]
    change: bool
    additive: bool
    past: bool
    # A change word other than one that only says "now" (``TIME_ONLY_CHANGE``).
    strong_change: bool = False
    # A change word other than those that only say "now" or that something began (``BEGIN_WORDS``).
    firm_change: bool = False
    # Ends a sentence in 了: a new state, evidence of change where a value differs too.
    settled: bool = False
    # The first name the text gives (a person's, in its own words): who a sentence without a kin word is about.
    lead_name: str = ""
    # Says something is not done (不/没/not/never …).
    negated: bool = False
    # The slots whose cue word follows a negation closely ("不怎么运动", "I don't drink"): what is not done.
    negated_slots: frozenset[str] = frozenset()
    # The change words found ("搬到", "moved").
    change_words: frozenset[str] = frozenset()
    # Who says it, from a speaker label ("用户：", "Alice:", "[Bob]"), lower-case; "" when the text has none.
    speaker: str = ""
    # What a transcript's other speakers name (things and values): an exchange restates only one where they name
    # mostly the same, since two exchanges that share the user's words are still two things said.
    replies: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Thresholds:
    """The similarity bands of the decision (cosine of the two memories' embeddings)."""

    update_min_similarity: float = 0.82
    restatement_min_similarity: float = 0.95
    restatement_min_overlap: float = 0.3
    # Two texts about the same relative (the same kin word), the new one with a change word, and nothing else in
    # common: as near as this, the change is of the older fact ("我爸开了十年的捷达" / "我爸今年换了辆比亚迪汉": no word
    # for a car in the first). Below it, a relative's other facts sit (her school, his age, a favourite dish).
    kin_change_min_similarity: float = 0.93


def _has_any(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _english_needle(cue: str) -> str:
    """What a cue is looked up as in the space-padded lower-case text: a word cue from a word start."""
    return f" {cue}" if cue[0].isalpha() else cue


# Every slot cue with how it is looked up: Chinese cues in the text as is, English ones in the padded text.
_CUES: tuple[tuple[str, str, bool], ...] = tuple(
    (cue, _english_needle(cue) if cue.isascii() else cue, cue.isascii())
    for cues in SLOT_CUES.values()
    for cue in dict.fromkeys(cues)
)
# The same cues as one search: a label with a cue in it is a field of a fact ("地址：", "Phone:"), not a speaker.
_HAN_CUE = re.compile("|".join(re.escape(cue) for cue, _, english in _CUES if not english))
_EN_CUE_WORDS = frozenset(cue for cue, _, english in _CUES if english)
_CHANGE_NEEDLES = tuple(_english_needle(cue) for cue in CHANGE_WORDS_EN)
# Whole words: "too" is not "took".
_ADDITIVE_EN = re.compile(r"\b(?:" + "|".join(map(re.escape, ADDITIVE_WORDS_EN)) + r")\b")
_PAST_NEEDLES = tuple(_english_needle(cue) for cue in PAST_WORDS_EN)


@functools.lru_cache(maxsize=8192)
def fact_cues(text: str) -> FactCues:
    """The cues of ``text`` (cached in the process; ``storage.fact_cue_store`` keeps each memory's cues in SQLite,
    so a neighbour's text is read once, not at every write that lands near it).

    A transcript is read as what its first speaker says (``speech_of``), without the labels; courtesy formulae
    ("不客气", "no problem") are not read at all: they say nothing about anyone's facts."""
    speaker, normal, lower, replies = _read_speech(text)
    padded = f" {lower} "
    cue_words = frozenset(cue for cue, needle, english in _CUES if needle in (padded if english else normal))
    slots = frozenset(slot for slot, cues in SLOT_CUES.items() if cue_words.intersection(cues))
    named = _named(normal)
    values, dates, names = named.values, named.dates, named.names
    kin = frozenset({*_han_kin(normal), *(_KIN_EN[word] for word in named.words if word in _KIN_EN)})
    changes = {word for word in CHANGE_WORDS if word in normal}
    changes.update(word for word, needle in zip(CHANGE_WORDS_EN, _CHANGE_NEEDLES, strict=True) if needle in padded)
    stopped = bool(_STOPPED.search(normal) or _STOPPED_EN.search(lower))
    strong_change = bool(changes - TIME_ONLY_CHANGE) or stopped
    return FactCues(
        slots=slots,
        cue_words=cue_words,
        kin=kin,
        values=frozenset(values),
        dates=dates,
        nouns=frozenset(named.nouns),
        things=frozenset(named.things),
        change=bool(changes) or strong_change,
        additive=(
            _has_any(normal, ADDITIVE_WORDS) or bool(_ADDITIVE_HAI.search(normal)) or bool(_ADDITIVE_EN.search(lower))
        ),
        past=_has_any(normal, PAST_WORDS) or _has_any(padded, _PAST_NEEDLES),
        strong_change=strong_change,
        firm_change=bool(changes - TIME_ONLY_CHANGE - BEGIN_WORDS) or stopped,
        settled=bool(_SETTLED.search(normal)),
        lead_name=min(names)[1].lower() if names else "",
        speaker=speaker,
        replies=_reply_words(replies) if replies else frozenset(),
        negated=bool(_NEGATED.search(lower)),
        negated_slots=_negated_slots(lower, cue_words),
        change_words=frozenset(changes),
    )


def _read_speech(text: str) -> tuple[str, str, str, str]:
    """(speaker, what the first speaker says as read, the same lower-cased, what the other speakers say) of
    ``text``: NFKC-folded, without courtesy formulae, greetings' addressees and ``NEUTRAL_PHRASES``."""
    normalised = unicodedata.normalize("NFKC", text)
    turns = _turns(normalised)
    speaker, said = _speech(turns, normalised)
    replies = _replies(turns) if speaker else ""
    normal = _COURTESY.sub(" ", _VOCATIVE.sub(_greeting_only, said))
    lower = normal.lower()
    for phrase in NEUTRAL_PHRASES:  # a cue word inside these speaks of something else
        lower = lower.replace(phrase, " ")
        normal = normal.replace(phrase, " ")
    return speaker, normal, lower, replies


@dataclass
class _Named:
    """What a text names: values (identifiers, numbers, names), dates, names with where they stand, nouns, things
    and its English words."""

    values: set[str]
    dates: frozenset[str]
    names: list[tuple[int, str]]
    nouns: set[str]
    things: set[str]
    words: set[str]


def _named(normal: str) -> _Named:
    """What ``normal`` (as ``_read_speech`` reads it) names."""
    # An identifier is one value: its parts are not numbers, names or words of their own.
    values: set[str] = {match.group(0).lower() for match in _IDENTIFIER.finditer(normal)}
    bare = _IDENTIFIER.sub(" ", normal)
    words = set(_EN_WORD.findall(bare.lower()))
    dates = frozenset(_NOISE.sub("", match.group(0).lower()) for match in _DATE.finditer(normal))
    values.update(_NUMBER.findall(bare))
    values.update(
        match.group(0) for match in _HAN_NUMERAL.finditer(normal) if not _ARTICLE.match(normal, match.start())
    )
    names = [
        (match.start(), match.group(0)) for match in _CAPITALISED.finditer(bare) if match.group(0) not in _NOT_NAMES
    ]
    values.update(word.lower() for _, word in names)
    things: set[str] = set()
    tags = _word_tags()
    nouns: set[str] = set()
    for token in tokenize(bare):
        if not "\u4e00" <= token[0] <= "\u9fff" or token in _KIN_WORDS or token[0] in _PRONOUNS:
            continue  # kin words are the subject
        tag = tags.get(token)
        if tag is None and _FUNCTION_CHARS.intersection(token):
            continue
        if len(token) >= 2 and (tag is None or tag in _PROPER_TAGS):
            values.add(token)
            if tag is None or tag.startswith("nr"):
                names.append((normal.find(token), token))
        elif tag is not None and tag.startswith("n") and token not in _GENERIC_NOUNS:
            nouns.add(token)
    things.update(nouns)
    # English words by their first five letters: "graduate" / "graduated", "raise" / "raised".
    # Names are values, not things: two lines addressed to the same person share the name, not their content.
    things.update(
        word[:5]
        for word in words
        if word not in _EN_STOP and len(word) > 2 and word not in values and word not in _KIN_EN
    )
    values -= dates
    return _Named(values, dates, names, nouns, things, words)


def _reply_words(replies: str) -> frozenset[str]:
    """The things and values a transcript's other speakers name (``FactCues.replies``)."""
    named = _named(_read_speech(replies)[1])
    return frozenset(named.things | named.values)


def speech_of(text: str) -> tuple[str, str]:
    """(speaker, what the speaker says) of a text that may be a transcript.

    Labels are who speaks, not what is said: left as words they are a noun, a name or a subject two turns share
    ("用户", "AI"). A transcript's later speakers answer, ask or advise (an assistant's reply, the other person in a
    chat); what they say is no fact about the first speaker, so only the first speaker's lines are read. A label
    counts only where it reads as a speaker (a role, a bracketed or capitalised name, a short Chinese name):
    "手机号：138…" or a form ("地址：…\n电话：…") keeps its words."""
    return _speech(_turns(text), text)


def _speech(turns: list[tuple[str, str]], text: str) -> tuple[str, str]:
    """``speech_of`` from the transcript's ``turns`` (``_turns``) of ``text``."""
    if not turns:
        return "", text
    first = turns[0][0]
    said = "\n".join(line for speaker, line in turns if speaker == first)
    for listener in {speaker for speaker, _ in turns} - {first}:
        said = _listener_mention(listener).sub(" ", said)
    return first, said


@functools.lru_cache(maxsize=256)
def _listener_mention(label: str) -> re.Pattern[str]:
    """How the first speaker names another speaker of the transcript: its label as a word, with the Chinese words
    written onto it ("AI伴侣", "AI助手"). Whom one speaks to is not a fact about oneself ("谢谢你，AI伴侣")."""
    return re.compile(r"(?<![A-Za-z0-9])" + re.escape(label) + r"(?![A-Za-z0-9])[\u4e00-\u9fff]{0,2}", re.IGNORECASE)


def _replies(turns: list[tuple[str, str]]) -> str:
    """What a transcript's other speakers say (all but ``speech_of``'s speaker), "" for a text that is none."""
    return "\n".join(said for speaker, said in turns if speaker != turns[0][0]) if turns else ""


def _turns(text: str) -> list[tuple[str, str]]:
    """(speaker, what is said) of each labelled part of a transcript, text before the first label counting as the
    first speaker's; [] when some label does not read as a speaker (then the text is no transcript)."""
    labels = list(_LABEL.finditer(text))
    if not labels or not all(_speaker_like(match) for match in labels):
        return []
    ends = [match.start() for match in labels[1:]] + [len(text)]
    turns = [(_label_name(match), text[match.end() : end].strip()) for match, end in zip(labels, ends, strict=True)]
    if text[: labels[0].start()].strip():
        turns.insert(0, (turns[0][0], text[: labels[0].start()].strip()))
    return turns


def _label_name(match: re.Match[str]) -> str:
    return (match.group("bracketed") or match.group("plain")).strip().lower()


def _speaker_like(match: re.Match[str]) -> bool:
    """A label that names a speaker: a role, a bracketed name, a capitalised name or "User 1", or two to four
    Chinese characters that jieba does not know as a common word; never a field of a fact ("Phone:", "地址：")."""
    if match.group("bracketed"):
        return True
    label = match.group("plain").strip()
    if label.lower() in _ROLE_LABELS:
        return True
    if _HAN_CUE.search(label) or _EN_CUE_WORDS.intersection(label.lower().split()):
        return False
    if _NAME_LABEL.fullmatch(label):
        return True
    if not (2 <= len(label) <= 4 and all("\u4e00" <= char <= "\u9fff" for char in label)):
        return False
    tag = _word_tags().get(label)
    return tag is None or tag.startswith("nr")


def _negated_slots(lower: str, cue_words: frozenset[str]) -> frozenset[str]:
    """The slots of ``cue_words`` that some negation just before one of their cues says are not done: a few
    characters before a Chinese cue ("不怎么运动"), a few words before an English one ("don't really drink")."""
    negated: set[str] = set()
    for cue in cue_words:
        reach = 12 if cue.isascii() else 4
        for match in re.finditer(re.escape(cue), lower):
            if _NEGATED.search(lower[max(0, match.start() - reach) : match.start()]):
                negated.update(slot for slot, cues in SLOT_CUES.items() if cue in cues)
                break
    return frozenset(negated)


def _greeting_only(match: re.Match[str]) -> str:
    """The greeting of a ``_VOCATIVE`` match without whom it is said to."""
    return f" {match.group('greeting') or match.group('english')} "


def _han_kin(text: str) -> set[str]:
    """The kin and role words of a Chinese text, each written form read once, longest first."""
    found: set[str] = set()
    for kin, alias in _KIN_HAN:
        if alias in text:
            found.add(kin)
            text = text.replace(alias, "\0")
    return found


def warm_up() -> None:
    """Load the part-of-speech dictionary the reading uses now rather than on the first write that meets a
    neighbour (it takes about as long as jieba's own dictionary). The runtime calls this in a worker thread at start.
    """
    _word_tags()


@functools.lru_cache(maxsize=1)
def _word_tags() -> dict[str, str]:
    """jieba's dictionary: word → part-of-speech tag (loaded once, with jieba)."""
    import jieba.posseg

    tokenize("初始化")  # jieba's dictionary is loaded by the first segmentation
    return jieba.posseg.dt.word_tag_tab


def _written_inside(words: frozenset[str]) -> list[str]:
    """The words of ``words`` that may be written inside another word, or another inside them (``_has_same``):
    Chinese, without digits."""
    return [word for word in words if not word.isascii() and not _HAS_DIGIT.search(word)]


def _has_same(value: str, others: frozenset[str], inside: list[str]) -> bool:
    """Some word of ``others`` names the same value as ``value``: the same word, or for Chinese words one written
    inside the other ("浦东" / "上海浦东"); numbers, dates and English words only when equal ("3" is not "13").
    ``inside`` is ``_written_inside(others)``."""
    if value in others:
        return True
    if value.isascii() or _HAS_DIGIT.search(value):
        return False
    return any(value in other or other in value for other in inside)


def _shared_count(values: frozenset[str], others: frozenset[str]) -> int:
    """How many of ``values`` are in ``others`` (``_has_same``)."""
    inside = _written_inside(others)
    return sum(1 for value in values if _has_same(value, others, inside))


def _covered(values: frozenset[str], others: frozenset[str]) -> bool:
    """Every value of ``values`` is also in ``others`` (``_has_same``)."""
    inside = _written_inside(others)
    return all(_has_same(value, others, inside) for value in values)


def _same_subject(new: FactCues, old: FactCues) -> bool:
    """The same kin or role words, or the same person named first ("My friend Oscar is single" / "Oscar has a
    girlfriend now"); never two different speakers ("Alice: I moved" is not about Bob's "I")."""
    if new.speaker and old.speaker and new.speaker != old.speaker:
        return False
    return new.kin == old.kin or bool(new.kin & old.kin) or (bool(new.lead_name) and new.lead_name == old.lead_name)


# Slots a person has one of at a time (a home, a job, a partner, a number): about oneself, two such facts need no
# word in common to be about the same thing ("我住在北京" / "我搬到上海了").
SELF_SLOTS = frozenset({"residence", "work", "partner", "contact"})
# Slots with one value at a time: one weight, one height. Another value there is a change even when no word says
# so ("My nephew was 21 kg at his last checkup"); a second phone number, a second class a week or a place one lives
# near ("I live near Central Park" / "I live in Brooklyn") is not.
SINGLE_VALUED_SLOTS = frozenset({"body"})


def anchor(new: FactCues, old: FactCues) -> int:
    """How many things, values and kin the two texts name in common: what ties an update to the fact it replaces.

    A cue word the new text has only inside its change word does not count: "搬" in "我搬到上海了" and in "公司搬远了"
    says both tell of a move, not that they tell of the same home."""
    cue_words = {cue for cue in new.cue_words & old.cue_words if not any(cue in word for word in new.change_words)}
    return (
        len(new.things & old.things) + len(new.kin & old.kin) + len(cue_words) + _shared_count(new.values, old.values)
    )


def _shared_names(new: FactCues, old: FactCues, but: str = "") -> bool:
    """Both name the same value other than a number and ``but`` ("可乐", "Kiwi", "ThinkPad")."""
    return any(not _HAS_DIGIT.search(value) and value != but and value in old.values for value in new.values)


def _overlap(mine: frozenset[str], theirs: frozenset[str]) -> float:
    """The share of the things two texts name that both name, a Chinese word of two characters or more counting as
    named by a word it is written in ("浦东" / "浦东新区"; one character is too little: "歌" / "歌手")."""
    if not mine and not theirs:
        return 1.0
    longer = frozenset(other for other in theirs if len(other) > 1)
    shared = _shared_count(frozenset(thing for thing in mine if len(thing) > 1), longer)
    return shared / (len(mine) + len(theirs) - shared) if len(mine) + len(theirs) > shared else 1.0


def decide(new: FactCues, old: FactCues, similarity: float, thresholds: Thresholds = Thresholds()) -> Decision:
    """What the new memory (``new``) is to an older one (``old``), their embeddings' cosine being ``similarity``.

    ``UPDATE``: the new memory replaces the old one (it becomes superseded, never merged). ``DUPLICATE``: the
    same facts in other words (merged, losslessly). ``MAYBE_*``: the cues half agree; a model or a reviewer
    decides. ``ADD``: a fact of its own.
    """
    if similarity < thresholds.update_min_similarity or not _same_subject(new, old):
        return Decision.ADD
    # One text may name more than the other (a merge keeps both); both naming a value the other lacks is a conflict.
    # Values and nouns together too: a name jieba splits into common words ("字节跳动" → 字节/跳动) is a noun on one
    # side against a name on the other ("腾讯").
    same_values = all(
        _covered(mine, theirs) or _covered(theirs, mine)
        for mine, theirs in (
            (new.values, old.values),
            (new.dates, old.dates),
            (new.nouns, old.nouns),
            (new.values | new.nouns, old.values | old.nouns),
        )
    )
    same_replies = _overlap(new.replies, old.replies) >= thresholds.restatement_min_overlap
    if similarity >= thresholds.restatement_min_similarity and same_values and same_replies:
        if (
            _overlap(new.things, old.things) >= thresholds.restatement_min_overlap
            and new.strong_change == old.strong_change
        ):
            return Decision.DUPLICATE
        if not new.change:
            return Decision.MAYBE_DUPLICATE
    shared_slots = new.slots & old.slots
    # A change told of the same relative, very near the older fact: the meaning ties them where no word does.
    kin_change = (
        bool(new.kin) and new.kin == old.kin and new.firm_change and similarity >= thresholds.kin_change_min_similarity
    )
    # What the two are about: a slot both speak of, or else a thing or a name both name ("吉他", "keto", "Kiwi"),
    # other than the name that made them about the same person.
    if (
        new.additive
        or new.past
        or not (
            shared_slots
            or new.things & old.things
            or _shared_names(new, old, but=new.lead_name if new.kin != old.kin else "")
            or kin_change
        )
    ):
        return Decision.ADD
    # A slot in common ties two texts about oneself's home, work, partner or number; any other slot needs a thing
    # in common too, or an old "not doing" of that slot that the new text changes ("我平时不怎么运动" / "我开始晨跑了";
    # "感觉总是不集中" does not say one does not like something).
    started = bool(shared_slots & old.negated_slots) and (new.strong_change or new.settled) and not new.negated
    if not (anchor(new, old) or started or kin_change) and (new.kin or old.kin or not shared_slots & SELF_SLOTS):
        return Decision.ADD
    if old.dates:
        return Decision.ADD  # a dated event stays what it was; two dated events are two events
    values_differ = (
        bool(new.values)
        and bool(old.values)
        and not _covered(new.values, old.values)
        and not _covered(old.values, new.values)
    )
    # A word that only says "now" (现在, 已经, these days) or that something began (开始) is weak evidence: without a
    # value that differs it needs two things in common ("favorite" and "food"), not one ("我现在感觉好多了" after
    # "我感觉很累" tells a mood), or an old "not doing" it ends.
    if (
        (new.firm_change or started or new.change and anchor(new, old) >= 2)
        and (values_differ or not old.change)
        or new.change
        and values_differ
        or values_differ
        and (new.settled and anchor(new, old) >= 2 or shared_slots & SINGLE_VALUED_SLOTS)
    ):
        return Decision.UPDATE
    if values_differ:
        return Decision.MAYBE_UPDATE
    return Decision.ADD


def best_supersession(
    new: FactCues, neighbours: list[tuple[str, FactCues, float]], thresholds: Thresholds = Thresholds()
) -> tuple[str, Decision] | None:
    """The one older memory the new memory updates (or may update), from ``neighbours`` (id, cues, cosine), most
    similar first; None when it updates none. At most one: a fact replaces one fact, and the most similar of the
    candidates (the one naming most of the same things, then the most similar) is the likeliest to be about the same
    thing."""
    unsure: tuple[str, Decision] | None = None
    # The candidate naming most of what the new text names comes first, then the most similar.
    # A candidate speaking of the same slot comes before one that only names a thing in common.
    ordered = sorted(
        neighbours, key=lambda item: (bool(new.slots & item[1].slots), anchor(new, item[1]), item[2]), reverse=True
    )
    for memory_id, cues, similarity in ordered:
        decision = decide(new, cues, similarity, thresholds)
        if decision is Decision.UPDATE:
            return memory_id, decision
        if decision is Decision.MAYBE_UPDATE and unsure is None:
            unsure = (memory_id, decision)
    return unsure


_PAST_QUESTION = re.compile(
    r"以前|之前|原来|过去|曾经|从前|早先|当初|当年|那时|(?:搬家|搬走|减肥|退休|结婚|离婚|分手|跳槽|辞职|换工作|毕业|出国|手术|生病|戒烟|换号|升职)前|上一个|上一任|旧的"
    r"|\bbefore\b|\bused? to\b|\bprevious(?:ly)?\b|\bformer(?:ly)?\b|\boriginally\b|\bback then\b",
    re.IGNORECASE,
)


NOW_WORDS = frozenset({"现在", "目前", "如今", "当前", "眼下", "now", "currently", "current", "nowadays", "today's"})
"""Query words that say *when* (now), not *what*: the currency step answers them (``fusion.order_by_currency``), so
the keyword route leaves them out (a memory is not a better answer for containing "now")."""


def without_now_words(terms: list[str]) -> list[str]:
    """``terms`` without ``NOW_WORDS``; all of them when nothing else is left."""
    return [term for term in terms if term not in NOW_WORDS] or terms


def says_now(terms: list[str]) -> bool:
    """The query's terms include a word that asks about now (``NOW_WORDS``)."""
    return any(term in NOW_WORDS for term in terms)


_WHEN_IT_HAPPENED_EN = re.compile(
    r"\b(?:when|what (?:day|date|month|year|time))\s+(?:did|was|were|had|has|have)\b|\bhow long ago\b", re.IGNORECASE
)
_WHEN_ZH = re.compile(r"什么时候|啥时候|哪天|哪一天|几号|哪年|哪一年|几月|多久以前|多久前")


def asks_when_it_happened(query: str) -> bool:
    """The question asks when something happened ("When did Caroline go to the support group?", "我哪天去的博物馆？"):
    it asks for an event's time, not for what is true now, so which of a superseded memory and
    its successor is current does not order the answers. A question about a schedule ("When is my piano lesson?",
    "我什么时候上瑜伽课？") asks what holds now and is not one of these. Chinese: a time word with a completed action
    after it (了, 过 or 的: "是哪天去的", "什么时候搬的家")."""
    if _WHEN_IT_HAPPENED_EN.search(query):
        return True
    found = _WHEN_ZH.search(query)
    if found is None:
        return False
    rest = query[found.end() :]
    return any(mark in rest for mark in "了过的")


def asks_about_the_past(query: str) -> bool:
    """The question asks how things were before (以前/原来/之前/搬家前/before/used to/previous …): a superseded
    memory is then the answer, not its successor."""
    return bool(_PAST_QUESTION.search(query))

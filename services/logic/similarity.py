"""Lexical similarity used to confirm a merge.

Why: multilingual-e5 puts different facts of the same shape very close ("用户住在北京" vs "用户住在上海" have cosine
0.98), so no cosine threshold separates a restatement from a new fact. A merge therefore also needs most character
bigrams in common; a real restatement or a copy with changed punctuation has them, a different fact does not.
"""

from __future__ import annotations

import re

_NOISE = re.compile(r"[\s\W_]+", re.UNICODE)


def char_bigrams(text: str) -> set[str]:
    compact = _NOISE.sub("", text.lower())
    if len(compact) < 2:
        return {compact} if compact else set()
    return {compact[i : i + 2] for i in range(len(compact) - 1)}


def bigram_overlap(a: str, b: str) -> float:
    """Jaccard overlap of character bigrams (punctuation and spacing ignored), in [0, 1]."""
    left, right = char_bigrams(a), char_bigrams(b)
    if not left and not right:
        return 1.0
    if not left or not right:
        return 0.0
    return len(left & right) / len(left | right)

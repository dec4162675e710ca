"""Inflection prefixes for the keyword route: one English query word also finds the other forms of that word.

The FTS5 index holds every English word exactly as written (``segmentation``), so the question "What hobbies does
Evan have?" never matched the memory that says "my favourite hobby", nor "recipes" a memory that says "this
recipe", nor "collect" one that says "my collection". Multi-hop questions (what things, which places, what kinds
of …) ask in the plural or in another word form than the memories that answer them, so they lose most.

Rather than re-index with stemmed words (which would change what every stored row holds), the query asks FTS5 for
a *prefix*: a word that could be inflected is cut back to its stem and searched as ``"stem"*``, which matches every
indexed word starting with it (``hobb*`` → hobby, hobbies; ``recip*`` → recipe, recipes; ``collect*`` → collect,
collection, collector). The stem is a crude suffix strip, not a linguistic stemmer: it only has to be a prefix of
the word's forms, and stems shorter than ``MIN_STEM`` letters are never used (``art*`` would match article, artist,
…), so short words stay exact. Only words of plain Latin letters are touched: numbers, names with digits and every
Han term keep their exact match, so Chinese queries search exactly as before.

A prefix costs the planner the summed frequency of the words it covers, so it stays within the same posting
budget as an exact term (``KeywordPlanner``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# A prefix term is the stem followed by this mark (FTS5's prefix operator); no segmented token contains it.
PREFIX_MARK = "*"
# Shortest stem searched as a prefix: four letters keep "hobb*", "paint*" and "visit*" specific enough.
MIN_STEM = 4
# Suffixes cut, longest first; at most one is removed, then a trailing e/i/y (hobbi → hobb, recipe → recip).
_SUFFIXES = ("ations", "ation", "ings", "ing", "ies", "ied", "ers", "er", "ed", "es", "ly", "s", "e", "y", "i")
_LATIN_WORD = re.compile(r"[a-z]+")


def inflection_stem(word: str) -> str | None:
    """The prefix that covers ``word``'s inflected forms, or ``None`` when the word is searched exactly.

    ``None`` for anything but lower-case Latin letters, and for words too short to keep a stem of ``MIN_STEM``
    letters after a suffix is cut (``evan``, ``dog``). ``hobbies`` → ``hobb``, ``visited`` → ``visit``,
    ``collect`` → ``collect``.
    """
    if not _LATIN_WORD.fullmatch(word) or len(word) <= MIN_STEM:
        return None
    stem = word
    for suffix in _SUFFIXES:
        if stem.endswith(suffix) and len(stem) - len(suffix) >= MIN_STEM:
            stem = stem[: -len(suffix)]
            break
    if stem[-1] in "eiy" and len(stem) > MIN_STEM:
        stem = stem[:-1]
    return stem


def is_prefix_term(term: str) -> bool:
    """True for a term made by ``with_inflections`` (a stem searched as an FTS5 prefix)."""
    return len(term) > 1 and term.endswith(PREFIX_MARK)


def with_inflections(terms: Iterable[str]) -> list[str]:
    """The keyword route's terms with every inflectable English word replaced by its ``stem*`` prefix term.

    Order is kept and duplicates collapse (``hobby`` and ``hobbies`` both become ``hobb*``). The result goes to
    ``KeywordPlanner.plan``, which quotes the stem and appends the FTS5 prefix operator.
    """
    result: list[str] = []
    for term in terms:
        stem = inflection_stem(term)
        result.append(term if stem is None else stem + PREFIX_MARK)
    return list(dict.fromkeys(result))


def prefix_upper_bound(stem: str) -> str:
    """The smallest string greater than every string starting with ``stem`` (for ``term >= stem AND term < bound``
    range reads of the FTS5 vocabulary)."""
    return stem[:-1] + chr(ord(stem[-1]) + 1)

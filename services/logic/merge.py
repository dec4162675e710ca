"""Non-destructive merge of a near-duplicate write into the memory it resembles.

The reference replaced the old memory with the new text on a "merge" (bug B1), so anything only the old version
said was lost. Here a merge keeps everything either version said: if one text already contains the other the longer
one wins; otherwise the old text is kept as is and the sentences of the new text that it does not already contain
are appended on a new line, in their original order.
"""

from __future__ import annotations

import re

_CJK_TERMINALS = frozenset("。！？；…")
_ASCII_TERMINALS = frozenset(".!?;")
_CLOSERS = frozenset("”’」』）)]\"'")
_SPACE = re.compile(r"\s+")
_TRAILING_PUNCT = re.compile(r"[\s。！？；…，、,.!?;:：”’」』）)\]\"']+$")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` with their terminal punctuation, blank pieces dropped.

    Boundaries: line breaks, Chinese terminals (。！？；…) anywhere, and ASCII ``. ! ? ;`` only when followed by
    whitespace or the end (so ``3.5`` and ``e-mail.com`` are not split). Closing quotes/brackets stay with the
    sentence they close.
    """
    sentences: list[str] = []
    for line in text.splitlines():
        current: list[str] = []
        length = len(line)
        index = 0
        while index < length:
            char = line[index]
            current.append(char)
            index += 1
            is_terminal = char in _CJK_TERMINALS or (
                char in _ASCII_TERMINALS and (index >= length or line[index].isspace() or line[index] in _CLOSERS)
            )
            if not is_terminal:
                continue
            while index < length and (line[index] in _CJK_TERMINALS or line[index] in _ASCII_TERMINALS):
                current.append(line[index])
                index += 1
            while index < length and line[index] in _CLOSERS:
                current.append(line[index])
                index += 1
            sentences.append("".join(current))
            current = []
        sentences.append("".join(current))
    return [sentence.strip() for sentence in sentences if sentence.strip()]


def _comparison_key(text: str) -> str:
    """Case- and spacing-insensitive form used for "already said" checks; trailing punctuation ignored."""
    return _TRAILING_PUNCT.sub("", _SPACE.sub(" ", text).strip().lower())


def _join_sentences(sentences: list[str]) -> str:
    """Concatenate sentences, with a space only between Latin-script ones (Chinese needs none)."""
    joined = ""
    for sentence in sentences:
        if joined and (joined[-1].isascii() and sentence[0].isascii()):
            joined += " "
        joined += sentence
    return joined


def merge_texts(old: str | None, new: str | None) -> str:
    """Merge ``new`` into ``old`` without losing anything either said.

    Returns ``old`` when it already contains ``new`` (ignoring case and spacing), ``new`` when it contains ``old``,
    otherwise ``old`` followed by a newline and the sentences of ``new`` that ``old`` lacks (line by line). Blank inputs
    yield the other text (stripped).
    """
    old_text = (old or "").strip()
    new_text = (new or "").strip()
    if not new_text:
        return old_text
    if not old_text:
        return new_text
    old_key = _SPACE.sub(" ", old_text).lower()
    new_key = _SPACE.sub(" ", new_text).lower()
    if new_key in old_key:
        return old_text
    if old_key in new_key:
        return new_text
    # Line structure of the new text is kept: each line contributes its unseen sentences as one line.
    added_lines: list[str] = []
    seen: set[str] = set()
    for line in new_text.splitlines():
        missing: list[str] = []
        for sentence in split_sentences(line):
            key = _comparison_key(sentence)
            if not key or key in old_key or key in seen:
                continue
            seen.add(key)
            missing.append(sentence)
        if missing:
            added_lines.append(_join_sentences(missing))
    if not added_lines:
        return old_text
    return old_text + "\n" + "\n".join(added_lines)

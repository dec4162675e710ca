"""The deterministic grow splitter: a long text into 2–6 event pieces on paragraph or sentence boundaries.

Used when no host model splits the text. Pieces are exact slices of the input (nothing is rewritten or dropped
except the blank lines between pieces) and each knows its 1-based line range, which links it to its place in the
immutable source layer.

Units are the paragraphs (runs of non-blank lines); a text with a single paragraph is cut into sentences instead.
The number of pieces is ``clamp(total_chars // 30, 2, 6)`` but never more than there are units, and consecutive
units are grouped so the pieces are about equally long. A text that is one single sentence stays one piece: a
sentence is never cut.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..logic.merge import split_sentences

MIN_PIECES = 2
MAX_PIECES = 6
CHARS_PER_PIECE = 30


@dataclass(frozen=True)
class GrowPiece:
    content: str
    first_line: int
    last_line: int


@dataclass(frozen=True)
class _Unit:
    start: int  # offset in the text
    end: int

    def size(self) -> int:
        return self.end - self.start


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for index, char in enumerate(text):
        if char == "\n":
            starts.append(index + 1)
    return starts


def _paragraphs(text: str, starts: list[int]) -> list[_Unit]:
    units: list[_Unit] = []
    current: _Unit | None = None
    lines = text.split("\n")
    for number, line in enumerate(lines):
        begin = starts[number]
        if line.strip():
            stop = begin + len(line.rstrip())
            lead = begin + len(line) - len(line.lstrip())
            current = _Unit(current.start, stop) if current else _Unit(lead, stop)
        elif current is not None:
            units.append(current)
            current = None
    if current is not None:
        units.append(current)
    return units


def _sentences(text: str, paragraph: _Unit) -> list[_Unit]:
    units, cursor = [], paragraph.start
    for sentence in split_sentences(text[paragraph.start : paragraph.end]):
        found = text.find(sentence, cursor, paragraph.end)
        if found < 0:  # cannot happen for stripped slices of the paragraph; keep the paragraph whole if it does
            return [paragraph]
        units.append(_Unit(found, found + len(sentence)))
        cursor = found + len(sentence)
    return units or [paragraph]


def _balanced_cuts(sizes: list[int], groups: int) -> list[int]:
    """Indexes where each group after the first starts, so group sizes are as equal as possible."""
    total = sum(sizes)
    cumulative = [0]
    for size in sizes:
        cumulative.append(cumulative[-1] + size)
    cuts: list[int] = []
    previous = 0
    for group in range(1, groups):
        target = total * group / groups
        lowest, highest = previous + 1, len(sizes) - (groups - group)
        best = min(range(lowest, highest + 1), key=lambda j: (abs(cumulative[j] - target), j))
        cuts.append(best)
        previous = best
    return cuts


def split_for_grow(text: str) -> list[GrowPiece]:
    """Pieces of ``text`` (see the module docstring); an empty text gives no piece."""
    starts = _line_starts(text)
    units = _paragraphs(text, starts)
    if not units:
        return []
    if len(units) == 1:
        units = _sentences(text, units[0])
    if len(units) == 1:
        groups = 1
    else:
        groups = max(MIN_PIECES, min(MAX_PIECES, len(units), sum(u.size() for u in units) // CHARS_PER_PIECE))
    bounds = [0, *_balanced_cuts([u.size() for u in units], groups), len(units)]
    pieces = []
    for first, stop in zip(bounds, bounds[1:]):
        start, end = units[first].start, units[stop - 1].end
        pieces.append(GrowPiece(text[start:end], _line_of(starts, start), _line_of(starts, end - 1)))
    return pieces


def _line_of(starts: list[int], offset: int) -> int:
    """1-based line number of a text offset."""
    low, high = 0, len(starts) - 1
    while low < high:
        middle = (low + high + 1) // 2
        if starts[middle] <= offset:
            low = middle
        else:
            high = middle - 1
    return low + 1

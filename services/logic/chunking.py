"""Structure-aware chunking of knowledge documents (pure: text in, chunks out, no I/O).

Why not fixed windows: a chunk is what retrieval returns and what the model reads, so it should be a piece of the
document a person would also cut out — one section, whole paragraphs, whole sentences. The splitter therefore works
top-down and only descends a level when a piece is still too long:

1. Markdown sections (ATX ``#`` and setext headings; lines inside fenced code blocks are never headings). Every
   chunk keeps the path of headings above it (``安装 > 依赖``) as its title, and chunks never span two sections.
2. Blocks inside a section: paragraphs separated by blank lines; a fenced code block is one block even when it
   contains blank lines.
3. Lines, then sentences (Chinese and English end punctuation), then clauses (commas, colons).
4. Last resort: a window cut at the last token boundary that fits, where a token is one CJK character or a run of
   non-space Latin characters; a run longer than the limit itself is cut hard, so no chunk ever exceeds the limit.

A block that fits the limit stays whole; one that does not is cut into pieces of at most ``max_chars - overlap``,
so that the overlap still fits in front of them. The pieces are then packed greedily, in order, up to
``max_chars``. Neighbouring chunks of one section overlap by up to ``overlap_chars`` of *real* text: the next chunk
starts inside the previous one (preferably at a sentence start, otherwise at a token boundary), so every chunk is
an exact substring of the normalised document and the overlap is literally shared text, not a duplicated separator.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ValidationError

HEADING_SEPARATOR = " > "
HEADING_MAX_CHARS = 80

_ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$")
_FENCE_OPEN = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-{2,})[ \t]*$")
# Lines that cannot be the text of a setext heading: list items, quotes, table rows, other markup.
_NOT_SETEXT_TEXT = re.compile(r"^\s*(?:[-*+]\s|\d+[.)]\s|>|\||#|`{3}|~{3})")

# Sentence ends: CJK end marks always; ASCII ``.`` only before whitespace (keeps 3.14 and a.b intact); ASCII
# ``!?;`` unless a word character follows (keeps URL queries intact); closing quotes/brackets stay with the sentence.
_CLOSERS = "”’\"'」』）)】]》"
_SENTENCE_END = re.compile(
    rf"(?:[。！？；]+|…+|\.+(?=[{re.escape(_CLOSERS)}]*(?:\s|$))|[!?;]+(?![A-Za-z0-9_/=&%]))[{re.escape(_CLOSERS)}]*"
)
_CLAUSE_END = re.compile(r"[，、：,:]+")
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_MANY_NEWLINES = re.compile(r"\n{3,}")
_TRAILING_SPACE = re.compile(r"[ \t]+\n")
# Characters at or above U+2E80 (CJK, kana, hangul, full-width punctuation) are tokens on their own.
_CJK_START = 0x2E80


@dataclass(frozen=True)
class TextChunk:
    """One chunk: its text (an exact substring of the normalised document) and where it came from.

    ``start``/``end`` are offsets into ``normalise_text(document)``; ``heading_path`` is the list of headings above
    the chunk, outermost first (empty for text before the first heading or for plain-text documents).
    """

    text: str
    heading_path: tuple[str, ...]
    start: int
    end: int

    @property
    def heading_title(self) -> str:
        """The heading path as one line, ``"安装 > 依赖"``; ``""`` when the chunk has no heading."""
        return HEADING_SEPARATOR.join(self.heading_path)


@dataclass(frozen=True)
class _Section:
    heading_path: tuple[str, ...]
    blocks: tuple[tuple[int, int], ...]


def normalise_text(text: str | None) -> str:
    """Canonical document text: BOM dropped, CRLF/CR → LF, trailing spaces cut, ≥3 newlines → 2, stripped.

    The content hash of a document is taken over this text, so the same file saved with Windows or Unix line ends
    is recognised as unchanged.
    """
    value = (text or "").replace("\ufeff", "").replace("\r\n", "\n").replace("\r", "\n")
    value = _TRAILING_SPACE.sub("\n", value)
    value = _MANY_NEWLINES.sub("\n\n", value)
    return value.strip()


def chunk_text(text: str, *, max_chars: int, overlap_chars: int, markdown: bool = True) -> list[TextChunk]:
    """Split ``text`` into chunks of at most ``max_chars`` characters (see the module docstring).

    ``markdown=False`` treats the text as plain prose (no headings, no code fences). ``overlap_chars`` is capped
    at half of ``max_chars`` so every chunk still brings mostly new text. Returns ``[]`` for blank text.
    Raises ``ValidationError`` for ``max_chars < 20`` or a negative ``overlap_chars``.
    """
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 20:
        raise ValidationError(f"max_chunk_chars 必须是不小于 20 的整数，实际为 {max_chars!r}")
    if isinstance(overlap_chars, bool) or not isinstance(overlap_chars, int) or overlap_chars < 0:
        raise ValidationError(f"overlap_chars 必须是不小于 0 的整数，实际为 {overlap_chars!r}")
    doc = normalise_text(text)
    if not doc:
        return []
    overlap = min(overlap_chars, max_chars // 2)
    sections = _markdown_sections(doc) if markdown else [_Section((), tuple(_paragraph_blocks(doc, 0, len(doc))))]
    chunks: list[TextChunk] = []
    for section in sections:
        pieces: list[tuple[int, int]] = []
        for start, end in section.blocks:
            if end - start <= max_chars:
                pieces.append((start, end))
            else:
                # A block that has to be cut anyway is cut into pieces that leave room for the overlap.
                pieces.extend(_split_span(doc, start, end, max_chars - overlap, 0))
        for start, end in _pack(doc, pieces, max_chars, overlap):
            chunks.append(TextChunk(doc[start:end], section.heading_path, start, end))
    return chunks


# --------------------------------------------------------------------------------------------- sections
def _markdown_sections(doc: str) -> list[_Section]:
    """Scan lines once: headings open sections, fences and blank lines delimit blocks."""
    sections: list[_Section] = []
    stack: list[tuple[int, str]] = []  # (level, heading text)
    blocks: list[tuple[int, int]] = []
    block_start: int | None = None
    block_end = 0
    fence: tuple[str, int] | None = None  # (fence char, fence length) while inside a fenced block
    previous_blank = True
    lines = doc.split("\n")
    offset = 0
    offsets = []
    for line in lines:
        offsets.append(offset)
        offset += len(line) + 1

    def close_block() -> None:
        nonlocal block_start
        if block_start is not None:
            # A block's first line may be indented (`` 汉``): chunks are stripped spans of the document.
            start, end = _trim(doc, block_start, block_end)
            if start < end:
                blocks.append((start, end))
            block_start = None

    def close_section() -> None:
        nonlocal blocks
        close_block()
        if blocks:
            sections.append(_Section(tuple(text for _, text in stack), tuple(blocks)))
        blocks = []

    def open_heading(level: int, raw: str) -> None:
        close_section()
        while stack and stack[-1][0] >= level:
            stack.pop()
        heading = " ".join(raw.split())[:HEADING_MAX_CHARS] or f"章节{level}"
        stack.append((level, heading))

    index = 0
    while index < len(lines):
        line = lines[index]
        line_start = offsets[index]
        line_end = line_start + len(line)
        if fence is not None:
            block_end = line_end
            stripped = line.strip()
            indent = len(line) - len(line.lstrip(" "))
            if stripped and set(stripped) == {fence[0]} and len(stripped) >= fence[1] and indent <= 3:
                fence = None
                close_block()
            index += 1
            previous_blank = False
            continue
        if not line.strip():
            close_block()
            previous_blank = True
            index += 1
            continue
        opened = _FENCE_OPEN.match(line)
        if opened and not (opened.group(1)[0] == "`" and "`" in opened.group(2)):
            close_block()
            fence = (opened.group(1)[0], len(opened.group(1)))
            block_start, block_end = line_start, line_end
            previous_blank = False
            index += 1
            continue
        atx = _ATX_HEADING.match(line)
        if atx and atx.group(2).strip().strip("#").strip():
            open_heading(len(atx.group(1)), atx.group(2).strip())
            previous_blank = True
            index += 1
            continue
        if (
            previous_blank
            and index + 1 < len(lines)
            and _SETEXT_UNDERLINE.match(lines[index + 1])
            and not _NOT_SETEXT_TEXT.match(line)
        ):
            open_heading(1 if lines[index + 1].strip()[0] == "=" else 2, line.strip())
            previous_blank = True
            index += 2
            continue
        if block_start is None:
            block_start = line_start
        block_end = line_end
        previous_blank = False
        index += 1
    close_section()
    return sections


def _paragraph_blocks(doc: str, start: int, end: int) -> list[tuple[int, int]]:
    """Paragraph spans of ``doc[start:end]`` (split at blank lines), whitespace-trimmed, empties dropped."""
    spans = []
    cursor = start
    for match in _BLANK_LINE.finditer(doc, start, end):
        spans.append((cursor, match.start()))
        cursor = match.end()
    spans.append((cursor, end))
    return [span for span in (_trim(doc, s, e) for s, e in spans) if span[0] < span[1]]


# ------------------------------------------------------------------------------------------- splitting
def _trim(doc: str, start: int, end: int) -> tuple[int, int]:
    while start < end and doc[start].isspace():
        start += 1
    while end > start and doc[end - 1].isspace():
        end -= 1
    return start, end


def _line_cuts(doc: str, start: int, end: int) -> list[int]:
    cuts = []
    position = doc.find("\n", start, end)
    while position != -1:
        cuts.append(position + 1)
        position = doc.find("\n", position + 1, end)
    return cuts


def _regex_cuts(pattern: re.Pattern[str]):
    def cuts(doc: str, start: int, end: int) -> list[int]:
        return [match.end() for match in pattern.finditer(doc, start, end) if match.end() < end]

    return cuts


_SPLITTERS = (_line_cuts, _regex_cuts(_SENTENCE_END), _regex_cuts(_CLAUSE_END))


def _split_span(doc: str, start: int, end: int, max_chars: int, level: int) -> list[tuple[int, int]]:
    """Pieces of at most ``max_chars`` covering ``doc[start:end]``, using the coarsest boundaries that suffice."""
    start, end = _trim(doc, start, end)
    if start >= end:
        return []
    if end - start <= max_chars:
        return [(start, end)]
    if level >= len(_SPLITTERS):
        return _window_cut(doc, start, end, max_chars)
    cuts = _SPLITTERS[level](doc, start, end)
    if not cuts:
        return _split_span(doc, start, end, max_chars, level + 1)
    pieces: list[tuple[int, int]] = []
    bounds = [start, *cuts, end]
    for left, right in zip(bounds, bounds[1:]):
        pieces.extend(_split_span(doc, left, right, max_chars, level + 1))
    return pieces


def _is_latin(char: str) -> bool:
    return not char.isspace() and ord(char) < _CJK_START


def _is_token_boundary(doc: str, position: int) -> bool:
    """True unless ``position`` falls inside a run of non-space Latin characters (a word, number or URL)."""
    return not (_is_latin(doc[position - 1]) and _is_latin(doc[position]))


def _window_cut(doc: str, start: int, end: int, max_chars: int) -> list[tuple[int, int]]:
    """Cut at the last token boundary that fits; a single token longer than ``max_chars`` is cut hard."""
    pieces = []
    cursor = start
    while end - cursor > max_chars:
        cut = cursor + max_chars
        while cut > cursor and not _is_token_boundary(doc, cut):
            cut -= 1
        if cut == cursor:
            cut = cursor + max_chars
        piece = _trim(doc, cursor, cut)
        if piece[0] < piece[1]:
            pieces.append(piece)
        cursor = cut
        while cursor < end and doc[cursor].isspace():
            cursor += 1
    piece = _trim(doc, cursor, end)
    if piece[0] < piece[1]:
        pieces.append(piece)
    return pieces


# --------------------------------------------------------------------------------------------- packing
def _pack(doc: str, pieces: list[tuple[int, int]], max_chars: int, overlap: int) -> list[tuple[int, int]]:
    """Greedy packing of ordered pieces into spans of at most ``max_chars``, with real overlap between spans."""
    if not pieces:
        return []
    spans = []
    chunk_start, chunk_end = pieces[0]
    for piece_start, piece_end in pieces[1:]:
        if piece_end - chunk_start <= max_chars:
            chunk_end = piece_end
            continue
        spans.append((chunk_start, chunk_end))
        overlap_start = _overlap_start(doc, chunk_start, chunk_end, piece_end, max_chars, overlap)
        chunk_start = overlap_start if overlap_start < chunk_end else piece_start
        chunk_end = piece_end
    spans.append((chunk_start, chunk_end))
    return spans


def _overlap_start(doc: str, chunk_start: int, chunk_end: int, next_end: int, max_chars: int, overlap: int) -> int:
    """Where the next chunk starts inside the previous one; ``chunk_end`` means no overlap.

    The overlap is at most ``overlap`` characters and small enough that the next chunk still fits. It starts at a
    sentence start when that keeps at least half of the allowed overlap, otherwise at the earliest token boundary,
    so it never begins in the middle of an English word.
    """
    if overlap <= 0:
        return chunk_end
    lowest = max(chunk_start + 1, chunk_end - overlap, next_end - max_chars)
    if lowest >= chunk_end:
        return chunk_end
    allowed = chunk_end - lowest
    for match in _SENTENCE_END.finditer(doc, max(chunk_start, lowest - 8), chunk_end):
        candidate = _skip_space(doc, match.end(), chunk_end)
        if candidate >= lowest:
            if chunk_end - candidate >= allowed / 2:
                return candidate
            break
    newline = doc.find("\n", lowest - 1, chunk_end)
    if newline != -1 and chunk_end - (newline + 1) >= allowed / 2:
        return _skip_space(doc, newline + 1, chunk_end)
    position = lowest
    while position < chunk_end and not _is_token_boundary(doc, position):
        position += 1
    return _skip_space(doc, position, chunk_end)


def _skip_space(doc: str, position: int, limit: int) -> int:
    while position < limit and doc[position].isspace():
        position += 1
    return position

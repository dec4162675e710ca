"""Text helpers shared by the write path, the output formatter and the keyword index.

These reproduce the original plugin's behaviour that callers and the admin UI observe: how a title is guessed
from the first line, how title and body are framed for embedding (and which titles the keyword index weighs), and
how long a preview snippet is.
"""

from __future__ import annotations

from .segmentation import query_terms
from .time_anchor import without_time_expressions

UNTITLED = "未命名记忆"
# How many memories of one store may carry one title before it stops framing their vectors (``compose_embedding_text``).
# Why: a title on many memories of a store labels a series (the speaker's name on every turn of a chat, a log's
# name), not the topic of one memory; framing every vector with it pulls them toward each other and away from the
# questions about any one of them. A topic a user titles a handful of memories with ("李四") stays below the line.
# The keyword route needs no such line: its IDF already discounts a word that many memories hold.
SHARED_TITLE_MIN = 10
TITLE_MAX_CHARS = 80
SNIPPET_MAX_CHARS = 280
ELLIPSIS = "..."


def extract_title(text: str | None) -> str:
    """Guess a title from free text.

    Returns the first line that still has content after removing leading ``#`` marks and spaces (so a Markdown
    heading becomes its plain text), cut to 80 characters; ``"未命名记忆"`` when no line has content.
    A line made only of ``#`` marks is skipped rather than producing an empty title.
    """
    for raw_line in (text or "").splitlines():
        line = raw_line.strip().lstrip("#").strip()
        if line:
            return line[:TITLE_MAX_CHARS].rstrip()
    return UNTITLED


def keyword_title(title: str | None, content: str | None) -> str:
    """The title as the keyword index weighs it: ``""`` when it adds nothing to the memory
    (``title_adds_information``), e.g. when it is only the guess from the content's first line.

    Why: the index weighs the title column three times the content. A title the caller chose names the memory's
    topic; a guessed one (``extract_title``) is merely the first line of the content again, so weighting it tripled
    the first line's words against the rest of the memory (on LoCoMo, where every turn is one line, it tripled the
    whole turn and made long turns rank above the short turns that hold the answer). A title made of the body's own
    words (the speaker's name, the turn's first clause) does the same, and a log's dated label ("<date> 对话")
    holds the date, which the time route reads from the memory's time, and the kind of log every entry shares. The
    content column still holds the body's words once; the vector route leaves such titles out too
    (``compose_embedding_text``), so both routes follow one rule.
    """
    clean = (title or "").strip()
    if not clean or clean == extract_title(content) or not title_adds_information(clean, content):
        return ""
    return clean


def title_adds_information(title: str | None, body: str | None) -> bool:
    """True when a memory's title tells something its body and its time do not: the title then frames the embedded
    text (``compose_embedding_text``); otherwise the memory is embedded as if no title had been given.

    Why: the embedding of ``"# <title>\n<body>"`` leans toward the title, the more so the shorter the body. A title
    that carries a topic the body lacks ("李四" over "高中同桌，住在杭州") must be there, or nothing in the vector
    says whom the memory is about. But chat clients title turns mechanically: the speaker's name or the turn's first
    clause (words the body holds already), or the day ("<date> 对话", the same for every turn of a day). Such a
    title adds no meaning, pulls the turns that share it toward each other and away from the questions about them.

    The rule, per title: leave out its dates and relative time words (``time_anchor.without_time_expressions``: the
    memory's time fields say when, and the time route reads them in the memory's own zone) and its words the body
    holds; what is left must hold a word, and when the title named a date, at least two: a date with a single word
    ("5月2日 日记", "May 2 notes") is how a log labels its entries, that word naming the kind of log every entry
    shares. Words are the keyword index's tokens (jieba's search mode), a word inside a longer one counting once.
    """
    clean_title = (title or "").strip()
    clean_body = (body or "").strip().lower()
    if not clean_title:
        return False
    undated = without_time_expressions(clean_title)
    words = [word for word in query_terms(undated) if word not in clean_body]
    distinct = [word for word in words if not any(word != other and word in other for other in words)]
    return len(distinct) >= (2 if undated != clean_title else 1)


def compose_embedding_text(title: str | None, body: str | None, *, title_shared: bool = False) -> str:
    """Frame a memory the way it is embedded: ``"# <title>\n<body>"``, the title being the guess from the body's
    first line (``extract_title``) when the given one adds nothing (``title_adds_information``) or is shared by many
    memories of its store (``title_shared``, see ``SHARED_TITLE_MIN``).

    The title line gives the embedding the topic even when the body is a bare list or a fragment. Every path that
    embeds a memory or a chunk (writes, the vector outbox and reindex, knowledge, companion similarities) frames it
    here, so a stored vector is always rebuilt from the same text. When only one part is non-empty (after stripping)
    that part alone is returned; both empty gives ``""``.
    """
    clean_title = (title or "").strip()
    clean_body = (body or "").strip()
    if clean_title and clean_body:
        if title_shared or not title_frames_vector(clean_title, clean_body):
            clean_title = extract_title(clean_body)
        return f"# {clean_title}\n{clean_body}"
    return clean_title or clean_body


def title_frames_vector(title: str | None, body: str | None) -> bool:
    """True when ``title`` would head the embedded text unless it is shared by many memories of its store: it is not
    the guess from the body's first line and it adds information (``title_adds_information``)."""
    clean_title = (title or "").strip()
    clean_body = (body or "").strip()
    if not clean_title or not clean_body or clean_title == extract_title(clean_body):
        return False
    return title_adds_information(clean_title, clean_body)


def make_snippet(body: str | None, limit: int = SNIPPET_MAX_CHARS) -> tuple[str, bool]:
    """Preview of a memory body for list views.

    Returns ``(snippet, is_truncated)``: the first ``limit`` characters, with ``"..."`` appended when the body was
    longer, so the UI can offer "read full content" only when something was cut. ``limit`` below 0 is treated as 0.
    """
    text = body or ""
    limit = max(0, int(limit))
    if len(text) <= limit:
        return text, False
    return text[:limit] + ELLIPSIS, True


def normalise_folder_id(folder: str | None, default: str) -> str:
    """Canonical folder id: stripped and lower-cased so ``" Work"`` and ``"work"`` are one folder.

    Returns ``default`` (itself normalised) when ``folder`` is ``None`` or blank.
    """
    value = (folder or "").strip().lower()
    if value:
        return value
    return (default or "").strip().lower() or default

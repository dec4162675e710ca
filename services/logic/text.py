"""Text helpers shared by the write path, the output formatter and the keyword index.

These reproduce the original plugin's behaviour that callers and the admin UI observe: how a title is guessed
from the first line, how title and body are framed for embedding (and which titles the keyword index weighs), and
how long a preview snippet is.
"""

from __future__ import annotations

UNTITLED = "未命名记忆"
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
    """The title as the keyword index weighs it: ``""`` when it is only the guess from the content's first line.

    Why: the index weighs the title column three times the content. A title the caller chose names the memory's
    topic; a guessed one (``extract_title``) is merely the first line of the content again, so weighting it tripled
    the first line's words against the rest of the memory (on LoCoMo, where every turn is one line, it tripled the
    whole turn and made long turns rank above the short turns that hold the answer). The content column still
    holds those words once. A caller-given title equal to the content's first line is treated the same way.
    """
    clean = (title or "").strip()
    if not clean or clean == extract_title(content):
        return ""
    return clean


def compose_embedding_text(title: str | None, body: str | None) -> str:
    """Frame a memory the way it is stored and embedded: ``"# <title>\\n<body>"``.

    The title line gives the embedding the topic even when the body is a bare list or a fragment. When only one
    part is non-empty (after stripping) that part alone is returned; both empty gives ``""``.
    """
    clean_title = (title or "").strip()
    clean_body = (body or "").strip()
    if clean_title and clean_body:
        return f"# {clean_title}\n{clean_body}"
    return clean_title or clean_body


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

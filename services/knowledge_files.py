"""Readers for files a user drops into a knowledge folder, using only the standard library.

Supported: ``.md .markdown .txt .log .csv .json .html .htm .docx``. Text files are decoded as UTF-8 (with or
without BOM), then UTF-16 when a BOM says so, then GB18030 (what Chinese Windows editors write as "ANSI"); a file
that is none of these, or that contains NUL bytes, is rejected rather than ingested as mojibake. HTML and DOCX keep
their headings as Markdown ``#`` lines so the chunker can use the document structure.

PDF is deliberately not supported: the standard library cannot read it and no PDF library is a dependency of this
plugin. A ``.pdf`` file gets a clear error that says which formats are accepted.

Every failure is a ``ValidationError`` raised before anything is written.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from xml.etree import ElementTree

from .errors import ValidationError
from .logic.chunking import normalise_text

MARKDOWN_SUFFIXES = frozenset({".md", ".markdown"})
PLAIN_SUFFIXES = frozenset({".txt", ".log", ".csv"})
SUPPORTED_SUFFIXES = frozenset({*MARKDOWN_SUFFIXES, *PLAIN_SUFFIXES, ".json", ".html", ".htm", ".docx"})
SUPPORTED_LABEL = "md/markdown/txt/log/csv/json/html/htm/docx"
MAX_FILE_BYTES = 20 * 1024 * 1024


@dataclass(frozen=True)
class LoadedFile:
    """The text of a file, normalised, and whether its structure is Markdown (headings usable for chunking)."""

    path: Path
    text: str
    markdown: bool


def is_supported(path: Path) -> bool:
    """True when the file name ends in one of ``SUPPORTED_SUFFIXES`` (case-insensitive)."""
    return path.suffix.lower() in SUPPORTED_SUFFIXES


def read_knowledge_file(path: Path) -> LoadedFile:
    """Read ``path`` into normalised text.

    Raises ``ValidationError`` (Chinese message naming ``file_path``) when the file is missing, not a regular
    file, larger than 20 MB, of an unsupported type, undecodable, corrupt, or empty after extraction.
    """
    path = Path(path)
    if not path.exists():
        raise ValidationError(f"file_path 指向的文件不存在：{path}")
    if not path.is_file():
        raise ValidationError(f"file_path 必须指向一个文件，而不是目录或其他对象：{path}")
    check_file_type(path.name)
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ValidationError(f"file_path 文件过大（{size} 字节），单个文件最多 {MAX_FILE_BYTES} 字节：{path}")
        raw = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"file_path 文件无法读取：{path}（{exc.strerror or exc}）") from exc
    return load_knowledge_bytes(raw, path)


def check_file_type(name: str, field: str = "file_path") -> None:
    """``ValidationError`` naming ``field`` and the accepted types unless ``name`` ends in a supported suffix."""
    suffix = Path(name).suffix.lower()
    if suffix not in SUPPORTED_SUFFIXES:
        raise ValidationError(f"{field} 的文件类型 {suffix or '（无扩展名）'} 不受支持，仅支持 {SUPPORTED_LABEL} 文件")


def load_knowledge_bytes(raw: bytes, path: Path, field: str = "file_path") -> LoadedFile:
    """The normalised text of a file's bytes, read by its suffix: the one decoding path of the CLI, the startup
    ingest and the dashboard's upload (``path`` may be just the uploaded file's name; ``field`` names the input in
    error messages)."""
    check_file_type(path.name, field)
    suffix = path.suffix.lower()
    if suffix == ".docx":
        text, markdown = docx_to_text(raw, path, field), True
    elif suffix in (".html", ".htm"):
        text, markdown = html_to_text(decode_text(raw, path, field)), True
    elif suffix == ".json":
        text, markdown = json_to_text(decode_text(raw, path, field)), False
    else:
        text, markdown = decode_text(raw, path, field), suffix in MARKDOWN_SUFFIXES
    text = normalise_text(text)
    if not text:
        raise ValidationError(f"{field} 文件没有可入库的文本内容：{path}")
    return LoadedFile(path, text, markdown)


def decode_text(raw: bytes, path: Path | str = "", field: str = "file_path") -> str:
    """Decode bytes of a text file (UTF-8 / UTF-16 with BOM / GB18030); ``ValidationError`` when none fits."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return raw.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise ValidationError(f"{field} 文件编码无法识别（UTF-16 内容损坏）：{path}") from exc
    if b"\x00" in raw:
        raise ValidationError(f"{field} 看起来是二进制文件而不是文本：{path}")
    for encoding in ("utf-8-sig", "gb18030"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise ValidationError(f"{field} 文件编码无法识别，请另存为 UTF-8：{path}")


def json_to_text(text: str) -> str:
    """Pretty-print JSON so the chunker sees one value per line and ``\\u`` escapes (such as \\u4e2d) become
    readable text.

    Text that is not valid JSON is kept as it is (a ``.json`` log is still useful text).
    """
    try:
        value = json.loads(text)
    except ValueError:
        return text
    return json.dumps(value, ensure_ascii=False, indent=2)


# ---------------------------------------------------------------------------------------------- HTML
_BLOCK_TAGS = frozenset(
    "p div section article main header footer aside nav blockquote table tr ul ol dl dt dd figure figcaption "
    "form fieldset address details summary hr".split()
)
_SKIP_TAGS = frozenset({"script", "style", "head", "template", "noscript", "svg"})
_HEADING_TAGS = {f"h{level}": level for level in range(1, 7)}
_SPACES = re.compile(r"[ \t\r\n\f\v]+")


class _HtmlText(HTMLParser):
    """Collects visible text; block elements become paragraphs and ``h1``–``h6`` become Markdown headings."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self._current: list[str] = []
        self._skip_depth = 0
        self._pre_depth = 0
        self._heading_level = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _SKIP_TAGS:
            self._skip_depth += 1
        elif tag in _HEADING_TAGS:
            self._flush()
            self._heading_level = _HEADING_TAGS[tag]
        elif tag == "pre":
            self._flush()
            self._pre_depth += 1
        elif tag == "br":
            self._current.append("\n")
        elif tag == "li":
            self._flush()
            self._current.append("- ")
        elif tag in ("td", "th"):
            self._current.append(" | ")
        elif tag in _BLOCK_TAGS:
            self._flush()

    def handle_startendtag(self, tag: str, attrs) -> None:
        if tag == "br":
            self._current.append("\n")
        elif tag in _BLOCK_TAGS:
            self._flush()

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP_TAGS:
            self._skip_depth = max(0, self._skip_depth - 1)
        elif tag in _HEADING_TAGS:
            self._flush()
        elif tag == "pre":
            self._flush()
            self._pre_depth = max(0, self._pre_depth - 1)
        elif tag in _BLOCK_TAGS or tag == "li":
            self._flush()

    def handle_data(self, data: str) -> None:
        if self._skip_depth:
            return
        self._current.append(data if self._pre_depth else _SPACES.sub(" ", data))

    def _flush(self) -> None:
        raw = "".join(self._current)
        self._current = []
        if self._pre_depth:
            text = raw.strip("\n")
        else:
            text = "\n".join(" ".join(line.split()) for line in raw.split("\n")).strip()
            text = text.strip("| ").strip() if text.startswith("|") else text
        if text.strip():
            if self._heading_level:
                text = "#" * self._heading_level + " " + " ".join(text.split())
            self.blocks.append(text)
        self._heading_level = 0

    def close(self) -> None:
        super().close()
        self._flush()


def html_to_text(html: str) -> str:
    """Visible text of an HTML page as Markdown-ish paragraphs (headings as ``#`` lines), via ``html.parser``."""
    parser = _HtmlText()
    parser.feed(html)
    parser.close()
    return "\n\n".join(parser.blocks)


# ---------------------------------------------------------------------------------------------- DOCX
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_HEADING_STYLE = re.compile(r"^(?:heading|标题)\s*([1-6])$", re.IGNORECASE)


def docx_to_text(raw: bytes, path: Path | str = "", field: str = "file_path") -> str:
    """Paragraph text of a Word document, paragraphs separated by blank lines.

    Heading paragraphs (style "Heading n" / "标题 n", or an outline level) become ``#`` lines so the chunker keeps
    the structure; a table becomes one block with one ``a | b | c`` line per row.
    """
    try:
        with zipfile.ZipFile(io.BytesIO(raw)) as archive:
            document = archive.read("word/document.xml")
            styles = archive.read("word/styles.xml") if "word/styles.xml" in archive.namelist() else b""
        root = ElementTree.fromstring(document)
        heading_styles = _docx_heading_styles(styles)
    except (zipfile.BadZipFile, KeyError, ElementTree.ParseError, OSError) as exc:
        raise ValidationError(f"{field} 不是有效的 docx 文件：{path}") from exc
    body = root.find(f"{_W}body")
    if body is None:
        return ""
    blocks: list[str] = []
    for element in body:
        if element.tag == f"{_W}p":
            text = _docx_paragraph_text(element).strip()
            if text:
                level = _docx_heading_level(element, heading_styles)
                blocks.append("#" * level + " " + " ".join(text.split()) if level else text)
        elif element.tag == f"{_W}tbl":
            rows = []
            for row in element.iter(f"{_W}tr"):
                cells = [
                    " ".join(" ".join(_docx_paragraph_text(p).split()) for p in cell.iter(f"{_W}p")).strip()
                    for cell in row.iter(f"{_W}tc")
                ]
                if any(cells):
                    rows.append(" | ".join(cells))
            if rows:
                blocks.append("\n".join(rows))
    return "\n\n".join(blocks)


def _docx_paragraph_text(paragraph: ElementTree.Element) -> str:
    parts = []
    for node in paragraph.iter():
        if node.tag == f"{_W}t" and node.text:
            parts.append(node.text)
        elif node.tag == f"{_W}tab":
            parts.append("\t")
        elif node.tag in (f"{_W}br", f"{_W}cr"):
            parts.append("\n")
    return "".join(parts)


def _docx_heading_styles(styles_xml: bytes) -> dict[str, int]:
    """Style id → heading level, from the style names ("heading 1", "标题 2", "Title")."""
    if not styles_xml:
        return {}
    levels: dict[str, int] = {}
    for style in ElementTree.fromstring(styles_xml).iter(f"{_W}style"):
        style_id = style.get(f"{_W}styleId") or ""
        name_node = style.find(f"{_W}name")
        name = (name_node.get(f"{_W}val") if name_node is not None else "") or ""
        match = _HEADING_STYLE.match(name.strip())
        if match:
            levels[style_id] = int(match.group(1))
        elif name.strip().lower() == "title":
            levels[style_id] = 1
    return levels


def _docx_heading_level(paragraph: ElementTree.Element, heading_styles: dict[str, int]) -> int:
    properties = paragraph.find(f"{_W}pPr")
    if properties is None:
        return 0
    style = properties.find(f"{_W}pStyle")
    if style is not None:
        style_id = style.get(f"{_W}val") or ""
        if style_id in heading_styles:
            return heading_styles[style_id]
        match = _HEADING_STYLE.match(style_id) or re.match(r"^Heading([1-6])$", style_id, re.IGNORECASE)
        if match:
            return int(match.group(1))
    outline = properties.find(f"{_W}outlineLvl")
    if outline is not None:
        try:
            level = int(outline.get(f"{_W}val") or "9") + 1
        except ValueError:
            return 0
        return level if 1 <= level <= 6 else 0
    return 0

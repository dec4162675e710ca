"""File readers for knowledge ingest (services/knowledge_files.py), on real files in a temp dir."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path

import pytest

from booku_memory.services.errors import ValidationError
from booku_memory.services.knowledge_files import read_knowledge_file

W_NS = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def write_docx(path: Path, body_xml: str, styles_xml: str | None = None) -> Path:
    """A minimal but valid .docx: the parts Word itself needs to open it, plus our document body."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr(
            "[Content_Types].xml",
            (
                '<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/'
                'content-types"><Default Extension="xml" ContentType="application/xml"/></Types>'
            ),
        )
        archive.writestr(
            "word/document.xml",
            (
                f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{W_NS}"><w:body>{body_xml}</w:body>'
                f"</w:document>"
            ),
        )
        if styles_xml is not None:
            archive.writestr("word/styles.xml", f'<w:styles xmlns:w="{W_NS}">{styles_xml}</w:styles>')
    path.write_bytes(buffer.getvalue())
    return path


def paragraph(text: str, style: str | None = None) -> str:
    props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
    return f"<w:p>{props}<w:r><w:t>{text}</w:t></w:r></w:p>"


def test_markdown_and_text_files_are_read_as_utf8_with_normalised_line_ends(tmp_path: Path) -> None:
    md = tmp_path / "guide.md"
    md.write_bytes("\ufeff# 标题\r\n\r\n正文 English\r\n".encode("utf-8"))
    txt = tmp_path / "notes.TXT"
    txt.write_text("第一行\n\n\n\n第二段", encoding="utf-8")

    loaded_md = read_knowledge_file(md)
    loaded_txt = read_knowledge_file(txt)

    assert loaded_md.text == "# 标题\n\n正文 English" and loaded_md.markdown is True
    assert loaded_txt.text == "第一行\n\n第二段" and loaded_txt.markdown is False


def test_gb18030_and_utf16_files_are_decoded(tmp_path: Path) -> None:
    ansi = tmp_path / "ansi.txt"
    ansi.write_bytes("中文记事本保存的文件".encode("gb18030"))
    utf16 = tmp_path / "utf16.log"
    utf16.write_bytes("日志内容".encode("utf-16"))

    assert read_knowledge_file(ansi).text == "中文记事本保存的文件"
    assert read_knowledge_file(utf16).text == "日志内容"


def test_json_is_pretty_printed_with_readable_chinese(tmp_path: Path) -> None:
    path = tmp_path / "faq.json"
    path.write_text(json.dumps({"问题": "怎么重启", "答案": ["先停止", "再启动"]}), encoding="utf-8")

    text = read_knowledge_file(path).text

    assert "\\u" not in text
    assert '"问题": "怎么重启"' in text and '"再启动"' in text
    assert len(text.splitlines()) > 3


def test_html_keeps_headings_and_visible_text_only(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        "<html><head><title>忽略</title><style>p{color:red}</style></head><body>"
        "<h1>产品说明</h1><p>第一段&amp;说明，<b>加粗</b>文字。</p><script>alert('x')</script>"
        "<h2>安装</h2><ul><li>下载</li><li>解压</li></ul><p>行一<br>行二</p></body></html>",
        encoding="utf-8",
    )

    loaded = read_knowledge_file(path)

    assert loaded.markdown is True
    assert loaded.text == "# 产品说明\n\n第一段&说明，加粗文字。\n\n## 安装\n\n- 下载\n\n- 解压\n\n行一\n行二"


def test_docx_paragraphs_are_separated_by_blank_lines_and_headings_kept(tmp_path: Path) -> None:
    styles = (
        '<w:style w:type="paragraph" w:styleId="1"><w:name w:val="heading 1"/></w:style>'
        '<w:style w:type="paragraph" w:styleId="a3"><w:name w:val="标题 2"/></w:style>'
    )
    table = (
        "<w:tbl><w:tr><w:tc>" + paragraph("名称") + "</w:tc><w:tc>" + paragraph("端口") + "</w:tc></w:tr>"
        "<w:tr><w:tc>" + paragraph("服务") + "</w:tc><w:tc>" + paragraph("8080") + "</w:tc></w:tr></w:tbl>"
    )
    path = write_docx(
        tmp_path / "manual.docx",
        paragraph("部署手册", "1")
        + paragraph("第一段。")
        + paragraph("")
        + paragraph("端口", "a3")
        + table
        + paragraph("第二段。"),
        styles,
    )

    loaded = read_knowledge_file(path)

    assert loaded.markdown is True
    assert loaded.text == "# 部署手册\n\n第一段。\n\n## 端口\n\n名称 | 端口\n服务 | 8080\n\n第二段。"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.md", b"  \n\n ", "没有可入库的文本"),
        ("binary.txt", b"abc\x00\x01def", "二进制"),
        ("bad.txt", b"abc \x80\xff", "编码"),
        ("report.pdf", b"%PDF-1.7", "仅支持 md/markdown/txt/log/csv/json/html/htm/docx"),
        ("broken.docx", b"not a zip", "不是有效的 docx"),
        ("noext", b"text", "不受支持"),
    ],
)
def test_unreadable_files_raise_validation_error(tmp_path: Path, name: str, content: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(ValidationError, match=message) as info:
        read_knowledge_file(path)
    assert "file_path" in str(info.value)


def test_missing_file_and_directory_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="不存在"):
        read_knowledge_file(tmp_path / "missing.md")
    folder = tmp_path / "folder.md"
    folder.mkdir()
    with pytest.raises(ValidationError, match="必须指向一个文件"):
        read_knowledge_file(folder)


def test_docx_without_text_is_empty(tmp_path: Path) -> None:
    path = write_docx(tmp_path / "blank.docx", paragraph(""))
    with pytest.raises(ValidationError, match="没有可入库的文本"):
        read_knowledge_file(path)

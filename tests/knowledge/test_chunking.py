"""The structure-aware chunker (services/logic/chunking.py): sections, limits, sentence cuts and real overlap."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.chunking import chunk_text, normalise_text

GUIDE = """这份指南介绍部署流程。

# 安装

先安装 Python 3.11。然后创建虚拟环境。

## 依赖

```bash
# 这一行是注释，不是标题
pip install booku

pip check
```

依赖装好后运行自检。

# 使用

运行命令即可启动服务。

Troubleshooting
---------------

If the port is busy, change it in the config file.
"""


def test_headings_become_heading_paths_and_code_comments_are_not_headings() -> None:
    chunks = chunk_text(GUIDE, max_chars=900, overlap_chars=0)

    assert [c.heading_path for c in chunks] == [(), ("安装",), ("安装", "依赖"), ("使用",), ("使用", "Troubleshooting")]
    assert chunks[0].text == "这份指南介绍部署流程。"
    assert chunks[1].heading_title == "安装"
    assert chunks[2].heading_title == "安装 > 依赖"
    # the fenced block stays whole, blank line and "# comment" included, together with the paragraph after it
    assert "# 这一行是注释，不是标题\npip install booku\n\npip check\n```\n\n依赖装好后运行自检。" in chunks[2].text
    assert chunks[4].text == "If the port is busy, change it in the config file."
    # headings are titles, not body text
    assert all(not c.text.startswith("#") for c in chunks)


def test_plain_text_mode_ignores_markdown_headings() -> None:
    chunks = chunk_text("# 不是标题\n\n正文。", max_chars=900, overlap_chars=0, markdown=False)
    assert len(chunks) == 1 and chunks[0].heading_path == () and chunks[0].text == "# 不是标题\n\n正文。"


def test_paragraphs_that_fit_are_packed_whole() -> None:
    paragraphs = [f"第{i}段。" + "内容" * 20 for i in range(6)]  # 44 characters each
    chunks = chunk_text("\n\n".join(paragraphs), max_chars=100, overlap_chars=0)

    assert [c.text for c in chunks] == ["\n\n".join(paragraphs[i : i + 2]) for i in range(0, 6, 2)]


def test_long_chinese_paragraph_is_cut_after_sentence_ends_with_real_overlap() -> None:
    sentences = [f"第{i}句说明了一个独立的事实并且足够长。" for i in range(40)]
    text = "".join(sentences)
    chunks = chunk_text(text, max_chars=120, overlap_chars=30)

    assert len(chunks) > 5
    for chunk in chunks:
        assert len(chunk.text) <= 120
        assert chunk.text.endswith("。")
        assert text[chunk.start : chunk.end] == chunk.text
    for previous, current in zip(chunks, chunks[1:]):
        shared = previous.end - current.start
        assert 0 < shared <= 30
        assert previous.text.endswith(current.text[:shared])
    # the sentences are 19-20 characters, so an overlap of up to 30 starts at a sentence start
    assert all(chunk.text.startswith("第") for chunk in chunks)


def test_english_cuts_never_split_a_word_or_a_decimal_number() -> None:
    words = " ".join(f"word{i}" for i in range(300)) + " pi is 3.14159 exactly"
    chunks = chunk_text(words, max_chars=80, overlap_chars=20)

    for chunk in chunks:
        assert len(chunk.text) <= 80
        assert re.fullmatch(r"[\w.]+( [\w.]+)*", chunk.text), chunk.text
        assert set(chunk.text.split()) <= set(words.split())
    assert any("3.14159" in c.text for c in chunks)
    assert sum(1 for a, b in zip(chunks, chunks[1:]) if a.end > b.start) == len(chunks) - 1


def test_english_sentences_are_split_at_full_stops_not_inside_abbreviated_numbers() -> None:
    text = " ".join(f"Sentence number {i} has version 1.{i} inside it." for i in range(20))
    chunks = chunk_text(text, max_chars=150, overlap_chars=0)
    assert all(c.text.endswith("inside it.") for c in chunks)
    assert all(c.text.startswith("Sentence number") for c in chunks)


def test_unpunctuated_run_and_overlong_token_still_respect_the_limit() -> None:
    han = "汉" * 2500
    url = "https://example.com/" + "a" * 400
    chunks = chunk_text(f"{han}\n\n{url}", max_chars=300, overlap_chars=50)

    assert max(len(c.text) for c in chunks) <= 300
    assert "".join(c.text for c in chunks if "汉" in c.text).count("汉") >= 2500


def test_overlap_never_crosses_a_heading() -> None:
    text = "# A\n\n" + "甲" * 50 + "。\n\n# B\n\n" + "乙" * 50 + "。"
    chunks = chunk_text(text, max_chars=40, overlap_chars=10)
    assert all("甲" not in c.text for c in chunks if c.heading_path == ("B",))
    assert all("乙" not in c.text for c in chunks if c.heading_path == ("A",))


def test_normalise_text_unifies_line_ends_and_blank_runs() -> None:
    assert normalise_text("\ufeff标题\r\n\r\n\r\n\r\n正文  \r\n下一行\r") == "标题\n\n正文\n下一行"
    assert chunk_text("a\r\nb", max_chars=50, overlap_chars=0)[0].text == "a\nb"


def test_blank_text_gives_no_chunks_and_bad_limits_are_rejected() -> None:
    assert chunk_text(" \n\n \t", max_chars=100, overlap_chars=10) == []
    with pytest.raises(ValidationError, match="max_chunk_chars"):
        chunk_text("x", max_chars=5, overlap_chars=0)
    with pytest.raises(ValidationError, match="overlap_chars"):
        chunk_text("x", max_chars=100, overlap_chars=-1)


_ALPHABET = st.sampled_from(list("汉字知识库。！？，；abc de.f,!? \n#`-") + ["\n\n", "```\n", "# 标题\n", "## 小节\n"])


@settings(max_examples=150, deadline=None)
@example(parts=["# 标题\n", " ", "汉"], max_chars=20, overlap=0, markdown=True)  # indented first line of a block
@given(
    parts=st.lists(_ALPHABET, min_size=0, max_size=400),
    max_chars=st.integers(min_value=20, max_value=200),
    overlap=st.integers(min_value=0, max_value=120),
    markdown=st.booleans(),
)
def test_invariants_on_arbitrary_text(parts: list[str], max_chars: int, overlap: int, markdown: bool) -> None:
    text = "".join(parts)
    doc = normalise_text(text)
    chunks = chunk_text(text, max_chars=max_chars, overlap_chars=overlap, markdown=markdown)
    covered = set()
    for chunk in chunks:
        assert 0 < len(chunk.text) <= max_chars
        assert doc[chunk.start : chunk.end] == chunk.text
        assert chunk.text == chunk.text.strip()
        covered.update(range(chunk.start, chunk.end))
    for previous, current in zip(chunks, chunks[1:]):
        assert current.start > previous.start
        if previous.heading_path == current.heading_path and current.start < previous.end:
            assert previous.end - current.start <= min(overlap, max_chars // 2)
    if not markdown:
        # plain text: nothing but whitespace is ever dropped
        assert all(doc[i].isspace() for i in range(len(doc)) if i not in covered)

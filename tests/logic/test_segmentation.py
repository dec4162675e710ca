import math
import sqlite3

import pytest

from booku_memory.services.logic.segmentation import (
    build_fts_query,
    document_idf,
    keyword_coverage,
    keyword_reliability,
    query_terms,
    segment_for_index,
    term_coverage,
    tokenize,
)


def test_chinese_is_segmented_with_search_mode_subwords():
    tokens = segment_for_index("我喜欢中华人民共和国").split()
    assert "喜欢" in tokens
    assert "中华人民共和国" in tokens and "共和国" in tokens and "人民" in tokens


def test_english_words_kept_whole_lowercased_and_punctuation_dropped():
    assert segment_for_index("Hello, World! Caroline's LGBTQ-group.") == "hello world caroline lgbtq group"


def test_mixed_text_and_fullwidth_characters():
    tokens = tokenize("我在学Python编程，ＡＢＣ１２３")
    assert "python" in tokens and "编程" in tokens and "abc123" in tokens
    assert "，" not in tokens


def test_query_terms_drop_stopwords_and_duplicates():
    assert query_terms("What did the dog eat? the DOG!") == ["dog", "eat"]
    assert "的" not in query_terms("我喜欢的电影")


def test_build_fts_query_quotes_every_term_and_neutralises_operators():
    expression = build_fts_query('cats AND dogs NEAR(x) "quoted" col:value *')
    assert expression is not None
    parts = expression.split(" OR ")
    assert all(part.startswith('"') and part.endswith('"') for part in parts)
    assert '"and"' not in expression.lower()  # stop word, never a bare operator
    assert "*" not in expression and "(" not in expression and ":" not in expression


def test_build_fts_query_returns_none_without_terms():
    assert build_fts_query("?!。，") is None
    assert build_fts_query("") is None
    assert build_fts_query(None) is None


def test_fts_query_runs_against_real_fts5_table_with_hostile_input():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(body)")
    docs = ["我喜欢看科幻电影《流浪地球》", "今天去公园跑步", 'He said "hello" to NEAR friends']
    db.executemany(
        "INSERT INTO t(rowid, body) VALUES (?, ?)", [(i + 1, segment_for_index(d)) for i, d in enumerate(docs)]
    )
    for query in ["科幻电影叫什么", 'he said "hello', "NEAR(friends", "跑步 OR -x AND ^y"]:
        expression = build_fts_query(query)
        rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expression,)).fetchall()
        assert rows, query
    top = db.execute(
        "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (build_fts_query("科幻电影叫什么"),)
    ).fetchone()
    assert top == (1,)


def test_keyword_reliability_separates_exact_terms_from_generic_segments():
    assert keyword_reliability("When did Caroline go to the LGBTQ support group?") == 1.0
    assert keyword_reliability("我曾经和你推荐过一部电影") == 0.0
    assert 0.0 < keyword_reliability("我喜欢哪些古典音乐作品") < 1.0
    assert keyword_reliability("??") == 0.0


def test_keyword_coverage_counts_query_terms_present_in_document():
    document = segment_for_index("Caroline joined a support group")
    assert keyword_coverage("Caroline support group", document) == 1.0
    assert keyword_coverage("Caroline painting", document) == 0.5
    assert keyword_coverage("Caroline", None) == 0.0


def test_document_idf_weighs_rare_terms_above_common_ones():
    weights = document_idf({"caroline": 90, "pottery": 2, "missing": 0}, 100)
    assert weights["pottery"] > weights["caroline"] > 0
    assert weights["missing"] == pytest.approx(math.log(1 + 100.5 / 0.5))
    assert document_idf({"everywhere": 100}, 100)["everywhere"] == pytest.approx(math.log(1 + 0.5 / 100.5))


def test_term_coverage_weighs_terms_and_matches_prefixes():
    document = segment_for_index("Melanie took a pottery class with her kids")
    terms = ["melanie", "pottery", "paint*", "kid*"]
    assert term_coverage(terms, document) == 0.75  # unweighted: 3 of 4, "kid*" matches "kids"
    weights = {"melanie": 0.1, "pottery": 3.0, "paint*": 2.0, "kid*": 1.0}
    assert term_coverage(terms, document, weights) == pytest.approx(4.1 / 6.1)
    assert term_coverage(terms, segment_for_index("Melanie painted a sunset"), weights) == pytest.approx(2.1 / 6.1)
    assert term_coverage(terms, document.split(), weights) == term_coverage(terms, document, weights)
    assert term_coverage(["pottery"], document, {}) == 0.0  # no term weighs anything
    assert term_coverage([], document) == 0.0 and term_coverage(terms, None) == 0.0
    # A prefix term matches the start of a token only, never its middle or a run across two tokens.
    assert term_coverage(["ids*"], document) == 0.0 and term_coverage(["ery*"], document) == 0.0
    assert term_coverage(["class*"], ["with", "class"]) == 1.0 and term_coverage(["ith c*"], document) == 0.0


def _uncached_tokens(text: str) -> list[str]:
    """The tokens as segmentation produced them before runs were cached: jieba called on every Han run."""
    import re
    import unicodedata

    import jieba

    from booku_memory.services.logic import segmentation

    normalised = segmentation._APOSTROPHE_TAIL.sub("", unicodedata.normalize("NFKC", text)).lower()
    tokens: list[str] = []
    for run in re.findall(r"[^\W_]+", normalised):
        for piece in segmentation._HAN_SPLIT.split(run):
            if piece and segmentation._HAN_SPLIT.fullmatch(piece):
                tokens.extend(word for word in jieba.cut_for_search(piece) if word.strip())
            elif piece:
                tokens.append(piece)
    return tokens


def test_cached_han_runs_give_exactly_jiebas_tokens_every_time():
    from booku_memory.services.logic.segmentation import _han_run_tokens

    content = (
        "用户：好的，我会考虑尝试这些活动。谢谢你的建议和关心，让我感到自己不再那么无助和沮丧。\n"
        "AI：没有关系，小琳。我总是在这里支持和帮助你。中华人民共和国成立于1949年，Caroline's 2024 plan。"
    )
    title = content.splitlines()[0][:30]  # a title repeats the start of its content, cut mid-run
    unpunctuated = "我们今天一起去了城市东边新开的那家很大的图书馆看书" * 4  # one run longer than the cache keeps
    before = _han_run_tokens.cache_info().hits
    for text in (title, content, content, title + "再加一句新的话"):
        assert tokenize(text) == _uncached_tokens(text)
    assert _han_run_tokens.cache_info().hits > before  # the repeated runs were answered from the cache
    size = _han_run_tokens.cache_info().currsize
    assert tokenize(unpunctuated + "。") == _uncached_tokens(unpunctuated)
    assert _han_run_tokens.cache_info().currsize == size  # a run that long is segmented but never kept

"""Inflection prefixes: an English query word also finds the other forms of that word (``logic.inflection``)."""

import pytest

from booku_memory.services.logic.inflection import (
    MIN_STEM,
    inflection_stem,
    is_prefix_term,
    prefix_upper_bound,
    with_inflections,
)


@pytest.mark.parametrize(
    ("word", "stem"),
    [
        ("hobbies", "hobb"),
        ("hobby", "hobb"),
        ("recipes", "recip"),
        ("recipe", "recip"),
        ("visited", "visit"),
        ("painting", "paint"),
        ("collect", "collect"),
        ("countries", "countr"),
    ],
)
def test_a_word_and_its_inflected_forms_share_one_prefix(word, stem):
    assert inflection_stem(word) == stem


@pytest.mark.parametrize("word", ["evan", "dog", "art", "2023", "3d", "café", "西湖", "hobby's", ""])
def test_short_words_numbers_and_non_latin_terms_stay_exact(word):
    assert inflection_stem(word) is None


def test_a_stem_is_never_shorter_than_the_minimum():
    for word in ("hiking", "kites", "tries", "sings", "lately", "aeiou"):
        stem = inflection_stem(word)
        assert stem is None or (len(stem) >= MIN_STEM and word.startswith(stem))


def test_with_inflections_marks_prefix_terms_keeps_order_and_collapses_forms():
    terms = with_inflections(["hobbies", "evan", "hobby", "绿茶", "2023"])
    assert terms == ["hobb*", "evan", "绿茶", "2023"]
    assert [is_prefix_term(term) for term in terms] == [True, False, False, False]
    assert not is_prefix_term("*")


def test_prefix_upper_bound_is_above_every_word_with_the_prefix_and_below_the_next():
    bound = prefix_upper_bound("hobb")
    assert "hobb" < "hobbies" < "hobbyzzz" < bound <= "hobc"
    assert not ("hobc" < bound)

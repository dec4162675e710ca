from booku_memory.services.logic.merge import merge_texts, split_sentences


def test_contained_new_text_keeps_old():
    assert merge_texts("我喜欢猫。我住在北京。", "我住在北京。") == "我喜欢猫。我住在北京。"


def test_new_text_that_contains_old_wins():
    assert merge_texts("I like tea.", "I like tea. I also like coffee.") == "I like tea. I also like coffee."


def test_containment_ignores_case_and_spacing():
    assert merge_texts("I like  Tea and cake", "i like tea") == "I like  Tea and cake"


def test_different_texts_keep_old_and_append_only_new_sentences():
    merged = merge_texts("我喜欢猫。我住在北京。", "我住在北京！我还养了一只狗。")
    assert merged == "我喜欢猫。我住在北京。\n我还养了一只狗。"


def test_english_sentences_and_lines_are_preserved():
    merged = merge_texts(
        "Alice likes tea. She lives in Paris.", "She lives in Paris. She works at a bakery.\nShe has a cat!"
    )
    assert merged.startswith("Alice likes tea. She lives in Paris.\n")
    assert merged.endswith("She works at a bakery.\nShe has a cat!")
    assert merged.count("She lives in Paris") == 1


def test_nothing_is_lost_from_either_side():
    old = "会议改到周三。地点在三楼。"
    new = "会议改到周四。地点在三楼。带上电脑。"
    merged = merge_texts(old, new)
    for sentence in ("会议改到周三。", "地点在三楼。", "会议改到周四。", "带上电脑。"):
        assert sentence in merged


def test_blank_sides():
    assert merge_texts("", " 新内容 ") == "新内容"
    assert merge_texts("旧内容", None) == "旧内容"


def test_split_sentences_handles_decimals_and_closing_quotes():
    assert split_sentences("他说：“好。”然后走了！Version 3.5 is out. Really?") == [
        "他说：“好。”",
        "然后走了！",
        "Version 3.5 is out.",
        "Really?",
    ]

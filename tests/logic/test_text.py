from booku_memory.services.logic.text import (
    compose_embedding_text,
    extract_title,
    keyword_title,
    make_snippet,
    normalise_folder_id,
    title_adds_information,
)


def test_extract_title_strips_markdown_heading_and_skips_blank_lines():
    assert extract_title("\n\n  ## 周末计划 \n正文") == "周末计划"


def test_extract_title_skips_lines_made_only_of_hashes():
    assert extract_title("###\n真正的标题") == "真正的标题"


def test_extract_title_truncates_to_80_chars():
    assert extract_title("长" * 120) == "长" * 80


def test_extract_title_falls_back_when_text_is_blank():
    assert extract_title("  \n\t\n") == "未命名记忆"
    assert extract_title(None) == "未命名记忆"


def test_compose_embedding_text_frames_title_and_body():
    assert compose_embedding_text("标题", "内容") == "# 标题\n内容"
    assert compose_embedding_text("", " 只有内容 ") == "只有内容"
    assert compose_embedding_text("只有标题", None) == "只有标题"
    assert compose_embedding_text(None, "  ") == ""


def test_a_title_that_adds_nothing_is_embedded_as_if_untitled():
    turn = "用户：我今天去动物园看了大熊猫\nAI：听起来很可爱！"
    untitled = "# 用户：我今天去动物园看了大熊猫\n" + turn
    for title in (
        "2024-05-03 对话",
        "5月3日 聊天记录",
        "May 3 notes",
        "昨天 日记",  # a log's dated label
        "动物园",
        "我今天去动物园",
        "用户",
    ):  # words the body holds
        assert not title_adds_information(title, turn), title
        assert compose_embedding_text(title, turn) == untitled, title
    assert compose_embedding_text("Caroline", "Caroline: I went hiking") == (
        "# Caroline: I went hiking\nCaroline: I went hiking"
    )


def test_the_keyword_index_weighs_a_title_only_when_it_adds_something():
    turn = "用户：我今天去动物园看了大熊猫\nAI：听起来很可爱！"
    assert keyword_title("2024-05-03 对话", turn) == ""
    assert keyword_title("动物园", turn) == ""
    assert keyword_title("Caroline", "Caroline: I went hiking") == ""
    assert keyword_title("李四", "高中同桌，住在杭州") == "李四"


def test_a_title_that_names_what_the_body_does_not_frames_it():
    assert compose_embedding_text("李四", "高中同桌，住在杭州") == "# 李四\n高中同桌，住在杭州"
    assert title_adds_information("5月3日 李四生日", "买了蛋糕")  # a date and a topic of two words
    assert title_adds_information("会议纪要", "讨论了预算")  # no date: one word is the topic
    assert not title_adds_information("", "内容") and not title_adds_information("  ", "内容")


def test_make_snippet_marks_truncation_only_when_cut():
    assert make_snippet("短文本") == ("短文本", False)
    exact = "x" * 280
    assert make_snippet(exact) == (exact, False)
    snippet, truncated = make_snippet("y" * 281)
    assert truncated is True
    assert snippet == "y" * 280 + "..."
    assert make_snippet("abcdef", limit=3) == ("abc...", True)


def test_normalise_folder_id_lowercases_and_defaults():
    assert normalise_folder_id("  Work ", "default") == "work"
    assert normalise_folder_id("", "default") == "default"
    assert normalise_folder_id(None, "Default") == "default"


def test_keyword_title_drops_a_title_guessed_from_the_first_line():
    assert keyword_title("周末计划", "## 周末计划\n去爬山") == ""
    assert keyword_title("长" * 80, "长" * 120) == ""  # the guess is cut to 80 characters
    assert keyword_title("未命名记忆", "") == ""


def test_keyword_title_keeps_a_title_the_caller_chose():
    assert keyword_title(" 书法课安排 ", "每周二晚上练习书法") == "书法课安排"
    assert keyword_title("书法课安排", None) == "书法课安排"
    assert keyword_title(None, "正文") == ""

"""Unit tests of the memory_command lexer: chaining, tokenising, the flag-value rule and value coercion."""

from __future__ import annotations

from datetime import datetime

import pytest

from booku_memory.tools.command_lexer import (
    MAX_CHAIN_STEPS,
    CommandError,
    parse_segment,
    parse_time,
    split_chain,
    tokenize,
)

# ----- split_chain -------------------------------------------------------------------------------------------------


def test_split_chain_splits_on_unquoted_double_ampersand_only():
    assert split_chain("search -q a && read -id m1") == ["search -q a", "read -id m1"]
    assert split_chain("search -q 'a&&b' && read -id m1") == ["search -q 'a&&b'", "read -id m1"]
    assert split_chain('search -q "x && y"') == ['search -q "x && y"']
    assert split_chain(r"search -q a\&&b") == [r"search -q a\&&b"]


def test_split_chain_single_ampersand_is_text():
    assert split_chain("search -q A&B") == ["search -q A&B"]


def test_split_chain_drops_empty_steps_and_rejects_only_separators():
    assert split_chain("  help  &&  && status ") == ["help", "status"]
    with pytest.raises(CommandError, match="未解析到可执行命令"):
        split_chain("&& &&")


@pytest.mark.parametrize("command", [None, "", "   \n\t"])
def test_split_chain_rejects_empty_command(command):
    with pytest.raises(CommandError, match="command 不能为空"):
        split_chain(command)


def test_split_chain_reports_unclosed_quote_with_position():
    with pytest.raises(CommandError, match='引号 " 没有闭合（从第 11 个字符开始）'):
        split_chain('search -q "abc && read -id m1')


def test_split_chain_limits_number_of_steps():
    with pytest.raises(CommandError, match=f"最多用 && 串联 {MAX_CHAIN_STEPS} 步"):
        split_chain(" && ".join(["status"] * (MAX_CHAIN_STEPS + 1)))


# ----- tokenize ----------------------------------------------------------------------------------------------------


def test_tokenize_keeps_hash_and_handles_full_width_space():
    assert tokenize("create -content '# 标题'") == ["create", "-content", "# 标题"]
    assert tokenize("search\u3000-q\u00a0张三") == ["search", "-q", "张三"]


def test_tokenize_trailing_backslash_is_a_clear_error():
    with pytest.raises(CommandError, match="反斜杠"):
        tokenize("search -q abc\\")


# ----- parse_segment: the flag-value rule ------------------------------------------------------------------------


def test_value_starting_with_dash_is_kept_when_not_a_flag_of_the_command():
    parsed = parse_segment('create -title t -content "- 第一条\n- 第二条" -type event')
    assert parsed.get("content") == "- 第一条\n- 第二条"
    assert parsed.get("memory_type") == "event"


def test_value_that_is_a_known_flag_needs_equals_form():
    with pytest.raises(CommandError, match="-content 缺少值"):
        parse_segment("create -content -title x")
    parsed = parse_segment("create -content=-title -title x")
    assert parsed.get("content") == "-title"
    assert parsed.get("title") == "x"


def test_flag_names_are_case_insensitive_with_one_or_two_dashes_and_hyphen_or_underscore():
    parsed = parse_segment("search --Query 张三 -TOP-N 3 --include-archived")
    assert parsed.get("query_text") == "张三"
    assert parsed.get("top_n") == 3
    assert parsed.get("include_archived") is True


def test_bool_flag_takes_only_boolean_literals():
    assert parse_segment("delete -id m1 -hard").get("hard") is True
    assert parse_segment("delete -hard false -id m1").get("hard") is False
    assert parse_segment("delete -hard -id m1").get("hard") is True
    with pytest.raises(CommandError, match="多出了「maybe」"):
        parse_segment("delete -id m1 -hard maybe")
    with pytest.raises(CommandError, match="-hard 只能是 true 或 false"):
        parse_segment("delete -id m1 -hard=maybe")


def test_unknown_flag_lists_valid_flags_and_suggests_the_closest():
    with pytest.raises(CommandError) as info:
        parse_segment("create -tittle x")
    message = str(info.value)
    assert "create 不支持参数 -tittle" in message
    assert "你可能想用 -title" in message
    assert "-content" in message and "-triple_tags" in message


def test_stray_word_is_an_error_listing_flags():
    with pytest.raises(CommandError, match="多出了「张三」.*search 可用参数：-query"):
        parse_segment("search 张三")


def test_help_accepts_one_topic_word_but_not_two():
    assert parse_segment("help search").positional == "search"
    with pytest.raises(CommandError, match="多出了「extra」"):
        parse_segment("help search extra")


def test_unknown_sub_command_keeps_reference_wording_and_suggests():
    with pytest.raises(CommandError, match="不支持的命令: serach，你可能想用 search；可先执行 help"):
        parse_segment("serach -q x")


def test_step_must_start_with_a_sub_command():
    with pytest.raises(CommandError, match="每一步都要以子命令开头"):
        parse_segment("-query x")


def test_sub_command_is_case_insensitive_and_alias_resolves():
    assert parse_segment("HELP").spec.name == "help"
    assert parse_segment("undelete -id m1").spec.name == "restore"


def test_ids_merge_across_aliases_and_occurrences_without_duplicates():
    parsed = parse_segment('read -ids "m1, m2" -id m1 -memory_ids m3，m2')
    assert parsed.get("memory_ids") == ["m1", "m2", "m3"]


def test_single_id_flag_rejects_a_list():
    with pytest.raises(CommandError, match="需要恰好一个记忆 id"):
        parse_segment("update -id a,b -title x")


def test_scalar_flag_repeated_with_different_values_is_an_error():
    with pytest.raises(CommandError, match="给了多次且值不同"):
        parse_segment("create -title a -title b")
    assert parse_segment("create -title a -title a").get("title") == "a"


def test_tag_lists_accept_ascii_full_width_and_ideographic_commas():
    parsed = parse_segment("search -core_tags a，b、c,d")
    assert parsed.get("core_tags") == ["a", "b", "c", "d"]
    assert parsed.has("diffusion_tags") is False


def test_presence_of_an_empty_value_is_recorded():
    parsed = parse_segment('search -core_tags ""')
    assert parsed.has("core_tags") and parsed.get("core_tags") == []


@pytest.mark.parametrize("raw", ["5.5", "abc", "", "1e3"])
def test_int_flag_rejects_non_integers(raw):
    with pytest.raises(CommandError, match="-topn 必须是整数"):
        parse_segment(f"search -topn '{raw}'")


def test_int_flag_enforces_minimum():
    with pytest.raises(CommandError, match="超出范围（不小于 1）"):
        parse_segment("search -n 0")


def test_word_flag_is_lower_cased_and_checked_against_choices():
    assert parse_segment("search -type PERSON").get("memory_type") == "person"
    with pytest.raises(CommandError, match="-type 的值 'robot' 无效，可选：person、event"):
        parse_segment("search -type robot")


def test_list_flag_with_choices_rejects_unknown_items():
    assert parse_segment("grep -q x -fields Title,content").get("search_fields") == ["title", "content"]
    with pytest.raises(CommandError, match="-fields 里的 'body' 无效"):
        parse_segment("grep -q x -fields title,body")


# ----- parse_time ---------------------------------------------------------------------------------------------------


def test_parse_time_accepts_epoch_and_local_dates():
    assert parse_time("1714521600") == 1714521600.0
    expected = datetime(2024, 5, 1, 14, 30).astimezone().timestamp()
    assert parse_time("2024-05-01 14:30") == expected
    assert parse_time("2024/5/1 14:30") == expected
    assert parse_time("2024年5月1日 14:30") == expected
    assert parse_time("2024-05-01T14:30:00+00:00") == datetime.fromisoformat("2024-05-01T14:30:00+00:00").timestamp()


@pytest.mark.parametrize("raw", ["yesterday", "2024-13-01", "nan", "inf"])
def test_parse_time_rejects_garbage(raw):
    with pytest.raises(CommandError, match="需要时间"):
        parse_time(raw, "-event_start_at")


def test_parse_time_rejects_before_1970():
    with pytest.raises(CommandError, match="不能早于 1970-01-01"):
        parse_time("-5", "-event_start_at")

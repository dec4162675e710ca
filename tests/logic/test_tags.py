import pytest

from booku_memory.services.errors import ValidationError
from booku_memory.services.logic.tags import (
    CandidateTags,
    TagTriplet,
    normalise_tags,
    parse_triple_tags,
    triplet_from_lists,
)


def test_normalise_tags_strips_lowercases_dedupes_in_order():
    assert normalise_tags([" Cat", "dog", "CAT", "", None, "  "]) == ["cat", "dog"]


def test_normalise_tags_accepts_comma_string_and_none():
    assert normalise_tags("音乐, Rock ，音乐,,") == ["音乐", "rock"]
    assert normalise_tags(None) == []


def test_normalise_tags_does_not_resplit_list_items():
    assert normalise_tags(["a,b"]) == ["a,b"]


def test_triplet_properties():
    empty = TagTriplet()
    assert empty.is_empty and not empty.is_complete
    full = TagTriplet(["a"], ["b"], ["c"])
    assert full.is_complete and not full.is_empty
    partial = TagTriplet(["a"], [], ["c"])
    assert not partial.is_empty and not partial.is_complete
    assert partial.missing_fields() == ["diffusion_tags"]


def test_required_triplet_rejects_incomplete_with_reference_message():
    with pytest.raises(ValidationError) as info:
        triplet_from_lists(["a"], ["b"], [], required=True)
    assert "创建记忆必须同时提供完整且非空的 core_tags、diffusion_tags、opposing_tags 三元组" in str(info.value)
    assert "opposing_tags" in str(info.value).split("三元组")[-1]


def test_required_triplet_rejects_tags_that_normalise_to_nothing():
    with pytest.raises(ValidationError):
        triplet_from_lists(["  "], ["b"], ["c"], required=True)


def test_optional_triplet_allows_nothing_or_everything():
    assert triplet_from_lists(None, None, None, required=False).is_empty
    triplet = triplet_from_lists("A, b", ["C"], "d", required=False)
    assert triplet == TagTriplet(["a", "b"], ["c"], ["d"])


def test_optional_triplet_rejects_partial_groups():
    with pytest.raises(ValidationError) as info:
        triplet_from_lists(["a"], None, None, required=False)
    assert "三组标签" in str(info.value)
    assert "diffusion_tags" in str(info.value) and "opposing_tags" in str(info.value)


def test_partial_triplet_allowed_for_queries_on_request():
    triplet = triplet_from_lists(["a"], None, None, required=False, allow_partial=True)
    assert triplet.core == ["a"] and triplet.non_empty_groups == 1


def test_parse_triple_tags_splits_three_groups():
    assert parse_triple_tags("C1, c2|d1|O1") == TagTriplet(["c1", "c2"], ["d1"], ["o1"])


def test_parse_triple_tags_keeps_empty_middle_group_for_later_check():
    triplet = parse_triple_tags("a||c")
    assert triplet.diffusion == [] and not triplet.is_complete


@pytest.mark.parametrize("value", ["true", "a|b", "a|b|c|d", ""])
def test_parse_triple_tags_requires_exactly_three_parts(value):
    with pytest.raises(ValidationError) as info:
        parse_triple_tags(value)
    assert "核心|扩散|对立" in str(info.value)


def test_candidate_tags_normalise_stored_values():
    tags = CandidateTags.from_lists(core=["Work"], generic="Project, X")
    assert tags.core == frozenset({"work"})
    assert tags.generic == frozenset({"project", "x"})


def test_stored_tags_equal_the_normalised_sets_and_follow_changed_values():
    from booku_memory.services.logic.tags import CandidateTags, stored_tags

    lists = (["Alice", " travel "], ["Paris"], ["work"], ["conv-1"])
    assert stored_tags(*lists) == CandidateTags.from_lists(*lists)
    assert stored_tags(*lists) is stored_tags(*[list(group) for group in lists])  # remembered by value
    assert stored_tags(None, [], None, None) == CandidateTags()
    assert stored_tags("a,B", None, None, None) == CandidateTags.from_lists("a,B")  # a string is split, not iterated
    edited = (["Alice", "food"], ["Paris"], ["work"], ["conv-1"])
    assert stored_tags(*edited).core == frozenset({"alice", "food"})

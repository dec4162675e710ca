"""In a stored conversation the answer to a question is the memory written right after it: retrieval lifts it to
the question that repeats the query's words (``logic.neighbours.answer_lift``), and for a query whose words are
exact (English here) the question itself, which only asks, drops below the answer (``logic.shape``)."""

from __future__ import annotations

from pathlib import Path

from booku_memory.services.logic.shape import question_share

from .memory_support import retrieve_over_chat

CHAT = [
    "Caroline: I went hiking with my sister on Saturday morning.",
    "Melanie: Sounds lovely, the weather was great for it.",
    "Caroline: What did you paint for the art fair this year?",
    "Melanie: A sunset over the lake behind our cabin.",
    "Caroline: My dog learned to fetch the newspaper.",
    "Melanie: I bought new running shoes yesterday.",
    "Caroline: We are planning a trip to Lisbon in spring.",
    "Melanie: My kids started piano lessons last month.",
]


async def test_the_answer_to_a_matching_question_follows_it(tmp_path: Path) -> None:
    found = await retrieve_over_chat(tmp_path, CHAT, "What did Melanie paint for the art fair?")
    ids, rows, parts = found.ids, found.rows, found.parts
    assert found.ranked[0] == ids[3]  # the answer comes first
    answer, question = parts[ids[3]], parts[ids[2]]
    assert answer["neighbour"] > 0  # lifted by the question it answers
    assert question["shape"] < answer["shape"] - 1.0  # the question only asks: demoted for an English query
    assert [rows[memory_id]["question_share"] is not None for memory_id in ids] == [
        False,
        False,
        True,
        False,
        False,
        False,
        False,
        False,
    ]
    assert rows[ids[2]]["question_share"] == question_share(CHAT[2])
    assert rows[ids[3]]["content_chars"] == len(CHAT[3])

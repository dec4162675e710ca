"""Through the service: among memories written as ``"<name>: …"``, what the person the query names said rises
behind rank 1 (``logic.speaker``), and the candidate rows carry the start of each text for it."""

from __future__ import annotations

from pathlib import Path

from booku_memory.services.logic.speaker import HEAD_CHARS

from .memory_support import retrieve_over_chat

CHAT = [
    "Caroline: I finished reading a novel about a lighthouse keeper last night.",
    "Melanie: I went kayaking on the river with my family last weekend.",
    "Caroline: I painted a sunset over the lake for the art fair.",
    "Melanie: My kids and I built a pottery bowl together at the studio.",
]


async def test_the_named_persons_memories_carry_a_speaker_part(tmp_path: Path) -> None:
    found = await retrieve_over_chat(tmp_path, CHAT, "What activities does Melanie do with her family?")
    ids, parts = found.ids, found.parts
    assert found.rows[ids[0]]["content_head"] == CHAT[0][:HEAD_CHARS]
    first = found.ranked[0]
    lifted = {memory_id for memory_id, part in parts.items() if part["speaker"] > 0}
    assert lifted and lifted <= {ids[1], ids[3]} - {first}  # only Melanie's memories, never rank 1
    assert all(parts[memory_id]["speaker"] == 0 for memory_id in (ids[0], ids[2]))


async def test_the_lift_does_not_pass_the_memory_about_what_the_query_asks(tmp_path: Path) -> None:
    """An adversarial question names the wrong person: Melanie ran the charity race, not Caroline."""
    chat = [
        "Melanie: The charity race last Saturday made me realize how much self-care matters.",
        "Caroline: I realize the charity race needs more volunteers this year.",
        "Caroline: After the race I realize I need rest.",
        "Caroline: I realize my painting is almost done.",
        *[f"Caroline: I spent day {day} at the support group and then went home." for day in range(1, 9)],
        "Melanie: I went kayaking on the river with my family last weekend.",
    ]
    found = await retrieve_over_chat(tmp_path, chat, "What did Caroline realize after her charity race?", top_k=5)
    ids, ranked, parts = found.ids, found.ranked, found.parts
    assert ids[0] in ranked
    above = ranked[: ranked.index(ids[0])]
    assert all(parts[memory_id]["speaker"] == 0 for memory_id in above)  # no lifted memory passed it

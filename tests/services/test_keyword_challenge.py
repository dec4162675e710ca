"""The keyword route's sure best challenges the fused rank 1 (``logic.fusion.keyword_challenge``, step 7): it takes
rank 1 when it leads its keyword runner-up clearly, trails the fused best by little, and covers the query's terms
(idf-weighted, ``segmentation.term_coverage``) better; a hit that only repeats one rare word does not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from booku_memory.services.embedding.deterministic import UnavailableEmbedder
from booku_memory.services.logic.fusion import FusionParams

from .memory_support import MEMORY_SERVICE, open_store

QUERY = "What did Melanie say about the pottery workshop?"
CHAT = [
    "Caroline: I went hiking with my sister on Saturday morning.",
    # Shares the question's words (what, did, say, about, the, workshop): the test embedder ranks it first.
    "Melanie: What did I say about the workshop? I did say the workshop was fun.",
    "Caroline: Sounds lovely, the weather was great for it.",
    "Melanie: My pottery workshop is so relaxing, I love pottery.",
    "Caroline: My kids say the piano lessons are fun.",
    "Melanie: We are planning a trip to Lisbon in spring.",
    "Caroline: I bought new running shoes yesterday.",
    "Melanie: My dog learned to fetch the newspaper.",
]
TALK, POTTERY = 1, 3


async def _write(handle: Any, entries: list[Any]) -> list[str]:
    svc = handle.get_service(MEMORY_SERVICE)
    ids = []
    for entry in entries:
        content, fields = (entry, {}) if isinstance(entry, str) else entry
        ids.append((await svc.upsert_memory(content, **fields))["id"])
    return ids


async def _rankings(path: Path, entries: list[Any]) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """(memory ids, hybrid results for QUERY, keyword-only ranking for QUERY) over a store of ``entries``."""
    async with open_store(path) as handle:
        ids = await _write(handle, entries)
        hybrid = (await handle.get_service(MEMORY_SERVICE).retrieve_memories(QUERY, top_k=len(entries)))["results"]
    async with open_store(path, embedder=UnavailableEmbedder("测试：仅关键词", dimension=0)) as handle:
        keyword = (await handle.get_service(MEMORY_SERVICE).retrieve_memories(QUERY, top_k=3))["results"]
    return ids, hybrid, [item["id"] for item in keyword]


def _conditions_hold(parts: dict[str, dict[str, Any]], challenger: str, incumbent: str) -> bool:
    """Whether the challenger passes the keyword-lead and fused-gap tests against the incumbent (English query:
    keyword reliability 1)."""
    params = FusionParams()
    runner_up = max(p["keyword_z"] for key, p in parts.items() if key != challenger and p["keyword_z"] is not None)
    keyword_lead = parts[challenger]["keyword_z"] - runner_up
    fused_gap = parts[incumbent]["fused"] - (parts[challenger]["fused"] - parts[challenger]["lead"])
    return keyword_lead >= params.keyword_lead_min and 0 < fused_gap <= params.fused_lead_max


async def test_a_sure_keyword_best_that_covers_the_query_takes_rank_one(tmp_path: Path) -> None:
    ids, hybrid, keyword_only = await _rankings(tmp_path, CHAT)
    parts = {item["id"]: item["score_parts"] for item in hybrid}
    pottery, talk = ids[POTTERY], ids[TALK]
    assert keyword_only[0] == pottery
    assert [item["id"] for item in hybrid[:2]] == [pottery, talk]
    # Before the challenge the talk about the workshop ranked first; the lead part is what moved the pottery turn.
    assert parts[pottery]["lead"] > 0 and parts[talk]["lead"] == 0
    assert parts[pottery]["fused"] - parts[pottery]["lead"] < parts[talk]["fused"] < parts[pottery]["fused"]
    assert _conditions_hold(parts, pottery, talk)
    named = ("vector", "keyword", "time", "neighbour", "shape", "lead")
    assert abs(sum(parts[pottery][name] for name in named) - parts[pottery]["fused"]) < 1e-5


async def test_a_keyword_best_on_one_rare_word_does_not_take_rank_one(tmp_path: Path) -> None:
    # The pottery memory now only repeats "pottery" (title and tag too), and other memories make "say" and
    # "workshop" common: it leads the keyword route by far, but covers less of the query than the talk does.
    entries: list[Any] = list(CHAT)
    entries[POTTERY] = ("Caroline: I love pottery, what a thing pottery is.", {"title": "Pottery", "tags": ["pottery"]})
    entries += [
        "Caroline: They say the coding workshop starts at nine.",
        "Caroline: People say the art workshop is full.",
        "Caroline: I would say the cooking workshop was too short.",
        "Caroline: Some say the writing workshop needs a new teacher.",
    ]
    ids, hybrid, keyword_only = await _rankings(tmp_path, entries)
    parts = {item["id"]: item["score_parts"] for item in hybrid}
    pottery, talk = ids[POTTERY], ids[TALK]
    assert keyword_only[0] == pottery
    assert _conditions_hold(parts, pottery, talk)  # only the term coverage stops the challenge
    assert [item["id"] for item in hybrid[:2]] == [talk, pottery]
    assert all(p["lead"] == 0 for p in parts.values())

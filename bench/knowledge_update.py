"""Knowledge update through the memory service: later facts supersede earlier ones, restatements merge (issue 28).

Run from the repository root:

    .venv/bin/python bench/knowledge_update.py                       # the set in bench/data/knowledge_update.json
    .venv/bin/python bench/knowledge_update.py --set bench/data/knowledge_update_check.json   # the check set
    .venv/bin/python bench/knowledge_update.py --set held_out.json   # another set of the same shape
    .venv/bin/python bench/knowledge_update.py --writer grow         # written by the companion tool grow

The set (JSON): ``updates`` [{kind, old, new, now, before}], ``adds`` [{base, add}], ``paraphrases``
[{base, restatement}] and ``background`` [text]; a set without a background of its own is run among the default
set's background (as ``knowledge_update_check.json`` is). Everything goes through the public service of a fresh store
(``booku_memory.open()`` with the real local embedding model, ``upsert_memory`` with no event times, as the bot's
tools write): first the background, the old facts, the bases of the negatives and of the paraphrases, shuffled; then
the new facts, the additions and the restatements, shuffled (seed 28). Then, per update pair, ``retrieve_memories``
with its "now" question and its "before" question.

Printed:

* new first: the new fact's memory is rank 1 for the "now" question;
* old in top 3: the old fact's memory is in the top 3 for the "before" question;
* updates marked: the old memory carries ``superseded_by`` = the new one;
* false supersessions: memories superseded by anything but the new fact of their own pair, over every memory
  that no pair replaces (all memories but the pairs' old facts: a wrong link hides a true fact either way);
* paraphrases merged: the restatement's write answered ``merged`` into its base;
* wrong merges: any other write answered ``merged``;
* old text kept: every old fact's text is still in its memory.

It also runs on a checkout without migration 0014 (the baseline: that checkout's own virtualenv, this script), where
nothing is ever superseded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import booku_memory
from booku_memory.services.embedding.local import LocalE5Embedder

MEMORY_SERVICE = "booku_memory:service:booku_memory"
DEFAULT_SET = Path(__file__).resolve().parent / "data" / "knowledge_update.json"
CONFIG = {"maintenance": {"enabled": False}, "write_conflict": {"top_n": 16}}


async def write_with(memory: Any, writer: str, text: str) -> tuple[str, str]:
    """One write as a client writes it: ``upsert_memory``, or the companion tool ``grow`` with one item (the path
    ``hold`` and ``grow`` share, plus the restatement merge ``hold`` leaves out). Returns (mode, memory id)."""
    if writer == "grow":
        from booku_memory.services.companion.service import BookuCompanionService

        grown = await BookuCompanionService(memory.runtime).grow(items=[text])
        return grown["modes"][0], grown["ids"][0]
    result = await memory.get_service(MEMORY_SERVICE).upsert_memory(text)
    return result["mode"], result["id"]


async def run(data: dict[str, Any], directory: Path, writer: str = "upsert") -> dict[str, Any]:
    rng = random.Random(28)
    first: list[tuple[str, str, int]] = [("background", text, i) for i, text in enumerate(data["background"])]
    first += [("old", pair["old"], i) for i, pair in enumerate(data["updates"])]
    first += [("add_base", pair["base"], i) for i, pair in enumerate(data["adds"])]
    first += [("para_base", pair["base"], i) for i, pair in enumerate(data["paraphrases"])]
    second: list[tuple[str, str, int]] = [("new", pair["new"], i) for i, pair in enumerate(data["updates"])]
    second += [("add", pair["add"], i) for i, pair in enumerate(data["adds"])]
    second += [("restatement", pair["restatement"], i) for i, pair in enumerate(data["paraphrases"])]
    rng.shuffle(first)
    rng.shuffle(second)
    ids: dict[tuple[str, int], str] = {}
    merged_into: dict[tuple[str, int], str] = {}
    async with booku_memory.open(directory, config=CONFIG, embedder=LocalE5Embedder()) as memory:
        svc = memory.get_service(MEMORY_SERVICE)
        start = time.perf_counter()
        for role, text, index in [*first, *second]:
            mode, ids[(role, index)] = await write_with(memory, writer, text)
            if mode == "merged":
                merged_into[(role, index)] = ids[(role, index)]
        write_seconds = time.perf_counter() - start
        now_first = before_top3 = marked = 0
        misses: list[str] = []
        for index, pair in enumerate(data["updates"]):
            old_id, new_id = ids[("old", index)], ids[("new", index)]
            now = (await svc.retrieve_memories(pair["now"], top_k=5))["results"]
            before = (await svc.retrieve_memories(pair["before"], top_k=5))["results"]
            hit_now = bool(now) and now[0]["id"] == new_id and new_id != old_id
            hit_before = old_id in [item["id"] for item in before[:3]]
            now_first += hit_now
            before_top3 += hit_before
            detail = (await svc.get_memory_detail(memory_id=old_id))["item"]
            successor = detail["metadata"].get("superseded_by", "")  # absent before migration 0014
            marked += successor == new_id
            if not (hit_now and hit_before):
                misses.append(
                    f"{pair['kind']}: now={'ok' if hit_now else 'MISS'}"
                    f" before={'ok' if hit_before else 'MISS'}"
                    f" marked={successor == new_id} | {pair['old']} -> {pair['new']}"
                    f" | now #1: {now[0]['content_snippet'] if now else '-'}"
                )
        kept = 0
        for index, pair in enumerate(data["updates"]):
            content = (await svc.get_memory_detail(memory_id=ids[("old", index)]))["item"]["content"]
            kept += pair["old"] in content
        columns = {
            row["name"]
            for row in await memory.runtime.db.fetch_all(
                "SELECT name FROM pragma_table_info('booku_memory_records')", ()
            )
        }
        successor_column = "superseded_by" if "superseded_by" in columns else "'' AS superseded_by"
        rows = await memory.runtime.db.fetch_all(
            f"SELECT memory_id, content, {successor_column} FROM booku_memory_records WHERE is_deleted = 0", ()
        )
    # A supersession is right only when the old fact of a pair points at the new fact of the same pair.
    intended = {ids[("old", i)]: ids[("new", i)] for i in range(len(data["updates"]))}
    text_of = {row["memory_id"]: row["content"] for row in rows}
    superseded = {row["memory_id"]: row for row in rows if row["superseded_by"]}
    false_ids = [memory_id for memory_id, row in superseded.items() if intended.get(memory_id) != row["superseded_by"]]
    should_stay = len(rows) - len(data["updates"])
    merged_paraphrases = [
        i for i in range(len(data["paraphrases"])) if merged_into.get(("restatement", i)) == ids[("para_base", i)]
    ]
    wrong_merges = [
        key for key in merged_into if key[0] != "restatement" or merged_into[key] != ids[("para_base", key[1])]
    ]
    return {
        "pairs": len(data["updates"]),
        "now_first": now_first,
        "before_top3": before_top3,
        "marked": marked,
        "false": false_ids,
        "should_stay": should_stay,
        "false_texts": [f"{text_of[i]} -> {text_of.get(superseded[i]['superseded_by'], '?')}" for i in false_ids],
        "paraphrases": len(data["paraphrases"]),
        "paraphrases_merged": len(merged_paraphrases),
        "merged_paraphrases": merged_paraphrases,
        "wrong_merges": wrong_merges,
        "old_kept": kept,
        "writes": len(first) + len(second),
        "write_seconds": write_seconds,
        "misses": misses,
    }


def pct(part: int, whole: int) -> str:
    return f"{100.0 * part / whole:.1f} %" if whole else "n/a"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", type=Path, default=DEFAULT_SET, help="the JSON set (default: the repository's)")
    parser.add_argument("--verbose", action="store_true", help="list the pairs that missed")
    parser.add_argument(
        "--writer",
        choices=("upsert", "grow"),
        default="upsert",
        help="write through upsert_memory (default) or the companion tool grow",
    )
    args = parser.parse_args(argv)
    data = json.loads(args.set.read_text(encoding="utf-8"))
    if "background" not in data:
        data["background"] = json.loads(DEFAULT_SET.read_text(encoding="utf-8"))["background"]
    with tempfile.TemporaryDirectory(prefix="booku-ku-") as directory:
        r = asyncio.run(run(data, Path(directory), args.writer))
    print(
        f"set: {args.set.name} (writer: {args.writer}): {r['pairs']} update pairs, {len(data['adds'])} adds, "
        f"{r['paraphrases']} paraphrases, {len(data['background'])} background; "
        f"{r['writes']} writes in {r['write_seconds']:.1f} s"
    )
    print("| measure | result | target |")
    print("|---|---|---|")
    print(
        f'| new fact first for the "now" question | {r["now_first"]}/{r["pairs"]} = '
        f"{pct(r['now_first'], r['pairs'])}"
        " | ≥ 90 % |"
    )
    print(
        f'| old fact in top 3 for the "before" question | {r["before_top3"]}/{r["pairs"]} = '
        f"{pct(r['before_top3'], r['pairs'])} | |"
    )
    print(f"| update pairs marked superseded | {r['marked']}/{r['pairs']} = {pct(r['marked'], r['pairs'])} | |")
    print(
        f"| false supersessions | {len(r['false'])}/{r['should_stay']} = {pct(len(r['false']), r['should_stay'])}"
        " | ≤ 2 % |"
    )
    print(
        f"| paraphrases merged | {r['paraphrases_merged']}/{r['paraphrases']} = "
        f"{pct(r['paraphrases_merged'], r['paraphrases'])} | ≥ 90 % |"
    )
    print(f"| wrong merges | {len(r['wrong_merges'])} | 0 |")
    print(f"| old text kept | {r['old_kept']}/{r['pairs']} | all |")
    if args.verbose:
        for line in r["misses"]:
            print("  miss:", line)
        for text in r["false_texts"]:
            print("  falsely superseded:", text)
        for i, pair in enumerate(data["paraphrases"]):
            if i not in r["merged_paraphrases"]:
                print("  paraphrase kept apart:", pair["base"], "|", pair["restatement"])
        for key in r["wrong_merges"]:
            print("  wrong merge:", key)
    return 0


if __name__ == "__main__":
    sys.exit(main())

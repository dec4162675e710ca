"""The one decision every memory write makes about its neighbours: a restatement, an update, unsure, or a new fact.

``upsert_memory`` (the group commit in ``memory_writes``) and the companion tools (hold / grow in
``companion/writes``) both ask ``judge_write``, so a fact told through either path is merged, supersedes an older
memory, or goes to the unsure-pair queue by the same rules (``logic.supersession``, docs/SUPERSESSION.md). Pure: it
reads the neighbours it is given and writes nothing; ``supersession_mark`` is the change both paths write on the
memory a new one replaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .logic.novelty import novelty_energy
from .logic.supersession import Decision, FactCues, Thresholds, best_supersession, decide, fact_cues
from .storage.vector_index import VectorHit

EXACT_DUPLICATE_SIMILARITY = 0.9999


@dataclass(frozen=True)
class NewFact:
    """What the decision reads of a memory about to be written."""

    content: str
    folder_id: str
    memory_type: str
    person_id: str | None = None
    dated: bool = False  # it carries an event time


@dataclass(frozen=True)
class WriteJudgement:
    """``target``: the record the write restates (merge into it); ``replaces``: the id of the memory it updates
    (mark it superseded); ``unsure``: (older memory id, ``maybe_update`` | ``maybe_duplicate``) for a model or a
    reviewer to decide after the commit; ``novelty`` as the novelty check computed it."""

    target: dict[str, Any] | None = None
    novelty: float = 1.0
    replaces: str | None = None
    unsure: tuple[str, str] | None = None


def thresholds_of(write_conflict: Any) -> Thresholds:
    """The decision's thresholds from ``config.write_conflict``."""
    return Thresholds(
        update_min_similarity=write_conflict.update_min_similarity,
        restatement_min_similarity=write_conflict.merge_min_similarity,
        restatement_min_overlap=write_conflict.restatement_min_overlap,
    )


def eligible(fact: NewFact, hits: Sequence[VectorHit], records: dict[str, dict[str, Any]]) -> list[VectorHit]:
    """The neighbours a write may merge into or supersede: same folder and type, and for a person memory the same
    person (two people described in the same words are still two people)."""
    return [
        h
        for h in hits
        if h.memory_id in records
        and records[h.memory_id]["folder_id"] == fact.folder_id
        and records[h.memory_id]["memory_type"] == fact.memory_type
        and (fact.memory_type != "person" or records[h.memory_id]["person_id"] == fact.person_id)
    ]


def judge_write(
    write_conflict: Any,
    fact: NewFact,
    vector: np.ndarray,
    hits: Sequence[VectorHit],
    records: dict[str, dict[str, Any]],
    *,
    may_merge: bool = True,
    merge_allowed: Callable[[dict[str, Any]], bool] | None = None,
    cues_of: Callable[[str], FactCues] = fact_cues,
) -> WriteJudgement:
    """Decide a write against its neighbours (``hits`` best first, ``records`` their rows).

    A restatement of the most similar eligible neighbour merges into it (``may_merge=False``: never, as for a held
    moment, which stays its own memory); ``merge_allowed`` may refuse a particular target (a pinned core rule).
    Otherwise the write may supersede one neighbour it updates. The caller holds ``single_threaded_blas`` when it
    judges many writes at once. ``cues_of`` reads a text's cues (a group commit passes its ``CueBook``, which reads
    stored ones back).
    """
    thresholds = thresholds_of(write_conflict)
    near = eligible(fact, hits, records)
    novelty = novelty_energy(vector, [h.embedding for h in hits if h.embedding is not None])
    unsure: tuple[str, str] | None = None
    if may_merge and near:
        best, target = near[0], records[near[0].memory_id]
        if merge_allowed is None or merge_allowed(target):
            if best.similarity >= EXACT_DUPLICATE_SIMILARITY:
                return WriteJudgement(target=target, novelty=0.0)
            # No novelty gate: with few neighbours the novelty of a restatement is 1 − cos², above the cutoff for
            # most paraphrases; the facts test (``logic.supersession.decide``) keeps different facts apart.
            if best.similarity >= thresholds.restatement_min_similarity and not _two_events(fact, target, cues_of):
                decision = decide(cues_of(fact.content), cues_of(target["content"]), best.similarity, thresholds)
                if decision is Decision.DUPLICATE:
                    return WriteJudgement(target=target, novelty=novelty)
                if decision is Decision.MAYBE_DUPLICATE and not target["superseded_by"]:
                    unsure = (best.memory_id, decision.value)
    found = _supersession(fact, near, records, thresholds, cues_of)
    if found is not None and found[1] is Decision.UPDATE:
        return WriteJudgement(novelty=novelty, replaces=found[0])
    if found is not None:
        unsure = (found[0], found[1].value)
    return WriteJudgement(novelty=novelty, unsure=unsure)


def _two_events(fact: NewFact, target: dict[str, Any], cues_of: Callable[[str], FactCues]) -> bool:
    """Two dated memories are two events (what was said or done each time, "Thanks, bye!" said twice is two turns):
    only the exact same text merges; a restatement is a fact told again, not an event. So are two turns of a
    transcript, dated or not: a client archiving a chat live sends no event time, and merging a turn into one said
    days before would leave one memory where the chat had two moments. A transcript is a text with a speaker's
    label (``FactCues.speaker``)."""
    return (fact.dated and bool(target.get("event_start_at"))) or (
        bool(cues_of(fact.content).speaker) and bool(cues_of(target["content"]).speaker)
    )


def _supersession(
    fact: NewFact,
    near: list[VectorHit],
    records: dict[str, dict[str, Any]],
    thresholds: Thresholds,
    cues_of: Callable[[str], FactCues],
) -> tuple[str, Decision] | None:
    """The current memory the write updates or may update: its id with ``UPDATE`` or ``MAYBE_UPDATE``, or None.

    Only neighbours in the update band are read for cues, so a write far from everything costs nothing. Two
    memories that both carry an event time are two events (what was said or done on each day), never one fact that
    changed: a dated write only supersedes an undated memory."""
    if thresholds.update_min_similarity >= 1.0:
        return None
    candidates = [
        (h.memory_id, cues_of(records[h.memory_id]["content"]), h.similarity)
        for h in near
        if h.similarity >= thresholds.update_min_similarity
        and not records[h.memory_id]["superseded_by"]
        and not (fact.dated and records[h.memory_id].get("event_start_at"))
    ]
    if not candidates:
        return None
    return best_supersession(cues_of(fact.content), candidates, thresholds)


def supersession_mark(successor: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The changes and revision note that mark a memory superseded by the just-written ``successor`` (its text is
    never touched)."""
    changes = {"superseded_at": successor["created_at"], "superseded_by": successor["memory_id"]}
    return changes, f"被新记忆 {successor['memory_id']} 取代：{(successor.get('title') or '')[:60]}"

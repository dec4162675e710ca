"""Write-order neighbours: a memory written right next to a strong hit is likely part of the same exchange.

Why: in a conversation the turn that answers a question usually follows the turn that asks it, and the asking turn
repeats the question's words, so both routes rank the asking turn high and the answer a few places lower
(MemoryBank-zh: in 21 of the 38 probing questions whose dense top-1 is wrong, the gold turn was written one or two
turns after that top-1). The store keeps the write order (``rid``), so no extra model call or text is needed.

Method: candidates are neighbours when they sit in the same partition (store and bucket) and their write positions
differ by at most ``radius``. A candidate is then *lifted toward* its best-scoring neighbour::

    lifted(i) = score(i) + weight · max(0, max_{j ∈ neighbours(i)} score(j) − score(i))

so it can rise up to, never above, that neighbour: the best candidate keeps rank 1 and an isolated candidate keeps
its score. Only candidates one of the routes already returned take part: a neighbour outside the candidate pool
counts as score 0 (the fused floor), so no extra vector or text has to be read.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping, Sequence


def write_neighbours(positions: Mapping[str, tuple[Hashable, int]], radius: int = 2) -> dict[str, list[str]]:
    """Candidates written within ``radius`` positions of each other in the same partition.

    ``positions``: id → ``(partition, position)``, e.g. ``((store_key, bucket), rid)``; positions only need to grow
    with write order (gaps from other partitions sharing the counter just make fewer pairs). Returns id → its
    neighbours among the given ids, nearest first (ids without one are absent). ``radius`` < 1 gives ``{}``.
    """
    if radius < 1:
        return {}
    groups: dict[Hashable, list[tuple[int, str]]] = defaultdict(list)
    for key, (partition, position) in positions.items():
        groups[partition].append((int(position), key))
    result: dict[str, list[str]] = {}
    for members in groups.values():
        members.sort(key=lambda item: item[0])
        for index, (position, key) in enumerate(members):
            close: list[tuple[int, str]] = []
            for step in (-1, 1):
                other = index + step
                while 0 <= other < len(members) and abs(members[other][0] - position) <= radius:
                    if members[other][0] != position:
                        close.append((abs(members[other][0] - position), members[other][1]))
                    other += step
            if close:
                close.sort(key=lambda item: item[0])
                result[key] = [neighbour for _distance, neighbour in close]
    return result


def neighbour_lift(
    scores: Mapping[str, float], neighbours: Mapping[str, Sequence[str]], weight: float
) -> dict[str, float]:
    """How much each candidate rises toward its best neighbour: ``weight · max(0, best neighbour − own score)``.

    ``scores``: id → score, higher is better (the fused scores, floor 0). A neighbour missing from ``scores`` counts
    as 0. ``weight`` is clamped to ``[0, 1]``, so a lifted score never exceeds the neighbour that lifted it.
    Returns id → lift (≥ 0) for every id of ``scores``.
    """
    share = min(max(float(weight), 0.0), 1.0)
    lifts: dict[str, float] = {}
    for key, score in scores.items():
        best = max((scores.get(other, 0.0) for other in neighbours.get(key, ())), default=0.0)
        lifts[key] = share * max(0.0, best - score)
    return lifts


def answers_to_questions(
    positions: Mapping[str, tuple[Hashable, int]], asking: Iterable[str], radius: int = 2
) -> dict[str, str]:
    """answer id → question id: for each candidate that ends with a question, the first candidate written after it
    (same partition, within ``radius`` positions), which in a conversation is the turn that answers it."""
    asks = set(asking)
    if radius < 1 or not asks:
        return {}
    groups: dict[Hashable, list[tuple[int, str]]] = defaultdict(list)
    for key, (partition, position) in positions.items():
        groups[partition].append((int(position), key))
    answers: dict[str, str] = {}
    for members in groups.values():
        members.sort(key=lambda item: item[0])
        for (position, key), (next_position, next_key) in zip(members, members[1:]):
            if key in asks and 0 < next_position - position <= radius:
                answers.setdefault(next_key, key)
    return answers


def answer_lift(scores: Mapping[str, float], answers: Mapping[str, str], margin: float) -> dict[str, float]:
    """How much each answer rises to sit just behind its question: ``max(0, score(question) − margin − own)``.

    Applied to the scores after ``neighbour_lift``: the answer ends at most ``margin`` below its question, never
    above it, so the question (which carries the query's words) keeps its place and the answer follows it.
    """
    lifts: dict[str, float] = {}
    for answer, question in answers.items():
        if answer in scores and question in scores:
            lifts[answer] = max(0.0, scores[question] - max(margin, 0.0) - scores[answer])
    return lifts

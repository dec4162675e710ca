"""Speaker match: a memory written as ``"<name>: …"`` whose name the query names says what that person said.

Why: conversation memories are often written with the speaker first (``"Melanie: I went kayaking"``, ``"小明：…"``), and
a question about a person ("What books has Melanie read?") is answered by that person's own statements: in LoCoMo
nearly every gold turn of a question that names one speaker was said by that speaker, while the fused top 5 holds many
turns of the other one. Neither route sees it: the name is in about half the memories, so bm25 gives it almost no
weight, and in the embedding it is one word among many.

Method (step 8 of ``fusion``, after the keyword challenge):

* A candidate *speaks* when its text starts with a short label (a name: letters and spaces, at most
  ``MAX_LABEL_WORDS`` words and ``MAX_LABEL_CHARS`` characters) followed by a colon, and the query names that label
  (as a whole word; a Han label as a substring, Chinese has no spaces).
* Every speaking candidate except rank 1 gains ``FusionParams.speaker_weight`` standard deviations (the ``speaker``
  part), capped just below rank 1. Rank 1 is never displaced: an adversarial question names the wrong person on
  purpose (most of its gold turns are not the named speaker's), and lifting past rank 1 costs those questions
  their best answer.
* Content gate: a lifted candidate also stays below every *rival* above it (a candidate at ranks 2 to
  ``RIVAL_RANKS`` + 1 that does not speak) whose idf-weighted coverage of the query's terms other than the name is
  more than ``CLEAR_LEAD`` times its own. Ungated, "What did Caroline realize after her charity race?" (Melanie ran
  it) pushed Caroline's unrelated statements above the one memory about the race.
* Nothing changes when no candidate or every candidate speaks (a question that names both people, a store whose
  memories all carry one label such as ``用户：…``).

Cost: a short column in the candidate read that ranking already makes and, only when a lift could pass a rival,
one read of the ``contested`` rows' keyword-index text. What the lift and its gate gain is in ``docs/BENCHMARKS.md``
(ranking steps).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .fusion import LEAD_MARGIN, FusedHit
from .inflection import PREFIX_MARK, is_prefix_term
from .segmentation import CoverageWeigher, tokenize

MAX_LABEL_CHARS = 32
"""Longest speaker label read; the candidate query reads ``HEAD_CHARS`` characters of each text for it."""

MAX_LABEL_WORDS = 4
"""A label of more words is a sentence with a colon ("The plan for today: …"), not a name."""

HEAD_CHARS = 40
"""How many leading characters of a memory's text the candidate query reads (``records.CANDIDATE_COLUMNS``)."""

RIVAL_RANKS = 10
"""How many ranks below rank 1 the content gate guards: the memories there that do not speak are the rivals a
lifted memory must not pass when they match the query's content clearly better (``speaker_lift``). Guarding every
rank instead changed no recall@5 and lost 0.1–0.4 of recall@10/25 (offline screening)."""

CLEAR_LEAD = 1.5
"""How many times the lifted memory's content coverage a rival's must exceed to hold it back: a rival that shares
one common word more ("take care") is no reason to stop the lift, one that shares the question's subject is."""

_PREFIX = re.compile(rf"([^:：\n]{{1,{MAX_LABEL_CHARS + 8}}})[:：]")  # room for spaces around a name
_NAME = re.compile(r"[^\W\d_](?:[^\W\d_]|[ ·'’.\-])*")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def _normalised(text: str) -> str:
    return unicodedata.normalize("NFKC", text).lower()


def _prefix(text: str | None) -> str | None:
    """The raw text before the first colon within the first ``MAX_LABEL_CHARS`` characters, else None."""
    match = _PREFIX.match(text or "")
    return match.group(1) if match else None


def _label_of(prefix: str) -> str | None:
    """``prefix`` (``_prefix`` output) as a lower-cased name, or None when it is not a short name."""
    label = " ".join(_normalised(prefix).split())
    if (
        not label
        or len(label) > MAX_LABEL_CHARS
        or len(label.split()) > MAX_LABEL_WORDS
        or _NAME.fullmatch(label) is None
    ):
        return None
    return label


def speaker_label(text: str | None) -> str | None:
    """The lower-cased name before the leading colon of ``text`` (``"Melanie: hi"`` → ``"melanie"``), else None."""
    prefix = _prefix(text)
    return None if prefix is None else _label_of(prefix)


def names_label(query: str, label: str) -> bool:
    """True when ``query`` names ``label``: as a whole word (``"Melanie's"`` names ``melanie``, ``"Melanies"``
    does not); a label with Han characters as a substring, since Chinese text has no word boundaries."""
    text = _normalised(query)
    if _HAN.search(label):
        return label in text
    return re.search(r"(?<![^\W_])" + re.escape(label) + r"(?![^\W_])", text) is not None


def speaking(query: str, heads: Mapping[str, str | None]) -> set[str]:
    """Ids of ``heads`` (id → the start of its text) whose speaker label the query names.

    Each distinct prefix is read as a name once: a conversation store has a handful of speakers, so a retrieval's
    hundred candidates cost a hundred string searches, not a hundred name checks."""
    prefixes = {key: _prefix(head) for key, head in heads.items()}
    named = {
        prefix
        for prefix in set(prefixes.values())
        if prefix is not None and (label := _label_of(prefix)) is not None and names_label(query, label)
    }
    return {key for key, prefix in prefixes.items() if prefix in named} if named else set()


def content_terms(terms: Sequence[str], labels: Iterable[str]) -> list[str]:
    """``terms`` (``query_terms``, optionally ``with_inflections``) without those that spell a word of a speaker
    ``label``: what the query asks about, not whom. Every memory of a speaker holds its name, so the name would
    count for all of them and for none of the others."""
    words = {word for label in labels for word in tokenize(label)}

    def names(term: str) -> bool:
        if is_prefix_term(term):
            stem = term[: -len(PREFIX_MARK)]
            return any(word.startswith(stem) for word in words)
        return term in words

    return [term for term in terms if not names(term)]


def _rivals(hits: Sequence[FusedHit], speakers: set[str]) -> list[FusedHit]:
    """The hits at ranks 2 to ``RIVAL_RANKS`` + 1 that do not speak."""
    return [hit for hit in hits[1 : RIVAL_RANKS + 1] if hit.id not in speakers]


def _moves(hits: Sequence[FusedHit], speakers: set[str], weight: float) -> bool:
    """True when ``speaker_lift`` may move anything: some hit but not every hit speaks and the weight is positive."""
    present = sum(1 for hit in hits if hit.id in speakers)
    return weight > 0 and 0 < present < len(hits)


def contested(hits: Sequence[FusedHit], speakers: set[str], weight: float) -> set[str]:
    """Ids whose content coverage the gate of ``speaker_lift`` reads: the rivals and every speaking hit (not rank
    1) whose lift could pass one of them; empty when nothing can pass a rival, so that no text need be read."""
    if not _moves(hits, speakers, weight):
        return set()
    rivals = _rivals(hits, speakers)
    climbers = {
        hit.id
        for hit in hits[1:]
        if hit.id in speakers and any(hit.score < rival.score < hit.score + weight for rival in rivals)
    }
    return {rival.id for rival in rivals} | climbers if climbers else set()


@dataclass(frozen=True)
class SpeakerLiftPlan:
    """What ``speaker_lift`` needs before it can run: the ``speakers`` (ids that speak as a person the query names),
    the ``contested`` ids whose content coverage gates the lift, and the query's ``content_terms`` to weigh it by.
    The caller reads the contested rows' text only when ``needs_coverage``."""

    speakers: set[str]
    contested: set[str]
    content_terms: list[str]

    @property
    def needs_coverage(self) -> bool:
        return bool(self.contested and self.content_terms)


def plan_speaker_lift(
    query: str, terms: Sequence[str], hits: Sequence[FusedHit], heads: Mapping[str, str | None], weight: float
) -> SpeakerLiftPlan:
    """The pure part of step 8 that the service and the bench share: who speaks (``speaking``), who is contested
    (``contested``) and the query's terms without the named speakers' names (``content_terms``)."""
    speakers = speaking(query, heads)
    labels = {label for key in speakers if (label := speaker_label(heads.get(key))) is not None}
    return SpeakerLiftPlan(speakers, contested(hits, speakers, weight), content_terms(terms, labels))


def content_coverage(
    terms: Sequence[str], texts: Mapping[str, str | None], weights: Mapping[str, float]
) -> dict[str, float]:
    """Each text's idf-weighted coverage of ``terms`` (``content_terms`` output; ``segmentation.term_coverage``)."""
    weigh = CoverageWeigher(terms, weights)
    return {key: weigh(text) for key, text in texts.items()}


def _ceiling(hit: FusedHit, rivals: Sequence[FusedHit], coverage: Mapping[str, float], ceiling: float) -> float:
    """``ceiling`` lowered below every rival above ``hit`` whose coverage exceeds ``CLEAR_LEAD`` times its own."""
    own = coverage.get(hit.id, 0.0)
    for rival in rivals:
        if rival.score > hit.score and coverage.get(rival.id, 0.0) > CLEAR_LEAD * own:
            ceiling = min(ceiling, rival.score - LEAD_MARGIN)
    return ceiling


def speaker_lift(
    hits: Sequence[FusedHit], speakers: set[str], weight: float, coverage: Mapping[str, float] | None = None
) -> list[FusedHit]:
    """``hits`` (best first) with every speaking hit but rank 1 lifted by ``weight``, capped ``LEAD_MARGIN`` below
    rank 1, as a ``speaker`` part; the rest keep their score, order among equals is kept. Unchanged when no hit or
    every hit speaks, or ``weight`` ≤ 0.

    ``coverage`` (id → ``content_coverage`` of the ``contested`` ids) gates the lift: a speaking hit stays below
    every rival above it whose coverage of the query's content terms is more than ``CLEAR_LEAD`` times its own.
    ``None`` (the query names nobody's content, or nothing is contested) lifts ungated."""
    if not _moves(hits, speakers, weight):
        return list(hits)
    top, ceiling = hits[0], hits[0].score - LEAD_MARGIN
    rivals = _rivals(hits, speakers) if coverage else []
    lifted: list[FusedHit] = []
    for hit in hits[1:]:
        if hit.id not in speakers:
            lifted.append(hit)
            continue
        cap = _ceiling(hit, rivals, coverage, ceiling) if rivals and coverage else ceiling
        lift = max(0.0, min(weight, cap - hit.score))
        lifted.append(
            hit
            if lift == 0.0
            else FusedHit(hit.id, hit.score + lift, {**hit.parts, "speaker": hit.parts.get("speaker", 0.0) + lift})
        )
    lifted.sort(key=lambda hit: -hit.score)  # stable: equal scores keep the fused order
    return [top, *lifted]

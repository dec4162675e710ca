"""EPA query reshaping: steer the query vector with the tags of the memories it first finds.

Retrieval runs in two passes. Pass 1 searches with the query embedding ``q`` and yields evidence: candidate
embeddings ``eᵢ``, their cosines ``sᵢ = cos(q, eᵢ)`` and their stored tags. Pass 2 searches again with a reshaped
vector ``r`` and scores every hit with its cosine to ``r`` plus a tag bonus. Tags are never embedded: they only
select which evidence vectors pull (or push) the query.

Logic depth ``L`` (how focused the query is on the evidence's principal directions): with ``B`` the principal basis
holding most of the evidence's energy (``novelty.principal_basis``), ``cₖ = bₖ·q``, ``pₖ = cₖ² / Σ c²``
(keeping ``pₖ > 1e-12``, ``K`` of them)::

    L = clamp(1 − H(p) / log₂ K, 0, 1)     H(p) = −Σ pₖ log₂ pₖ;  L = 1 when K = 1;  L = 0 without basis/energy

Beta (how far pass 2 moves away from ``q``)::

    β = clamp(base_beta + L · logic_depth_scale + (resonance_bonus if resonance), 0, 1)

Resonance = at least two query tag groups are non-empty, or the query text contains a cross-topic marker
(并且 同时 以及 对比 / cross, across).

Tag matches of candidate ``i`` against the query triplet ``(Qc, Qd, Qo)`` (exact, lower-cased)::

    mcᵢ = |Qc ∩ coreᵢ|        mdᵢ = |Qd ∩ diffusionᵢ|
    moᵢ = |Qo ∩ (coreᵢ ∪ diffusionᵢ ∪ genericᵢ)| + |opposingᵢ ∩ Qc|

so a memory counts as *opposed* when it is about what the query says it is not about, or when the memory itself
declares that it is not about the query's core topic. (The reference compared opposing with opposing — bug B10 —
and substituted whitespace tokens of the query for an empty tag group — bug B11; here an empty group contributes
nothing.)

Reshaping, with ``κ = (core_boost_min + core_boost_max) / 2`` and ``wᵢ = max(0, sᵢ)``::

    c = Σ wᵢκ·mcᵢ eᵢ / Σ wᵢκ·mcᵢ                   (weighted mean of core-matching evidence; 0 if none)
    o = Σ wᵢρ·moᵢ eᵢ / Σ wᵢρ·moᵢ                   (same for opposed evidence; ρ = opposing_penalty)
    d = Σ wᵢδ·mdᵢ uᵢ                               (δ = diffusion_boost; uᵢ = Gram–Schmidt direction of eᵢ,
                                                    taken only if ≥ energy_cutoff of eᵢ's energy is new)
    r = normalise((1 − β) q + β (c + d − o))

When no candidate matches any tag, ``r = q`` and the caller can skip pass 2 (``ReshapedQuery.reshaped`` is False).

Final score of a pass-2 hit ``j``: ``cos(r, eⱼ) + tag_bonus`` with
``tag_bonus = β (κ·mcⱼ + δ·mdⱼ − ρ·moⱼ)``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .novelty import principal_coordinates, usable_rows, valid_rows
from .tags import CandidateTags, TagTriplet

_ZERO = 1e-12
_RESONANCE_MARKERS_CJK = ("并且", "同时", "以及", "对比")
_RESONANCE_MARKERS_EN = re.compile(r"\b(?:cross|across)\b", re.IGNORECASE)

__all__ = [
    "CandidateTags",
    "EpaParams",
    "QueryTags",
    "ReshapedQuery",
    "TagMatch",
    "compute_beta",
    "has_resonance",
    "logic_depth",
    "match_tags",
    "reshape_query",
    "reshape_query_detailed",
    "tag_bonus",
]


@dataclass(frozen=True)
class EpaParams:
    """Tunable weights of the EPA route; defaults are the original plugin's shipped values."""

    base_beta: float = 0.3
    logic_depth_scale: float = 0.5
    core_boost_min: float = 1.2
    core_boost_max: float = 1.4
    diffusion_boost: float = 0.3
    opposing_penalty: float = 0.5
    energy_cutoff: float = 0.1
    resonance_bonus: float = 0.1

    @property
    def core_boost(self) -> float:
        """κ: the reference only ever uses the midpoint of the core boost range."""
        low, high = sorted((self.core_boost_min, self.core_boost_max))
        return (low + high) / 2.0


@dataclass(frozen=True)
class TagMatch:
    """Overlap counts of one candidate with the query triplet (formulas in the module docstring)."""

    core: int = 0
    diffusion: int = 0
    opposing: int = 0

    @property
    def any(self) -> bool:
        """True when the candidate matched at least one tag in any direction."""
        return bool(self.core or self.diffusion or self.opposing)


@dataclass(frozen=True)
class ReshapedQuery:
    """Result of ``reshape_query_detailed``.

    ``vector`` is the pass-2 query (unit length, float32 like the input embeddings); ``reshaped`` is False when it
    is simply ``q`` (no tag matched, or the combination cancelled out), in which case pass 2 would repeat pass 1.
    """

    vector: np.ndarray
    reshaped: bool


@dataclass(frozen=True)
class QueryTags:
    """A query triplet's groups as sets, built once per retrieval: ``match_tags`` runs for every hit of both
    passes (~100 per tagged retrieval) and built the three sets on each call."""

    core: frozenset[str]
    diffusion: frozenset[str]
    opposing: frozenset[str]

    @classmethod
    def of(cls, query: TagTriplet | QueryTags) -> QueryTags:
        if isinstance(query, QueryTags):
            return query
        return cls(frozenset(query.core), frozenset(query.diffusion), frozenset(query.opposing))

    @property
    def is_empty(self) -> bool:
        return not (self.core or self.diffusion or self.opposing)


def match_tags(candidate: CandidateTags, query: TagTriplet | QueryTags) -> TagMatch:
    """Count the candidate's tag overlaps with the query triplet (no token fallback for empty groups)."""
    sets = QueryTags.of(query)
    opposed = len(sets.opposing & (candidate.core | candidate.diffusion | candidate.generic))
    opposed += len(candidate.opposing & sets.core)
    return TagMatch(
        core=len(sets.core & candidate.core),
        diffusion=len(sets.diffusion & candidate.diffusion),
        opposing=opposed,
    )


def logic_depth(query_vec: np.ndarray, evidence_matrix: np.ndarray | Sequence[Sequence[float] | None]) -> float:
    """Projection-entropy focus of the query on the evidence subspace, in ``[0, 1]`` (module docstring).

    Evidence rows that are empty, of another length than ``query_vec``, non-finite or zero are dropped before the
    basis is built, so one missing embedding does not force 0 (reference bug B18).
    """
    q = np.asarray(query_vec, dtype=np.float64).reshape(-1)
    coordinates = principal_coordinates(evidence_matrix, q)
    if coordinates.size == 0:
        return 0.0
    energy = coordinates**2
    total = float(energy.sum())
    if total <= _ZERO:
        return 0.0
    p = energy / total
    p = p[p > _ZERO]
    if p.size <= 1:
        return 1.0
    entropy = float(-(p * np.log2(p)).sum())
    return float(min(max(1.0 - entropy / math.log2(p.size), 0.0), 1.0))


def has_resonance(query_text: str | None, triplet: TagTriplet) -> bool:
    """True for a cross-topic query: ≥ 2 non-empty tag groups, or a marker word (并且 同时 以及 对比 cross across)."""
    if triplet.non_empty_groups >= 2:
        return True
    text = (query_text or "").lower()
    if any(marker in text for marker in _RESONANCE_MARKERS_CJK):
        return True
    return bool(_RESONANCE_MARKERS_EN.search(text))


def compute_beta(params: EpaParams, depth: float, resonance: bool) -> float:
    """β = clamp(base_beta + depth·logic_depth_scale + resonance_bonus·[resonance], 0, 1)."""
    beta = params.base_beta + depth * params.logic_depth_scale + (params.resonance_bonus if resonance else 0.0)
    if not math.isfinite(beta):
        return min(max(params.base_beta, 0.0), 1.0)
    return float(min(max(beta, 0.0), 1.0))


def _weighted_mean(rows: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Σwᵢeᵢ / Σwᵢ over positive weights; the zero vector when the weights carry nothing."""
    mask = weights > _ZERO
    total = float(weights[mask].sum())
    if total <= _ZERO:
        return np.zeros(rows.shape[1], dtype=np.float64)
    return (weights[mask] @ rows[mask]) / total


def _diffusion_vector(rows: np.ndarray, weights: np.ndarray, energy_cutoff: float) -> np.ndarray:
    """Σ wᵢ uᵢ over Gram–Schmidt directions that add at least ``energy_cutoff`` new energy (candidate order)."""
    d = rows.shape[1]
    result = np.zeros(d, dtype=np.float64)
    basis: list[np.ndarray] = []
    for row, weight in zip(rows, weights):
        if weight <= _ZERO:
            continue
        norm_sq = float(row @ row)
        if norm_sq <= _ZERO:
            continue
        residual = row.copy()
        if basis:
            stacked = np.vstack(basis)
            residual -= stacked.T @ (stacked @ row)
        residual_sq = float(residual @ residual)
        if residual_sq / norm_sq < energy_cutoff or residual_sq <= _ZERO:
            continue
        direction = residual / math.sqrt(residual_sq)
        basis.append(direction)
        result += weight * direction
    return result


def reshape_query_detailed(
    query_vec: np.ndarray,
    cand_embeddings: np.ndarray | Sequence[Sequence[float] | None],
    cand_tags: Sequence[CandidateTags | None],
    query_triplet: TagTriplet | QueryTags,
    sims: np.ndarray | Sequence[float],
    params: EpaParams,
    beta: float,
) -> ReshapedQuery:
    """Reshape ``q`` with the tag-matching pass-1 evidence (formulas in the module docstring).

    ``cand_embeddings[i]``, ``cand_tags[i]`` and ``sims[i]`` describe candidate ``i``; a candidate without a usable
    embedding (missing, empty, wrong length, zero, non-finite) or without tags (``None``) is ignored. Returns the
    pass-2 vector and whether it differs from ``q``.
    """
    q = np.asarray(query_vec)
    q64 = q.astype(np.float64).reshape(-1)
    unchanged = ReshapedQuery(vector=q, reshaped=False)
    if query_triplet.is_empty or len(cand_tags) == 0:
        return unchanged
    dim = int(q64.size)
    similarities = np.asarray(sims, dtype=np.float64).reshape(-1)
    # A matrix of evidence is checked row by row in one step; a list of rows (any may be missing) one at a time.
    stacked = (
        cand_embeddings.astype(np.float64, copy=False)
        if isinstance(cand_embeddings, np.ndarray) and cand_embeddings.ndim == 2 and cand_embeddings.shape[1] == dim
        else None
    )
    usable = usable_rows(stacked) if stacked is not None else None
    core_w: list[float] = []
    diff_w: list[float] = []
    opp_w: list[float] = []
    rows: list[np.ndarray] = []
    query_tags = QueryTags.of(query_triplet)
    for index, tags in enumerate(cand_tags):
        if tags is None or index >= similarities.size:
            continue
        match = match_tags(tags, query_tags)
        if not match.any:
            continue
        similarity = float(similarities[index])
        if not math.isfinite(similarity) or similarity <= _ZERO:
            continue
        if stacked is not None and usable is not None:
            if index >= stacked.shape[0] or not usable[index]:
                continue
            rows.append(stacked[index])
        else:
            if index >= len(cand_embeddings):
                continue
            row = valid_rows([cand_embeddings[index]], dimension=dim)
            if row.shape[0] == 0:
                continue
            rows.append(row[0])
        core_w.append(similarity * params.core_boost * match.core)
        diff_w.append(similarity * params.diffusion_boost * match.diffusion)
        opp_w.append(similarity * params.opposing_penalty * match.opposing)
    if not rows:
        return unchanged
    evidence = np.vstack(rows)
    core = _weighted_mean(evidence, np.asarray(core_w))
    opposing = _weighted_mean(evidence, np.asarray(opp_w))
    diffusion = _diffusion_vector(evidence, np.asarray(diff_w), params.energy_cutoff)
    steer = core + diffusion - opposing
    if float(steer @ steer) <= _ZERO:
        return unchanged
    combined = (1.0 - beta) * q64 + beta * steer
    norm_sq = float(combined @ combined)
    if norm_sq <= _ZERO or not math.isfinite(norm_sq):
        return unchanged
    vector = (combined / math.sqrt(norm_sq)).astype(q.dtype if q.dtype.kind == "f" else np.float32)
    return ReshapedQuery(vector=vector, reshaped=True)


def reshape_query(
    query_vec: np.ndarray,
    cand_embeddings: np.ndarray | Sequence[Sequence[float] | None],
    cand_tags: Sequence[CandidateTags | None],
    query_triplet: TagTriplet,
    sims: np.ndarray | Sequence[float],
    params: EpaParams,
    beta: float,
) -> np.ndarray:
    """The pass-2 query vector; ``query_vec`` itself when no tag matched (see ``reshape_query_detailed``)."""
    return reshape_query_detailed(query_vec, cand_embeddings, cand_tags, query_triplet, sims, params, beta).vector


def tag_bonus(
    candidate_tags: CandidateTags | None, query_triplet: TagTriplet | QueryTags, params: EpaParams, beta: float
) -> float:
    """Additive score of a pass-2 hit: ``β (κ·mc + diffusion_boost·md − opposing_penalty·mo)``; 0 without tags."""
    if candidate_tags is None or query_triplet.is_empty:
        return 0.0
    match = match_tags(candidate_tags, query_triplet)
    return float(
        beta
        * (
            params.core_boost * match.core
            + params.diffusion_boost * match.diffusion
            - params.opposing_penalty * match.opposing
        )
    )

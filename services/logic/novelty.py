"""Novelty energy: how much of a new vector lies outside the principal subspace of its neighbours.

Let ``E`` be the stacked neighbour embeddings (rows) and ``E = U Σ Vᵀ`` its thin SVD with singular values
``σ₁ ≥ σ₂ ≥ …``. The *principal basis* is the first ``k`` right-singular vectors, where ``k`` is the smallest count
whose cumulative energy share ``Σ_{i≤k} σᵢ² / Σ σᵢ²`` reaches ``energy_share`` (0.9), never taking a direction with
``σᵢ² ≤ 1e-8`` (numerical noise).

The novelty energy of ``v`` is the share of its squared norm left after projecting onto that basis::

    novelty(v) = ‖v − Σ_b (v·b) b‖² / ‖v‖²        ∈ [0, 1]

0 means ``v`` is (a combination of) what the neighbours already say; 1 means it is orthogonal to all of them. With
one neighbour it is ``1 − cos²``. Invalid rows (empty, wrong length, non-finite, zero) are ignored rather than
poisoning the basis, so one bad stored vector cannot disable the check (reference bug B18).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

_ZERO_ENERGY = 1e-12
_NOISE_ENERGY = 1e-8

VectorRows = np.ndarray | Sequence[Sequence[float] | np.ndarray | None]


def valid_rows(rows: VectorRows, dimension: int | None = None) -> np.ndarray:
    """Stack usable vectors into a float64 matrix ``(m, d)``.

    A row is kept when it is non-empty, has ``dimension`` elements (default: the length of the first non-empty
    row), is finite everywhere and has a squared norm above 1e-12. Returns shape ``(0, dimension or 0)`` when none
    survive.
    """
    if not isinstance(rows, np.ndarray) and rows is not None:
        # A list of equal-length vectors (the usual case) takes the vectorised path below; a list with a missing,
        # empty or ragged row is checked row by row.
        try:
            stacked = np.array(rows, dtype=np.float64)
        except (TypeError, ValueError):
            stacked = None
        if stacked is not None and stacked.ndim == 2 and stacked.shape[1] > 0:
            rows = stacked
    if isinstance(rows, np.ndarray) and rows.ndim == 2:
        matrix = rows.astype(np.float64, copy=False)
        if dimension is not None and matrix.shape[1] != dimension:
            return np.zeros((0, dimension), dtype=np.float64)
        return matrix[usable_rows(matrix)]
    kept: list[np.ndarray] = []
    for row in rows if rows is not None else ():
        if row is None:
            continue
        vector = np.asarray(row, dtype=np.float64).reshape(-1)
        if vector.size == 0:
            continue
        if dimension is None:
            dimension = int(vector.size)
        if vector.size != dimension or not np.isfinite(vector).all():
            continue
        if float(vector @ vector) > _ZERO_ENERGY:
            kept.append(vector)
    if not kept:
        return np.zeros((0, dimension or 0), dtype=np.float64)
    return np.vstack(kept)


def usable_rows(matrix: np.ndarray) -> np.ndarray:
    """Boolean mask of the rows of a 2-D float matrix that ``valid_rows`` keeps: finite everywhere, squared norm
    above 1e-12."""
    finite = np.isfinite(matrix).all(axis=1)
    safe = np.where(finite[:, None], matrix, 0.0)
    return finite & (np.einsum("ij,ij->i", safe, safe) > _ZERO_ENERGY)


def _principal_directions(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Squared singular values (descending) and right singular vectors of ``rows``.

    With few rows (the usual case: 8 write neighbours, ~50 retrieval candidates) the eigen-decomposition of the small
    Gram matrix ``R Rᵀ`` is several times cheaper than an SVD of ``R``; each direction is ``Rᵀu / σ``.
    """
    n, d = rows.shape
    if n >= d:
        _, singular, vt = np.linalg.svd(rows, full_matrices=False)
        return singular**2, vt
    eigenvalues, eigenvectors = np.linalg.eigh(rows @ rows.T)
    order = np.argsort(eigenvalues)[::-1]
    energy = np.clip(eigenvalues[order], 0.0, None)
    directions = (rows.T @ eigenvectors[:, order]).T
    sigma = np.sqrt(energy)
    directions = directions / np.where(sigma > 0, sigma, 1.0)[:, None]
    return energy, directions


def principal_basis(matrix: VectorRows, energy_share: float = 0.9, *, dimension: int | None = None) -> np.ndarray:
    """Orthonormal basis (rows, shape ``(k, d)``) of the subspace holding ``energy_share`` of the rows' energy.

    See the module docstring for the construction. ``dimension`` forces the expected vector length (rows of
    another length are ignored). Returns shape ``(0, d)`` when there is no usable row or no energy.
    """
    rows = valid_rows(matrix, dimension)
    d = rows.shape[1]
    if rows.shape[0] == 0:
        return np.zeros((0, d), dtype=np.float64)
    energy, vt = _principal_directions(rows)
    basis = vt[: _principal_count(energy, energy_share)]
    norms = np.linalg.norm(basis, axis=1, keepdims=True)
    return basis / np.where(norms > 0, norms, 1.0)


def _principal_count(energy: np.ndarray, energy_share: float) -> int:
    """How many of the directions (their energies sorted descending) form the principal basis: the fewest whose
    cumulative share reaches ``energy_share``, none at or below the noise floor; 0 without energy."""
    total = float(energy.sum())
    if total <= _ZERO_ENERGY:
        return 0
    # The energies come sorted, so the directions above the noise floor are a prefix.
    usable = int(np.count_nonzero(energy > _NOISE_ENERGY))
    share = np.cumsum(energy) / total
    reached = np.nonzero(share >= min(max(energy_share, 0.0), 1.0) - 1e-12)[0]
    k = int(reached[0]) + 1 if reached.size else energy.size
    return min(k, usable)


def principal_coordinates(matrix: VectorRows, vector: np.ndarray, energy_share: float = 0.9) -> np.ndarray:
    """``B v``: the coordinates of ``vector`` on the principal basis ``B`` of ``matrix``'s rows (``principal_basis``;
    rows of another length than ``vector`` are ignored), without building ``B``. Shape ``(k,)``; empty when there
    is no usable row or no energy.

    Why: every write asks for its novelty and every retrieval for its logic depth, and both need only these
    coordinates. With fewer rows than dimensions (8 write neighbours, ~50 retrieval hits, 384 dimensions) each
    direction is ``bₖ = Rᵀuₖ / σₖ``, so ``bₖ·v = uₖ·(R v) / σₖ``: the small eigenproblem and one product with ``v``,
    not the directions themselves, which leaves the eigenproblem as most of the cost.
    """
    v = np.asarray(vector, dtype=np.float64).reshape(-1)
    rows = valid_rows(matrix, int(v.size))
    if rows.shape[0] == 0:
        return np.zeros(0, dtype=np.float64)
    if rows.shape[0] >= rows.shape[1]:
        energy, vt = _principal_directions(rows)
        return vt[: _principal_count(energy, energy_share)] @ v
    eigenvalues, eigenvectors = np.linalg.eigh(rows @ rows.T)
    order = np.argsort(eigenvalues)[::-1]
    energy = np.clip(eigenvalues[order], 0.0, None)
    k = _principal_count(energy, energy_share)
    return (eigenvectors[:, order[:k]].T @ (rows @ v)) / np.sqrt(energy[:k])


def novelty_energy(vector: np.ndarray, neighbours: VectorRows, energy_share: float = 0.9) -> float:
    """Novelty of ``vector`` against its nearest stored neighbours, in ``[0, 1]`` (module docstring).

    Returns 1.0 when there is no usable neighbour (everything is new) and 0.0 for a zero query vector.
    """
    v = np.asarray(vector, dtype=np.float64).reshape(-1)
    coordinates = principal_coordinates(neighbours, v, energy_share)
    norm_sq = float(v @ v)
    if coordinates.size == 0:
        return 1.0 if norm_sq > _ZERO_ENERGY else 0.0
    if norm_sq <= _ZERO_ENERGY or not np.isfinite(norm_sq):
        return 0.0
    # The basis is orthonormal: what is left of ‖v‖² once its part in the basis, Σ cₖ², is taken away.
    return float(min(max((norm_sq - float(coordinates @ coordinates)) / norm_sq, 0.0), 1.0))

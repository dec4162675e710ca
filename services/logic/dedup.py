"""Relevance-first near-duplicate removal for ranked results.

The original plugin's de-duplicator picked results by diversity after the first hit, so the returned list was not
ordered by relevance and record-less vectors could take slots. Here the rule is simply: walk the candidates from the
best score down and skip one whose cosine with an already kept result is ≥ ``threshold`` (a near-copy says nothing new).
The output keeps score order.
"""

from __future__ import annotations

import numpy as np

_ZERO = 1e-12


def select_distinct(
    order_scores: np.ndarray,
    embeddings: np.ndarray,
    limit: int,
    threshold: float,
    *,
    keyword_mask: np.ndarray | None = None,
) -> list[int]:
    """Indices of up to ``limit`` candidates in descending score, near-copies removed.

    ``order_scores``: ``(n,)`` ranking scores (NaN ranks last). ``embeddings``: ``(n, d)``; a row that is all zero
    or non-finite means "no embedding". Such a candidate is only eligible when ``keyword_mask[i]`` is True (it was found
    by a route that needs no vector: keywords, or the time route); it is then kept without a similarity check, since
    there is nothing to compare.
    Ties keep input order. A ``threshold`` above 1 disables de-duplication.
    Returns indices into the inputs.
    """
    scores = np.asarray(order_scores, dtype=np.float64).reshape(-1)
    n = scores.size
    if n == 0 or limit <= 0:
        return []
    vectors = np.asarray(embeddings, dtype=np.float64)
    if vectors.ndim != 2 or vectors.shape[0] != n:
        raise ValueError(f"embeddings must have shape ({n}, d), got {vectors.shape}")
    finite = np.asarray(np.isfinite(vectors).all(axis=1))
    vectors = np.where(finite[:, None], vectors, 0.0)
    norms = np.linalg.norm(vectors, axis=1)
    has_vector = finite & (norms > _ZERO)
    unit = np.divide(vectors, norms[:, None], out=np.zeros_like(vectors), where=has_vector[:, None])
    allowed = has_vector.copy()
    if keyword_mask is not None:
        allowed |= np.asarray(keyword_mask, dtype=bool).reshape(-1)
    order = np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")
    # Largest cosine of every candidate with any kept result, updated as results are kept: O(limit · n · d).
    closest = np.full(n, -np.inf)
    kept: list[int] = []
    for index in order:
        if not allowed[index]:
            continue
        if has_vector[index]:
            if closest[index] >= threshold:
                continue
            np.maximum(closest, unit @ unit[index], out=closest)
        kept.append(int(index))
        if len(kept) >= limit:
            break
    return kept

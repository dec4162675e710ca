"""temporary"""
from __future__ import annotations
from dataclasses import dataclass
from collections.abc import Sequence, Hashable

@dataclass(frozen=True)
class FusionParams:
    rrf_k: int = 60

@dataclass(frozen=True)
class FusedHit:
    id: Hashable
    score: float
    parts: dict

def reciprocal_rank_fusion(rankings: Sequence[Sequence[Hashable]], k: int = 60):
    scores = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])

def fuse_routes(dense, keyword, *, params=FusionParams(), coverage=None):
    return [FusedHit(i, s, {}) for i, s in reciprocal_rank_fusion([sorted(dense, key=lambda i: -dense[i]), sorted(keyword, key=lambda i: -keyword[i])])]

import numpy as np

from booku_memory.services.logic.dedup import select_distinct


def _rows(*vectors):
    matrix = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return np.divide(matrix, norms, out=np.zeros_like(matrix), where=norms > 0)


def test_keeps_descending_score_order():
    embeddings = np.eye(4)
    assert select_distinct(np.array([0.2, 0.9, 0.5, 0.7]), embeddings, 10, 0.88) == [1, 3, 2, 0]


def test_drops_near_copy_of_a_better_result_and_keeps_order():
    embeddings = _rows([1, 0, 0], [1, 0.05, 0], [0, 1, 0], [0, 0, 1])
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    assert select_distinct(scores, embeddings, 10, 0.88) == [0, 2, 3]


def test_relevance_is_not_traded_for_diversity():
    """Reference bug B9: a diverse but weak candidate must not jump ahead of a strong distinct one."""
    embeddings = _rows([1, 0, 0], [0.6, 0.8, 0], [0, 0, 1])
    scores = np.array([0.9, 0.85, 0.1])
    assert select_distinct(scores, embeddings, 2, 0.88) == [0, 1]


def test_limit_counts_only_kept_items():
    embeddings = _rows([1, 0, 0], [1, 0.01, 0], [0, 1, 0], [0, 0, 1])
    assert select_distinct(np.array([4.0, 3.0, 2.0, 1.0]), embeddings, 2, 0.88) == [0, 2]


def test_candidates_without_embedding_need_a_keyword_hit():
    embeddings = _rows([1, 0, 0], [0, 0, 0], [0, 1, 0], [0, 0, 0])
    scores = np.array([0.9, 0.8, 0.7, 0.6])
    assert select_distinct(scores, embeddings, 10, 0.88) == [0, 2]
    mask = np.array([False, True, False, False])
    assert select_distinct(scores, embeddings, 10, 0.88, keyword_mask=mask) == [0, 1, 2]


def test_nan_scores_rank_last_and_bad_rows_are_missing_embeddings():
    embeddings = np.array([[1.0, 0.0], [np.nan, 1.0], [0.0, 1.0]])
    assert select_distinct(np.array([np.nan, 0.5, 0.4]), embeddings, 10, 0.88) == [2, 0]


def test_threshold_above_one_disables_dedup_and_empty_input():
    embeddings = _rows([1, 0], [1, 0])
    assert select_distinct(np.array([1.0, 0.5]), embeddings, 10, 1.01) == [0, 1]
    assert select_distinct(np.array([]), np.zeros((0, 2)), 5, 0.88) == []
    assert select_distinct(np.array([1.0]), _rows([1, 0]), 0, 0.88) == []

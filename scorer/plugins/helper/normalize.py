"""kube-scheduler's DefaultNormalizeScore, vectorized."""

from __future__ import annotations

import numpy as np

from scorer.framework.types import MAX_NODE_SCORE


def default_normalize_score(scores: np.ndarray, *, reverse: bool, max_priority: int = MAX_NODE_SCORE) -> np.ndarray:
    """Scale scores to [0, max_priority] by the largest one (integer arithmetic).

    max = max(scores, 0). If max == 0: reverse -> all max_priority, else unchanged.
    Otherwise s' = max_priority * s // max, and with reverse s' = max_priority - s'.
    """
    top = int(scores.max()) if len(scores) else 0
    top = max(top, 0)
    if top == 0:
        if reverse:
            return np.full(len(scores), max_priority, dtype=np.int64)
        return scores
    scaled = trunc_div(max_priority * scores, top)
    if reverse:
        scaled = max_priority - scaled
    return scaled


def trunc_div(a: np.ndarray, b: int | np.ndarray) -> np.ndarray:
    """Go's integer division (truncates toward zero), elementwise."""
    q = np.abs(a) // np.abs(b)
    quotient: np.ndarray = np.where((a < 0) ^ (np.asarray(b) < 0), -q, q)
    return quotient


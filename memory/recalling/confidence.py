"""What a similarity is worth: a retrieved memory's cosine similarity to the query, turned into a
probability that it is relevant, measured on locomo-dev.

calibrated(s) = 1 / (1 + exp(−(SLOPE·s + INTERCEPT))): a logistic fit (Platt scaling) of
P(relevant | similarity) over every (question, line) pair of locomo-dev's 231 questions, the
evidence lines against every other line, the two classes weighted equally. So 0.5 is the
similarity as typical of a line a question needed as of one it did not; 0.9, nine times more
typical of the needed kind. Equal weights, because the true prior depends on the bank's size
(1 line in 400 here), and a confidence that shrank as a bank grew would mean nothing to an agent.
`manage.py evaluate_retrieval FILE --calibrate` refits it and prints the reliability table (docs/memory.md).

Similarity is the ranking's own: the best of a memory's content and key embeddings against the
query vector as searched. The tools answer it twice: each fact's `confidence` (recall_facts) and,
for a whole answer, `retrieval_confidence`: the calibrated similarity of its best-matching memory,
0 when nothing came back. The fit is on dialogue lines; on other kinds it is an estimate.
"""

from __future__ import annotations

import math

import numpy as np
from memory.recalling.scoring import SIMILARITY

# evaluate_retrieval --calibrate on locomo-dev: 309 relevant pairs (mean similarity 0.54) against
# 92,430 irrelevant (0.36); 0.5 at similarity 0.45, 0.88 at 0.6, 0.01 at 0.1 (docs/memory.md).
SLOPE = 12.66
INTERCEPT = -5.642


def calibrated(similarity: float | None) -> float:
    if similarity is None:
        return 0.0
    return 1.0 / (1.0 + math.exp(-(SLOPE * float(similarity) + INTERCEPT)))


def retrieval_confidence(results) -> float:
    """A tool answer's confidence: its best memory's calibrated similarity (0 for an empty answer)."""
    sims = [r.components[SIMILARITY] for r in results if r.components.get(SIMILARITY) is not None]
    return round(calibrated(max(sims)), 4) if sims else 0.0


def fit_logistic(similarities, labels, *, weights=None, iterations: int = 50) -> tuple[float, float]:
    """(slope, intercept) maximising the (weighted) likelihood of labels (1: relevant) given
    similarities, by Newton's method (two parameters: no library needed)."""
    x = np.asarray(similarities, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    w = np.ones_like(x) if weights is None else np.asarray(weights, dtype=np.float64)
    design = np.stack([x, np.ones_like(x)], axis=1)
    theta = np.zeros(2)
    for _ in range(iterations):
        p = 1.0 / (1.0 + np.exp(-(design @ theta)))
        gradient = design.T @ (w * (y - p))
        hessian = design.T @ (design * (w * p * (1 - p))[:, None]) + 1e-12 * np.eye(2)
        step = np.linalg.solve(hessian, gradient)
        theta += step
        if np.abs(step).max() < 1e-9:
            break
    return float(theta[0]), float(theta[1])

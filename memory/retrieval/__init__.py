"""Filtered, scored retrieval over a bank: exact below EXACT_LIMIT candidates, HNSW above.

A memory's similarity is its best match over its content embedding and its canonical-query keys
(MemoryKey); the result says which key matched. Scores and their components are computed in SQL.

filters: what a search may return and what it returns · scoring: presets, weights and the score's
SQL · sql: the ranking statement, run and loaded · search: recall() and the exact-vs-index choice.
"""

from memory.retrieval.filters import MemoryFilter, Recalled, RecallResult, episode_context_text, episode_keys
from memory.retrieval.scoring import SCORING_PRESETS, Fusion, resolve_weights
from memory.retrieval.search import EXACT_LIMIT, recall

__all__ = [
    "EXACT_LIMIT", "SCORING_PRESETS", "Fusion", "MemoryFilter", "Recalled", "RecallResult", "episode_context_text",
    "episode_keys", "recall", "resolve_weights",
]

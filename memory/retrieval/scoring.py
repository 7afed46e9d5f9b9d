"""How a candidate is scored: the presets' weights, query_memory's fusion stages, and the SQL of a
score's components."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

RECENCY_DECAY = 0.1         # per turn: recency = exp(-0.1 · turns ago), a half-life of ~7 turns
FUSION_DEPTH = 50           # fusion ranks the top 50 by similarity ∪ the top 50 by BM25 (at least k each)

SCORING_PRESETS: dict[str, dict[str, float]] = {
    "similarity": {"similarity": 1.0, "recency": 0.0, "importance": 0.0},   # seed 000
    "hybrid": {"similarity": 0.6, "recency": 0.2, "importance": 0.2},       # seed 002
    "decayed": {"similarity": 0.6, "recency": 0.1, "importance": 0.3},      # seed 004: importance decays, access boosts
}


@dataclass
class Fusion:
    """query_memory's stages; a weight of 0 switches its stage off (ablation in evaluate_retrieval)."""
    lexical_weight: float
    speaker_boost: float

    @classmethod
    def from_settings(cls, lexical_weight: float | None = None, speaker_boost: float | None = None) -> "Fusion":
        return cls(
            float(settings.RETRIEVAL_LEXICAL_WEIGHT if lexical_weight is None else lexical_weight),
            float(settings.RETRIEVAL_SPEAKER_BOOST if speaker_boost is None else speaker_boost),
        )


def resolve_weights(scoring: str, weights: dict | None) -> dict[str, float]:
    if scoring not in SCORING_PRESETS:
        raise ValueError(f"unknown scoring {scoring!r}: use one of {', '.join(SCORING_PRESETS)}")
    resolved = dict(SCORING_PRESETS[scoring])
    for key, value in (weights or {}).items():
        if key not in resolved:
            raise ValueError(f"unknown weight {key!r}: use similarity, recency or importance")
        resolved[key] = float(value)
    return resolved


def _decay(exponent: str) -> str:
    """exp(−x) in float8, x capped: PostgreSQL raises on underflow (exp(−1000) is an error, not 0),
    which a memory thousands of turns old would otherwise hit."""
    return f"exp(-LEAST(({exponent})::float8, 700.0))"


def score_sql(scoring: str) -> str:
    """Components over alias m (a candidate row carrying sim); %(turn)s is the current turn."""
    age = "GREATEST(%(turn)s - COALESCE(m.turn, 0), 0)"
    recency = _decay(f"{RECENCY_DECAY} * {age}")
    if scoring == "decayed":
        # Seed 004: importance · exp(−decay·age) · (1 + 0.1·ln(accesses)), recent access boost ×1.1.
        importance = (
            f"LEAST(1.0, m.importance / 10.0 * {_decay(f'm.decay_rate * {age}')}"
            " * (1 + 0.1 * ln(GREATEST(m.access_count, 1)))"
            " * (CASE WHEN m.last_accessed_turn IS NOT NULL AND %(turn)s - m.last_accessed_turn <= 1 THEN 1.1 ELSE 1 END))"
        )
    else:
        importance = "m.importance / 10.0"
    return f"m.sim AS c_similarity, {recency}::float8 AS c_recency, {importance}::float8 AS c_importance"

"""How a candidate is scored: the presets' weights, query_memory's fusion stages, and the SQL of a
score's components."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.conf import settings

if TYPE_CHECKING:
    from memory.models import Memory

RECENCY_DECAY = 0.1         # per turn: recency = exp(-0.1 · turns ago), a half-life of ~7 turns
FUSION_DEPTH = 30           # fusion ranks the top 30 by similarity ∪ the top 30 by BM25 (at least k each);
# 30 ranks as well as 50 on both LoCoMo dev conversations (docs/memory.md: Retrieval quality) with ~40 % fewer candidates
FEEDBACK_LINES = 3          # pseudo-relevance feedback: the query moves toward its 3 most relevant candidates,
# ... when the pool holds at least one full top list: among fewer candidates (a young bank) every
# one is in view anyway, and their best 3 only pull the query toward the loudest (tests: test_enhance).
FEEDBACK_MIN_POOL = FUSION_DEPTH
# The `decayed` preset's decay component (seed 004, docs/memory.md "Decay and reinforcement"), per memory:
# A memory's own decay rate when it is made (seeds 000/001: "base decay rate varies by importance";
# seed 000's extended types keep at their own pace): the kind's rate, × (1.5 − importance/10), so
# importance 5 keeps the kind's rate, 10 halves it and 0 makes it half as fast again. What one knows
# (facts, lessons, insights, the sheet and the scene) fades slower than what one saw or heard.
KIND_DECAY_RATES = {"episodic": 0.01, "emotional": 0.01, "observation": 0.015, "action": 0.015, "plan": 0.015,
                    "goal_progress": 0.01, "metacognition": 0.005, "opinion": 0.01, "semantic": 0.005, "reflection": 0.005, "procedural": 0.003, "character": 0.005,
                    "character_knowledge": 0.005, "scene": 0.005}
CONSOLIDATED_RATE_FACTOR = 0.8  # seed 004: a consolidated memory decays 20 % slower than what it sums up


def initial_decay_rate(kind: str, importance: float) -> float:
    base = KIND_DECAY_RATES.get(kind, 0.01)
    return round(base * (1.5 - max(0.0, min(10.0, float(importance))) / 10), 6)


DECAY_EMOTION_SLOWDOWN = 0.5  # rate × (1 − 0.5·emotion): a memory felt at full strength decays half as fast
DECAY_GOAL_FLOOR = 0.5        # a goal-critical memory never fades below half
DECAY_ACCESS_BOOST = 0.1      # × (1 + 0.1·ln accesses): seed 004's diminishing boost per retrieval
DECAY_RECENT_BOOST = 1.1      # × 1.1 when recalled within DECAY_RECENT_TURNS (seed 004: the last hour)
DECAY_RECENT_TURNS = 1
DECAY_EXPONENT_CAP = 700.0    # exp(−x) for x ≤ 700: PostgreSQL raises on float8 underflow

# The cosine part of a score: its component's and its weight's name, and the preset of it alone. Named
# once, so that the default preset and "likeness alone" cannot drift apart in some module's copy.
SIMILARITY = "similarity"
SCORING_PRESETS: dict[str, dict[str, float]] = {
    SIMILARITY: {SIMILARITY: 1.0, "recency": 0.0, "importance": 0.0},   # seed 000
    "hybrid": {SIMILARITY: 0.6, "recency": 0.2, "importance": 0.2},     # seed 002
    "decayed": {SIMILARITY: 0.6, "recency": 0.1, "importance": 0.3},    # seed 004: importance decays, access boosts
}
DEFAULT_SCORING = SIMILARITY  # a run's, a search's and the commands' preset unless one is chosen


@dataclass
class Fusion:
    """query_memory's stages; a weight of 0 switches its stage off (ablation in evaluate_retrieval).
    feedback: β of pseudo-relevance feedback (sql.ranked_sql), 0 for one ranking only."""
    lexical_weight: float
    speaker_boost: float
    feedback: float = 0.0

    @classmethod
    def from_settings(cls, lexical_weight: float | None = None, speaker_boost: float | None = None,
                      feedback: float | None = None) -> "Fusion":
        return cls(
            float(settings.RETRIEVAL_LEXICAL_WEIGHT if lexical_weight is None else lexical_weight),
            float(settings.RETRIEVAL_SPEAKER_BOOST if speaker_boost is None else speaker_boost),
            float(settings.RETRIEVAL_FEEDBACK_WEIGHT if feedback is None else feedback),
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
    return f"exp(-LEAST(({exponent})::float8, {DECAY_EXPONENT_CAP}))"


def memory_emotion(memory: Memory) -> float:
    """How strongly a memory was felt, 0–1: |valence|, and 1 for an `emotional` memory whatever its valence."""
    return max(abs(memory.emotional_valence or 0.0), 1.0 if memory.kind == "emotional" else 0.0)


def goal_critical(memory: Memory) -> bool:
    return bool(memory.related_goals) or memory.category == "goals"


def clock_age(turn: int, memory_turn: int | None, skips: list[float] | None = None) -> float:
    """How old a memory is, in turns: the turns since it was formed plus, with a scenario clock,
    the turns' worth of time skipped in between (chronicle's stage directions: "Three hours later"
    at 2 minutes a turn is 90 turns older). `skips[i]`: the skipped turns' worth up to turn i."""
    formed = memory_turn or 0
    age = turn - formed
    if skips:
        age += skips[min(max(turn, 0), len(skips) - 1)] - skips[min(max(formed, 0), len(skips) - 1)]
    return max(age, 0)


def age_sql() -> str:
    """clock_age over alias m: %(turn)s the current turn, %(skips)s the clock's skips or NULL."""
    skipped = ("COALESCE((%(skips)s::float8[])[LEAST(%(turn)s, cardinality(%(skips)s::float8[]) - 1) + 1]"
               " - (%(skips)s::float8[])[LEAST(COALESCE(m.turn, 0), cardinality(%(skips)s::float8[]) - 1) + 1], 0)")
    return f"GREATEST(%(turn)s - COALESCE(m.turn, 0) + {skipped}, 0)"


def decay_component(memory: Memory, current_turn: int | None, skips: list[float] | None = None) -> float:
    """Seed 004's decay of one memory at current_turn: the `decayed` preset's recency component (its
    importance component is importance/10 times this, at most 1). score_sql computes the same in SQL.
    Not capped: a fresh memory recalled often goes past 1 (seed 004's boosts), so accesses still tell
    apart memories that have not decayed yet.

    A gifted memory (no turn) ages from turn 0, the start of the run, as `hybrid`'s recency counts it:
    a sheet memory the agent keeps recalling stays present, one it never needs fades slowly (goals
    keep their floor). Reinforcement acts through the memory's own fields: reinforce_memory lowers
    decay_rate (×0.8), every recall adds an access and sets last_accessed_turn."""
    turn = int(current_turn or 0)
    rate = memory.decay_rate * (1 - DECAY_EMOTION_SLOWDOWN * memory_emotion(memory))
    retention = math.exp(-min(rate * clock_age(turn, memory.turn, skips), DECAY_EXPONENT_CAP))
    if goal_critical(memory):
        retention = max(DECAY_GOAL_FLOOR, retention)
    value = retention * (1 + DECAY_ACCESS_BOOST * math.log(max(memory.access_count, 1)))
    if memory.last_accessed_turn is not None and turn - memory.last_accessed_turn <= DECAY_RECENT_TURNS:
        value *= DECAY_RECENT_BOOST
    return value


def decayed_importance(memory: Memory, current_turn: int | None, skips: list[float] | None = None) -> float:
    """The `decayed` preset's importance component: seed 004's current importance on a 0–1 scale."""
    return min(1.0, memory.importance / 10 * decay_component(memory, current_turn, skips))


# The per-memory inputs of the decay component, added to the candidates' columns for `decayed` only.
DECAY_COLUMNS = (", GREATEST(abs(m.emotional_valence), CASE WHEN m.kind = 'emotional' THEN 1.0 ELSE 0.0 END)::float8"
                 " AS emotion, (cardinality(m.related_goals) > 0 OR m.category = 'goals') AS goal_critical")


def decay_sql() -> str:
    """decay_component over alias m (a candidate row carrying DECAY_COLUMNS); %(turn)s is the current
    turn, %(skips)s the scenario clock's skips (NULL: none)."""
    rate = f"m.decay_rate * (1 - {DECAY_EMOTION_SLOWDOWN} * m.emotion)"
    retention = _decay(f"{rate} * {age_sql()}")
    retention = f"(CASE WHEN m.goal_critical THEN GREATEST({DECAY_GOAL_FLOOR}::float8, {retention}) ELSE {retention} END)"
    return (f"({retention} * (1 + {DECAY_ACCESS_BOOST} * ln(GREATEST(m.access_count, 1)))"
            f" * (CASE WHEN m.last_accessed_turn IS NOT NULL AND %(turn)s - m.last_accessed_turn <= {DECAY_RECENT_TURNS}"
            f" THEN {DECAY_RECENT_BOOST} ELSE 1 END))")


def score_sql(scoring: str) -> str:
    """Components over alias m (a candidate row carrying sim); %(turn)s is the current turn."""
    if scoring == "decayed":
        # Seed 004: the decay component replaces recency; importance is what is left of it.
        decay = decay_sql()
        return f"m.sim AS c_similarity, {decay}::float8 AS c_recency, LEAST(1.0::float8, m.importance / 10.0 * {decay}) AS c_importance"
    recency = _decay(f"{RECENCY_DECAY} * {age_sql()}")
    return f"m.sim AS c_similarity, {recency}::float8 AS c_recency, (m.importance / 10.0)::float8 AS c_importance"

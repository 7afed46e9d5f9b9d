"""How a search ranks, apart from what it searches for (a query, a filter, k): recall()'s options.

Defined once here. recall() takes them as keyword arguments or as `options=`; an agent's tools carry
the shared ones in their context (ToolContext is an AgentRecall), and each search adds its own.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

from memory.recalling.scoring import DEFAULT_SCORING

if TYPE_CHECKING:
    from memory.recalling.enhance import EnhancedQuery


@dataclass(frozen=True, kw_only=True)
class AgentRecall:
    """What every search of one agent shares: the run's preset and weights, the turn and its clock,
    links followed, the agent's retrieval distortion and mood."""
    scoring: str = DEFAULT_SCORING
    weights: dict | None = None
    current_turn: int | None = None
    clock: list[float] | None = None  # a scenario clock's skips (memory.recalling.scoring.clock_age)
    associations: float = 0.0  # links followed one hop in every search (recall's spreading activation)
    distort: Any = None  # the agent's retrieval-stage distortion (memory.forming.distortion.RetrievalDistortion)
    mood: float = 0.0  # the agent's mood (memory.living.mood): memories that match it are primed

    def recall_options(self, **chosen) -> RecallOptions:
        """These shared options, with what one search chooses besides (exact=…, fusion=…)."""
        shared = {f.name: getattr(self, f.name) for f in fields(AgentRecall)}
        return RecallOptions(**(shared | chosen))


@dataclass(frozen=True, kw_only=True)
class RecallOptions(AgentRecall):
    """recall()'s options: the shared ones and what one search chooses (see recall for each)."""
    exact: bool | None = None
    fusion: bool = False
    lexical_weight: float | None = None
    speaker_boost: float | None = None
    enhance: EnhancedQuery | None = None
    feedback: float | None = None

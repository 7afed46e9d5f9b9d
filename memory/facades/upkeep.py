"""What memory does between lines: reflection, consolidation and story days, when each is due, and the background
they run in."""

from __future__ import annotations

from memory.embedding.yielding import background
from memory.living.consolidation import (
    ConsolidationResult, RECENT_TURNS, consolidate, consolidation_due, consolidations_due, summarizer,
)
from memory.living.days import day_summarise
from memory.living.reflection import (
    importance_since_last_reflection, importance_since_last_reflections, insights_store, lifecycle_totals,
    reflect, reflections_between, statements_to_reflect,
)
from memory.living.reflection_rules import lived_since, reflections_due
from memory.queue import bank_consolidate_request

__all__ = [
    "reflect", "reflections_due", "reflections_between", "importance_since_last_reflection",
    "importance_since_last_reflections", "insights_store", "lifecycle_totals", "statements_to_reflect",
    "lived_since", "consolidate", "consolidation_due", "consolidations_due", "summarizer", "RECENT_TURNS",
    "ConsolidationResult", "bank_consolidate_request", "day_summarise", "background",
]

"""Reading a bank: search, the sheet by category, what was witnessed and told, lore, story days, confidence and
the scoring weights."""

from __future__ import annotations

from memory.living.days import latest_day_turn
from memory.living.days import DAY as DAY_SUMMARY
from memory.recalling.confidence import calibrated
from memory.recalling.lore import lore_triggered
from memory.recalling.scoring import resolve_weights
from memory.recalling.search import recall
from memory.recalling.sheet_recall import MEMORY_KINDS, recall_sheet, recall_stable, stable_snapshot
from memory.recalling.tool_types import WITNESSED_KINDS, restates_window, told_text

__all__ = [
    "recall", "recall_sheet", "recall_stable", "stable_snapshot", "MEMORY_KINDS", "calibrated", "lore_triggered",
    "latest_day_turn", "DAY_SUMMARY", "WITNESSED_KINDS", "restates_window", "told_text", "resolve_weights",
]

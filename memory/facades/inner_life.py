"""How a line leaves each listener feeling, their mood, opinions of people, and plans for the scene."""

from __future__ import annotations

from memory.living.mood import Mood, feel_line, moods
from memory.living.opinions import opinions_after_line
from memory.living.plans import current_plans, plan_make, plan_text
from memory.living.plans import after_line as plans_after_line

__all__ = [
    "Mood", "feel_line", "moods", "opinions_after_line", "plans_after_line", "current_plans", "plan_make",
    "plan_text",
]

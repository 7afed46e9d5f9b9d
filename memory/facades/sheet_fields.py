"""A character's and a scene's sheet as memory seeds a bank from it: the fields, and the aspects a briefing
quotes."""

from __future__ import annotations

from memory.forming.seed_specs import WHOLE_SHEET_K, other_text, sheet_aspects
from memory.forming.sheets import (
    CHARACTER_FIELDS, CHARACTER_LIST_FIELDS, CHARACTER_LONG_LIST_FIELDS, CHARACTER_TEXT_FIELDS,
)

__all__ = [
    "CHARACTER_FIELDS", "CHARACTER_LIST_FIELDS", "CHARACTER_LONG_LIST_FIELDS", "CHARACTER_TEXT_FIELDS",
    "WHOLE_SHEET_K", "other_text", "sheet_aspects",
]

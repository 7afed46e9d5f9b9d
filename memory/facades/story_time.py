"""Dates and times as a story says them."""

from __future__ import annotations

from memory.recalling.story_time import MONTHS, WEEKDAYS, only_time, said_date

__all__ = ["said_date", "only_time", "MONTHS", "WEEKDAYS"]

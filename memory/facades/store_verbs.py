"""The store's verbs as a program calls them over HTTP: retain, recall with tags and floors, reflect on a query,
consolidate."""

from __future__ import annotations

from memory.living.consolidation import consolidate_matching
from memory.living.sessions import consolidate_sessions, session_summarizer
from memory.services.store import (
    MAX_RESULTS, MemoryLimitReached, SIMILARITY_THRESHOLD, memories_describe, recall_filtered, reflect_on,
    room_check, tag_mode,
)
from memory.services.store import retain as memory_retain

__all__ = [
    "memory_retain", "recall_filtered", "reflect_on", "room_check", "memories_describe", "consolidate_matching",
    "consolidate_sessions", "session_summarizer", "MemoryLimitReached", "MAX_RESULTS", "SIMILARITY_THRESHOLD",
    "tag_mode",
]

"""What a spoken line leaves in its listeners' banks: the capture planned in the turn and committed after it,
linked, reinforced, superseded, its lesson and its accesses."""

from __future__ import annotations

from memory.embedding.cache import embed_ahead
from memory.forming.adaptive import ADAPTIVE_CEILING
from memory.forming.capture import capture_commit, capture_prepare, capture_soon, earlier_lines, remember_utterance
from memory.forming.extraction import lesson_of
from memory.forming.importance import CaptureFilters, Skipped
from memory.queue import line_extract_request
from memory.services import accesses_record, memories_supersede, memory_associate, memory_reinforce

__all__ = [
    "CaptureFilters", "Skipped", "ADAPTIVE_CEILING", "capture_prepare", "capture_commit", "capture_soon",
    "earlier_lines", "embed_ahead", "line_extract_request", "memories_supersede", "memory_associate",
    "memory_reinforce", "accesses_record", "lesson_of", "remember_utterance",
]

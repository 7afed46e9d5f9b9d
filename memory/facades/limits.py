"""The bounds every outside input is held to (the HTTP API's schemas), with their clean-up."""

from __future__ import annotations

from memory.services.validation import (
    INT_MAX, NAME_LIMIT, OFFSET_MAX, RECALL_K_MAX, RETAIN_LISTENERS_MAX, TEXT_LIMIT, clean_kinds, clean_text,
)

__all__ = [
    "INT_MAX", "NAME_LIMIT", "OFFSET_MAX", "RECALL_K_MAX", "RETAIN_LISTENERS_MAX", "TEXT_LIMIT", "clean_kinds",
    "clean_text",
]

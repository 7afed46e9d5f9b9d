"""One memory written or changed by a writer or a program: checked, created, revised, marked, archived and back,
pruned and back."""

from __future__ import annotations

from memory.living.consolidation import memory_statuses_set, statuses_of
from memory.living.pruning import memories_prune, memories_unprune
from memory.services import (
    memories_create, memories_dated, memory_archive, memory_check, memory_create, memory_mark, memory_restore,
    memory_revise, memory_update,
)

__all__ = [
    "memory_check", "memory_create", "memories_create", "memory_archive", "memory_restore", "memory_mark",
    "memory_update", "memory_revise", "memory_statuses_set", "statuses_of", "memories_dated", "memories_prune",
    "memories_unprune",
]

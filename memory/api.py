"""Memory's public API: everything another app (chronicle, the simulations) may use, in one place.

`memory` knows nothing of its callers. They import from here (and the models from memory.models, for
the ORM), never from memory's other modules: tests/test_foundation.py checks it, so what memory
offers stays visible and small enough to change behind.
"""

from __future__ import annotations

# What a bank holds and how it is seeded: a character's or a scene's sheet.
from memory.sheets import CharacterSheet, ExtraMemory, ScenarioSheet
from memory.seeding import WHOLE_SHEET_K, other_text

# Writing memories and banks (services: each a transaction, validated).
from memory.services import (
    CapturePlan, accesses_record, bank_carry, bank_copy, bank_create, bank_delete, bank_hold, bank_mark_seeded,
    bank_request_seed, capture_commit, capture_prepare, memories_supersede, memory_archive, memory_associate,
    memory_create, memory_reinforce, memory_restore, memory_revise, memory_statuses_set, memory_update,
    validate_content,
)
from memory.services.banks import CARRY_MODES
from memory.services.capture import earlier_lines
from memory.services.consolidation import statuses_of
from memory.importance import CaptureFilters, Skipped
from memory.signals import memory_edited

# Reading: search, the sheet by category, confidence, scoring presets.
from memory.retrieval import MemoryFilter, recall
from memory.retrieval.confidence import calibrated
from memory.retrieval.scoring import SCORING_PRESETS, resolve_weights
from memory.sheet_recall import MEMORY_KINDS, recall_sheet, recall_stable, stable_snapshot

# The agent's tools (also served over MCP).
from memory.tools import (
    DEFAULT_SIMULATION_TOOLS, QUERY_MEMORY_KINDS, REGISTRY, SIMULATION_TOOLS, WRITE_TOOLS, ToolContext, call_tool,
    openai_tool_schemas,
)

# What a line leaves behind: relationships, lessons, distortions; reflection and consolidation.
from memory.after_turn import REFLECT_STATEMENTS
from memory.consolidation import (
    RECENT_TURNS, ConsolidationResult, consolidate, consolidation_due, consolidations_due, summarizer,
)
from memory.distortion import DistortionError, retrieval_filter
from memory.distortion import parse as parse_distortions
from memory.extraction import lesson_of
from memory.reflection import (
    importance_since_last_reflection, importance_since_last_reflections, insights_store, lifecycle_totals,
    recent_memories, reflect,
)
from memory.relationships import describe, relationships_update, standing

# Work done by memory's workers.
from memory.tasks import bank_map_task, consolidate_bank_task, extract_task, seed_bank_task

# The error a failing embedding model raises (a turn that meets it is paused, not lost).
from memory.embedding.errors import EmbeddingError

# A bank's map (the memory map page): its memories laid out in two dimensions.
from memory.projection import bank_map

__all__ = [
    "CharacterSheet", "ExtraMemory", "ScenarioSheet", "WHOLE_SHEET_K", "other_text",
    "CapturePlan", "accesses_record", "bank_carry", "bank_copy", "bank_create", "bank_delete", "bank_hold",
    "bank_mark_seeded", "bank_request_seed", "capture_commit", "capture_prepare", "memories_supersede",
    "memory_archive", "memory_associate", "memory_create", "memory_reinforce", "memory_restore", "memory_revise",
    "memory_statuses_set", "memory_update", "validate_content", "CARRY_MODES", "earlier_lines", "statuses_of",
    "CaptureFilters", "Skipped", "memory_edited",
    "MemoryFilter", "recall", "calibrated", "SCORING_PRESETS", "resolve_weights", "MEMORY_KINDS", "recall_sheet",
    "recall_stable", "stable_snapshot",
    "DEFAULT_SIMULATION_TOOLS", "QUERY_MEMORY_KINDS", "REGISTRY", "SIMULATION_TOOLS", "WRITE_TOOLS", "ToolContext",
    "call_tool", "openai_tool_schemas",
    "REFLECT_STATEMENTS", "RECENT_TURNS", "consolidate", "consolidation_due", "consolidations_due", "summarizer",
    "DistortionError", "retrieval_filter", "parse_distortions", "lesson_of", "importance_since_last_reflection",
    "importance_since_last_reflections", "insights_store", "lifecycle_totals", "recent_memories", "reflect",
    "describe", "relationships_update", "standing",
    "bank_map_task", "consolidate_bank_task", "extract_task", "seed_bank_task",
    "EmbeddingError", "bank_map", "ConsolidationResult",
]

"""Memory's public API: everything another app (chronicle, the HTTP API) may use, in one place.

`memory` knows nothing of its callers. They import from here (and the models from memory.models, for
the ORM), never from memory's other modules: tests/test_layering.py checks it, so what memory
offers stays visible and small enough to change behind.
"""

from __future__ import annotations

# What a bank holds and how it is seeded: a character's or a scene's sheet.
from memory.forming.seed_specs import WHOLE_SHEET_K, other_text, sheet_aspects
from memory.forming.sheets import (
    CHARACTER_FIELDS, CHARACTER_LIST_FIELDS, CHARACTER_LONG_LIST_FIELDS, CHARACTER_TEXT_FIELDS, CharacterSheet,
    ExtraMemory, ScenarioSheet,
)

# Writing memories and banks (services: each a transaction, validated).
from memory.forming.capture import (
    CapturePlan, capture_commit, capture_prepare, capture_soon, earlier_lines, remember_utterance,
)
from memory.forming.adaptive import ADAPTIVE_CEILING
from memory.forming.importance import CaptureFilters, Skipped
from memory.forming.seeding import bank_request_seed, bank_seed
from memory.living.consolidation import memory_statuses_set, statuses_of
from memory.services import (
    accesses_record, bank_carry, bank_copy, bank_create, bank_delete, bank_hold, bank_mark_seeded, bank_rename,
    banks_delete,
    memories_create, memories_dated, memories_supersede, memory_archive, memory_associate, memory_check, memory_create,
    memory_mark, memory_reinforce, memory_restore, memory_revise, memory_update, secrets_mark_told,
)
from memory.services.banks import (
    CARRY_MODES, access_check, accesses_export, accesses_import, relationship_check, relationships_export,
    relationships_import,
)
from memory.signals import memory_edited

# Seed 004's store verbs as programs call them (the HTTP API): retain with context, metadata, entities
# and tags under the per-agent cap; recall with tag modes and floors; reflect on a query; consolidate.
from memory.services.store import (
    MAX_RESULTS, SIMILARITY_THRESHOLD, MemoryLimitReached, memories_describe, recall_filtered, reflect_on, room_check, tag_mode,
)
from memory.services.store import retain as memory_retain
from memory.living.consolidation import consolidate_matching
from memory.living.sessions import consolidate_sessions, session_summarizer
# Pruning: faded, unimportant lived memories archived (and back), by the bank page and Celery beat.
from memory.living.pruning import faded, memories_prune, memories_unprune, pruned_count

# Card lore woken by its keys in the recent lines (SillyTavern's world info).
from memory.recalling.lore import lore_triggered

# Seed 002's statistics of one agent's memories (the analytics page, the API's /stats/<agent>).
from memory.measuring.stats import BANDS as IMPORTANCE_BANDS, MemoryStats, memory_stats

# Seed 004's operation counters, as every process added to them (wonda_site.metrics serves them).
from memory.measuring.operations import BUCKETS as OPERATION_BUCKETS
from memory.measuring.operations import read as operation_counts

# The bounds every outside input is held to (the HTTP API's schemas), with their clean-up, and the
# one text rule (the API, the MCP tools, the forms and the imports share it).
from memory.services.validation import (
    INT_MAX, NAME_LIMIT, OFFSET_MAX, RECALL_K_MAX, RETAIN_LISTENERS_MAX, TEXT_LIMIT, clean_kinds, clean_text,
    text_problem, text_problem_in, visible,
)

# Reading: search, the sheet by category, confidence, scoring presets.
from memory.recalling.confidence import calibrated
from memory.recalling.filters import MemoryFilter
from memory.forming.seed_specs import SECRET_LABEL
from memory.recalling.held import HeldBelief, beliefs_planted, held_beliefs, held_claims, held_secrets
from memory.recalling.scoring import DEFAULT_SCORING, SCORING_PRESETS, resolve_weights
from memory.recalling.search import recall
from memory.recalling.story_time import MONTHS, WEEKDAYS, only_time, said_date
from memory.recalling.sheet_recall import MEMORY_KINDS, recall_sheet, recall_stable, stable_snapshot

# The agent's tools (served over MCP too: build_server, below).
from memory.recalling.tools import (
    DEFAULT_SIMULATION_TOOLS, QUERY_MEMORY_KINDS, REGISTRY, SIMULATION_TOOLS, WRITE_TOOLS, ToolContext, call_tool,
    openai_tool_schemas,
)
from memory.recalling.tool_types import WITNESSED_KINDS, restates_window, told_text

# What a line leaves behind: relationships, lessons, distortions; reflection and consolidation.
from memory.forming.distortion import DistortionError, retrieval_filter
from memory.forming.distortion import parse as parse_distortions
from memory.forming.extraction import lesson_of
from memory.living.consolidation import (
    RECENT_TURNS, ConsolidationResult, consolidate, consolidation_due, consolidations_due, summarizer,
)
from memory.living.days import DAY as DAY_SUMMARY, day_summarise, latest_day_turn
from memory.living.reflection import (
    importance_since_last_reflection, importance_since_last_reflections, insights_store, lifecycle_totals,
    reflect, reflections_between, statements_to_reflect,
)
from memory.living.reflection_rules import lived_since, reflections_due
# How a line leaves each listener feeling, and each agent's mood (primes its searches).
from memory.living.mood import Mood, feel_line, moods
# An agent's plan for the scene and its goals' progress.
from memory.living.plans import after_line as plans_after_line
from memory.living.plans import current_plans, plan_make, plan_text
# Opinions of people, with a confidence evidence moves; seed 004's four networks by kind.
from memory.living.opinions import SEED004_NETWORKS, opinions_after_line
from memory.living.relationships import describe, relationships_update, standing

# Work memory's workers do, asked for (no task crosses this module: they are memory's to queue).
from memory.queue import bank_consolidate_request, bank_map_request, line_extract_request

# The error a failing embedding model raises (a turn that meets it is paused, not lost).
from memory.embedding.errors import EmbeddingError

# Texts a later write will store, embedded ahead of it (a run's stage directions).
from memory.embedding.cache import embed_ahead

# Work nobody waits on (a reflection, a consolidation): its encodes yield the cores to a turn's.
from memory.embedding.yielding import background

# A bank's map (the memory map page): its memories laid out in two dimensions.
from memory.measuring.projection import bank_map


def build_server(context: ToolContext | None = None, *, context_for=None, ask_for=None):
    """The agent tools, with reflect and consolidate, as an MCP server (memory.mcp_server.build_server).

    Imported when asked, on purpose: the MCP SDK takes ~0.9 s to import, which workers and commands
    that never serve MCP would otherwise pay through this module."""
    from memory.mcp_server import build_server as build

    return build(context, context_for=context_for, ask_for=ask_for)


__all__ = [
    "CHARACTER_FIELDS", "CHARACTER_LIST_FIELDS", "CHARACTER_LONG_LIST_FIELDS", "CHARACTER_TEXT_FIELDS",
    "CharacterSheet", "ExtraMemory", "ScenarioSheet", "WHOLE_SHEET_K", "other_text", "sheet_aspects",
    "CapturePlan", "accesses_record", "bank_carry", "bank_copy", "bank_create", "bank_delete", "banks_delete",
    "bank_hold", "bank_rename",
    "bank_mark_seeded", "bank_request_seed", "bank_seed", "memory_check", "capture_commit", "capture_prepare", "capture_soon", "memories_supersede",
    "memories_create", "memories_dated", "memory_archive", "memory_associate", "memory_create", "memory_mark", "memory_reinforce", "memory_restore",
    "memory_revise",
    "memory_statuses_set", "memory_update", "CARRY_MODES", "earlier_lines", "statuses_of",
    "CaptureFilters", "Skipped", "memory_edited", "remember_utterance", "ADAPTIVE_CEILING",
    "INT_MAX", "NAME_LIMIT", "OFFSET_MAX", "RECALL_K_MAX", "RETAIN_LISTENERS_MAX", "TEXT_LIMIT", "clean_kinds",
    "clean_text", "text_problem", "text_problem_in", "visible",
    "SECRET_LABEL", "HeldBelief", "beliefs_planted", "held_beliefs", "held_claims", "held_secrets", "secrets_mark_told",
    "MemoryFilter", "recall", "said_date", "only_time", "MONTHS", "WEEKDAYS",
    "calibrated", "DEFAULT_SCORING", "SCORING_PRESETS", "resolve_weights", "MEMORY_KINDS", "recall_sheet",
    "recall_stable", "stable_snapshot",
    "DEFAULT_SIMULATION_TOOLS", "QUERY_MEMORY_KINDS", "REGISTRY", "SIMULATION_TOOLS", "WRITE_TOOLS", "ToolContext",
    "call_tool", "openai_tool_schemas", "build_server", "WITNESSED_KINDS", "restates_window", "told_text",
    "RECENT_TURNS", "consolidate", "consolidation_due",
    "consolidations_due", "summarizer",
    "DistortionError", "retrieval_filter", "parse_distortions", "lesson_of", "importance_since_last_reflection",
    "DAY_SUMMARY", "day_summarise", "latest_day_turn", "importance_since_last_reflections", "insights_store", "reflections_between", "lifecycle_totals", "statements_to_reflect", "reflect",
    "lived_since", "reflections_due", "Mood", "feel_line", "moods",
    "plans_after_line", "current_plans", "plan_make", "plan_text", "SEED004_NETWORKS", "opinions_after_line",
    "describe", "relationships_update", "standing", "relationship_check", "relationships_export", "relationships_import",
    "access_check", "accesses_export", "accesses_import",
    "bank_consolidate_request", "bank_map_request", "line_extract_request",
    "EmbeddingError", "embed_ahead", "background", "bank_map", "ConsolidationResult",
    "MAX_RESULTS", "SIMILARITY_THRESHOLD", "MemoryLimitReached", "recall_filtered", "reflect_on", "room_check",
    "tag_mode", "memory_retain", "memories_describe", "consolidate_matching", "consolidate_sessions", "session_summarizer", "operation_counts", "OPERATION_BUCKETS",
    "IMPORTANCE_BANDS", "MemoryStats", "memory_stats", "lore_triggered",
    "faded", "memories_prune", "memories_unprune", "pruned_count",
]

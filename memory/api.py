"""Memory's public API: everything another app (chronicle, the HTTP API) may use, in one place.

`memory` knows nothing of its callers. They import from here (and the models from memory.models, for
the ORM), never from memory's other modules: tests/test_layering.py checks it, so what memory
offers stays visible and small enough to change behind. Besides a few types every caller passes
around, what memory offers is grouped by what a caller does (memory/facades/: one module each, its
`__all__` the list): `line_capture.capture_prepare(…)`, `recollection.recall(…)`, `banks.bank_create(…)`.
No Celery task crosses it (background work is asked for through request services), no prompt's words
and no parser of memory's own.
"""

from __future__ import annotations

# The types every caller passes around: a character's and a scene's sheet, a search's filter, a line's
# capture (planned in the turn, committed after it), the agent tools' context.
from memory.forming.sheets import CharacterSheet, ExtraMemory, ScenarioSheet
from memory.recalling.filters import MemoryFilter
from memory.forming.capture import CapturePlan
from memory.recalling.tools import ToolContext, call_tool

# The one text rule (the API, the MCP tools, the forms and the imports share it).
from memory.services.validation import text_problem, text_problem_in

# The scoring presets, the one default every run, search and command starts from, and the name of a
# score's similarity part (its component, its weight, the preset of it alone).
from memory.recalling.scoring import DEFAULT_SCORING, SCORING_PRESETS, SIMILARITY

# The error a failing embedding model raises (a turn that meets it is paused, not lost).
from memory.embedding.errors import EmbeddingError

# Sent when a memory is edited outside a service (the admin): chronicle keeps its history.
from memory.signals import memory_edited

# The services, by what a caller does with them.
from memory.facades import (
    bank_files, banks, beliefs_held, distortions, inner_life, limits, line_capture, memory_edits, recollection,
    relations, sheet_fields, store_verbs, story_time, tools_offered, upkeep,
)


def build_server(context: ToolContext | None = None, *, context_for=None, ask_for=None):
    """The agent tools, with reflect and consolidate, as an MCP server (memory.mcp_server.build_server).

    Imported when asked, on purpose: the MCP SDK takes ~0.9 s to import, which workers and commands
    that never serve MCP would otherwise pay through this module."""
    from memory.mcp_server import build_server as build

    return build(context, context_for=context_for, ask_for=ask_for)


__all__ = [
    "CharacterSheet", "ExtraMemory", "ScenarioSheet", "MemoryFilter", "CapturePlan", "ToolContext", "call_tool",
    "build_server", "text_problem", "text_problem_in", "DEFAULT_SCORING", "SCORING_PRESETS", "SIMILARITY",
    "EmbeddingError", "memory_edited",
    "bank_files", "banks", "beliefs_held", "distortions", "inner_life", "limits", "line_capture", "memory_edits",
    "recollection", "relations", "sheet_fields", "store_verbs", "story_time", "tools_offered", "upkeep",
]

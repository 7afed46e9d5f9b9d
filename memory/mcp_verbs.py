"""Seed 004's reflect and consolidate as MCP tools, beside the agent tools (memory.mcp_server).

The agent tools are what a simulated agent calls in a turn; these two are the store's verbs, which
the HTTP API serves as POST …/reflect and …/consolidate: the same services, the same parameters and
rules, and the same model (the run's the bank belongs to, when the server is given a way to find it:
`ask_for`); without one, reflect lists the memories and consolidation writes its summaries offline.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from django.core.exceptions import ValidationError

from memory.living.consolidation import consolidate_matching, summarizer
from memory.living.sessions import MIN_SESSION_LINES, SESSION_MINUTES, SESSION_PROMPT, consolidate_sessions
from memory.recalling.tool_types import ToolCallResult, ToolContext
from memory.services.store import MAX_RESULTS, SIMILARITY_THRESHOLD, reflect_on, tag_filter
from memory.services.validation import INT_MAX, RECALL_K_MAX, clean_text
from memory.recalling.scoring import SIMILARITY

Ask = Callable[..., str]

_TAGS = {"type": "array", "items": {"type": "string"},
         "description": "Only memories with these tags (see tag_mode); none: no tag filter."}
_TAG_MODE = {"type": "string", "enum": ["any", "all", "any_strict", "all_strict"], "default": "any",
             "description": "any/all keep untagged memories in view; the strict modes ask for the tags."}
_CONTEXT = {"type": "string", "description": "What the question or the memories are about, said to the model first."}

SCHEMAS = {
    "reflect": {
        "description": ("Answer a question in your own voice from your memories (seed 004's reflect): your "
                        "memories at least similarity_threshold similar to the query, and the answer the model "
                        "writes from them (without a model, the memories listed). Nothing is stored."),
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "The question to answer from your memories."},
            "context": _CONTEXT, "tags": _TAGS, "tag_mode": _TAG_MODE,
            "similarity_threshold": {"type": "number", "minimum": -1, "maximum": 1, "default": SIMILARITY_THRESHOLD},
            "max_results": {"type": "integer", "minimum": 1, "maximum": RECALL_K_MAX, "default": MAX_RESULTS},
        }, "required": ["query"], "additionalProperties": False},
    },
    "consolidate": {
        "description": ("Merge groups of your similar episodic and observation memories into summaries (seed 004's "
                        "consolidate): memories at cosine >= threshold to a group's oldest join it; each group of two "
                        "or more becomes one summary, 10 % more important, tags merged, decaying 20 % slower; the "
                        "originals are kept as consolidated. Answers the summaries."),
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string", "description": "Only the memories most similar to this."},
            "context": _CONTEXT, "tags": _TAGS, "tag_mode": _TAG_MODE,
            "threshold": {"type": "number", "minimum": 0, "maximum": 1, "default": SIMILARITY_THRESHOLD},
            "before_turn": {"type": "integer", "description": "Only memories of turns before this one."},
            "by": {"type": "string", "enum": [SIMILARITY, "session"], "default": SIMILARITY,
                   "description": "session: your conversation sessions by story time instead, each summarised."},
            "session_minutes": {"type": "number", "minimum": 1, "maximum": 10080, "default": SESSION_MINUTES,
                                "description": "by session: every line within this many story minutes of the first."},
            "min_lines": {"type": "integer", "minimum": 2, "maximum": 1000, "default": MIN_SESSION_LINES},
        }, "additionalProperties": False},
    },
}
VERBS = tuple(SCHEMAS)


def _number(arguments: dict, name: str, default: float, low: float, high: float) -> float:
    value = arguments.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or not low <= value <= high:
        raise ValidationError({name: f"must be a number from {low:g} to {high:g}."})
    return float(value)


def _whole(arguments: dict, name: str, default: int | None, low: int, high: int) -> int | None:
    value = arguments.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValidationError({name: f"must be a whole number from {low:,} to {high:,}."})
    return value


def _reflect(arguments: dict, context: ToolContext, ask: Ask | None) -> dict:
    query = clean_text(arguments.get("query"), "query")
    said = clean_text(arguments.get("context", ""), "context", required=False)
    tags = tag_filter(arguments.get("tags"), arguments.get("tag_mode"))
    answer, used = reflect_on(context.bank, context.agent, query, context=said, tags=tags.get("tags"),
                              mode=tags.get("tags_mode", "any"),
                              similarity_threshold=_number(arguments, "similarity_threshold", SIMILARITY_THRESHOLD, -1, 1),
                              max_results=_whole(arguments, "max_results", MAX_RESULTS, 1, RECALL_K_MAX),
                              current_turn=context.current_turn, ask=ask)
    return {"answer": answer, "memories": [{"id": r.memory.pk, "content": r.memory.content, "kind": r.memory.kind,
                                            "turn": r.memory.turn, SIMILARITY: round(r.components.get(SIMILARITY, 0.0), 4)}
                                           for r in used]}


def _consolidate(arguments: dict, context: ToolContext, ask: Ask | None) -> dict:
    query = arguments.get("query")
    query = clean_text(query, "query") if query is not None else None
    said = clean_text(arguments.get("context", ""), "context", required=False)
    tags = tag_filter(arguments.get("tags"), arguments.get("tag_mode"))
    by = arguments.get("by", SIMILARITY)
    if by not in (SIMILARITY, "session"):
        raise ValidationError({"by": ["use similarity or session."]})
    if by == "session":
        results = consolidate_sessions(
            context.bank, context.agent, minutes=_number(arguments, "session_minutes", SESSION_MINUTES, 1, 10_080),
            min_lines=_whole(arguments, "min_lines", MIN_SESSION_LINES, 2, 1000), tags=tags.get("tags"),
            summarize=summarizer(ask, context=said, prompt=SESSION_PROMPT) if ask is not None else None)
        return {"summaries": [_summary(r) for r in results]}
    results = consolidate_matching(context.bank, context.agent, query=query, tags=tags.get("tags"),
                                   mode=tags.get("tags_mode", "any"),
                                   threshold=_number(arguments, "threshold", SIMILARITY_THRESHOLD, 0, 1),
                                   before_turn=_whole(arguments, "before_turn", None, -INT_MAX - 1, INT_MAX),
                                   summarize=summarizer(ask, context=said) if ask is not None else None)
    return {"summaries": [_summary(r) for r in results]}


def _summary(result) -> dict:
    return {"id": result.summary.pk, "content": result.summary.content, "importance": result.summary.importance,
            "tags": result.summary.tags, "originals": [m.pk for m in result.originals]}


def call_verb(name: str, arguments, context: ToolContext, ask: Ask | None = None) -> ToolCallResult:
    """Run reflect or consolidate for the connection's agent; a bad argument is an {"error"} answer
    naming it, as the agent tools answer one."""
    started = time.perf_counter()
    arguments = arguments if isinstance(arguments, dict) else {}
    error = ""
    try:
        unknown = sorted(set(arguments) - set(SCHEMAS[name]["parameters"]["properties"]))
        if unknown:
            raise ValidationError({unknown[0]: f"is not an argument of {name}."})
        response = (_reflect if name == "reflect" else _consolidate)(arguments, context, ask)
    except ValidationError as exc:
        error = _said(exc)
        response = {"error": error}
    return ToolCallResult(name=name, arguments=arguments, response=response, query=str(arguments.get("query") or ""),
                          filter={}, results=[], latency_ms=round((time.perf_counter() - started) * 1000, 2), error=error)


def _said(exc: ValidationError) -> str:
    """A ValidationError as one line naming each field (once: some messages name it already)."""
    if not hasattr(exc, "error_dict"):
        return " ".join(exc.messages)
    parts = []
    for field, messages in exc.message_dict.items():
        text = " ".join(str(m) for m in messages)
        parts.append(text if text.startswith(f"{field}") else f"{field}: {text}")
    return "; ".join(parts)

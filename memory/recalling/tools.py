"""The agent tools (seed 000, then seed 001): one registry for OpenAI schemas, MCP and the engine.

`call_tool` never raises: a bad call answers {"error": "..."} that the agent can read and correct.
"""

from __future__ import annotations

import re
import time

from django.core.exceptions import ValidationError

from memory.forming.seed_specs import CHARACTER_QUERIES
from memory.measuring import operations
from memory.models import Memory
from memory.recalling.enhance import EnhancedQuery
from memory.recalling.filters import TAG_MODES, MemoryFilter, Recalled, RecallResult
from memory.recalling.learned import learned_of, said_once, standing_of
from memory.recalling.search import recall
from memory.recalling.story_time import dated_first, time_range_turns
from memory.recalling.replies import with_replies
from memory.recalling.sheet_recall import KEYWORD_ONLY, QUERY_MEMORY_KINDS, SELF_ASPECTS, recall_sheet
from memory.services import memory_associate, memory_create, memory_reinforce
from memory.services.store import tag_filter
from memory.recalling.facts import recall_facts as _recall_facts
# A tool's parts live beside this module; callers import them from here (ToolContext, ToolCallResult).
from memory.recalling.tool_types import (Param, Tool, ToolCallResult, ToolContext, ToolError,
                                         check_arguments as _check_arguments, entries, metadata_of as _metadata, note_in_front,
                                         without_confidence)

__all__ = ["DEFAULT_SIMULATION_TOOLS", "QUERY_MEMORY_KINDS", "READ_TOOLS", "REGISTRY", "SIMULATION_TOOLS", "TOOL_NAMES", "WRITE_TOOLS", "Param",
           "Tool", "ToolCallResult", "ToolContext", "ToolError", "call_tool", "openai_tool_schemas", "recall_sheet",
           "search_memory", "without_confidence"]
from memory.services.validation import validate_content
from memory.recalling.scoring import SIMILARITY


def _fixed(query: str, k: int, *, kinds: list[str], category: str | None = None, own: bool = True):
    """A seed 000 fixed-query tool: canonical query (served from the cache), fixed filter, fixed k."""

    def run(ctx: ToolContext, args: dict):
        flt = MemoryFilter(agent=ctx.agent if own else None, kinds=kinds, categories=[category] if category else None)
        results = recall(ctx.bank, query, filter=flt, k=k, options=ctx.recall_options())
        return {"memories": entries(results)}, query, flt, results

    return run


def _query_self(ctx: ToolContext, args: dict):
    aspect = str(args.get("aspect") or "all").strip().lower()
    if aspect not in SELF_ASPECTS:
        raise ToolError(f"query_self: aspect must be one of: {', '.join(SELF_ASPECTS)}.")
    if aspect == "all":
        flt, results = recall_sheet(ctx.bank, ctx.agent, scoring=ctx.scoring, weights=ctx.weights,
                                    current_turn=ctx.current_turn, clock=ctx.clock, shared=True)
        return {"memories": entries(results)}, "who am I?", flt, results
    query = CHARACTER_QUERIES[aspect][0]
    flt = MemoryFilter(agent=ctx.agent, kinds=["character"], categories=[aspect])
    results = recall(ctx.bank, query, filter=flt, k=5, options=ctx.recall_options())
    return {"memories": entries(results)}, query, flt, results


def _known_characters(ctx: ToolContext) -> list[str]:
    if ctx.known_characters is not None:
        return [n for n in ctx.known_characters if n]
    agents = Memory.objects.in_bank(ctx.bank).exclude(agent="").values_list("agent", flat=True).distinct()
    abouts = (Memory.objects.in_bank(ctx.bank).filter(agent=ctx.agent).exclude(about="")
              .values_list("about", flat=True).distinct())
    return sorted(set(agents) | set(abouts))


_scene = _fixed("where am I?", 5, kinds=["scene"], own=False)


def _query_scene(ctx: ToolContext, args: dict):
    answer, query, flt, results = _scene(ctx, args)
    if ctx.story_now is not None:
        # With a calendar, time_now is the story's date and hour; the time of day the writer gave
        # is when the scene began ("A wet Monday morning", read on Friday as if it were now).
        results = [r for r in results if r.memory.category != "time"]
        answer = dict(answer, memories=entries(results))
    if ctx.present is not None:
        answer["who_is_here"] = [name for name in ctx.present if name != ctx.agent]
    if ctx.now:
        answer["time_now"] = ctx.now
    return answer, query, flt, results


def _query_character(ctx: ToolContext, args: dict):
    name = args["name"].strip()
    known = {n.lower(): n for n in _known_characters(ctx) if n != ctx.agent}
    if name.lower() not in known:
        listing = ", ".join(sorted(known.values())) or "none"
        raise ToolError(f"Unknown character {name!r}. Characters you can ask about: {listing}.")
    name = known[name.lower()]
    query = f"who is {name}?"
    flt = MemoryFilter(agent=ctx.agent, kinds=["character_knowledge"], about=name)
    results = said_once(recall(ctx.bank, query, filter=flt, k=3, options=ctx.recall_options()))
    return {"memories": entries(results)} | learned_of(ctx, name), query, flt, results


# A question about what one believes or has heard: the agent's beliefs on it are searched first.
ABOUT_BELIEFS = re.compile(r"\b(?:believe[sd]?|beliefs?|rumou?rs?|is it true|heard (?:about|that))\b", re.IGNORECASE)
BELIEFS_FIRST = 2
# A question about how something felt: a line and the feeling it left are both kept, not one for both.
ABOUT_FEELINGS = re.compile(r"\b(?:feel|feels|felt|feelings?|mood|hurt|upset|warm(?:ed)? to|made (?:me|you|him|her|them))\b",
                            re.IGNORECASE)


def search_memory(ctx: ToolContext, query: str, *, k: int = 5, exact: bool | None = None,
                  enhanced: EnhancedQuery | None = None, within: tuple[int, int] | None = None,
                  tagged: dict | None = None) -> tuple[MemoryFilter, list[RecallResult]]:
    """query_memory's search, k aside: evaluate_retrieval measures exactly this path (bench_memory
    compares it with exact=True). enhanced: the call's query enhancement (ctx's when not given);
    tagged: the call's tags and tag_mode arguments (memory.services.store.tag_filter)."""
    # What happened and what was learned: the agent's own copies (episodic memories are stored once
    # per listener) and the memories shared with everyone, of every kind a run or a writer forms.
    flt = MemoryFilter(agent=ctx.agent, kinds=QUERY_MEMORY_KINDS, shared=True, **(tagged or {}))
    if within:  # a span of turns the question's time words name (dated_turns)
        flt.min_turn, flt.max_turn = within
    if enhanced is None:
        enhanced = ctx.enhanced(query)
    held = []
    if ABOUT_BELIEFS.search(query):
        # "What do I believe about …?": what I hold about it (who told me, who denied it) comes
        # before the lines that mention it, even where the window shows the line I heard it in.
        held = recall(ctx.bank, query, filter=MemoryFilter(agent=ctx.agent, kinds=["semantic"], categories=["belief"]),
                      k=BELIEFS_FIRST, options=ctx.recall_options(), fusion=True, exact=exact, enhance=enhanced)
    ids = {r.memory.pk for r in held}

    def search(n: int) -> Recalled:
        found = recall(ctx.bank, query, filter=flt, k=n, options=ctx.recall_options(), fusion=True, exact=exact,
                       enhance=enhanced)
        return Recalled([r for r in found if r.memory.pk not in ids], path=getattr(found, "path", "exact"))
    return flt, ctx.recall_outside(search, k, asked=held, feelings=bool(ABOUT_FEELINGS.search(query)))


def _query_memory(ctx: ToolContext, args: dict):
    query = args["query"].strip()
    enhanced = ctx.enhanced(query)
    tagged = tag_filter(args.get("tags"), args.get("tag_mode"))
    flt, results = search_memory(ctx, query, enhanced=enhanced, tagged=tagged)
    # "What did Sam say yesterday?": what is dated so comes first.
    results = dated_first(ctx, query, results,
                          lambda span: search_memory(ctx, query, enhanced=enhanced, within=span, tagged=tagged)[1])
    results = with_replies(ctx, results)  # a question found brings the line that answered it
    return ({"query": query, "memories": entries(results, with_turn=True)} | _metadata(results, enhanced),
            query, flt, results)


def _recall_episodes(ctx: ToolContext, args: dict):
    query = args["query"].strip()
    flt = MemoryFilter(agent=ctx.agent, kinds=["episodic", "observation", "action"],
                       **tag_filter(args.get("tags"), args.get("tag_mode")))
    if args.get("time_range") not in (None, "", []):
        try:  # words ("yesterday", "in May") read against the story's calendar, or turns
            flt.min_turn, flt.max_turn, _words = time_range_turns(ctx, args["time_range"], flt)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
    if args.get("importance_threshold") is not None:
        threshold = float(args["importance_threshold"])
        if not 0 <= threshold <= 10:
            raise ToolError("importance_threshold must be between 0 and 10.")
        flt.min_importance = threshold
    enhanced = ctx.enhanced(query)
    results = ctx.recall_outside(lambda n: recall(ctx.bank, query, filter=flt, k=n,
                                                  options=ctx.recall_options(enhance=enhanced)), 5)
    ordered = sorted(results, key=lambda r: (r.memory.turn is None, r.memory.turn or 0))  # seed 001: in time order
    return ({"query": query, "memories": entries(ordered, with_turn=True, extra=True)} | _metadata(results, enhanced),
            query, flt, results)


def _recall_interactions(ctx: ToolContext, args: dict):
    name = args["character_name"].strip()
    known = {n.lower(): n for n in _known_characters(ctx) if n != ctx.agent}
    if name.lower() not in known:
        raise ToolError(f"Unknown character {name!r}. Characters you can ask about: {', '.join(sorted(known.values())) or 'none'}.")
    name = known[name.lower()]
    flt = MemoryFilter(agent=ctx.agent, kinds=["episodic", "observation", "action"], participant=name)
    query = f"my interactions with {name}"
    enhanced = ctx.enhanced(query)
    results = ctx.recall_outside(lambda n: recall(ctx.bank, query, filter=flt, k=n,
                                                  options=ctx.recall_options(enhance=enhanced)), 10)
    ordered = sorted(results, key=lambda r: (r.memory.turn or 0, r.memory.pk))
    answer = {"character": name, "memories": entries(ordered, with_turn=True)}
    return answer | standing_of(ctx, name) | _metadata(results, enhanced), query, flt, results


def _check_similar(ctx: ToolContext, args: dict):
    context = args["current_context"].strip()
    flt = MemoryFilter(agent=ctx.agent, kinds=["episodic", "observation", "action", "reflection", "procedural"])
    enhanced = ctx.enhanced(context)
    options = ctx.recall_options(scoring=SIMILARITY, weights=None, enhance=enhanced)  # likeness alone
    results = ctx.recall_outside(lambda n: recall(ctx.bank, context, filter=flt, k=n, options=options), 5)
    return {"memories": entries(results, with_turn=True)} | _metadata(results, enhanced), context, flt, results


FORMABLE_KINDS = ["episodic", "semantic", "procedural", "emotional", "observation", "reflection", "plan"]


def _form_memory(ctx: ToolContext, args: dict):
    kind = args.get("type") or "semantic"
    if kind not in FORMABLE_KINDS:
        raise ToolError(f"type must be one of: {', '.join(FORMABLE_KINDS)}.")
    importance = float(args["importance"])
    if not 0 <= importance <= 10:
        raise ToolError("importance must be between 0 and 10.")
    extra = {}
    if args.get("valence") not in (None, ""):  # an emotion's valence, −1..1
        extra["emotional_valence"] = float(args["valence"])
        if not -1 <= extra["emotional_valence"] <= 1:
            raise ToolError("valence must be between -1 and 1.")
    if args.get("about"):  # whom it is about (an emotion's target, a fact's subject)
        known = {n.lower(): n for n in _known_characters(ctx)}
        if str(args["about"]).strip().lower() not in known:
            raise ToolError(f"Unknown character {args['about']!r}. You can name: {', '.join(sorted(known.values()))}.")
        extra["about"] = known[str(args["about"]).strip().lower()]
    if ctx.deferred is not None:
        validate_content(args["content"])
        ctx.deferred.append({"tool": "form_memory", "content": args["content"].strip(), "kind": kind,
                             "importance": importance, **extra})
        return {"stored": True, "memory_id": None, "note": "It becomes a memory when your turn ends."}, "", None, []
    memory = memory_create(bank=ctx.bank, content=args["content"], agent=ctx.agent, kind=kind, category="formed",
                           importance=importance, source="earned", turn=ctx.current_turn, **extra)
    return {"memory_id": memory.pk, "stored": True}, "", None, []


def _own_memory(ctx: ToolContext, memory_id: int) -> Memory:
    memory = Memory.objects.in_bank(ctx.bank).filter(pk=memory_id, agent__in=[ctx.agent, ""]).first()
    if memory is None:
        raise ToolError(f"No memory {memory_id} among your memories.")
    return memory


def _reinforce(ctx: ToolContext, args: dict):
    if ctx.deferred is not None:
        memory = _own_memory(ctx, args["memory_id"])
        ctx.deferred.append({"tool": "reinforce_memory", "memory_id": memory.pk})
        return {"memory_id": memory.pk, "reinforced": True, "note": "Applied when your turn ends."}, "", None, []
    memory = memory_reinforce(memory=_own_memory(ctx, args["memory_id"]), current_turn=ctx.current_turn)
    return {"memory_id": memory.pk, "importance": memory.importance, "decay_rate": round(memory.decay_rate, 5),
            "access_count": memory.access_count}, "", None, []


def _associate(ctx: ToolContext, args: dict):
    first, second = _own_memory(ctx, args["memory_id_1"]), _own_memory(ctx, args["memory_id_2"])
    if first.pk == second.pk:
        raise ToolError("A memory cannot be associated with itself.")
    if ctx.deferred is not None:
        ctx.deferred.append({"tool": "associate_memories", "memory_ids": [first.pk, second.pk]})
        return {"associated": [first.pk, second.pk], "note": "Linked when your turn ends."}, "", None, []
    memory_associate(first=first, second=second)
    return {"associated": [first.pk, second.pk]}, "", None, []


_S, _I, _N = "string", "integer", "number"
# Seed 004's tag filter on the free-text searches (an untagged memory is in view unless strict).
TAG_PARAMS = {"tags": Param("array", "Optional: only memories with these tags", required=False, items=_S),
              "tag_mode": Param(_S, "Optional: any (default), all, any_strict, all_strict", required=False,
                                enum=list(TAG_MODES))}
REGISTRY: dict[str, Tool] = {
    t.name: t
    for t in [
        Tool("query_self", "Who you are: your whole sheet, or one aspect of it",
             {"aspect": Param(_S, "Optional: all (default), " + ", ".join(SELF_ASPECTS[1:]), required=False,
                              enum=SELF_ASPECTS)}, _query_self),
        Tool("query_background", "Retrieve your personal history and background", {},
             _fixed("what is my background?", 5, kinds=["character"], category="background")),
        Tool("query_communication_style", "Learn how you communicate and interact with others", {},
             _fixed("how do I communicate?", 3, kinds=["character"], category="communication")),
        Tool("query_scene", "Where you are, the mood, and who is here now", {},
             _query_scene),
        Tool("query_character", "What you know of another character",
             {"name": Param(_S, "")}, _query_character),
        Tool("query_memory", "Search your memories of what has happened",
             {"query": Param(_S, "e.g. \"what did Alice say about restaurants?\""), **TAG_PARAMS}, _query_memory),
        Tool("recall_episodes", "Search specific events and experiences; results in time order",
             {"query": Param(_S, ""),
              "time_range": Param(_S, "Optional: \"yesterday\", \"in May\", or turns \"12-40\"", required=False,
                                  or_list=True),
              "importance_threshold": Param(_N, "Optional minimum importance, 0-10", required=False), **TAG_PARAMS},
             _recall_episodes, "seed001"),
        Tool("recall_facts", "Facts you know or have heard about a topic",
             {"topic": Param(_S, "")}, _recall_facts, "seed001"),
        Tool("recall_interactions", "Get your history with another character, in time order",
             {"character_name": Param(_S, "")}, _recall_interactions, "seed001"),
        Tool("check_similar_situations", "Find analogous past experiences",
             {"current_context": Param(_S, "The situation you are in now")}, _check_similar, "seed001"),
        Tool("form_memory", "Explicitly create a new memory of something significant",
             {"content": Param(_S, "What to remember (1-10,000 characters)"),
              "importance": Param(_N, "How important, 0-10"),
              "type": Param(_S, f"One of: {', '.join(FORMABLE_KINDS)}", required=False),
              "valence": Param(_N, "For a feeling: how it felt, -1 (bad) to 1 (good)", required=False),
              "about": Param(_S, "Whom it is about (a character's name)", required=False)},
             _form_memory, "seed001"),
        Tool("reinforce_memory", "Strengthen an important memory so it decays slower",
             {"memory_id": Param(_I, "")}, _reinforce, "seed001"),
        Tool("associate_memories", "Create an explicit link between two of your memories",
             {"memory_id_1": Param(_I, ""), "memory_id_2": Param(_I, "")},
             _associate, "seed001"),
    ]
}
TOOL_NAMES = list(REGISTRY)
WRITE_TOOLS = ["form_memory", "reinforce_memory", "associate_memories"]
READ_TOOLS = [n for n in TOOL_NAMES if n not in WRITE_TOOLS]
SIMULATION_TOOLS = READ_TOOLS + WRITE_TOOLS  # the writes wait for the turn's transaction (ToolContext.deferred)
# Offered unless the writer ticks more: each tool re-sends its schema on every call, a model in the
# loop used four of thirteen in twelve turns, and query_self's aspects cover background and style.
DEFAULT_SIMULATION_TOOLS = ["query_self", "query_scene", "query_character", "query_memory", "recall_facts",
                            "recall_interactions"]


def openai_tool_schemas(names: list[str] | None = None) -> list[dict]:
    chosen = names if names is not None else TOOL_NAMES
    return [REGISTRY[n].schema() for n in chosen if n in REGISTRY]


def call_tool(name: str, arguments: dict | str | None, *, context: ToolContext) -> ToolCallResult:
    """Run one tool call by name with JSON arguments; never raises."""
    started = time.perf_counter()
    raw_args = arguments if isinstance(arguments, dict) else {}
    query, flt, results, error = "", None, [], ""
    try:
        tool = REGISTRY.get(name)
        if tool is None:
            raise ToolError(f"Unknown tool {name!r}. Available tools: {', '.join(TOOL_NAMES)}.")
        raw_args = _check_arguments(tool, arguments)
        response, query, flt, results = tool.run(context, raw_args)
    except ToolError as exc:
        error = str(exc)
    except ValidationError as exc:
        error = "; ".join(m for msgs in getattr(exc, "message_dict", {"": exc.messages}).values() for m in msgs)
    except Exception as exc:  # the agent gets a readable error; the run goes on
        error = f"{name} failed: {type(exc).__name__}: {exc}"
    if error:
        response = {"error": error}
    elif getattr(results, "path", "") == "keyword":
        # Degraded mode: the agent (and the inspector, which shows this answer) read why.
        response = {**response, "search_mode": KEYWORD_ONLY}
    if not error:
        response = note_in_front(response, results)
    if not error and not context.confidence:
        response = without_confidence(response)
    if not error and name in READ_TOOLS:  # seed 004's recall metrics (memory.measuring.operations)
        operations.recalled(len(results), mode=flt.tags_mode if flt and flt.tags else "none",
                            seconds=time.perf_counter() - started)
    return ToolCallResult(
        name=name, arguments=raw_args, response=response, query=query,
        filter=flt.to_dict() if flt else {}, results=results,
        latency_ms=(time.perf_counter() - started) * 1000, error=error, path=getattr(results, "path", ""),
    )

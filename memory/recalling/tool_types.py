"""What an agent's memory tools are made of: the context a call runs in, a tool and its parameters,
the result of a call, and how recalled memories are put in a tool's answer (memory.recalling.tools)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Callable

from django.core.exceptions import ValidationError

from memory.recalling.confidence import retrieval_confidence
from memory.recalling.enhance import EnhancedQuery, QueryEnhancement
from memory.recalling.filters import MemoryFilter, Recalled, RecallResult
from memory.recalling.options import AgentRecall
from memory.recalling.story_time import DAY_CATEGORY, only_time, said_date
from memory.services.validation import INT_MAX, TEXT_LIMIT, clean_text

# What the caller's transcript shows as it happened: a line, a stage direction, an action or a whisper
# seen. Within its window a search leaves them out (the window says them already).
WITNESSED_KINDS = ("episodic", "observation", "action")
# The most memories one line leaves a listener: its copy of the line, up to three facts drawn from it
# (memory.living.after_turn's MAX_FACTS), how it moved them, and a belief it passed on.
MEMORIES_PER_LINE = 6


def restates_window(memory, turns, *, beliefs: bool = True) -> bool:
    """Whether a memory only says what the caller reads in its window (the turns it holds): a line, a
    stage direction or what was seen there, a fact drawn from such a line or how it moved me (the line
    quoted again), or a belief heard there and not changed since ("Gordon told me: …" beside Gordon's
    line saying it). beliefs=False: a belief is what the agent holds, and from whom, never a restatement."""
    if memory.turn not in turns:
        return False
    metadata = memory.metadata if isinstance(memory.metadata, dict) else {}
    belief = metadata.get("belief")
    if isinstance(belief, dict) and belief.get("hops"):
        return beliefs and all(isinstance(step, dict) and step.get("turn") in turns
                               for step in belief.get("history") or [{}])
    # A story day kept as one memory says more than the lines of it the window still shows.
    return (memory.kind in WITNESSED_KINDS and memory.category != DAY_CATEGORY) \
        or metadata.get("extracted") in ("fact", "reaction")


def _says_nothing(memory) -> bool:
    """A stage note that only marks time: the memories around it carry their dates."""
    return memory.kind == "observation" and only_time(memory.content)


def _extracted(memory) -> str:
    return (memory.metadata if isinstance(memory.metadata, dict) else {}).get("extracted") or ""


def _without_echoes(results: list[RecallResult]) -> list[RecallResult]:
    """The results with a line and how it moved me (which quotes it) given one place, the one found
    first: asked how someone made me feel, the feeling; asked what was said, the line."""
    kept, seen = [], set()
    for r in results:
        said = r.memory.kind == "episodic" or _extracted(r.memory) == "reaction"
        pair = (r.memory.turn, r.memory.speaker)
        if said and pair[0] is not None and pair in seen:
            continue
        if said:
            seen.add(pair)
        kept.append(r)
    return kept


@dataclass(frozen=True, kw_only=True)
class ToolContext(AgentRecall):
    """Who calls a tool, in which bank, and what every search of theirs shares (the AgentRecall it
    is; recall_options() hands that on to recall)."""
    bank: Any
    agent: str
    known_characters: list[str] | None = None
    # Inside a simulated turn the write tools do not write: they queue here, and the turn's one
    # transaction (chronicle's turn_finish) applies them, so a redone turn never writes twice.
    # None (MCP, the API): writes happen at once.
    deferred: list[dict] | None = None
    # Query enhancement options for this call (see memory.recalling.enhance): {"context": str, "temporal":
    # bool, "synonyms": bool}; empty: queries go as the agent wrote them.
    enhance: dict = field(default_factory=dict)
    # The turns whose lines the caller already reads in its transcript: their episodic memories are
    # not handed back (a tool adds what the window lacks; it does not echo it).
    window_turns: frozenset = frozenset()
    # What the caller's prompt states in full, as (kind, category) of its own or shared memories (a
    # simulation's header: the goals, the time of day): the searches do not hand those back either.
    shown: frozenset = frozenset()
    # Who is in the room now, the caller included (query_scene says so); None: not known (MCP, the API).
    present: list[str] | None = None
    # The time now, as the caller's clock tells it (query_scene says it beside the scene's own time of
    # day, which is when the scene began); "": not known.
    now: str = ""
    # The story's date and time now (a run with a story calendar): recall_episodes' "yesterday" and
    # "in May" are read against it. None: no date (then time ranges are turns).
    story_now: datetime | None = None
    # Whether answers carry their retrieval confidence (seed 001's metadata). A simulation shows it only
    # with confidence gating, whose prompt uses it: on in-run probes the calibrated similarity was
    # off by ~0.4 (ECE), and a number that misleads is worse than none.
    confidence: bool = True

    def enhanced(self, query: str) -> EnhancedQuery:
        """This call's enhancement of one query (what applies to it, in .used)."""
        return QueryEnhancement.from_options(self.enhance).apply(query, self.current_turn)

    def beyond_window(self, k: int) -> int:
        """How many to ask a search for, so that k remain once the window's lines are left out."""
        return k + len(self.window_turns)

    def recall_outside(self, search: Callable[[int], list[RecallResult]], k: int, *,
                       keep: Callable[[RecallResult], bool] | None = None, **options) -> Recalled:
        """What ranks in the first k + window places of `search(n)` (a search for n) that the caller
        has not in front of it, at most k (outside_window's options). One line in the window leaves
        several memories (the line, the facts drawn from it, a reaction, a belief): when those take
        every place, the search goes again, wide enough for all of them, rather than answer nothing.
        A model asking "Bella's prices" got an empty answer, its window's three lines about Bella's
        having taken all eight places. (Going wider whenever fewer than k remained added ~110
        tokens a turn on the long sheets, for memories further from the question.) `keep`: what of a
        search's results may be answered at all (a floor), applied before the window is."""
        def answerable(found) -> Recalled:
            return found if keep is None else Recalled([r for r in found if keep(r)], path=getattr(found, "path", "exact"))

        n = self.beyond_window(k)
        results = search(n)
        kept = self.outside_window(answerable(results), k, **options)
        if not kept and len(results) >= n and self.window_turns:
            wider = k + MEMORIES_PER_LINE * len(self.window_turns)
            kept = self.outside_window(answerable(search(wider)), k, **options)
        return kept

    def outside_window(self, results: list[RecallResult], k: int, *, asked=(), beliefs: bool = True,
                       feelings: bool = False) -> list[RecallResult]:
        """The results but what the caller reads in its window (restates_window) or prompt (shown), ranked
        anew, at most k;
        `asked` (what the question asked for by name) first, window or not; beliefs=False: the agent's
        beliefs stay (a tool asked for what it holds); feelings: a line and how it moved me both stay
        (the question asks how it felt)."""
        fresh = [r for r in results if not restates_window(r.memory, self.window_turns, beliefs=beliefs)
                 and (r.memory.kind, r.memory.category) not in self.shown and not _says_nothing(r.memory)]
        fresh = fresh if feelings else _without_echoes(fresh)
        kept = [*asked, *fresh]
        return Recalled([replace(r, rank=i) for i, r in enumerate(kept[:k], start=1)], path=getattr(results, "path", "exact"),
                        in_front=len(results) - len(fresh))


@dataclass
class ToolCallResult:
    name: str
    arguments: dict
    response: dict
    query: str
    filter: dict
    results: list[RecallResult]
    latency_ms: float
    error: str = ""
    path: str = ""  # how its search found them: "exact", "index" or "cache" (recall's Recalled.path)

    def to_dict(self) -> dict:
        return {
            "name": self.name, "arguments": self.arguments, "response": self.response, "query": self.query,
            "filter": self.filter, "results": [r.snapshot() for r in self.results],
            "latency_ms": round(self.latency_ms, 3), "error": self.error,
        }


class ToolError(Exception):
    """A mistake in the call, reported to the agent as {"error": message}."""


@dataclass
class Param:
    type: str  # "string" | "integer" | "number" | "array"
    description: str
    required: bool = True
    items: str | None = None
    enum: list[str] | None = None
    or_list: bool = False  # also takes a list (time_range's older form, [from_turn, to_turn])


@dataclass
class Tool:
    name: str
    description: str
    params: dict[str, Param]
    run: Callable[[ToolContext, dict], tuple[dict, str, MemoryFilter | None, list[RecallResult]]]
    group: str = "seed000"

    def schema(self) -> dict:
        props = {}
        for pname, p in self.params.items():
            # A parameter whose name says it all ("topic") goes without a description: every model
            # call re-sends the schemas.
            prop: dict = {"type": p.type, "description": p.description} if p.description else {"type": p.type}
            if p.type == "array":
                prop["items"] = {"type": p.items or "integer"}
            if p.enum:
                prop["enum"] = list(p.enum)
            props[pname] = prop
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": {
                    "type": "object", "properties": props,
                    "required": [n for n, p in self.params.items() if p.required], "additionalProperties": False,
                },
            },
        }


def belief_of(memory) -> dict:
    """A memory's belief fields (belief_fields), or {} for a memory that is no belief."""
    belief = (memory.metadata or {}).get("belief") if isinstance(memory.metadata, dict) else None
    return belief_fields(belief) if isinstance(belief, dict) else {}


def belief_fields(belief: dict) -> dict:
    """Who told me (and who told them), how sure I am now, and who last said it is not so."""
    fields = {"belief_confidence": belief.get("confidence")}
    if belief.get("source_chain"):
        fields["heard_from"] = " ← ".join(belief["source_chain"])
    if belief.get("disputed"):
        # Not "disputed": to a holder who says it is not so too, the last denial is no dispute (a model
        # read it as one).
        fields["last_denied_by"] = f"{belief['disputed']['by']} at turn {belief['disputed']['turn']}"
    return fields


def told_text(told) -> str:
    """A secret's "told" metadata as read: "Jordan at turn 6, Sam at turn 9" ("" when untold)."""
    if not isinstance(told, dict):
        return ""
    return ", ".join(f"{name} at turn {at}" for name, at in sorted(told.items(), key=lambda item: (item[1], item[0])))


def entries(results: list[RecallResult], *, with_turn: bool = False, extra: bool = False) -> list[dict]:
    out = []
    for r in results:
        entry: dict = {"content": r.memory.content, "relevance": round(r.score, 4), "memory_id": r.memory.pk}
        if with_turn and r.memory.turn is not None:
            entry["turn"] = str(r.memory.turn)  # seed 000 writes turns as strings
        if with_turn and r.memory.story_time is not None:
            entry["when"] = said_date(r.memory.story_time)  # the story's calendar: "8 May 2023, afternoon"
        until = (r.memory.metadata or {}).get("superseded_turn") if isinstance(r.memory.metadata, dict) else None
        if until is not None:
            entry["until_turn"] = str(until)  # no longer so since then ("Tess leaves", until Tess arrived)
        belief = (r.memory.metadata or {}).get("belief") if isinstance(r.memory.metadata, dict) else None
        if isinstance(belief, dict):
            entry |= belief_fields(belief)
        if r.reply is not None:  # a line that asks: the next line answered it
            entry["reply"] = r.reply.content
        if told := told_text((r.memory.metadata or {}).get("told") if isinstance(r.memory.metadata, dict) else None):
            entry["told_to"] = told  # a secret its owner has told: whom, and when
        if extra:
            m = r.memory
            entry |= {"importance": round(m.importance / 10, 3), "participants": m.participants,
                      "location": m.location, "emotional_valence": m.emotional_valence,
                      "related_goals": m.related_goals}
        out.append(entry)
    return out


# An answer left empty because all it found is what the caller reads already: said, not an empty list
# (a model read recall_interactions' empty list as "no history" with the whole history on screen), and
# not as an answer (one read "it is in front of you already" as "the price is in the conversation").
IN_FRONT = "All this search found is what you can already see above; it found nothing else."


def note_in_front(response: dict, results) -> dict:
    """The answer, with IN_FRONT as its note when its list came back empty for that reason."""
    key = "facts" if "facts" in response else "memories"
    if response.get(key) == [] and getattr(results, "in_front", 0):
        return dict(response, note=IN_FRONT)
    return response


def without_confidence(response: dict) -> dict:
    """The answer less its retrieval confidences (the answer's and each fact's). A belief's own
    confidence (how far it travelled) stays: it is what the agent was told, not a search's guess."""
    response = {k: v for k, v in response.items() if k != "retrieval_confidence"}
    if isinstance(response.get("facts"), list):
        response["facts"] = [{k: v for k, v in f.items() if k != "confidence"} if isinstance(f, dict) else f
                             for f in response["facts"]]
    return response


LIST_MAX = 100  # items in one list argument: a tool's lists are a few turns or kinds
_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "array": (list,)}


def check_arguments(tool: Tool, arguments) -> dict:
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ToolError(f"Arguments for {tool.name} are not valid JSON: {exc}.") from exc
    if not isinstance(arguments, dict):
        raise ToolError(f"Arguments for {tool.name} must be a JSON object.")
    unexpected = set(arguments) - set(tool.params)
    if unexpected:
        allowed = ", ".join(tool.params) or "none"
        # A key may be hostile text too, and there may be thousands: ten, printable, say enough.
        shown = sorted(k if k.isprintable() else ascii(k) for k in unexpected)
        more = f" and {len(shown) - 10:,} more" if len(shown) > 10 else ""
        raise ToolError(f"{tool.name} got unexpected argument(s): {', '.join(shown[:10])}{more}. Allowed: {allowed}.")
    for pname, param in tool.params.items():
        value = arguments.get(pname)
        if value is None:
            if param.required:
                raise ToolError(f"{tool.name} needs the argument {pname!r} ({param.type}).")
            continue
        if isinstance(value, bool) or not isinstance(value, _TYPES[param.type] + ((list,) if param.or_list else ())):
            raise ToolError(f"{tool.name}: {pname!r} must be a {param.type}, not {type(value).__name__}.")
        if isinstance(value, list) and len(value) > LIST_MAX:
            raise ToolError(f"{tool.name}: {pname!r} has {len(value):,} items; the limit is {LIST_MAX}.")
        texts = [value] if isinstance(value, str) else [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
        for text in texts:
            try:  # the API's, the forms' and the imports' rule for text (memory.services.validation)
                clean_text(text, pname, limit=TEXT_LIMIT, required=param.type == "string")
            except ValidationError as exc:
                raise ToolError(f"{tool.name}: {pname!r} {' '.join(exc.message_dict[pname])}") from None
        numbers = [value] if param.type == "integer" else [v for v in value if isinstance(v, int)] if isinstance(value, list) else []
        if any(not -INT_MAX - 1 <= n <= INT_MAX for n in numbers):
            raise ToolError(f"{tool.name}: {pname!r} must be between {-INT_MAX - 1:,} and {INT_MAX:,}.")
    return arguments


def metadata_of(results: list[RecallResult], enhanced: EnhancedQuery) -> dict:
    """Seed 001's response metadata, on every search tool's answer: retrieval_confidence (the best
    memory's calibrated similarity: memory.recalling.confidence) and query_expansion_used (the
    enhancements that changed this query: memory.recalling.enhance)."""
    return {"retrieval_confidence": retrieval_confidence(results), "query_expansion_used": list(enhanced.used)}

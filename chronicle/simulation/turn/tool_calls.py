"""The tools a model is offered in a turn, and each call it makes: run, recorded, answered."""

from __future__ import annotations

import json

from chronicle.simulation.turn.briefing import header_aspects
from chronicle.simulation.turn.types import TurnInput, TurnOutcome
from memory.api import ToolContext, call_tool, tools_offered



# Seed 000's minimal prompt names these six: offered alone with it, so the prompt says what is sent.
SEED_000_TOOLS = ("query_self", "query_background", "query_communication_style", "query_scene", "query_character",
                  "query_memory")
HEADER_ASPECTS = "One listed as also on your sheet; omit for all"


def offered_tools(turn: TurnInput, mode: str) -> list[dict] | None:
    """The tool schemas a model is sent this turn (None: no tools in this mode or set)."""
    wanted = [n for n in tools_offered.SIMULATION_TOOLS if n in set(turn.tool_set)
              and (turn.tool_prompt != "seed000" or n in SEED_000_TOOLS)]
    if mode in ("tools", "both") and turn.max_tool_calls > 0 and wanted:
        tools = compact_schemas(tools_offered.openai_tool_schemas(wanted))
        return _aspects_from_header(tools) if header_aspects(turn) else tools
    return None


def _aspects_from_header(tools: list[dict]) -> list[dict]:
    """query_self's aspect without its enum where the header lists this sheet's aspects for it: the
    list of every aspect there is, re-sent with both calls of a turn, said less than the header's."""
    out = []
    for tool in tools:
        function = tool["function"]
        aspect = (function.get("parameters") or {}).get("properties", {}).get("aspect")
        if function["name"] == "query_self" and aspect:
            parameters = dict(function["parameters"],
                              properties={"aspect": {"type": "string", "description": HEADER_ASPECTS}})
            tool = dict(tool, function=dict(function, parameters=parameters))
        out.append(tool)
    return out


def compact_schemas(tools: list[dict]) -> list[dict]:
    """The tool schemas without what a model does not need: every tool round re-sends all of them
    (13 tools: 1,150 → 1,040 cl100k tokens a call). Dropped: `additionalProperties: false` and an empty
    `required` (nothing is strict-mode here; the registry checks arguments itself), and a parameter's
    description that only lists its enum's values."""
    compact = []
    for tool in tools:
        function = dict(tool["function"])
        parameters = json.loads(json.dumps(function.get("parameters") or {"type": "object", "properties": {}}))
        parameters.pop("additionalProperties", None)
        if not parameters.get("required"):
            parameters.pop("required", None)
        for prop in (parameters.get("properties") or {}).values():
            if prop.get("enum"):
                prop.pop("description", None)
        function["parameters"] = parameters
        compact.append(dict(tool, function=function))
    return compact


# Asked for by name (the sheet, a person, the scene) before searched for: a memory two calls of a round
# find is given under the call that named it, and the search points to it (a model read its secret under
# query_memory("Thai menu") with query_self(aspect="secrets") pointing there, twice, as surprising).
NAMED_LOOKUPS = ("query_self", "query_scene", "query_character", "query_background", "query_communication_style")


def run_round(calls: list[dict], offered: set[str], context: ToolContext, outcome: TurnOutcome, *, calls_left: int,
              limit: int, excluded: frozenset[int], handed: set[int]) -> list[dict]:
    """One round of the model's tool calls: run (named lookups first, then searches, each in the
    model's order), recorded and answered in the model's order; past `calls_left`, refused."""
    start = len(outcome.retrievals)
    order = sorted(range(len(calls)), key=lambda i: ((calls[i].get("function") or {}).get("name") not in NAMED_LOOKUPS, i))
    answers, given_by = {}, {}  # given_by: memory id → the call of this round (model's order) whose answer holds it
    for i in order:
        before = set(handed)
        answers[i] = run_tool_call(calls[i], offered, context, outcome, over_limit=i >= calls_left, limit=limit,
                                   excluded=excluded, handed=handed)
        given_by.update((memory_id, i) for memory_id in handed - before)
    _given_below(answers, given_by, calls)
    rows = dict(zip(order, outcome.retrievals[start:]))  # run_tool_call records one row per call
    outcome.retrievals[start:] = [rows[i] for i in range(len(calls))]
    for number, row in enumerate(outcome.retrievals[start:], start=start):
        row["order"] = number
    return [answers[i] for i in range(len(calls))]


def _given_below(answers: dict[int, dict], given_by: dict[int, int], calls: list[dict]) -> None:
    """A memory this round's answers hold under a call the model reads after this one is not "already
    given" (the model has not read it yet): it is named as given below, under that call."""
    for i, answer in answers.items():
        given = answer.get("already_given") if isinstance(answer, dict) else None
        below = [memory_id for memory_id in given or [] if given_by.get(memory_id, -1) > i]
        if not below:
            continue
        rest = [memory_id for memory_id in given if memory_id not in below]
        if rest:
            answer["already_given"] = rest
        else:
            answer.pop("already_given")
        tools = list(dict.fromkeys((calls[given_by[m]].get("function") or {}).get("name") or "another call" for m in below))
        answer["given_below"] = below
        where = f"in the {' and '.join(tools)} answer{'s' if len(tools) > 1 else ''} below"
        everything = str(answer.get("note", "")).startswith("Nothing besides")
        answer["note"] = f"What this found is {where}." if everything and not rest else \
            f"Also found, and given {where}" + ("; the rest you have already." if rest else ".")


def run_tool_call(call: dict, offered: set[str], context: ToolContext, outcome: TurnOutcome, *, over_limit: bool,
              limit: int, excluded: frozenset[int] = frozenset(), handed: set[int] | None = None) -> dict:
    """Run one tool call of a turn and record it. `handed`: the memories the model already has in
    front of it (its notes, what earlier calls of this turn gave); they are not given again, and this
    call's are added."""
    function = call.get("function") or {}
    name = str(function.get("name") or "")
    raw = function.get("arguments")
    row = outcome.record(agent=context.agent, tool=name or "(no name)")
    error = ""
    arguments: dict = {}
    if over_limit:
        error = f"tool call limit reached ({limit} per turn): answer with what you know now"
    elif name not in offered:
        error = f"unknown tool {name!r}: use one of {', '.join(sorted(offered))}"
    else:
        try:
            parsed = json.loads(raw) if isinstance(raw, str) and raw.strip() else (raw or {})
            if not isinstance(parsed, dict):
                raise ValueError("arguments must be a JSON object")
            arguments = parsed
        except ValueError as exc:
            row["arguments"] = {"raw": str(raw)[:2000]}
            error = f"malformed arguments for {name}: {exc}. Send a JSON object, e.g. {{\"query\": \"...\"}}"
    if error:
        row.update(error=error, response={"error": error})
        return row["response"]
    result = call_tool(name, arguments, context=context)
    snapshots, response = exclude_results([r.snapshot() for r in result.results], result.response, excluded)
    if handed is not None:
        snapshots, response = leave_out_repeats(snapshots, response, handed)
        handed.update(s["memory_id"] for s in snapshots if not s.get("excluded") and not s.get("repeated"))
    row.update(arguments=result.arguments or arguments, query=result.query or "", filter=result.filter or {},
               results=snapshots, response=response,
               latency_ms=round(result.latency_ms, 2), error=result.error or "", path=result.path)
    return response


# Not for the model: the echo of what it asked (its own call says it; a scripted topic is a whole
# line) and how the search was widened (seed 001's diagnostic: nothing a model can act on). The
# record, the inspector, the MCP server and the API keep the seeds' formats whole.
NOT_FOR_MODEL = ("topic", "query", "query_expansion_used")


def for_model(response: dict) -> dict:
    """A tool answer as the model reads it: each memory's content and id, best first, and no
    relevance figure. A model reads that score as a confidence, and as one it misleads (off by about
    0.3, ECE, on the probes' answers); the record and the turn inspector keep it."""
    lean = {key: value for key, value in response.items() if key not in NOT_FOR_MODEL}
    for key in ("memories", "facts"):
        if isinstance(lean.get(key), list):
            lean[key] = [{k: v for k, v in item.items() if k != "relevance"} if isinstance(item, dict) else item
                         for item in lean[key]]
    return lean


def exclude_results(snapshots: list[dict], response: dict, excluded: frozenset[int] | set[int], *,
                    mark: str = "excluded") -> tuple[list[dict], dict]:
    """Drop excluded memories from what the agent reads; the record keeps them, marked (`mark`)."""
    if not excluded or not any(s["memory_id"] in excluded and not s.get("excluded") for s in snapshots):
        return snapshots, response
    key = "facts" if isinstance(response, dict) and "facts" in response else "memories"
    entries = response.get(key) if isinstance(response, dict) else None
    if isinstance(entries, list):
        if len(entries) == len(snapshots):  # seed 000 tools: one entry per result, same order
            kept = [e for e, s in zip(entries, snapshots) if s["memory_id"] not in excluded]
        else:
            kept = [e for e in entries if not (isinstance(e, dict) and e.get("memory_id") in excluded)]
        response = dict(response, **{key: kept})
    marked = [dict(s, **{mark: True}) if s["memory_id"] in excluded and not s.get("excluded") else s for s in snapshots]
    return marked, response


def leave_out_repeats(snapshots: list[dict], response: dict, handed: set[int]) -> tuple[list[dict], dict]:
    """What the model already has in front of it is left out (marked repeated), named by id
    (`already_given`) and by turn in the note: of calls made together, one answer holds a memory two
    found, and a model read the other's empty answer as "nothing on this". An answer left with
    nothing says so too."""
    snapshots, response = exclude_results(snapshots, response, handed, mark="repeated")
    found = [s for s in snapshots if not s.get("excluded")]
    repeated = [s for s in found if s.get("repeated")]
    if repeated and isinstance(response, dict):
        response = dict(response, already_given=[s["memory_id"] for s in repeated])
        # Also in words, by the turns the model's notes show ("(turn 69) …"): in the notes a memory
        # has no id, and two models in a row found the bare ids meaningless.
        turns = sorted({s["turn"] for s in repeated if s.get("turn") is not None})
        where = f"turn{'s' if len(turns) > 1 else ''} {', '.join(map(str, turns))}" if turns else ""
        if len(repeated) == len(found):
            response["note"] = "Nothing besides what you already have in front of you this turn" + \
                (f" ({where})." if where else ".")
        elif where:
            response["note"] = f"Also found, and above already: {where}."
    return snapshots, response

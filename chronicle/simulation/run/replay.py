"""Lines given in advance for the `replay` provider: a writer's script, or a recorded run.

A script is one entry per turn, in order:

    {"speaker": "Sam", "text": "*whispers to Alex* Bella's is closing.",
     "tool_calls": [{"name": "query_memory", "arguments": {"query": "what did Jordan say?"}}]}

The tool calls are made (for real) before the line is said. A recorded run keeps each reply its
model gave in order, as `replies` ([{"content", "tool_calls"}, …], the last one the line), so a
replay sends the engine exactly what the model sent: several calls in one reply, text beside them,
a call written as text. The script fixes who speaks each turn, so a speaker must be in the room.
"""

from __future__ import annotations

import json

from chronicle.simulation.story.moves import direction_lines, line_moves
from chronicle.simulation.run.run_settings import MAX_TURNS
from chronicle.simulation.story.stage import StageError, parse, present_at
from memory.api import tools_offered


class ScriptError(ValueError):
    """A script the run cannot play; the message names the line."""


def _calls(raw, where: str) -> list[dict]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ScriptError(f"{where}: tool_calls must be a list of {{\"name\", \"arguments\"}}.")
    calls = []
    for position, call in enumerate(raw, start=1):
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"].strip():
            raise ScriptError(f"{where}, tool call {position}: give the tool's \"name\".")
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):  # as the OpenAI API sends them: a JSON string
            try:
                arguments = json.loads(arguments) if arguments.strip() else {}
            except ValueError:
                pass  # kept as sent: the engine answers the agent that they are malformed, as live
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, (dict, str)):
            raise ScriptError(f"{where}, tool call {position} ({call['name']}): arguments must be an object.")
        calls.append({"name": call["name"].strip(), "arguments": arguments})
    return calls


def normalise(raw) -> list[dict]:
    """The script as the run stores it: [{"speaker", "text", "replies"}]; ScriptError names a bad line."""
    if not isinstance(raw, list):
        raise ScriptError("The script must be a list of lines, each {\"speaker\": name, \"text\": line}.")
    if len(raw) > MAX_TURNS:
        raise ScriptError(f"The script has {len(raw):,} lines; a run has at most {MAX_TURNS:,} turns.")
    lines = []
    for number, entry in enumerate(raw, start=1):
        where = f"Script line {number}"
        if not isinstance(entry, dict):
            raise ScriptError(f"{where}: write {{\"speaker\": name, \"text\": line}}.")
        speaker = entry.get("speaker")
        if not isinstance(speaker, str) or not speaker.strip():
            raise ScriptError(f"{where}: give the \"speaker\".")
        replies = entry.get("replies")
        if replies is not None:
            if not isinstance(replies, list) or not replies or not all(isinstance(r, dict) for r in replies):
                raise ScriptError(f"{where}: replies must be a list of {{\"content\", \"tool_calls\"}}.")
            replies = [{"content": r.get("content") if isinstance(r.get("content"), str) else None,
                        "tool_calls": _calls(r.get("tool_calls"), where)} for r in replies]
            text = entry.get("text") if isinstance(entry.get("text"), str) else (replies[-1]["content"] or "")
        else:
            text = entry.get("text")
            if not isinstance(text, str) or not text.strip():
                raise ScriptError(f"{where} ({speaker}): give the \"text\" to say.")
            calls = _calls(entry.get("tool_calls"), where)
            replies = ([{"content": None, "tool_calls": calls}] if calls else []) + [{"content": text, "tool_calls": []}]
        line = {"speaker": speaker.strip(), "text": text, "replies": replies}
        if entry.get("recorded"):
            line["recorded"] = True  # a model's own calls, unknown tools included: replayed as they were
        lines.append(line)
    return lines


def check_script(script: list[dict], *, cast: list[str], stage_directions: str = "", said: int = 0) -> None:
    """Every speaker is in the cast and in the room at its turn (the run's directions, and the exits and
    entrances the lines make, as the run adds them); ScriptError names the first line that is not.
    said: the lines a run has said, whose moves are in its directions already (or the writer took them back)."""
    try:
        directions = parse(stage_directions or "", cast=cast)
    except StageError:
        directions = []  # the directions' own error is reported by their field
    added: list[str] = []
    for number, entry in enumerate(script, start=1):
        speaker = entry.get("speaker")
        if speaker not in cast:
            raise ScriptError(f"Script line {number}: {speaker} is not in the cast ({', '.join(cast)}).")
        for reply in entry.get("replies") or []:
            for call in reply.get("tool_calls") or []:
                if call["name"] not in tools_offered.SIMULATION_TOOLS and not entry.get("recorded"):
                    raise ScriptError(f"Script line {number}: there is no tool {call['name']!r} "
                                      f"(the tools: {', '.join(tools_offered.SIMULATION_TOOLS)}).")
        if added:
            directions = parse("\n".join([stage_directions or "", *added]), cast=cast)
        here = present_at(directions, cast, number)
        if speaker not in here:
            raise ScriptError(f"Script line {number}: {speaker} is not in the room at turn {number} "
                              f"(present: {', '.join(here) or 'nobody'}).")
        # The run adds the moves a line makes (chronicle.simulation.story.moves) as it goes: so here.
        if number > said:
            moves = line_moves(entry.get("text") or "", speaker=speaker, cast=cast, present=here)
            added += direction_lines(moves, speaker=speaker, turn=number, directions=directions, cast=cast)


def script_from_export(data: dict) -> list[dict]:
    """A recorded run's lines (a simulation's JSON export) as a script: each done turn's speaker, its line
    and the replies its model gave, read off the messages it was sent."""
    turns = [t for t in data.get("turns") or [] if isinstance(t, dict) and t.get("status") == "done"]
    script = []
    for turn in sorted(turns, key=lambda t: t.get("index", 0)):
        replies = [{"content": m.get("content") if isinstance(m.get("content"), str) else None,
                    "tool_calls": [{"name": (c.get("function") or {}).get("name") or "",
                                    "arguments": (c.get("function") or {}).get("arguments") or {}}
                                   for c in m.get("tool_calls") or [] if isinstance(c, dict)]}
                   for m in turn.get("prompt_messages") or [] if isinstance(m, dict) and m.get("role") == "assistant"]
        if not replies or replies[-1]["tool_calls"] or not replies[-1]["content"]:
            # A line with no model reply behind it (written by hand, a greeting): said as it was.
            replies = [{"content": turn.get("utterance") or "", "tool_calls": []}]
        script.append({"speaker": turn.get("agent") or "", "text": turn.get("utterance") or "", "replies": replies,
                       "recorded": True})
    return normalise(script)


def script_from_simulation(simulation) -> list[dict]:
    """A finished run's lines as a script (what "Replay under other settings" starts from)."""
    turns = simulation.turns.done().order_by("index").values("index", "agent", "utterance", "status", "prompt_messages")
    return script_from_export({"turns": list(turns)})

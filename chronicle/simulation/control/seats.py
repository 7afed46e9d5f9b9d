"""The writer's seat: the writer plays a character live while the agents play the others.

At a seated character's turn the run waits: its turn is opened in status "seat" (no worker busy, no
time-out, the page stops polling) until the writer's line comes. The line is kept as the turn's
"line written by hand" (a TurnOverride) and the turn then runs like any other, so it is heard,
whispered, believed and remembered exactly as an agent's line would be. Leaving the seat hands the
turn to the agent. Beside the input the page shows what the character would be given now
(`seat_view`), runs its own tools (`seat_search`) and may ask the run's model for a line (`seat_suggest`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from chronicle.simulation.turn.briefing import now_header, prepopulate, took_it
from chronicle.simulation.turn.engine import run_turn, tool_context
from chronicle.simulation.turn.types import TurnFailed, TurnOutcome
from chronicle.simulation.run.models import Simulation, Turn, TurnOverride
from chronicle.simulation.prompting.prompts import MARKUP, Section, transcript_text
from chronicle.simulation.providers import get_provider
from chronicle.simulation.turn.inputs import turn_input
from chronicle.simulation.control.turns import next_index, queue_next, script_end
from memory.api import call_tool, text_problem, tools_offered


class SeatError(Exception):
    """A seat action that cannot be done now; the message is for the writer."""


# --- the run waits ----------------------------------------------------------------------------

def seat_waits(*, simulation_id: int, index: int, agent: str) -> bool:
    """Called by the turn's task once it knows who speaks: True when the writer plays `agent` and has
    not given this turn's line yet. The turn is then opened as the writer's, and the task stops."""
    with transaction.atomic():
        simulation = Simulation.objects.select_for_update().filter(pk=simulation_id).first()
        if simulation is None or simulation.status != Simulation.Status.RUNNING or agent not in (simulation.seats or []):
            return False
        if index != next_index(simulation) or index >= min(simulation.max_turns, script_end(simulation)):
            return False  # not this turn's moment (the claim says why and ends the run if it is over)
        if TurnOverride.objects.at(simulation, index).filter(kind=TurnOverride.Kind.LINE).exists():
            return False  # the writer's line is in: the turn runs with it
        turn = Turn.objects.filter(simulation=simulation, index=index).first()
        if turn is None:
            Turn.objects.create(simulation=simulation, index=index, agent=agent, status=Turn.Status.SEAT)
        elif turn.status in (Turn.Status.SEAT, Turn.Status.FAILED):
            Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.SEAT, agent=agent, error="")
        else:
            return False  # a worker holds it
        simulation.save(update_fields=["updated"])
        return True


def _locked(simulation: Simulation) -> Simulation:
    return Simulation.objects.select_for_update().get(pk=simulation.pk)


@transaction.atomic
def seat_change(*, simulation: Simulation, agent: str, take: bool) -> Simulation:
    """Take a character's seat (its next turn waits for the writer) or leave it (the agent takes over,
    at once if the run is waiting for that character's line)."""
    simulation = _locked(simulation)
    if agent not in simulation.cast_names:
        raise SeatError(f"{agent} is not in this run's cast.")
    if take and simulation.provider == Simulation.Provider.REPLAY:
        raise SeatError("A replay says its recorded lines: nobody can take a seat in it.")
    if take and simulation.status == Simulation.Status.CANCELLED:
        raise SeatError("This run was cancelled: go on in a branch to play in it.")
    chosen = set(simulation.seats or []) | {agent} if take else set(simulation.seats or []) - {agent}
    simulation.seats = [name for name in simulation.cast_names if name in chosen]
    simulation.save(update_fields=["seats", "updated"])
    if not take:
        waiting = simulation.turns.filter(status=Turn.Status.SEAT, agent=agent).first()
        if waiting is not None and simulation.status == Simulation.Status.RUNNING:
            _hand_over(simulation, waiting)  # the turn's task finds the seat empty and runs the agent
    return simulation


@transaction.atomic
def seat_speak(*, simulation: Simulation, line: str, actor) -> Turn:
    """The writer's line for the seat's turn: kept as the turn's hand-written line, then the turn runs."""
    simulation = _locked(simulation)
    turn = simulation.turns.filter(status=Turn.Status.SEAT).order_by("index").first()
    if turn is None:
        raise SeatError("The run is not waiting for your line now.")
    if simulation.status == Simulation.Status.PAUSED:
        raise SeatError("The run is paused: resume it, then say your line.")
    if simulation.status != Simulation.Status.RUNNING:
        raise SeatError(f"This run is {simulation.get_status_display().lower()}: it takes no more lines.")
    text = (line or "").strip()
    if not text:
        raise SeatError(f"Write {turn.agent}'s line first.")
    if problem := text_problem(text):
        raise SeatError(f"{turn.agent}'s line {problem}")
    TurnOverride.objects.update_or_create(simulation=simulation, turn_index=turn.index, kind=TurnOverride.Kind.LINE,
                                          defaults={"content": text, "created_by": actor})
    _hand_over(simulation, turn)
    return turn


def _hand_over(simulation: Simulation, turn: Turn) -> None:
    """The seat's turn goes to a worker: shown as under way (the page polls again, and says so if no
    worker takes it), never attempted before (turns.turn_claim takes it as a first attempt)."""
    Turn.objects.filter(pk=turn.pk).update(status=Turn.Status.RUNNING, started=timezone.now(), heartbeat=None, claim="")
    queue_next(simulation)


# --- what the seat shows ------------------------------------------------------------------------

@dataclass
class SeatView:
    turn: Turn
    header: str
    sections: list[Section]
    transcript: str
    present: list[str]
    mode: str
    tools: list[dict] = field(default_factory=list)  # {"name", "param", "description"} for the search box
    markup: str = MARKUP


def seat_tools(simulation: Simulation) -> list[dict]:
    """The run's own reading tools for the seat's search box, each with the one text it asks for."""
    names = [n for n in (simulation.tool_set or tools_offered.DEFAULT_SIMULATION_TOOLS) if n in tools_offered.REGISTRY and n not in tools_offered.WRITE_TOOLS]
    tools = []
    for name in names:
        texts = [p for p, spec in tools_offered.REGISTRY[name].params.items() if spec.required and spec.type == "string"]
        if len(texts) <= 1:
            tools.append({"name": name, "param": texts[0] if texts else "", "description": tools_offered.REGISTRY[name].description})
    return tools


def seat_view(simulation: Simulation) -> SeatView | None:
    """What the seated character would be given now, as an agent in its place gets it: the fixed
    header, its pre-populated memories and the transcript it witnessed. Nothing is recorded."""
    turn = simulation.seat_turn
    if turn is None:
        return None
    given = turn_input(turn=turn)
    sections = [s for s in [*prepopulate(given, TurnOutcome()), took_it(given, TurnOutcome())] if s.lines]
    # The header as the writer reads it: its "## " marks are for the model.
    header = "\n".join(line.removeprefix("## ") for line in now_header(given).splitlines())
    return SeatView(turn=turn, header=header, sections=sections,
                    transcript=transcript_text(given.transcript, given.stage), present=given.others,
                    mode=given.mode, tools=seat_tools(simulation))


def seat_search(simulation: Simulation, *, tool: str, text: str) -> dict:
    """One of the seated character's own tools, run as its agent would run it now (writes never happen)."""
    turn = simulation.seat_turn
    if turn is None:
        raise SeatError("The run is not waiting for your line now.")
    offered = {t["name"]: t for t in seat_tools(simulation)}
    if tool not in offered:
        raise SeatError(f"{tool or 'That tool'} is not one of this run's reading tools.")
    param = offered[tool]["param"]
    if param and not text.strip():
        raise SeatError(f"Type what to ask {tool} first.")
    result = call_tool(tool, {param: text.strip()} if param else {}, context=tool_context(turn_input(turn=turn), deferred=[]))
    return {"tool": tool, "text": text, "error": result.error or "",
            "results": [r.snapshot() for r in result.results]}


def seat_suggest(simulation: Simulation) -> str:
    """What the run's model would say in the seat now (its tools and memories as an agent's); not kept."""
    turn = simulation.seat_turn
    if turn is None:
        raise SeatError("The run is not waiting for your line now.")
    try:
        return run_turn(turn_input(turn=turn), get_provider(simulation)).utterance
    except TurnFailed as exc:
        raise SeatError(f"The model gave no suggestion: {exc.reason}") from exc

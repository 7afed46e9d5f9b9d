"""What a turn is given: the transcript and stage directions its speaker witnessed, the notes its
earlier turns were given, and the run's settings (the engine's TurnInput)."""

from __future__ import annotations

import re

from django.conf import settings

from chronicle.simulation.turn.types import TurnInput
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.run.run_settings import turn_values
from chronicle.simulation.run.selectors import turn_overrides
from chronicle.simulation.story.stage import deliver, present_at, seen_action
from memory.api import CharacterSheet, ScenarioSheet, inner_life

PLAN_HEAD = re.compile(r"^My plan[^:]{0,200}:\s*")  # "Your plan: …" says whose already
MOOD_CALM = 0.08  # a mood weaker than this is no mood (memory.living.mood's CALM): the header says nothing


def transcript_for(simulation: Simulation, before: int, agent: str) -> list[tuple[int, str, str]]:
    """The lines `agent` heard before this turn: nothing said while it was away, and of a whisper
    between others only that it happened."""
    rows = (simulation.turns.done().filter(index__lt=before).order_by("index")
            .values_list("index", "agent", "utterance", "heard_by", "whisper_to"))
    lines = []
    for index, speaker, text, heard_by, whisper_to in rows:
        number = index + 1
        if not heard_by or agent in heard_by:
            lines.append((number, speaker, text))
        elif whisper_to and agent in simulation.present_at(number):
            lines.append((number, speaker, whispered(text, speaker=speaker, whisper_to=whisper_to)))
    return lines


def whispered(text: str, *, speaker: str, whisper_to: str) -> str:
    """A whisper between others as a witness reads it: that it happened, the words not heard, and what
    the speaker was seen doing (its memory of the moment keeps the same: aftermath.formation.witness)."""
    line = deliver(text, speaker=speaker, present=[whisper_to])
    seen = " ".join(s for action in line.actions if (s := seen_action(speaker, action)))
    return f"(whispers something to {whisper_to}, too low to hear. Seen: {seen})" if seen \
        else f"(whispers something to {whisper_to})"


def notes_for(simulation: Simulation, before: int, agent: str) -> dict[int, dict]:
    """What came back to `agent` before each of its earlier turns, as it was sent, by turn number."""
    rows = (simulation.turns.done().filter(index__lt=before, agent=agent)
            .values_list("index", "context__note"))
    return {index + 1: note for index, note in rows if isinstance(note, dict) and note.get("text")}


def heard_before(simulation: Simulation, turn: Turn) -> str:
    """The last line the turn's speaker heard before it spoke (what a reply answers), or ""."""
    row = (simulation.turns.done().filter(index__lt=turn.index).order_by("-index")
           .values_list("utterance", "heard_by").first())
    return row[0] if row and (not row[1] or turn.agent in row[1]) else ""


def stage_for(simulation: Simulation, before: int, agent: str) -> list[tuple[int, str]]:
    """The stage directions `agent` witnessed up to and including this turn's (number before + 1):
    exits, entrances, world events and time skips in the writer's words, each at the turn it comes
    before. A direction is witnessed by those in the room at its turn, and by the one it moves."""
    directions = [d for d in simulation.directions if d.turn <= before + 1]
    cast = simulation.cast_names
    return [(d.turn, d.text) for d in directions
            if agent == d.who or agent in present_at(simulation.directions, cast, d.turn)]


def mood_on() -> bool:
    """Mood is on unless WONDA_MOOD=0 (settings.MOOD_ENABLED)."""
    return bool(getattr(settings, "MOOD_ENABLED", True))


def mood_before(simulation: Simulation, agent: str, number: int) -> inner_life.Mood:
    """How `agent` feels as turn `number` begins (after the lines before it); calm with mood off."""
    if not mood_on() or simulation.bank_id is None:
        return inner_life.Mood()
    return inner_life.moods(simulation.bank, [agent], number - 1)[agent]


def turn_input(*, turn: Turn) -> TurnInput:
    simulation = turn.simulation
    mode = simulation.retrieval_mode
    if simulation.tools_unsupported and mode != Simulation.RetrievalMode.PREPOPULATE:
        mode = Simulation.RetrievalMode.PREPOPULATE
    overrides = turn_overrides(simulation=simulation, index=turn.index)
    cast = [CharacterSheet.from_dict(c) for c in simulation.cast_snapshot]
    greeting = ""
    if turn.index == 0 and simulation.greeting_by == turn.agent:
        greeting = next((c.first_mes for c in cast if c.name == turn.agent), "")
    mood = mood_before(simulation, turn.agent, turn.number)
    return TurnInput(
        **turn_values(simulation),  # the run's settings a turn takes as stored (run_settings.RUN_SETTINGS)
        excluded=overrides.excluded, pinned=overrides.pinned, line=overrides.line, greeting=greeting,
        bank=simulation.bank, agent=turn.agent, index=turn.index,
        cast=cast,
        scenario=ScenarioSheet.from_dict(simulation.scenario_snapshot) if simulation.scenario_snapshot else None,
        transcript=transcript_for(simulation, turn.index, turn.agent), stage=stage_for(simulation, turn.index, turn.agent),
        mode=mode,
        present=simulation.present_at(turn.number) if simulation.stage_directions else None,
        clock=simulation.clock, distortions=simulation.distortion_filters,
        mood=mood.valence, feeling=mood.word if abs(mood.valence) >= MOOD_CALM else "",
        plan=PLAN_HEAD.sub("", plan.content) if (plan := inner_life.current_plans(simulation.bank, [turn.agent]).get(turn.agent)
                                                 if simulation.bank_id else None) else "",
        story_time=simulation.story_time_at(turn.number),
        notes=notes_for(simulation, turn.index, turn.agent),
    )

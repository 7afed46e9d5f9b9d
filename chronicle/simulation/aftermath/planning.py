"""Each agent's plan for the scene and its goals' progress in a run (memory.living.plans).

Before an agent's turn: a plan when it has none for this story day (its first turn, or the day
changed), from its goals, who is in the room and where. After a line: progress on a listener's goals
and a plan the line overturned, from the model's judgement of the line where a model judges it
(the same call), else by the rules. WONDA_PLANS=0 turns both off.
"""

from __future__ import annotations

from django.conf import settings

from chronicle.simulation.aftermath.formation import scene_place
from chronicle.simulation.run.models import Simulation, Turn
from memory.api import CapturePlan, EmbeddingError, inner_life


def plans_on() -> bool:
    return bool(getattr(settings, "PLANS_ENABLED", True))


def story_day(simulation: Simulation, number: int) -> str:
    """The story day a plan is for ("" without a calendar: one plan for the scene)."""
    now = simulation.story_time_at(number)
    return now.date().isoformat() if now is not None else ""


def plan_place(simulation: Simulation) -> str:
    """Where the scene is, as a plan names it: the place's first clause, "the" where the writer wrote "The"
    ("the mess room at Skarvik Station", not the hut's whole description)."""
    place = scene_place(simulation).split(",")[0].strip()
    return "the" + place[3:] if place.startswith("The ") else place


def plan_before_turn(simulation: Simulation, number: int, agent: str) -> bool:
    """The agent's plan, made before its turn `number` when it has none for the day. Returns whether made."""
    if not plans_on() or simulation.bank_id is None:
        return False
    day = story_day(simulation, number)
    held = inner_life.current_plans(simulation.bank, [agent]).get(agent)
    if held is not None and (held.metadata.get("plan") or {}).get("day", "") == day:
        return False
    sheet = next((c for c in simulation.cast_snapshot or [] if c.get("name") == agent), {})
    others = [name for name in simulation.present_at(number) if name != agent]
    text = inner_life.plan_text(list(sheet.get("goals") or []), others, plan_place(simulation))
    try:
        return inner_life.plan_make(bank=simulation.bank, agent=agent, turn=number, text=text, day=day) is not None
    except EmbeddingError:  # the embedder is down: the turn goes on without a plan; the next one makes it
        return False


def plans_after_heard(simulation: Simulation, turn: Turn, capture: CapturePlan, captured, feelings: dict) -> int:
    """Progress and overturned plans of those who heard the line (in turn_finish's transaction).
    Returns the memories made."""
    if not plans_on() or simulation.bank_id is None:
        return 0
    after = capture.after
    judged = after is not None and after.moves is not None
    present = simulation.present_at(turn.number)
    return len(inner_life.plans_after_line(bank=simulation.bank, speaker=turn.agent, line=turn.utterance, turn=turn.number,
                                           memories=list(captured), feelings=feelings,
                                           others={name: [o for o in present if o != name] for name in present},
                                           judged_progress=dict(after.progress) if judged else None,
                                           judged_plans=after.plans if judged else None))

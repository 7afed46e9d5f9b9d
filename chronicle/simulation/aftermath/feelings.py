"""How a line leaves those who hear it feeling, and how each of the cast feels after it
(memory.living.mood): the feelings go into the listeners' memories of the line, the moods onto the
turn (`context["moods"]`: {name: [valence, word]}), where the inspector and analytics read them.

WONDA_MOOD=0 turns it off: no feelings recorded, no mood in the header, no priming.
"""

from __future__ import annotations

from django.conf import settings

from chronicle.simulation.aftermath.planning import plans_after_heard
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.turn.inputs import mood_on
from memory.api import CapturePlan, inner_life


def feel_after_line(simulation: Simulation, turn: Turn, capture: CapturePlan, captured, moved) -> None:
    """In turn_finish's transaction, after the relationships moved: each listener's memory of the
    line gets its feeling (the model's judgement of the line, else the offline judge's) and the
    goals it touches; then what the line did to their goals and plans (planning); the turn records
    everyone's mood after it. With mood off, plans read no feelings (only a model's judgement moves them)."""
    if simulation.bank_id is None:
        return
    after = capture.after
    felt = {}
    if mood_on():
        felt = inner_life.feel_line(bank=simulation.bank, memories=list(captured), moved=list(moved or []),
                                    judged=dict(after.feelings) if after else None,
                                    words=dict(after.feeling_words) if after else None, vector=capture.vectors.get(capture.content))
    plans_after_heard(simulation, turn, capture, captured, felt)  # goals moved, a plan overturned
    if getattr(settings, "OPINIONS_ENABLED", True) and moved:  # what each one moved now thinks of the speaker
        inner_life.opinions_after_line(bank=simulation.bank, moved=list(moved), turn=turn.number, memories=list(captured),
                                       judged=dict(after.opinions) if after else None)
    if mood_on():
        now = inner_life.moods(simulation.bank, simulation.cast_names, turn.number)
        turn.context = dict(turn.context or {}, moods={name: [m.valence, m.word] for name, m in now.items()})

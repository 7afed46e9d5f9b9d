"""How a line leaves those who hear it feeling, and how each of the cast feels after it
(memory.living.mood): the feelings go into the listeners' memories of the line, the moods onto the
turn (`context["moods"]`: {name: [valence, word]}), where the inspector and analytics read them.

WONDA_MOOD=0 turns it off: no feelings recorded, no mood in the header, no priming.
"""

from __future__ import annotations

from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.turn.inputs import mood_on
from memory.api import CapturePlan, feel_line, moods


def feel_after_line(simulation: Simulation, turn: Turn, capture: CapturePlan, captured, moved) -> None:
    """In turn_finish's transaction, after the relationships moved: each listener's memory of the
    line gets its feeling (the model's judgement of the line, else the offline judge's) and the
    goals it touches; the turn records everyone's mood after it."""
    if not mood_on() or simulation.bank_id is None:
        return
    after = capture.after
    feel_line(bank=simulation.bank, memories=list(captured), moved=list(moved or []),
              judged=dict(after.feelings) if after else None, words=dict(after.feeling_words) if after else None,
              vector=capture.vectors.get(capture.content))
    now = moods(simulation.bank, simulation.cast_names, turn.number)
    turn.context = dict(turn.context or {}, moods={name: [m.valence, m.word] for name, m in now.items()})

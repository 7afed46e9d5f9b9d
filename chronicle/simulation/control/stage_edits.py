"""The writer changes a run's stage directions between turns: an exit a line made taken back, an
entrance moved, a new event. What changes takes effect from the next turn to run; the turns already
played keep the directions they were played with (regenerating from a turn changes those)."""

from __future__ import annotations

from collections import Counter

from django.core.exceptions import ValidationError
from django.db import transaction

from chronicle.simulation.control.errors import ControlError
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.run.replay import ScriptError, check_script
from chronicle.simulation.story.stage import StageError, parse
from memory.api import text_problem


def played(simulation: Simulation) -> int:
    """The turns begun (done, failed, waiting for the writer's line): their directions have been
    applied, as memories of everyone present, so they are no longer the writer's to change here."""
    return simulation.turns.count()


@transaction.atomic
def stage_directions_update(*, simulation: Simulation, text: str) -> Simulation:
    locked = Simulation.objects.select_for_update().get(pk=simulation.pk)
    if locked.is_live:
        raise ControlError("Pause the run before changing its stage directions: a turn may be starting.")
    text = "\n".join(line.rstrip() for line in (text or "").strip().splitlines() if line.strip())
    if problem := text_problem(text):
        raise ControlError(f"The stage directions {problem}")
    try:
        changed = parse(text, cast=locked.cast_names)
    except StageError as exc:
        raise ControlError(str(exc)) from None
    done = played(locked)
    if Counter(d.line() for d in locked.directions if d.turn <= done) != Counter(d.line() for d in changed if d.turn <= done):
        raise ControlError(f"Turns 1–{done} have been played with their directions: change those from turn "
                           f"{done + 1} on, or regenerate from an earlier turn.")
    locked.stage_directions = text
    try:
        if locked.script:  # a replay's next speakers must still be in the room, as the run will have it
            check_script(locked.script, cast=locked.cast_names, stage_directions=text, said=done)
        locked.full_clean()
    except ScriptError as exc:
        raise ControlError(f"{exc} Its script says who speaks: leave them in the room.") from None
    except ValidationError as exc:
        raise ControlError(" ".join(exc.messages)) from None
    locked.save(update_fields=["stage_directions", "updated"])
    return locked


def stage_direction_undo(*, simulation: Simulation, line: str) -> Simulation:
    """Take back one direction (as `Direction.line()` writes it): the run page's button beside it."""
    kept, found = [], False
    for raw in (simulation.stage_directions or "").splitlines():
        try:
            same = not found and [d.line() for d in parse(raw, cast=simulation.cast_names)] == [line]
        except StageError:
            same = False
        found = found or same
        if not same:
            kept.append(raw)
    if not found:
        raise ControlError("That direction is no longer in the run's stage directions.")
    return stage_directions_update(simulation=simulation, text="\n".join(kept))

"""The writer's pins on a turn: which memories can be pinned there, and which pins a run could not apply.

A pin gives a memory to the agent when the turn is (re)generated, from the bank that turn reads (a
branch's bank is copied as of its first turn: memory.services.bank_copy). So the writer may pin only
a memory the agent could have recalled at that turn (chronicle.writing refuses the others, saying
why), and a pin the run cannot apply when the turn comes (its memory archived since, say) is said
on the turn (turns.turn_claim), never dropped silently.
"""

from __future__ import annotations

from chronicle.simulation.run.models import Simulation, TurnOverride
from memory.models import Memory


def pin_refusal(*, simulation: Simulation, index: int, agent: str, memory: Memory) -> str:
    """Why `memory` cannot be pinned onto turn `index` (0-based) for `agent`, or "" when it can.
    Story time: a memory exists from the turn after its `turn` (gifted ones from the start)."""
    number = index + 1
    if memory.bank_id != simulation.bank_id:
        return f"Memory #{memory.pk} is not in this run's bank."
    if memory.status != Memory.Status.ACTIVE:
        return (f"Memory #{memory.pk} is {memory.status}: a regeneration reads only active memories. "
                "Restore it from the history first, or pin another.")
    if memory.turn is not None and memory.turn > index:
        return (f"Memory #{memory.pk} exists only from turn {memory.turn + 1}, after turn {number} began: "
                f"{agent} could not have recalled it then. Form a memory for turn {number} instead.")
    if memory.agent not in ("", agent):
        return (f"Memory #{memory.pk} is {memory.agent}'s: {agent} cannot recall it. "
                f"Form a memory for {agent} instead.")
    return ""


def dropped_pins(*, simulation: Simulation, index: int, agent: str) -> list[str]:
    """A note for each pin of this turn that the run will not give the agent: the ones
    simulation.selectors.turn_overrides leaves out (memory not in the bank or not active, or the
    same memory excluded too)."""
    rows = list(TurnOverride.objects.at(simulation, index).filter(memory_id__isnull=False)
                .filter(kind__in=[TurnOverride.Kind.PIN, TurnOverride.Kind.EXCLUDE]))
    pins = [r.memory_id for r in rows if r.kind == TurnOverride.Kind.PIN]
    if not pins:
        return []
    excluded = {r.memory_id for r in rows if r.kind == TurnOverride.Kind.EXCLUDE}
    memories = Memory.objects.in_bank(simulation.bank).in_bulk(pins) if simulation.bank_id else {}
    notes = []
    for memory_id in pins:
        memory = memories.get(memory_id)
        if memory is None:
            reason = "it is not in this run's bank"
        elif memory.status != Memory.Status.ACTIVE:
            reason = f"it is {memory.status}"
        elif memory_id in excluded:
            reason = "it is excluded from this turn too"
        else:
            continue
        notes.append(f"Pinned memory #{memory_id} was not given to {agent}: {reason}.")
    return notes

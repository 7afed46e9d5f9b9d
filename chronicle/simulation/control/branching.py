"""Branches: regenerate a run from one of its turns.

`simulation_branch` (in the request) creates the branch and copies the turns before the branch
turn with their retrievals and the writer's overrides (database rows only, one bulk insert each).
`branch_prepare` (in a worker: it may re-embed edited memories) copies the memory bank as it stood
when that turn began (memory.services.bank_copy), points the copied records at the copied
memories, and runs on from the branch turn with the same engine.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from chronicle import queueing
from chronicle.simulation.control.errors import ControlError
from chronicle.simulation.run.models import Retrieval, Simulation, Turn, TurnOverride
from chronicle.simulation.run.run_settings import BRANCH_SETTINGS
from chronicle.simulation.story.stage import without_added
from chronicle.simulation.control.turns import queue_next
from memory.api import banks

# A branch keeps its parent's settings, and what the parent learned about its model.
BRANCH_FIELDS = ("scenario", "scenario_snapshot", "cast_snapshot", *BRANCH_SETTINGS, "tools_unsupported")


@transaction.atomic
def simulation_branch(*, parent: Simulation, index: int, changes: dict | None = None,
                      label: str = "") -> tuple[Simulation, dict[int, int]]:
    """A new run sharing the turns before `index` (0-based); returns it and {parent turn id: copy id}.
    changes: settings the branch runs with instead of the parent's (a replay without distortions)."""
    if parent.is_live:
        raise ControlError("Pause the run (or let it finish) before regenerating from one of its turns.")
    done = parent.turns.done().filter(index__lt=index).count()
    if index < 0 or done != index:
        raise ControlError(f"Turn {index + 1} cannot be regenerated: the turns before it are not all done.")
    if parent.bank_id is None:
        raise ControlError("This run has no memory bank to branch from.")
    branch = Simulation(owner=parent.owner, parent=parent, branch_turn=index, status=Simulation.Status.SEEDING)
    for name in BRANCH_FIELDS:
        setattr(branch, name, getattr(parent, name))
    # The moves the parent's lines from this turn on added are not the branch's: its lines are said anew.
    branch.stage_directions = without_added(parent.stage_directions, since=index + 1)
    for name, value in (changes or {}).items():
        setattr(branch, name, value)
    branch.max_turns = max(parent.max_turns, index + 1)
    branch.title = (f"{parent.title or parent} · branch {parent.branches.count() + 1} from turn {index + 1}"
                    f"{' · ' + label if label else ''}")[:200]
    branch.full_clean()
    branch.save()
    branch.bank = banks.bank_create(name=f"Simulation #{branch.pk}: {branch.title}"[:200], owner=parent.owner)
    branch.save(update_fields=["bank", "updated"])
    turn_map = _copy_turns(parent, branch, index)
    TurnOverride.objects.bulk_create([
        TurnOverride(simulation=branch, turn_index=o.turn_index, kind=o.kind, memory_id=o.memory_id,
                     content=o.content, created_by=o.created_by)
        for o in TurnOverride.objects.filter(simulation=parent, turn_index__lte=index)])
    queueing.send_on_commit(queueing.START_SIMULATION, branch.pk)
    return branch, turn_map


def _copy_turns(parent: Simulation, branch: Simulation, index: int) -> dict[int, int]:
    turns = list(parent.turns.done().filter(index__lt=index).order_by("index").prefetch_related("retrievals"))
    skip = {"id", "simulation"}
    fields = [f.name for f in Turn._meta.concrete_fields if f.name not in skip]
    copies = Turn.objects.bulk_create([Turn(simulation=branch, **{n: getattr(t, n) for n in fields}) for t in turns])
    skip = {"id", "turn"}
    fields = [f.name for f in Retrieval._meta.concrete_fields if f.name not in skip]
    Retrieval.objects.bulk_create([Retrieval(turn=copy, **{n: getattr(r, n) for n in fields})
                                   for turn, copy in zip(turns, copies) for r in turn.retrievals.all()],
                                  batch_size=1000)
    return {turn.pk: copy.pk for turn, copy in zip(turns, copies)}


def _remap(snapshots: list[dict], mapping: dict[int, int]) -> list[dict]:
    return [dict(s, memory_id=mapping.get(s.get("memory_id"), s.get("memory_id"))) for s in snapshots or []]


def branch_prepare(*, simulation_id: int) -> Simulation | None:
    """In the worker: the bank as of the branch turn, the copied records pointed at it, then run on."""
    with transaction.atomic():
        branch = Simulation.objects.select_for_update().filter(pk=simulation_id).first()
        if branch is None or branch.status != Simulation.Status.SEEDING or branch.parent_id is None:
            return branch
        if branch.bank.seed_status != "done":  # not prepared yet (a redelivered task finds it done)
            parent = Simulation.objects.select_related("bank").get(pk=branch.parent_id)
            mapping = banks.bank_copy(source=parent.bank, target=branch.bank, as_of_turn=(branch.branch_turn or 0) + 1)
            retrievals = list(Retrieval.objects.filter(turn__simulation=branch))
            for retrieval in retrievals:
                retrieval.results = _remap(retrieval.results, mapping)
            Retrieval.objects.bulk_update(retrievals, ["results"], batch_size=1000)
            overrides = list(TurnOverride.objects.filter(simulation=branch, memory_id__isnull=False))
            for override in overrides:
                override.memory_id = mapping.get(override.memory_id, override.memory_id)
            TurnOverride.objects.bulk_update(overrides, ["memory_id"])
            banks.bank_mark_seeded(bank=branch.bank)
        branch.status = Simulation.Status.RUNNING
        branch.updated = timezone.now()
        branch.save(update_fields=["status", "updated"])
        queue_next(branch)
    return branch

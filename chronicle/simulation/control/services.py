"""Writes for simulations as a whole: start, seed, pause, resume, cancel, one more turn, model
settings, recovery after a worker died, the demo. A turn's own bookkeeping (claim, heartbeat,
finish, fail: why a turn is never run twice nor skipped) is in turns.py.
"""

from __future__ import annotations

from datetime import timedelta

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from chronicle import demo, queueing
from chronicle.models import Scenario
from chronicle.simulation.control.branching import branch_prepare
from chronicle.simulation.control.errors import ControlError
from chronicle.simulation.aftermath.formation import stage_ahead
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.run.replay import script_from_simulation
from chronicle.simulation.run.run_settings import (BRANCH_SETTINGS, LLM_SETTING_FIELDS, MAX_TURNS, SETTING_FIELDS,
                                                   server_defaults, unknown_settings)
from chronicle.simulation.story.stage import without_added
from chronicle.simulation.control.turns import next_index, queue_next, stale_after
from memory.models import Memory
from memory.api import DEFAULT_SCORING, banks

DEMO_PACE_S = 1.0  # the demo is a dry run that would finish in a blink; a second a line can be watched


def file_settings_errors(values, *, cast_names: list[str]) -> list[str]:
    """What is wrong with a file's "settings", as "settings.NAME: …" lines ([] when nothing is)."""
    if not isinstance(values, dict):
        return ["settings must be an object"]
    if unknown := unknown_settings(values):
        return unknown
    return [f"settings.{name}: {message}" for name, messages in
            simulation_settings_errors(settings=values, cast_names=cast_names).items() for message in messages]


# --- start and seed -------------------------------------------------------------------------

@transaction.atomic
def simulation_start(*, owner, scenario, cast: list, settings: dict, sequel_of: Simulation | None = None) -> Simulation:
    """Snapshot the scenario and cast, create the run's memory bank and queue seeding + turn 0.
    sequel_of: the run whose earned memories the cast carries in (Simulation.sequel_carry)."""
    sheets = scenario.cast_sheets(cast)  # pair notes merged, card macros resolved for this cast
    simulation = Simulation(owner=owner, scenario=scenario, scenario_snapshot=scenario.to_sheet().to_dict(),
                            cast_snapshot=[s.to_dict() for s in sheets], status=Simulation.Status.SEEDING)
    for name, value in settings.items():
        if name in SETTING_FIELDS and value is not None:
            setattr(simulation, name, value)
    if not simulation.title:
        simulation.title = scenario.title
    simulation.sequel_of = sequel_of
    simulation.full_clean()
    simulation.save()
    simulation.bank = banks.bank_create(name=f"Simulation #{simulation.pk}: {simulation.title}"[:200], owner=owner)
    simulation.save(update_fields=["bank", "updated"])
    queueing.send_on_commit(queueing.START_SIMULATION, simulation.pk)
    return simulation


def simulation_settings_errors(*, settings: dict, cast_names: list[str]) -> dict[str, list[str]]:
    """What simulation_start would refuse in these settings for a cast of these names, checked before
    anything is created (a command line checks a file's settings before it imports the file). A model
    server the settings do not name is the server's configuration, as the new-run form and the command
    fill it in."""
    simulation = Simulation(cast_snapshot=[{"name": name} for name in cast_names], title="check")
    if settings.get("provider") == Simulation.Provider.OPENAI:
        settings = {**server_defaults(), **settings}
    for name, value in settings.items():
        if name in SETTING_FIELDS and value is not None:
            setattr(simulation, name, value)
    try:
        simulation.full_clean(exclude=["owner", "scenario", "bank", "parent", "sequel_of"])
    except ValidationError as exc:
        return exc.message_dict
    return {}


def simulation_seed(*, simulation_id: int) -> Simulation | None:
    """Seed the bank from the snapshots (synchronously, in the worker), then queue the first turn."""
    simulation = Simulation.objects.filter(pk=simulation_id).first()
    if simulation is None or simulation.status != Simulation.Status.SEEDING:
        return simulation
    if simulation.parent_id and simulation.branch_turn is not None:
        return branch_prepare(simulation_id=simulation_id)  # a branch copies its parent's bank instead
    payload = {"characters": simulation.cast_snapshot, "scenario": simulation.scenario_snapshot or None}
    try:
        banks.bank_seed(bank_id=simulation.bank_id, payload=payload)  # here, in this worker; marks the bank on failure
    except Exception as exc:
        Simulation.objects.filter(pk=simulation_id).update(
            status=Simulation.Status.FAILED, error=f"Seeding the memory bank failed: {exc}", updated=timezone.now())
        return None
    sequel_carry(simulation)
    stage_ahead(simulation)  # the writer's directions, embedded now rather than before their turns' lines
    with transaction.atomic():
        simulation = Simulation.objects.select_for_update().get(pk=simulation_id)
        if simulation.status == Simulation.Status.SEEDING:
            simulation.status = Simulation.Status.RUNNING
            simulation.save(update_fields=["status", "updated"])
            queue_next(simulation)
    return simulation


def sequel_carry(simulation: Simulation) -> dict[str, int]:
    """A sequel's characters bring what they earned in the first run (memory.services.bank_carry),
    once: a redone seeding finds them carried."""
    source = simulation.sequel_of
    if source is None or source.bank_id is None or simulation.bank_id is None:
        return {}
    if Memory.objects.in_bank(simulation.bank).filter(metadata__has_key="carried_from").exists():
        return {}
    last = source.turns.done().order_by("-index").values_list("index", flat=True).first()
    return banks.bank_carry(source=source.bank, target=simulation.bank, carry=simulation.carry_plan(),
                            last_turn=(last + 1) if last is not None else 0, source_label=str(source))


# --- controls -------------------------------------------------------------------------------

def _locked(simulation: Simulation) -> Simulation:
    return Simulation.objects.select_for_update().get(pk=simulation.pk)


@transaction.atomic
def simulation_pause(*, simulation: Simulation) -> Simulation:
    simulation = _locked(simulation)
    if simulation.status != Simulation.Status.RUNNING:
        raise ControlError(f"Only a running simulation can be paused (this one is {simulation.status}).")
    simulation.status, simulation.pause_reason = Simulation.Status.PAUSED, "Paused by you."
    simulation.save(update_fields=["status", "pause_reason", "updated"])
    return simulation


@transaction.atomic
def simulation_resume(*, simulation: Simulation, step_once: bool = False) -> Simulation:
    """Go on from the first turn not done; a failed or stale turn is redone, never duplicated."""
    simulation = _locked(simulation)
    if simulation.status not in (Simulation.Status.PAUSED, Simulation.Status.FAILED):
        raise ControlError(f"Only a paused or failed simulation can be resumed (this one is {simulation.status}).")
    simulation.pause_reason, simulation.error, simulation.step_once = "", "", step_once
    if simulation.bank is None or simulation.bank.seed_status != "done":
        simulation.status = Simulation.Status.SEEDING
        queueing.send_on_commit(queueing.START_SIMULATION, simulation.pk)
    elif next_index(simulation) >= simulation.max_turns:
        simulation.status = Simulation.Status.COMPLETED
    else:
        simulation.status = Simulation.Status.RUNNING
        queue_next(simulation)
    simulation.save(update_fields=["status", "pause_reason", "error", "step_once", "updated"])
    return simulation


@transaction.atomic
def simulation_llm_update(*, simulation: Simulation, settings: dict) -> Simulation:
    """Change a stopped run's model settings (a wrong model name, a new key), to take effect on Resume."""
    simulation = _locked(simulation)
    if simulation.status not in (Simulation.Status.PAUSED, Simulation.Status.FAILED):
        raise ControlError(f"The model settings can be changed while the run is paused (this one is {simulation.status}).")
    changed = [name for name in LLM_SETTING_FIELDS if name in settings and getattr(simulation, name) != settings[name]]
    for name in changed:
        setattr(simulation, name, settings[name])
    if "provider" in changed or "model" in changed or "base_url" in changed:
        simulation.tools_unsupported = False  # another model may well call tools
        changed.append("tools_unsupported")
    simulation.full_clean()
    simulation.save(update_fields=[*changed, "updated"])
    return simulation


@transaction.atomic
def simulation_replay(*, source: Simulation, changes: dict) -> Simulation:
    """A new run that replays `source`'s lines from turn 1 (its model's replies and tool calls, or its
    script) with the memory settings in `changes`, seeded afresh from the same snapshots."""
    if source.is_live:
        raise ControlError("Pause the run (or let it finish) before replaying it.")
    script = source.script if source.provider == Simulation.Provider.REPLAY else script_from_simulation(source)
    if not script:
        raise ControlError("This run has no finished lines to replay yet.")
    run = Simulation(owner=source.owner, scenario=source.scenario, scenario_snapshot=source.scenario_snapshot,
                     cast_snapshot=source.cast_snapshot, sequel_of=source.sequel_of, status=Simulation.Status.SEEDING)
    for name in BRANCH_SETTINGS:  # a replay keeps what a branch keeps
        setattr(run, name, getattr(source, name))
    run.stage_directions = without_added(source.stage_directions)  # its lines add their moves again
    run.provider, run.script, run.max_turns, run.pause_after = Simulation.Provider.REPLAY, script, len(script), None
    run.seats = []  # the writer's lines are in the script, said as they were
    for name, value in changes.items():
        setattr(run, name, value)
    run.title = f"{source.title or source} · replayed ({run.retrieval_mode}, {run.scoring})"[:200]
    run.full_clean()
    run.save()
    run.bank = banks.bank_create(name=f"Simulation #{run.pk}: {run.title}"[:200], owner=run.owner)
    run.save(update_fields=["bank", "updated"])
    queueing.send_on_commit(queueing.START_SIMULATION, run.pk)
    return run


@transaction.atomic
def simulation_cancel(*, simulation: Simulation) -> Simulation:
    simulation = _locked(simulation)
    if simulation.is_finished:
        raise ControlError(f"This simulation is already {simulation.status}.")
    simulation.status, simulation.pause_reason = Simulation.Status.CANCELLED, "Cancelled by you."
    simulation.save(update_fields=["status", "pause_reason", "updated"])
    return simulation


@transaction.atomic
def simulation_delete(*, simulation: Simulation) -> None:
    """The run, its turns and history, and its memory bank (a branch or sequel has its own copy)."""
    simulation = _locked(simulation)
    if simulation.is_live:
        raise ControlError("Cancel or pause the run before deleting it.")
    bank = simulation.bank
    simulation.delete()
    if bank is not None:
        banks.bank_delete(bank=bank)  # locked first: a worker still writing into it finishes, or finds it gone


@transaction.atomic
def simulation_one_more_turn(*, simulation: Simulation) -> Simulation:
    """Completed: add a turn and run it. Paused: run the next turn, then pause again."""
    locked = _locked(simulation)
    if locked.status == Simulation.Status.COMPLETED:
        locked.max_turns = max(locked.max_turns, next_index(locked)) + 1
        locked.status = Simulation.Status.RUNNING
        locked.full_clean()
        locked.save(update_fields=["max_turns", "status", "updated"])
        queue_next(locked)
        return locked
    if locked.status == Simulation.Status.PAUSED:
        if next_index(locked) >= locked.max_turns:
            locked.max_turns = next_index(locked) + 1
            locked.save(update_fields=["max_turns", "updated"])
        return simulation_resume(simulation=locked, step_once=True)
    raise ControlError(f"One more turn needs a completed or paused simulation (this one is {locked.status}).")


MORE_TURNS_LIMIT = 100  # turns one "Run N more turns" may ask for


@transaction.atomic
def simulation_more_turns(*, simulation: Simulation, turns: int | None) -> Simulation:
    """Run `turns` more turns (None: until the writer pauses), from a completed or paused run; a
    paused run pauses again after them."""
    if turns is not None and not 1 <= turns <= MORE_TURNS_LIMIT:
        raise ControlError(f"Run between 1 and {MORE_TURNS_LIMIT} more turns at a time.")
    locked = _locked(simulation)
    if locked.status not in (Simulation.Status.COMPLETED, Simulation.Status.PAUSED):
        raise ControlError(f"More turns need a completed or paused simulation (this one is {locked.status}).")
    start = next_index(locked)
    if turns is None:
        if start >= MAX_TURNS:
            raise ControlError(f"This run has reached the most turns a run may have ({MAX_TURNS:,}): "
                               "start a sequel to go on.")
        locked.max_turns, locked.pause_after = MAX_TURNS, None
    else:
        locked.max_turns = min(MAX_TURNS, max(locked.max_turns, start + turns))
        # Paused, it pauses again after them; completed, it completes after them.
        locked.pause_after = start + turns if locked.status == Simulation.Status.PAUSED else None
    paused = locked.status == Simulation.Status.PAUSED
    if not paused:
        locked.status = Simulation.Status.RUNNING
    locked.full_clean()
    locked.save(update_fields=["max_turns", "pause_after", "status", "updated"])
    if paused:
        return simulation_resume(simulation=locked)
    queue_next(locked)
    return locked


def simulations_recover(*, stuck_only: bool = False) -> list[int]:
    """Re-queue what a dead worker or an outage left (stale turns, runs stuck between turns): at
    worker start every running run (a task re-checks its turn and never runs one twice), and on the
    worker's timer (stuck_only) only the runs nothing has touched for twice the stale window."""
    queued = []
    limit = timezone.now() - timedelta(seconds=stale_after())
    running = Simulation.objects.filter(status=Simulation.Status.RUNNING)
    if stuck_only:
        quiet = timezone.now() - timedelta(seconds=2 * stale_after())
        busy = (Turn.objects.filter(simulation=OuterRef("pk"))
                .filter(Q(heartbeat__gte=quiet) | Q(finished__gte=quiet) | Q(started__gte=quiet)))
        running = running.filter(updated__lt=quiet).exclude(Exists(busy))
    # A run waiting for the writer's line (a seat) is not stuck: nothing is to be done until it comes.
    running = running.exclude(Exists(Turn.objects.filter(simulation=OuterRef("pk"), status=Turn.Status.SEAT)))
    for simulation in running:
        index = next_index(simulation)
        # Queued even when the turn looks alive: the task re-checks later and never runs a turn twice.
        queueing.send(queueing.RUN_TURN, simulation.pk, index)
        queued.append(simulation.pk)
    seeding = Simulation.objects.none() if stuck_only else Simulation.objects.filter(status=Simulation.Status.SEEDING,
                                                                                       updated__lt=limit)
    for simulation in seeding:
        queueing.send(queueing.START_SIMULATION, simulation.pk)
        queued.append(simulation.pk)
    return queued


def demo_simulation_start(*, owner) -> Simulation:
    """One click: a scripted (dry) run of the owner's demo dinner scenario, created if missing."""
    def find():
        mine = Scenario.objects.owned_by(owner)
        return mine.filter(title=getattr(demo, "DEMO_TITLE", "")).first() or mine.filter(title__icontains="dinner").first()

    scenario = find()
    if scenario is None:
        demo.load_demo(owner=owner)
        scenario = find()
    if scenario is None:
        raise ControlError("The demo scenario could not be loaded.")
    cast = list(scenario.cast.all())
    return simulation_start(owner=owner, scenario=scenario, cast=cast, settings={
        "title": f"{scenario.title} (demo)", "max_turns": 2 * len(cast) or 6, "provider": "scripted",
        "retrieval_mode": "tools", "speaking_order": "round_robin", "scoring": DEFAULT_SCORING,
        "pace_s": DEMO_PACE_S,
    })

"""Writes for simulations: start, seed, claim/finish/fail a turn, pause, resume, cancel, one more turn.

Turn bookkeeping (why it cannot duplicate or skip a turn):
- `(simulation, index)` is unique and every claim runs under `select_for_update` on the Simulation.
- A claim stamps the turn with a fresh token; only the holder of the current token may finish it.
  A worker killed mid-turn stops heart-beating; the turn is then *stale* and the next task for that
  index (redelivered, re-queued at worker start, or queued by Resume) claims it again.
- Retrievals, the line and the episodic memories are written in one transaction at the end.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chronicle import demo
from chronicle.models import Scenario
from chronicle.simulation.engine import TurnInput, TurnOutcome
from chronicle.simulation.models import Retrieval, Simulation, Turn
from chronicle.simulation.selectors import turn_overrides
from memory.services import accesses_record, bank_create, remember_utterance
from memory.sheets import CharacterSheet, ScenarioSheet
from memory.tasks import seed_bank_task

DEMO_PACE_S = 1.0  # the demo is a dry run that would finish in a blink; a second a line can be watched

# A run's settings, one list for the form, a branch and an export (which leaves SECRET_SETTINGS out).
SETTING_FIELDS = ("title", "max_turns", "speaking_order", "retrieval_mode", "scoring", "weights", "provider",
                  "base_url", "model", "api_key", "temperature", "max_tokens", "seed", "max_tool_calls", "timeout_s", "pace_s")
SECRET_SETTINGS = ("api_key",)


def stale_after() -> float:
    """Seconds without a heartbeat after which a running turn's worker is presumed dead."""
    return settings.TURN_STALE_SECONDS


# --- start and seed -------------------------------------------------------------------------

@transaction.atomic
def simulation_start(*, owner, scenario, cast: list, settings: dict) -> Simulation:
    """Snapshot the scenario and cast, create the run's memory bank and queue seeding + turn 0."""
    from chronicle.simulation.tasks import start_simulation_task
    pair_notes = getattr(scenario, "pair_notes", None) or {}
    sheets = [c.to_sheet(extra_knowledge=pair_notes.get(c.name)) for c in cast]
    simulation = Simulation(owner=owner, scenario=scenario, scenario_snapshot=scenario.to_sheet().to_dict(),
                            cast_snapshot=[s.to_dict() for s in sheets], status=Simulation.Status.SEEDING)
    for name, value in settings.items():
        if name in SETTING_FIELDS and value is not None:
            setattr(simulation, name, value)
    if not simulation.title:
        simulation.title = scenario.title
    simulation.full_clean()
    simulation.save()
    simulation.bank = bank_create(name=f"Simulation #{simulation.pk}: {simulation.title}"[:200], owner=owner)
    simulation.save(update_fields=["bank", "updated"])
    start_simulation_task.delay_on_commit(simulation.pk)
    return simulation


def simulation_seed(*, simulation_id: int) -> Simulation | None:
    """Seed the bank from the snapshots (synchronously, in the worker), then queue the first turn."""
    simulation = Simulation.objects.filter(pk=simulation_id).first()
    if simulation is None or simulation.status != Simulation.Status.SEEDING:
        return simulation
    if simulation.parent_id and simulation.branch_turn is not None:
        from chronicle.simulation.branching import branch_prepare  # branching builds on this module

        return branch_prepare(simulation_id=simulation_id)  # a branch copies its parent's bank instead
    payload = {"characters": simulation.cast_snapshot, "scenario": simulation.scenario_snapshot or None}
    try:
        seed_bank_task(simulation.bank_id, payload)  # called, not queued: runs here; marks the bank on failure
    except Exception as exc:
        Simulation.objects.filter(pk=simulation_id).update(
            status=Simulation.Status.FAILED, error=f"Seeding the memory bank failed: {exc}", updated=timezone.now())
        return None
    with transaction.atomic():
        simulation = Simulation.objects.select_for_update().get(pk=simulation_id)
        if simulation.status == Simulation.Status.SEEDING:
            simulation.status = Simulation.Status.RUNNING
            simulation.save(update_fields=["status", "updated"])
            queue_next(simulation)
    return simulation


# --- turns ----------------------------------------------------------------------------------

def next_index(simulation: Simulation) -> int:
    """The first turn not done: turns are done in order, so this is the count of done turns."""
    return simulation.turns.done().count()


def transcript(simulation: Simulation, before: int) -> list[tuple[int, str, str]]:
    rows = simulation.turns.done().filter(index__lt=before).order_by("index").values_list("index", "agent", "utterance")
    return [(index + 1, agent, text) for index, agent, text in rows]


def queue_next(simulation: Simulation) -> None:
    """Queue the first turn not done, once the current transaction commits."""
    from chronicle.simulation.tasks import run_turn_task  # the tasks call these services: imported late

    run_turn_task.delay_on_commit(simulation.pk, next_index(simulation))


def choose_speaker(*, simulation: Simulation, index: int, provider) -> str:
    names = simulation.cast_names
    if simulation.speaking_order == Simulation.SpeakingOrder.MODEL_PICKS and index > 0 and len(names) > 1:
        lines = transcript(simulation, index)
        try:
            picked, _usage = provider.pick_speaker(candidates=names, transcript=lines)
        except Exception:  # a failed pick is not worth a failed turn: fall back to the rotation
            picked = None
        last = lines[-1][1] if lines else None
        if picked in names and picked != last:
            return picked
        # The least recently heard of the others.
        heard = {name: -1 for name in names}
        for number, speaker, _text in lines:
            heard[speaker] = number
        return min((n for n in names if n != last), key=lambda n: (heard[n], names.index(n)))
    return names[index % len(names)]


@dataclass
class Claim:
    turn: Turn | None = None
    token: str = ""
    busy: bool = False  # another live worker holds the turn: check again later
    retry_in: float = 0.0  # when that worker's heartbeat would go stale


def _claim_token(task_id: str) -> str:
    # "<task id> <random>": the task id tells a redelivered message that the attempt holding the
    # turn was its own earlier delivery; the random part makes every attempt's token new.
    return f"{task_id} {uuid.uuid4().hex[:20]}" if task_id else uuid.uuid4().hex


def turn_claim(*, simulation_id: int, index: int, agent: str, worker: str = "", task_id: str = "",
               redelivered: bool = False) -> Claim:
    """Take turn `index` for this attempt, or say why not.

    A message Celery redelivers (`redelivered`) comes back only when the process that ran it died
    (reject_on_worker_lost) or its worker stopped without acking it; if that attempt still holds
    the turn (same task id in the claim) the turn is taken over at once instead of after the stale
    window: a killed pool child costs seconds, not a stale window."""
    with transaction.atomic():
        simulation = Simulation.objects.select_for_update().filter(pk=simulation_id).first()
        if simulation is None or simulation.status != Simulation.Status.RUNNING:
            return Claim()
        if index != next_index(simulation):
            return Claim()  # a duplicate message for a turn already done (or not yet due)
        if index >= simulation.max_turns:
            simulation.status = Simulation.Status.COMPLETED
            simulation.save(update_fields=["status", "updated"])
            return Claim()
        turn = Turn.objects.filter(simulation=simulation, index=index).first()
        now = timezone.now()
        own_dead_attempt = redelivered and task_id and turn is not None and turn.claim.split(" ")[0] == task_id
        if turn and turn.status == Turn.Status.RUNNING and turn.heartbeat and not own_dead_attempt:
            age = (now - turn.heartbeat).total_seconds()
            if age < stale_after():
                return Claim(busy=True, retry_in=stale_after() - age + 1)
        token = _claim_token(task_id)
        if turn is None:
            turn = Turn(simulation=simulation, index=index, agent=agent)
        else:
            turn.note = (turn.note + "\n" if turn.note else "") + \
                f"Redone (attempt {turn.attempts + 1}): the previous attempt {'failed' if turn.status == Turn.Status.FAILED else 'stopped with its worker'}."
        turn.status, turn.claim, turn.error = Turn.Status.RUNNING, token, ""
        turn.attempts += 1
        turn.worker = worker[:200]
        turn.started = turn.heartbeat = now
        turn.finished = None
        turn.full_clean(validate_constraints=False)  # the unique index is enforced by the database
        turn.save()
        return Claim(turn=turn, token=token)


def turn_heartbeat(*, turn_id: int, token: str) -> None:
    Turn.objects.filter(pk=turn_id, claim=token, status=Turn.Status.RUNNING).update(heartbeat=timezone.now())


def turn_input(*, turn: Turn) -> TurnInput:
    simulation = turn.simulation
    mode = simulation.retrieval_mode
    if simulation.tools_unsupported and mode != Simulation.RetrievalMode.PREPOPULATE:
        mode = Simulation.RetrievalMode.PREPOPULATE
    overrides = turn_overrides(simulation=simulation, index=turn.index)
    return TurnInput(
        excluded=overrides.excluded, pinned=overrides.pinned, line=overrides.line,
        bank=simulation.bank, agent=turn.agent, index=turn.index,
        cast=[CharacterSheet.from_dict(c) for c in simulation.cast_snapshot],
        scenario=ScenarioSheet.from_dict(simulation.scenario_snapshot) if simulation.scenario_snapshot else None,
        transcript=transcript(simulation, turn.index), mode=mode, scoring=simulation.scoring,
        weights=simulation.weights or None, max_tool_calls=simulation.max_tool_calls,
    )


def recalled_ids(outcome: TurnOutcome) -> list[int]:
    """Each memory the agent read this turn, once per time it came back (pins and exclusions aside)."""
    return [snap["memory_id"] for row in outcome.retrievals if row["tool"] != "pinned" and not row.get("error")
            for snap in row["results"] if not snap.get("excluded") and snap.get("memory_id")]


def _retrieval_rows(turn: Turn, outcome: TurnOutcome) -> list[Retrieval]:
    return [Retrieval(turn=turn, **row) for row in outcome.retrievals]


def _collapsed(failures: list[str]) -> list[str]:
    """"call 1, attempt 1: X; call 1, attempt 2: X; …" → "call 1, attempts 1–3: X" (the same error, said once)."""
    out: list[tuple[str, list[str], str]] = []
    for failure in failures:
        head, _, message = failure.partition(": ")
        call, _, attempt = head.partition(", attempt ")
        if out and out[-1][0] == call and out[-1][2] == message and attempt:
            out[-1][1].append(attempt)
        else:
            out.append((call, [attempt] if attempt else [], message if attempt else failure))
    said = []
    for call, attempts, message in out:
        if not attempts:
            said.append(message)
        elif len(attempts) == 1:
            said.append(f"{call}, attempt {attempts[0]}: {message}")
        else:
            said.append(f"{call}, attempts {attempts[0]}–{attempts[-1]}: {message}")
    return said


def _notes(turn: Turn, outcome: TurnOutcome, mode_note: str = "") -> str:
    lines = [turn.note] if turn.note else []
    lines += outcome.notes
    if mode_note:
        lines.append(mode_note)
    if outcome.failures:
        lines.append("Retried after: " + "; ".join(_collapsed(outcome.failures)))
    return "\n".join(lines)


@transaction.atomic
def turn_finish(*, turn_id: int, token: str, outcome: TurnOutcome) -> Turn | None:
    """Store the line, its retrievals and everyone's episodic memory of it; queue the next turn."""
    turn = Turn.objects.select_related("simulation").get(pk=turn_id)
    simulation = Simulation.objects.select_for_update().get(pk=turn.simulation_id)
    turn = Turn.objects.select_for_update().get(pk=turn_id)
    if turn.claim != token or turn.status != Turn.Status.RUNNING:
        return None  # this attempt lost its claim (it was presumed dead and redone)
    mode_note = ""
    if simulation.tools_unsupported and simulation.retrieval_mode != Simulation.RetrievalMode.PREPOPULATE \
            and not outcome.tools_unsupported:
        mode_note = "model has no tool calling: fell back to prepopulate"
    turn.retrievals.all().delete()  # leftovers of a failed attempt
    Retrieval.objects.bulk_create(_retrieval_rows(turn, outcome))
    turn.utterance = outcome.utterance
    turn.prompt_messages = outcome.messages
    turn.usage = outcome.usage
    turn.full_definition_tokens = outcome.full_definition_tokens
    turn.note = _notes(turn, outcome, mode_note)
    turn.status, turn.error, turn.finished = Turn.Status.DONE, "", timezone.now()
    turn.save()
    remember_utterance(bank=simulation.bank, speaker=turn.agent, text=turn.utterance, turn=turn.number,
                       listeners=simulation.cast_names)
    # What the agent recalled counts now, in this transaction: a failed or redone attempt counted nothing.
    accesses_record(memory_ids=recalled_ids(outcome), turn=turn.number)
    fields = ["updated"]
    if outcome.tools_unsupported and not simulation.tools_unsupported:
        simulation.tools_unsupported = True
        fields.append("tools_unsupported")
    if simulation.status == Simulation.Status.RUNNING:
        if turn.index + 1 >= simulation.max_turns:
            simulation.status = Simulation.Status.COMPLETED
            fields.append("status")
        elif simulation.step_once:
            simulation.status, simulation.step_once = Simulation.Status.PAUSED, False
            simulation.pause_reason = "Paused after one more turn."
            fields += ["status", "step_once", "pause_reason"]
        else:
            queue_next(simulation)
    simulation.save(update_fields=fields)
    return turn


@transaction.atomic
def turn_fail(*, turn_id: int, token: str, reason: str, outcome: TurnOutcome | None) -> Turn | None:
    """Record why the turn failed (and what it retrieved before), and pause the run with that reason."""
    turn = Turn.objects.select_related("simulation").get(pk=turn_id)
    simulation = Simulation.objects.select_for_update().get(pk=turn.simulation_id)
    turn = Turn.objects.select_for_update().get(pk=turn_id)
    if turn.claim != token or turn.status != Turn.Status.RUNNING:
        return None
    outcome = outcome or TurnOutcome()
    turn.retrievals.all().delete()
    Retrieval.objects.bulk_create(_retrieval_rows(turn, outcome))
    turn.prompt_messages = outcome.messages
    turn.usage = outcome.usage
    turn.note = _notes(turn, outcome)
    turn.status, turn.error, turn.finished = Turn.Status.FAILED, reason[:4000], timezone.now()
    turn.save()
    if simulation.status == Simulation.Status.RUNNING:
        simulation.status = Simulation.Status.PAUSED
        simulation.pause_reason = f"Turn {turn.number} ({turn.agent}) failed: {reason}"[:4000]
        simulation.save(update_fields=["status", "pause_reason", "updated"])
    return turn


# --- controls -------------------------------------------------------------------------------

class ControlError(Exception):
    pass


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
    from chronicle.simulation.tasks import start_simulation_task

    simulation = _locked(simulation)
    if simulation.status not in (Simulation.Status.PAUSED, Simulation.Status.FAILED):
        raise ControlError(f"Only a paused or failed simulation can be resumed (this one is {simulation.status}).")
    simulation.pause_reason, simulation.error, simulation.step_once = "", "", step_once
    if simulation.bank is None or simulation.bank.seed_status != "done":
        simulation.status = Simulation.Status.SEEDING
        start_simulation_task.delay_on_commit(simulation.pk)
    elif next_index(simulation) >= simulation.max_turns:
        simulation.status = Simulation.Status.COMPLETED
    else:
        simulation.status = Simulation.Status.RUNNING
        queue_next(simulation)
    simulation.save(update_fields=["status", "pause_reason", "error", "step_once", "updated"])
    return simulation


LLM_SETTING_FIELDS = ("provider", "base_url", "model", "api_key", "timeout_s", "temperature", "max_tokens",
                      "max_tool_calls")


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
def simulation_cancel(*, simulation: Simulation) -> Simulation:
    simulation = _locked(simulation)
    if simulation.is_finished:
        raise ControlError(f"This simulation is already {simulation.status}.")
    simulation.status, simulation.pause_reason = Simulation.Status.CANCELLED, "Cancelled by you."
    simulation.save(update_fields=["status", "pause_reason", "updated"])
    return simulation


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


def simulations_recover() -> list[int]:
    """At worker start: re-queue what a dead worker left (stale turns, runs stuck between turns)."""
    from chronicle.simulation.tasks import run_turn_task, start_simulation_task

    queued = []
    limit = timezone.now() - timedelta(seconds=stale_after())
    for simulation in Simulation.objects.filter(status=Simulation.Status.RUNNING):
        index = next_index(simulation)
        # Queued even when the turn looks alive: the task re-checks later and never runs a turn twice.
        run_turn_task.delay(simulation.pk, index)
        queued.append(simulation.pk)
    for simulation in Simulation.objects.filter(status=Simulation.Status.SEEDING, updated__lt=limit):
        start_simulation_task.delay(simulation.pk)
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
        "retrieval_mode": "tools", "speaking_order": "round_robin", "scoring": "similarity",
        "pace_s": DEMO_PACE_S,
    })

"""A turn's bookkeeping: which turn is due, claim / heartbeat / finish / fail (who speaks: speakers.py).

Why it cannot duplicate or skip a turn:
- `(simulation, index)` is unique and every claim runs under `select_for_update` on the Simulation.
- A claim stamps the turn with a fresh token; only the holder of the current token may finish it.
  A worker killed mid-turn stops heart-beating; the turn is then *stale* and the next task for that
  index (redelivered, re-queued at worker start, or queued by Resume) claims it again.
- Retrievals, the line, the episodic memories and the recalled memories' accesses are written in
  one transaction at the end (`turn_finish`): a failed or abandoned attempt leaves nothing behind.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import uuid
from dataclasses import dataclass

import psutil
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from chronicle import queueing
from chronicle.simulation.aftermath import secrets
from chronicle.simulation.aftermath.storage import storage_counts
from chronicle.simulation.story.beliefs import revise
from chronicle.simulation.turn.types import TurnOutcome
from chronicle.simulation.run import costs
from core import tracing
from chronicle.simulation.run.models import Retrieval, Simulation, Turn
from chronicle.simulation.story.moves import direction_lines, line_moves
from chronicle.simulation.control.pins import dropped_pins
from chronicle.simulation.story.stage import deliver
from chronicle.simulation.turn.inputs import heard_before
from memory.api import CapturePlan, line_capture, memory_edits, relations, upkeep
from chronicle.simulation.aftermath.feelings import feel_after_line
from chronicle.simulation.aftermath.formation import (  # noqa: F401 (stage_apply: read from here too)
    _notes,
    _queue_extract,
    apply_writes,
    belief_note,
    capture_for,
    capture_note,
    distortion_note,
    stage_apply,
    witness,
)

log = logging.getLogger(__name__)


def stale_after() -> float:
    """Seconds without a heartbeat after which a running turn's worker is presumed dead."""
    return settings.TURN_STALE_SECONDS


def next_index(simulation: Simulation) -> int:
    """The first turn not done: turns are done in order, so this is the count of done turns."""
    return simulation.turns.done().count()


def queue_next(simulation: Simulation) -> None:
    """Queue the first turn not done, once the current transaction commits."""
    queueing.send_on_commit(queueing.RUN_TURN, simulation.pk, next_index(simulation))


def script_end(simulation: Simulation) -> float:
    """The turns a replayed run has lines for (any other run: no end of its own)."""
    if simulation.provider == Simulation.Provider.REPLAY:
        return len(simulation.script or [])
    return float("inf")


def script_end_note(simulation: Simulation, done: int) -> str:
    if done >= script_end(simulation) and done < simulation.max_turns:
        return f"The script ended after {done} lines, before the {simulation.max_turns} turns this run was set for."
    return ""


@dataclass
class Claim:
    turn: Turn | None = None
    token: str = ""
    busy: bool = False  # another live worker holds the turn: check again later
    retry_in: float = 0.0  # when that worker's heartbeat would go stale


def _claim_token(task_id: str) -> str:
    # "<task id> <random> <pid>": the task id tells a redelivered message that the attempt holding
    # the turn was its own earlier delivery; the random part makes every attempt's token new; the
    # pid tells a later claim on this machine whether the process holding the turn is still there.
    return f"{task_id or uuid.uuid4().hex} {uuid.uuid4().hex[:12]} {os.getpid()}"


def _holder_gone(turn: Turn) -> bool:
    """The process holding the turn has ended: a killed worker's pool processes die with it (Celery
    sets them a parent-death signal), and their turns need not wait out the stale window. Known only
    on the machine that ran it (the worker's node name ends in this host's name)."""
    parts = turn.claim.split(" ")
    if len(parts) < 3 or not parts[2].isdigit() or turn.worker.rpartition("@")[2] != socket.gethostname():
        return False
    try:
        holder = psutil.Process(int(parts[2]))
        # A pid taken again since, by a process born after the claim, is not the holder.
        return holder.status() == psutil.STATUS_ZOMBIE or holder.create_time() > turn.started.timestamp()
    except psutil.NoSuchProcess:
        return True
    except psutil.Error:  # not ours to inspect: assume it lives
        return False


def turn_claim(*, simulation_id: int, index: int, agent: str, worker: str = "", task_id: str = "",
               redelivered: bool = False) -> Claim:
    """Take turn `index` for this attempt, or say why not.

    A message Celery redelivers (`redelivered`) comes back only when the process that ran it died
    (reject_on_worker_lost) or its worker stopped without acking it, and a task's retry only once
    the attempt that asked for it has ended (an outage); if that attempt still holds the turn (same
    task id in the claim) the turn is taken over at once instead of after the stale window: a killed
    pool child or a crashed database costs seconds, not a stale window. So is a turn whose holding
    process is known to be gone (_holder_gone: a killed worker's main process took it along)."""
    with transaction.atomic():
        simulation = Simulation.objects.select_for_update().filter(pk=simulation_id).first()
        if simulation is None or simulation.status != Simulation.Status.RUNNING:
            return Claim()
        if index != next_index(simulation):
            return Claim()  # a duplicate message for a turn already done (or not yet due)
        if index >= simulation.max_turns or index >= script_end(simulation):
            simulation.status = Simulation.Status.COMPLETED
            simulation.pause_reason = script_end_note(simulation, index)
            simulation.save(update_fields=["status", "pause_reason", "updated"])
            return Claim()
        if reason := costs.over_daily_limit(simulation):  # before the turn's calls, not after them
            simulation.status, simulation.pause_reason = Simulation.Status.PAUSED, reason
            simulation.save(update_fields=["status", "pause_reason", "updated"])
            return Claim()
        turn = Turn.objects.filter(simulation=simulation, index=index).first()
        now = timezone.now()
        own_dead_attempt = redelivered and task_id and turn is not None and turn.claim.split(" ")[0] == task_id
        if turn and turn.status == Turn.Status.RUNNING and turn.heartbeat and not own_dead_attempt \
                and not _holder_gone(turn):
            age = (now - turn.heartbeat).total_seconds()
            if age < stale_after():
                return Claim(busy=True, retry_in=stale_after() - age + 1)
        token = _claim_token(task_id)
        if turn is None:
            turn = Turn(simulation=simulation, index=index, agent=agent)
        elif turn.attempts == 0:
            turn.note = ""  # a seat's turn handed over (the writer's line came, or the agent took it): a first attempt
        else:
            turn.note = (turn.note + "\n" if turn.note else "") + \
                f"Redone (attempt {turn.attempts + 1}): the previous attempt {'failed' if turn.status == Turn.Status.FAILED else 'stopped with its worker'}."
        for note in dropped_pins(simulation=simulation, index=index, agent=agent):  # said, never dropped silently
            if note not in turn.note:
                turn.note = (turn.note + "\n" if turn.note else "") + note
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


def recalled_ids(outcome: TurnOutcome) -> list[int]:
    """Each memory the agent read this turn, once per time it came back (pins, exclusions and repeats aside)."""
    return [snap["memory_id"] for row in outcome.retrievals if row["tool"] != "pinned" and not row.get("error")
            for snap in row["results"] if not snap.get("excluded") and not snap.get("repeated") and snap.get("memory_id")]


def _retrieval_rows(turn: Turn, outcome: TurnOutcome) -> list[Retrieval]:
    return [Retrieval(turn=turn, **row) for row in outcome.retrievals]


@transaction.atomic
def turn_finish(*, turn_id: int, token: str, outcome: TurnOutcome, capture: CapturePlan | None = None) -> Turn | None:
    """Store the line, its retrievals and everyone's episodic memory of it; queue the next turn.

    `capture` is capture_for's plan, made before this transaction; without one it is made here."""
    simulation, turn = _locked_turn(turn_id)
    if turn.claim != token or turn.status != Turn.Status.RUNNING:
        return None  # this attempt lost its claim (it was presumed dead and redone)
    mode_note = _fallback_note(simulation, outcome)
    _store_reply(turn, outcome)
    if capture is None or (capture.turn, capture.speaker) != (turn.number, turn.agent):
        capture = capture_for(turn=turn, outcome=outcome)
    started = time.perf_counter()  # the memory system's time from here (_record_memory_time)
    with tracing.span("memory.retain", **{"memory.source": "line"}):
        captured = line_capture.capture_commit(capture)  # everyone's episodic memory of the line
    line = _deliver(simulation, turn)
    believed = _revise_beliefs(simulation, turn, line, capture)
    told = secrets.tell(bank=simulation.bank, speaker=turn.agent, heard_by=line.heard_by, turn=turn.number,
                        revealed=capture.after.revealed if capture.after else [])
    moved = _move_relationships(simulation, turn, line, capture, captured)
    feel_after_line(simulation, turn, capture, captured, moved)  # how it left each listener feeling
    _queue_extraction(simulation, turn, line, capture, moved)
    not_kept = capture_note(captured.skipped)
    turn.note = _notes(turn, outcome, mode_note, not_kept, "\n".join(n for n in (belief_note(believed), told) if n),
                       distortion_note(captured),
                       _degraded_note(simulation, outcome, capture))
    _record_reading_and_writes(simulation, turn, outcome, capture)
    memory_edits.memories_dated(bank=simulation.bank, turn=turn.number, when=simulation.story_time_at(turn.number))
    _mark_due(simulation, turn)
    _record_memory_time(turn, outcome, capture, captured, started, not_kept)
    turn.status, turn.error, turn.finished = Turn.Status.DONE, "", timezone.now()
    turn.save()
    _advance(simulation, turn, outcome, _comings_and_goings(simulation, turn, capture))
    return turn


def _comings_and_goings(simulation: Simulation, turn: Turn, capture: CapturePlan) -> list[str]:
    """The directions the line's exits and entrances add (chronicle.simulation.story.moves): read off its
    words, and as the model's judgement of it said."""
    after = capture.after
    found = line_moves(turn.utterance, speaker=turn.agent, cast=simulation.cast_names,
                       present=simulation.present_at(turn.number),
                       left=after.left if after else (), came=after.came if after else ())
    return direction_lines(found, speaker=turn.agent, turn=turn.number, directions=simulation.directions,
                           cast=simulation.cast_names)


def _locked_turn(turn_id: int) -> tuple[Simulation, Turn]:
    """The run, then the turn, each locked (in that order, as every claim takes them)."""
    simulation_id = Turn.objects.values_list("simulation_id", flat=True).get(pk=turn_id)
    # Its bank with it (of=self: the bank's row is not locked): the line's memories are written there.
    simulation = Simulation.objects.select_for_update(of=("self",)).select_related("bank").get(pk=simulation_id)
    return simulation, Turn.objects.select_for_update().get(pk=turn_id)


def _fallback_note(simulation: Simulation, outcome: TurnOutcome) -> str:
    if simulation.tools_unsupported and simulation.retrieval_mode != Simulation.RetrievalMode.PREPOPULATE \
            and not outcome.tools_unsupported:
        return "model has no tool calling: fell back to prepopulate"
    return ""


def _store_reply(turn: Turn, outcome: TurnOutcome) -> None:
    """The line, what was sent for it and what it cost, and its retrievals (a failed attempt's dropped)."""
    turn.retrievals.all().delete()
    Retrieval.objects.bulk_create(_retrieval_rows(turn, outcome))
    turn.utterance = outcome.utterance
    turn.prompt_messages = outcome.messages
    turn.usage = outcome.usage
    turn.full_definition_tokens = outcome.full_definition_tokens
    turn.context = outcome.context


def _deliver(simulation: Simulation, turn: Turn):
    """Who hears the line (those in the room; a whisper's one), and what they saw done."""
    line = deliver(turn.utterance, speaker=turn.agent, present=simulation.present_at(turn.number))
    turn.heard_by, turn.whisper_to = line.heard_by, line.whisper_to
    witness(simulation=simulation, turn=turn, line=line)
    return line


def _revise_beliefs(simulation: Simulation, turn: Turn, line, capture: CapturePlan):
    """What the line does to what its listeners believe: the model's stance on each claim, else the rule's."""
    return revise(bank=simulation.bank, speaker=turn.agent, line=turn.utterance,
                  vector=capture.vectors.get(capture.content), heard_by=line.heard_by, turn=turn.number,
                  previous=lambda: heard_before(simulation, turn), cast=simulation.cast_names,
                  judged=capture.after.stances if capture.after else None)


def _move_relationships(simulation: Simulation, turn: Turn, line, capture: CapturePlan, captured):
    """How each listener now stands with the speaker (memory.living.relationships): the line's own memory
    is the evidence. With a model, its judgement after the line moves them (memory.living.after_turn);
    else the word lists."""
    after = capture.after
    return relations.relationships_update(bank=simulation.bank, speaker=turn.agent, text=line.text or turn.utterance,
                                          listeners=line.heard_by, turn=turn.number, whisper_to=line.whisper_to,
                                          evidence={m.agent: m for m in captured}, judged=after.moves if after else None)


def _queue_extraction(simulation: Simulation, turn: Turn, line, capture: CapturePlan, moved) -> None:
    """Memories the line leaves besides itself (memory.forming.extraction): how it made each listener
    feel, a lesson its speaker drew aloud, the facts the model says each listener learned; made by a
    task after the commit, off the turn's path."""
    after = capture.after
    facts = {name: listed for name, listed in (after.facts if after else {}).items() if name in line.heard_by}
    if moved or facts or line_capture.lesson_of(line.text or turn.utterance):
        args = (simulation.bank_id, turn.number, turn.agent, line.text or turn.utterance, facts)
        transaction.on_commit(lambda: _queue_extract(*args))


def _degraded_note(simulation: Simulation, outcome: TurnOutcome, capture: CapturePlan) -> str:
    """What ran on a fallback this turn: keyword search without the embedding model, the rules without
    the model's judgement."""
    degraded = ""
    if capture.keyword_only or any(r.get("path") == "keyword" for r in outcome.retrievals):
        kept = "; this line is kept and gets its vector when the model is back." if capture.keyword_only else "."
        degraded = ("The embedding model was unavailable: memories were found by their words only "
                    f"(keyword search){kept}")
    after = capture.after
    if after is not None and after.error and simulation.provider != Simulation.Provider.REPLAY:
        degraded = "\n".join(filter(None, [degraded, f"The model's judgement of the line could not be used ({after.error}): "
                                                   "importance and relationships were decided by the rules."]))
    return degraded


def _record_reading_and_writes(simulation: Simulation, turn: Turn, outcome: TurnOutcome, capture: CapturePlan) -> None:
    """What the agent recalled counts now, in this transaction (a failed or redone attempt counted
    nothing); the memories its tools wrote, and the reflections the model's judgement made."""
    line_capture.accesses_record(memory_ids=recalled_ids(outcome), turn=turn.number)
    apply_writes(bank=simulation.bank, agent=turn.agent, turn=turn.number, writes=outcome.writes)
    for agent, insights in (capture.after.insights if capture.after else {}).items():
        if agent in capture.reflect:
            upkeep.insights_store(bank=simulation.bank, agent=agent, turn=turn.number, insights=insights,
                                  pool=capture.reflect[agent], metadata={"batched": True}, approach=capture.after.approaches.get(agent, ""))


def _mark_due(simulation: Simulation, turn: Turn) -> None:
    """Who is due to reflect or to consolidate, with this line counted (the caller queues them after
    the commit: chronicle.simulation.control.tasks)."""
    lived = upkeep.lived_since(simulation.bank, simulation.cast_names)
    due = upkeep.reflections_due(simulation.bank, simulation.cast_names, threshold=simulation.reflection_threshold,
                                 turn=turn.number, lived=lived)
    done_today = simulation.reflected_out_today(due, turn.number)  # the story day's three, made already
    turn.due_reflections = [name for name in due if name not in done_today]
    turn.due_consolidations = [name for name in simulation.cast_names if simulation.consolidation_budget > 0
                               and name in lived and lived[name].earned > simulation.consolidation_budget]


def _record_memory_time(turn: Turn, outcome: TurnOutcome, capture: CapturePlan, captured, started: float,
                        not_kept: str) -> None:
    """The memory system's own time this turn (model calls excluded): its searches, then capture
    (embedding, importance, filters), access counts, the deferred writes and those checks."""
    searched = sum(float(r.get("latency_ms") or 0) for r in outcome.retrievals)
    spent = capture.prepare_ms + (time.perf_counter() - started) * 1000
    turn.context = dict(turn.context or {}, memory_ms=round(searched + spent, 2), capture_ms=round(spent, 2),
                        llm_ms=round(outcome.llm_ms, 2), aux_calls=outcome.aux_calls, aux_tokens=outcome.aux_tokens,
                        not_kept=len(captured.skipped), not_kept_notes=not_kept.splitlines(),
                        **storage_counts(captured))


def _advance(simulation: Simulation, turn: Turn, outcome: TurnOutcome, moves: list[str]) -> None:
    """The run after the line: who it took out of the room or brought in, from the next turn; a model
    without tool calling is remembered; then it completes, pauses as asked, or queues the next turn."""
    fields = ["updated"]
    if moves:
        # As if the writer had said so: added to the run's own directions, where the writer sees
        # them (with the line they came from) and can change or take them back.
        simulation.stage_directions = "\n".join([simulation.stage_directions.rstrip(), *moves]).strip()
        fields.append("stage_directions")
    if outcome.tools_unsupported and not simulation.tools_unsupported:
        simulation.tools_unsupported = True
        fields.append("tools_unsupported")
    if simulation.status == Simulation.Status.RUNNING:
        if turn.index + 1 >= min(simulation.max_turns, script_end(simulation)):
            simulation.status = Simulation.Status.COMPLETED
            simulation.pause_reason = script_end_note(simulation, turn.index + 1)
            fields += ["status", "pause_reason"]
        elif simulation.pause_after and turn.number >= simulation.pause_after:
            simulation.status, simulation.pause_after = Simulation.Status.PAUSED, None
            simulation.pause_reason = f"Paused after turn {turn.number}, as asked."
            fields += ["status", "pause_after", "pause_reason"]
        elif simulation.step_once:
            simulation.status, simulation.step_once = Simulation.Status.PAUSED, False
            simulation.pause_reason = "Paused after one more turn."
            fields += ["status", "step_once", "pause_reason"]
        else:
            queue_next(simulation)
    simulation.save(update_fields=fields)


@transaction.atomic
def turn_fail(*, turn_id: int, token: str, reason: str, outcome: TurnOutcome | None) -> Turn | None:
    """Record why the turn failed (and what it retrieved before), and pause the run with that reason."""
    simulation, turn = _locked_turn(turn_id)
    if turn.claim != token or turn.status != Turn.Status.RUNNING:
        return None
    outcome = outcome or TurnOutcome()
    turn.retrievals.all().delete()
    Retrieval.objects.bulk_create(_retrieval_rows(turn, outcome))
    turn.prompt_messages = outcome.messages
    turn.usage = outcome.usage
    turn.context = outcome.context  # what was sent before it failed: the inspector shows it
    turn.note = _notes(turn, outcome)
    turn.status, turn.error, turn.finished = Turn.Status.FAILED, reason[:4000], timezone.now()
    turn.save()
    if simulation.status == Simulation.Status.RUNNING:
        simulation.status = Simulation.Status.PAUSED
        simulation.pause_reason = f"Turn {turn.number} ({turn.agent}) failed: {reason}"[:4000]
        simulation.save(update_fields=["status", "pause_reason", "updated"])
    return turn

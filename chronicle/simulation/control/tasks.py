"""Celery tasks: one per turn. Arguments are ids; bodies re-fetch and call services.

`acks_late` + `reject_on_worker_lost`: a turn whose worker dies is delivered again rather than lost;
the claim in `turns.turn_claim` makes running it twice impossible.

Each task names itself (`name=`): a queued task and a recorded run find it by that name, so moving
this module to another package renames nothing.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from celery import shared_task
from celery.exceptions import Retry
from celery.signals import worker_ready, worker_shutdown
from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models.expressions import RawSQL
from django.utils import timezone

from chronicle.simulation.story import beliefs
from chronicle.simulation.aftermath import formation, planning
from chronicle.simulation.control import seats, services, speakers, turns
from chronicle.simulation.turn import inputs as turn_inputs
from chronicle.simulation.prompting.context import count_tokens
from chronicle.simulation.turn.engine import run_turn
from chronicle.simulation.turn.types import TurnFailed
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.providers import get_bookkeeper, get_provider
from memory.api import EmbeddingError, banks, upkeep
from memory.models import Memory
from core import tracing
from core.outage import part_of

log = logging.getLogger(__name__)


class Heartbeat:
    """Stamps the turn every few seconds from a thread, so a live worker's slow LLM call is not 'stale'."""

    def __init__(self, turn_id: int, token: str):
        self.turn_id, self.token = turn_id, token
        self.stop = threading.Event()
        self.every = max(1.0, turns.stale_after() / 4)
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self) -> None:
        try:
            while not self.stop.wait(self.every):
                try:
                    turns.turn_heartbeat(turn_id=self.turn_id, token=self.token)
                except Exception as exc:  # the database is away: stamp again once it is back, or the
                    # turn, still alive in its model call, would be taken for dead and redone
                    log.warning("turn %s: heartbeat not written (%s)", self.turn_id, exc)
                    connection.close()
        finally:
            connection.close()  # the thread's own connection

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(timeout=10)


@shared_task(name="chronicle.simulation.tasks.start_simulation_task",
             acks_late=True, reject_on_worker_lost=True, soft_time_limit=1800, time_limit=1900)
def start_simulation_task(simulation_id: int) -> None:
    services.simulation_seed(simulation_id=simulation_id)


# Waits before a turn that met an outage tries again: serve brings a crashed PostgreSQL or Redis back
# within seconds, so the turn goes on then rather than after a stale window.
OUTAGE_RETRY_S = (1, 2, 3, 5)


@shared_task(name="chronicle.simulation.tasks.run_turn_task",
             bind=True, acks_late=True, reject_on_worker_lost=True, soft_time_limit=1500, time_limit=1600)
def run_turn_task(self, simulation_id: int, index: int) -> str:
    try:
        with tracing.span("wonda.turn", **{"wonda.simulation_id": simulation_id, "wonda.turn": index + 1}) as span:
            result = _run_turn_task(self, simulation_id, index)
            span.set_attribute("wonda.turn.result", result)
            return result
    except Retry:
        raise
    except Exception as exc:
        if part_of(exc) is None:
            raise
        return _wait_for_outage(self, exc, simulation_id, index)  # before its claim, or after its line was kept


def _run_turn_task(self, simulation_id: int, index: int) -> str:
    simulation = Simulation.objects.filter(pk=simulation_id).select_related("bank").first()
    if simulation is None or simulation.status != Simulation.Status.RUNNING:
        return "not running"
    provider = get_provider(simulation)
    existing = Turn.objects.filter(simulation=simulation, index=index).first()
    agent = existing.agent if existing else speakers.choose_speaker(simulation=simulation, index=index, provider=provider)
    if agent in (simulation.seats or []) and seats.seat_waits(simulation_id=simulation_id, index=index, agent=agent):
        # The writer plays this one: what happens before the line is made now, so the seat's panel
        # shows it, and the run waits for the line (seats.seat_speak queues this task again).
        beliefs.plant(simulation)
        formation.stage_apply(simulation=simulation, number=index + 1)
        return "waiting for the writer"
    delivery = self.request.delivery_info or {}
    # A retry (after an outage) carries the task id of the attempt that held the turn and gave it up.
    claim = turns.turn_claim(simulation_id=simulation_id, index=index, agent=agent,
                                worker=self.request.hostname or "", task_id=self.request.id or "",
                                redelivered=bool(delivery.get("redelivered")) or bool(self.request.retries))
    if claim.busy:
        # Another worker holds a fresh claim: look again once it would have gone stale.
        run_turn_task.apply_async((simulation_id, index), countdown=claim.retry_in)
        return "busy"
    if claim.turn is None:
        return "nothing to do"
    turn = claim.turn
    outcome = None
    with Heartbeat(turn.pk, claim.token):
        try:
            staging = time.perf_counter()
            beliefs.plant(simulation)  # the writer's planted beliefs, once
            formation.stage_apply(simulation=simulation, number=turn.number)  # what happens before the line
            day_calls, day_tokens = keep_the_day_before(simulation, turn.number)
            planning.plan_before_turn(simulation, turn.number, turn.agent)  # its plan for the scene, once a day
            staged_ms = (time.perf_counter() - staging) * 1000
            outcome = run_turn(turn_inputs.turn_input(turn=turn), provider, pace_s=simulation.turn_pace)
            outcome.aux_calls += day_calls
            outcome.aux_tokens += day_tokens
            capture = formation.capture_for(turn=turn, outcome=outcome)
            capture.prepare_ms += staged_ms  # memory's time too (the turn's memory_ms)
        except TurnFailed as exc:
            turns.turn_fail(turn_id=turn.pk, token=claim.token, reason=exc.reason, outcome=exc.outcome)
            return "failed"
        except EmbeddingError as exc:  # the line was said but cannot be remembered: pause rather than forget it
            turns.turn_fail(turn_id=turn.pk, token=claim.token, outcome=outcome,
                            reason=f"The line could not be remembered (the embedding model failed): {exc}")
            return "failed"
        except Exception as exc:  # a bug must still pause the run with a reason, not leave it hanging
            return _crashed(self, exc, turn=turn, token=claim.token, simulation_id=simulation_id, index=index)
    finished = turns.turn_finish(turn_id=turn.pk, token=claim.token, outcome=outcome, capture=capture)
    if finished is not None:
        queue_reflections(simulation_id, finished.number, due=finished.due_reflections)
        queue_consolidations(simulation_id, finished.number, due=finished.due_consolidations)
    return "done"


def _crashed(task, exc: Exception, *, turn: Turn, token: str, simulation_id: int, index: int) -> str:
    """A turn that raised: an outage waits (retried, never paused); anything else fails the turn."""
    close_old_connections()
    if part_of(exc) is not None:
        return _wait_for_outage(task, exc, simulation_id, index)
    log.exception("turn %s of simulation %s crashed", index, simulation_id)
    turns.turn_fail(turn_id=turn.pk, token=token, reason=f"{type(exc).__name__}: {exc}", outcome=None)
    return "failed"


def _wait_for_outage(task, exc: Exception, simulation_id: int, index: int) -> str:
    """The database or the broker went away: not the run's fault, and the run is not paused. This
    task tries again in seconds and, being the attempt that held the turn, takes it back at once;
    with no broker to retry through, serve (when it brings the part back) or the workers' recovery
    timer queues the run again."""
    close_old_connections()
    log.warning("turn %s of simulation %s waits for the %s: %s", index, simulation_id, part_of(exc), exc)
    try:
        raise task.retry(countdown=OUTAGE_RETRY_S[min(task.request.retries, len(OUTAGE_RETRY_S) - 1)],
                         max_retries=None)
    except Retry:
        raise
    except Exception:
        return "waiting"


def queue_consolidations(simulation_id: int, turn_number: int, due: list[str] | None = None) -> list[str]:
    """Over the run's per-agent budget (consolidation_budget; 0: never), an agent's old low-importance
    memories are consolidated by a task of its own (offline summaries; the writer can undo it).
    due: who is over it, when the caller has looked already (turn_finish does)."""
    simulation = Simulation.objects.select_related("bank").filter(pk=simulation_id).first()
    if simulation is None or simulation.bank_id is None:
        return []
    if due is None:
        due = upkeep.consolidations_due(simulation.bank, simulation.cast_names, simulation.consolidation_budget)
    for name in due:
        try:
            if simulation.provider == Simulation.Provider.OPENAI:  # the run's model writes the summaries
                consolidate_task.delay(simulation_id, name, turn_number - upkeep.RECENT_TURNS)
            else:
                upkeep.bank_consolidate_request(bank_id=simulation.bank_id, agent=name, before_turn=turn_number - upkeep.RECENT_TURNS,
                                                budget=simulation.consolidation_budget)
        except Exception:  # the broker being down costs this round (it is due again next turn), not the run
            log.exception("could not queue %s's consolidation at turn %s", name, turn_number)
    return due


def queue_reflections(simulation_id: int, turn_number: int, due: list[str] | None = None) -> list[str]:
    """Queue a reflection for each cast member whose importance since its last one reached the
    threshold. Reflecting is a task of its own: the next turn does not wait for two model calls.
    due: who reached it, when the caller has looked already (turn_finish does)."""
    simulation = Simulation.objects.select_related("bank").filter(pk=simulation_id).first()
    if simulation is None or simulation.bank_id is None:
        return []
    if due is None:
        due = upkeep.reflections_due(simulation.bank, simulation.cast_names, threshold=simulation.reflection_threshold,
                                     turn=turn_number)
        done_today = simulation.reflected_out_today(due, turn_number)
        due = [name for name in due if name not in done_today]
    batched = formation.judged_by_model(simulation)
    if batched and simulation.provider == Simulation.Provider.OPENAI and simulation.status == Simulation.Status.RUNNING:
        return []  # the model's judgement of the next line reflects for them, in the same call
    for name in due:
        _mark_reflecting(simulation_id, name, True)  # before the task: it may finish before delay() returns
        try:
            # A replay answers offline what its judgement call (counted) would have: not a call of its own.
            replayed = batched and simulation.provider == Simulation.Provider.REPLAY
            reflect_task.delay(simulation_id, name, turn_number, *([True] if replayed else []))
        except Exception:  # the broker being down costs this reflection (it is due again next turn), not the run
            log.exception("could not queue %s's reflection at turn %s", name, turn_number)
            _mark_reflecting(simulation_id, name, False)
    return due


def keep_the_day_before(simulation: Simulation, number: int) -> tuple[int, int]:
    """When turn `number` opens a new story day, each of the cast keeps the day before as one memory
    (memory.living.days) before the turn runs: the first to speak after "Two days later" reads it.
    Once: a redone turn finds the days kept. With a model, one call an agent (a failing one leaves
    the offline summary); a replay counts the call and lets the offline summary answer it.
    Returns (calls, their prompts' tokens): the turn's cost besides the speaker."""
    if simulation.bank_id is None or number < 2:
        return 0, 0
    now, before = simulation.story_time_at(number), simulation.story_time_at(number - 1)
    if now is None or before is None or now.date() <= before.date():
        return 0, 0
    start = datetime.combine(before.date(), datetime.min.time(), tzinfo=dt_timezone.utc)
    asked: list[int] = []
    ask = None
    if simulation.provider in (Simulation.Provider.OPENAI, Simulation.Provider.REPLAY):
        provider = get_bookkeeper(simulation)  # the day's summary is bookkeeping: the bookkeeping model's, if any
        answer = provider.complete if simulation.provider == Simulation.Provider.OPENAI else (lambda _prompt: "")

        def ask(prompt: str) -> str:
            asked.append(count_tokens(prompt))
            return answer(prompt)
    for name in simulation.cast_names:
        upkeep.day_summarise(bank=simulation.bank, agent=name, start=start, end=start + timedelta(days=1), summarize=ask)
    return len(asked), sum(asked)


def _add_reflection_tokens(simulation: Simulation, turn_number: int, tokens: int) -> None:
    """A reflection's calls, counted with the turn it was made at (one UPDATE: the turn is saved)."""
    if tokens:
        Turn.objects.filter(simulation=simulation, index=turn_number - 1).update(context=RawSQL(
            "jsonb_set(coalesce(context, '{}'::jsonb), '{reflection_tokens}', to_jsonb("
            "coalesce((context ->> 'reflection_tokens')::int, 0) + %s))", [tokens]))


def _mark_reflecting(simulation_id: int, agent: str, on: bool) -> None:
    """Simulation.reflecting, changed by one UPDATE (no read-modify-write racing the turn's save)."""
    if on:
        change = RawSQL("reflecting || %s::jsonb", [json.dumps({agent: timezone.now().isoformat()})])
    else:
        change = RawSQL("reflecting - %s", [agent])
    Simulation.objects.filter(pk=simulation_id).update(reflecting=change)


@contextmanager
def _reflection_lock(bank_id: int, agent: str):
    """Held by one reflection of one agent at a time: a redelivered task meanwhile finds it taken."""
    key = int.from_bytes(hashlib.blake2b(f"reflect:{bank_id}:{agent}".encode(), digest_size=8).digest(), "big", signed=True)
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_lock(%s)", [key])
        held = cursor.fetchone()[0]
    try:
        yield held
    finally:
        if held:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s)", [key])


@shared_task(name="chronicle.simulation.tasks.reflect_task",
             acks_late=True, reject_on_worker_lost=True, soft_time_limit=600, time_limit=660)
def reflect_task(simulation_id: int, agent: str, turn_number: int, batched: bool = False) -> str:
    """The agent reflects at this turn, once: a redelivery, or a task queued again by a later turn
    before this one ran, finds the reflection made (or no longer due) and does nothing."""
    simulation = Simulation.objects.select_related("bank").filter(pk=simulation_id).first()
    if simulation is None or simulation.bank_id is None:
        return "no simulation"
    try:
        with upkeep.background():  # nobody waits on it: its encodes yield the cores to the next turn's
            return _reflect(simulation, agent, turn_number, batched=batched)
    finally:
        _mark_reflecting(simulation_id, agent, False)


def _reflect(simulation: Simulation, agent: str, turn_number: int, batched: bool = False) -> str:
    bank = simulation.bank
    with _reflection_lock(bank.pk, agent) as held:
        if not held:
            return "busy"
        if Memory.objects.in_bank(bank).for_agent(agent).filter(kind=Memory.Kind.REFLECTION, turn=turn_number).exists():
            return "already reflected"
        # Seed 003's rules, read again: a redelivered task, or one queued before a later turn's, may find it done.
        if not upkeep.reflections_due(bank, [agent], threshold=simulation.reflection_threshold, turn=turn_number) \
                or simulation.reflected_out_today([agent], turn_number):
            return "not due"
        try:
            with transaction.atomic():
                if not banks.bank_hold(bank.pk):
                    return "no bank"  # the run was deleted meanwhile
                asked: list[int] = []
                complete = get_bookkeeper(simulation).complete

                def ask(prompt: str) -> str:
                    asked.append(count_tokens(prompt))
                    return complete(prompt)
                made = upkeep.reflect(bank, agent, turn=turn_number, ask=ask, metadata={"batched": True} if batched else None)
                if not batched:  # else the judgement that asked for it counted the call (a replay answers it here)
                    _add_reflection_tokens(simulation, turn_number, sum(asked))
        except Exception:  # a failing model records nothing and the run goes on; it is due again next turn
            log.exception("%s's reflection at turn %s of simulation %s failed", agent, turn_number, simulation.pk)
            return "failed"
    return f"{len(made)} reflection{'s' if len(made) != 1 else ''}"


@shared_task(name="chronicle.simulation.tasks.consolidate_task",
             soft_time_limit=600, time_limit=660)
def consolidate_task(simulation_id: int, agent: str, before_turn: int) -> int:
    """bank_consolidate_request for a run with a model: its summaries are the model's (seed 004's
    prompt); a failing call falls back to the offline summary (memory.living.consolidation)."""
    simulation = Simulation.objects.select_related("bank").filter(pk=simulation_id).first()
    if simulation is None or simulation.bank_id is None:
        return 0
    summarize = upkeep.summarizer(get_bookkeeper(simulation).complete)
    with upkeep.background(), transaction.atomic():
        if not banks.bank_hold(simulation.bank_id):
            return 0  # the run was deleted meanwhile
        if not upkeep.consolidation_due(simulation.bank, agent, simulation.consolidation_budget):
            return 0
        return len(upkeep.consolidate(simulation.bank, agent, before_turn=before_turn, summarize=summarize))


@shared_task(name="chronicle.simulation.tasks.recover_simulations_task")
def recover_simulations_task() -> list[int]:
    return services.simulations_recover()


@worker_ready.connect
def _recover_on_worker_start(sender=None, **_kwargs) -> None:
    # A worker that died mid-turn left a running turn with no one on it; a new worker picks it up.
    try:
        recover_simulations_task.delay()
    except Exception:  # the broker being down must not stop the worker from starting
        log.exception("could not queue simulation recovery")
    if settings.RECOVERY_EVERY_SECONDS > 0:
        threading.Thread(target=_recover_stuck_runs, name="wonda-recovery", daemon=True).start()


def _recover_stuck_runs() -> None:
    """The worker's recovery timer: a run that an outage (the database, the broker, a killed worker)
    left with nothing happening is queued again, so no run needs a person after one."""
    while not _stopping.wait(settings.RECOVERY_EVERY_SECONDS):
        try:
            close_old_connections()
            queued = services.simulations_recover(stuck_only=True)
            if queued:
                log.info("recovery timer queued runs %s again", queued)
        except Exception as exc:  # still down: try again at the next tick
            log.warning("recovery timer: %s", exc)


_stopping = threading.Event()


@worker_shutdown.connect
def _stop_recovery(**_kwargs) -> None:
    _stopping.set()

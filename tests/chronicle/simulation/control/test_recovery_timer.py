"""A run that an outage left running with nothing happening (its turn's task lost with the broker,
or failed while the database was away) is taken up again by the workers' recovery timer: nobody
has to press Resume."""

from __future__ import annotations

import os
from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from chronicle.simulation.run.models import Simulation, Turn
from tests.chronicle.simulation.conftest import wait_for, wait_status
from tests.factories import start


def runs_queued_nowhere(send):
    """core.queueing.send that queues no run's task (a worker another test left running would
    otherwise claim the turn first); memory's work is queued as usual."""
    return lambda name, *args, **kwargs: send(name, *args, **kwargs) if name.startswith("memory.") else None


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_run_left_standing_is_taken_up_again_by_the_recovery_timer(user, dinner, start_worker):
    worker = start_worker("recovery", env={"WONDA_RECOVERY_EVERY_SECONDS": "1", "WONDA_TURN_STALE_SECONDS": "2"})
    try:
        simulation = start(user, dinner, max_turns=2, provider="scripted", retrieval_mode="prepopulate")
        wait_status(simulation, Simulation.Status.COMPLETED)
        # As an outage leaves it: running, one more turn to go, no task queued, nothing touched lately.
        past = timezone.now() - timedelta(minutes=5)
        Simulation.objects.filter(pk=simulation.pk).update(status=Simulation.Status.RUNNING, max_turns=3, updated=past)
        Turn.objects.filter(simulation=simulation).update(heartbeat=past, started=past, finished=past)
        wait_for(lambda: simulation.turns.done().count() == 3, timeout=60, what="the recovery timer to run turn 3")
        wait_status(simulation, Simulation.Status.COMPLETED)
    finally:
        worker.stop()  # its timer must not reach into the tests that follow


@pytest.mark.django_db(transaction=True)
def test_a_turn_that_loses_the_database_waits_for_it_instead_of_pausing_the_run(user, dinner, monkeypatch):
    from core import queueing
    from chronicle.simulation.control import tasks

    # Nothing queued: a worker another test left running would otherwise claim turn 0 first.
    monkeypatch.setattr(queueing, "send", runs_queued_nowhere(queueing.send))
    simulation = start(user, dinner, max_turns=2, provider="scripted")

    def gone(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(tasks, "run_turn", gone)
    retried = []
    monkeypatch.setattr(tasks.run_turn_task, "retry", lambda **kw: retried.append(kw) or Exception("no broker"))
    assert tasks.run_turn_task.apply(args=(simulation.pk, 0)).get() == "waiting"
    simulation.refresh_from_db()
    assert simulation.status == Simulation.Status.RUNNING and retried  # not paused: retried, or found by the timer
    assert not simulation.turns.filter(status=Turn.Status.FAILED).exists()


@pytest.mark.django_db(transaction=True)
def test_a_turn_retried_after_an_outage_takes_its_own_turn_back_at_once(user, dinner, monkeypatch):
    """The database went away mid-turn (memory's raw cursor says so in psycopg's own words): the task
    retries within seconds and, being the attempt that held the turn, does it then rather than
    waiting out the 30 s a dead worker's turn is given."""
    import psycopg

    from core import queueing
    from chronicle.simulation.control import tasks

    monkeypatch.setattr(queueing, "send", runs_queued_nowhere(queueing.send))  # as above: no other worker takes turn 0
    simulation = start(user, dinner, max_turns=2, provider="scripted")
    retried = []
    with monkeypatch.context() as patch:
        def gone(*args, **kwargs):
            raise psycopg.OperationalError("the connection is lost")

        patch.setattr(tasks, "run_turn", gone)
        patch.setattr(tasks.run_turn_task, "retry", lambda **kw: retried.append(kw) or Exception("kept for later"))
        assert tasks.run_turn_task.apply(args=(simulation.pk, 0), task_id="turn-0-task").get() == "waiting"
    assert retried and retried[0]["countdown"] <= 5
    held = simulation.turns.get(index=0)
    assert held.status == Turn.Status.RUNNING and held.claim.startswith("turn-0-task ")  # fresh: not stale
    assert tasks.run_turn_task.apply(args=(simulation.pk, 0), task_id="turn-0-task", retries=1).get() == "done"
    assert simulation.turns.get(index=0).status == Turn.Status.DONE


@pytest.mark.django_db(transaction=True)
def test_a_turn_whose_process_has_ended_is_taken_over_at_once(user, dinner, monkeypatch):
    """A worker's main process killed takes its pool processes with it (Celery's parent-death signal):
    their turns, on this machine, are taken over as soon as a task asks, not after 30 s of silence;
    a turn whose process is alive waits for it."""
    import socket
    import subprocess
    import sys

    from core import queueing
    from chronicle.simulation.control import turns

    monkeypatch.setattr(queueing, "send", runs_queued_nowhere(queueing.send))
    simulation = start(user, dinner, max_turns=2, provider="scripted")
    claim = turns.turn_claim(simulation_id=simulation.pk, index=0, agent="Alex", worker=f"w@{socket.gethostname()}",
                             task_id="first-attempt")
    assert claim.turn is not None and claim.token.split(" ")[2] == str(os.getpid())  # alive: this very process
    again = turns.turn_claim(simulation_id=simulation.pk, index=0, agent="Alex", worker="w2", task_id="second")
    assert again.busy and again.turn is None and again.retry_in > 20
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    Turn.objects.filter(pk=claim.turn.pk).update(claim=f"first-attempt 0123456789ab {ended.stdout.strip()}")
    taken = turns.turn_claim(simulation_id=simulation.pk, index=0, agent="Alex", worker="w2", task_id="second")
    assert not taken.busy and taken.turn is not None and taken.turn.attempts == 2
    assert "stopped with its worker" in taken.turn.note

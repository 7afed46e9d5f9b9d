"""Simulations run by REAL Celery workers: a full dry run, pause/resume/cancel, a worker killed mid-turn."""

from __future__ import annotations

import re

import html

import os
import signal
import time

import pytest

from chronicle.simulation.control import services
from chronicle.simulation.run.models import Retrieval, Simulation, Turn
from memory.models import Memory
from tests.chronicle.simulation.conftest import wait_for, wait_status
from tests.factories import make_dinner

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def start(user, scenario, **settings) -> Simulation:
    return services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()),
                                     settings={"max_turns": 6, "retrieval_mode": "tools", **settings})


def done_turns(simulation) -> int:
    return simulation.turns.filter(status="done").count()


def assert_complete_once(simulation: Simulation, n: int) -> None:
    indices = list(Turn.objects.filter(simulation=simulation).order_by("index").values_list("index", flat=True))
    assert indices == list(range(n))
    assert set(Turn.objects.filter(simulation=simulation).values_list("status", flat=True)) == {"done"}
    # Each line remembered exactly once by each of the three agents: no duplicates from a redone turn.
    episodic = Memory.objects.in_bank(simulation.bank).filter(kind="episodic")
    assert episodic.count() == 3 * n
    assert sorted(set(episodic.values_list("turn", flat=True))) == list(range(1, n + 1))


def test_full_scripted_run_through_a_real_worker(celery_worker, user, client_for):
    simulation = start(user, make_dinner(user))
    wait_status(simulation, "completed")
    assert simulation.bank.seed_status == "done" and simulation.bank.seed_done == simulation.bank.seed_total
    assert_complete_once(simulation, 6)
    turns = list(simulation.turns.order_by("index"))
    for turn in turns[:3]:  # turn 1 of each agent: discovery
        tools = list(turn.retrievals.values_list("tool", flat=True))
        assert tools[:2] == ["query_self", "query_scene"], turn.agent
        # The first opens the scene greeting the others; the others greet whoever spoke before them.
        greeted = ("Jordan and Sam" if turn.index == 0 else turns[turn.index - 1].agent)
        assert re.match(rf"(?:Hello|Hi|Hey|Evening), {greeted}\b", turn.utterance), turn.utterance
        assert all(r.results for r in turn.retrievals.all())
    for turn in turns[3:]:  # later turns: recall, with turn numbers
        assert list(turn.retrievals.values_list("tool", flat=True)) == ["query_memory", "recall_facts"]
        retrieval = turn.retrievals.get(tool="query_memory")
        earlier = {t.number: t for t in turns if t.index < turn.index}
        # Every earlier line is in the agent's transcript window, so the tool hands none of them back…
        assert retrieval.results and not any(r["kind"] == "episodic" and r["turn"] in earlier for r in retrieval.results)
        # …and the agent answers whoever spoke last, by name, without quoting what it reads there.
        last = max(n for n, t in earlier.items() if t.agent != turn.agent)
        assert earlier[last].agent in turn.utterance and "you said" not in turn.utterance
        assert not any(t.utterance[:40] in turn.utterance for t in earlier.values())
    # Every tool call has its Retrieval row.
    calls = sum(len(m.get("tool_calls") or []) for t in turns for m in t.prompt_messages)
    assert calls == Retrieval.objects.filter(turn__simulation=simulation).count() == 3 * 4 + 3 * 2
    assert all(t.worker for t in turns)
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "dry run" in page and turns[5].utterance in html.unescape(page)


def test_pause_resume_and_cancel(celery_worker, user):
    scenario = make_dinner(user)
    simulation = start(user, scenario, max_turns=9, pace_s=0.5)
    wait_for(lambda: done_turns(simulation) >= 1, what="a first turn")
    services.simulation_pause(simulation=simulation)
    simulation.refresh_from_db()
    assert simulation.status == "paused"
    # The turn in flight may still finish; after that nothing more happens.
    wait_for(lambda: not simulation.turns.filter(status="running").exists(), what="the turn in flight")
    held = done_turns(simulation)
    import time
    time.sleep(2.5)
    assert done_turns(simulation) == held < 9
    simulation.refresh_from_db()
    assert simulation.status == "paused"

    services.simulation_resume(simulation=simulation)
    wait_status(simulation, "completed")
    assert_complete_once(simulation, 9)

    other = start(user, scenario, max_turns=9, pace_s=0.5)
    wait_for(lambda: done_turns(other) >= 1, what="a first turn")
    services.simulation_cancel(simulation=other)
    wait_for(lambda: not other.turns.filter(status="running").exists(), what="the turn in flight")
    held = done_turns(other)
    time.sleep(2.5)
    other.refresh_from_db()
    assert other.status == "cancelled" and done_turns(other) == held < 9


def test_worker_killed_mid_turn_another_finishes_with_no_gap_and_no_duplicate(start_worker, user, monkeypatch):
    # A short staleness window so the test need not wait 30 s for the dead worker's heartbeat to age.
    monkeypatch.setenv("WONDA_TURN_STALE_SECONDS", "3")
    first = start_worker("sim-kill-a")
    simulation = start(user, make_dinner(user), max_turns=7, pace_s=1.5)

    def running_on_first():
        return simulation.turns.filter(status="running", index__gte=1, worker__startswith="sim-kill-a").first()

    victim = wait_for(running_on_first, timeout=180, what="a turn running on the first worker")
    first.kill()  # SIGKILL, mid-turn: no goodbye, no ack
    assert first.proc.poll() is not None
    victim.refresh_from_db()
    assert victim.status == "running"

    second = start_worker("sim-kill-b")
    wait_status(simulation, "completed", timeout=240)
    assert_complete_once(simulation, 7)
    victim.refresh_from_db()
    assert victim.attempts >= 2 and "Redone" in victim.note
    assert not victim.worker.startswith("sim-kill-a")
    # Left running, it would take the next tests' turns from the workers they watch (the pool-child
    # drill waited 180 s for a turn on its own worker while this one took them all).
    second.stop()


def test_a_killed_pool_child_is_replaced_and_its_redelivered_turn_takes_its_own_dead_attempt_over(
        start_worker, user, settings):
    # The drill that found the pool dark for up to 12 minutes: SIGKILL a pool child mid-turn. This
    # worker's stale window is an hour: the turn can only go on because its redelivered message takes
    # its own dead attempt over at once (how long that takes is `manage.py drill_kill`'s figure).
    worker = start_worker("child-kill", concurrency=1, env={"WONDA_TURN_STALE_SECONDS": "3600"})
    simulation = start(user, make_dinner(user), max_turns=5, pace_s=1.5)

    def running_here():
        return simulation.turns.filter(status="running", index__gte=1, worker__startswith="child-kill").first()

    victim = wait_for(running_here, timeout=180, what="a turn running on the worker")
    (child,) = worker.children()
    os.kill(child, signal.SIGKILL)

    def victim_done():
        victim.refresh_from_db()
        return victim.status == "done"

    wait_for(victim_done, timeout=settings.TURN_STALE_SECONDS + 30, what="the killed turn to be redone")
    wait_status(simulation, "completed", timeout=120)
    assert_complete_once(simulation, 5)
    assert victim.attempts == 2 and "Redone" in victim.note
    assert worker.proc.poll() is None and worker.children() and child not in worker.children()
    log = worker.log_path.read_text()
    assert "Timed out waiting for UP message" not in log

"""What the drills share: their own worker and web server, a throw-away writer, and the run checks.

`manage.py drill_load` and `manage.py drill_kill` run against the configured database and broker
(the embedded ones under var/ by default) as a writer of their own, `drill-<time>`, whose data is
deleted afterwards unless --keep. A worker already running (`make run`) may take drill tasks too;
that is fine for drill_load, while drill_kill wants its own worker to be the only one (it says so).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.sessions.backends.db import SessionStore
from django.db import connection
from django.db.models import Count

from chronicle.demo import DEMO_TITLE, load_demo
from chronicle.models import Scenario
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.control.services import simulation_start
from memory.models import Memory
from core.workers import WorkerProcess

ROOT = Path(settings.BASE_DIR)


def _env() -> dict:
    # The subprocesses must use this process's database (a test database, too) and broker.
    return os.environ | {"WONDA_DB_NAME": connection.settings_dict["NAME"], "PYTHONUNBUFFERED": "1",
                         "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
                         "CELERY_RESULT_BACKEND": settings.CELERY_RESULT_BACKEND}


def start_worker(name: str, concurrency: int, log_dir: Path) -> WorkerProcess:
    """The drill's own worker (its pool children are what drill_kill kills), on this process's broker;
    ready once its pool processes beat (wait_ready(pool=True))."""
    broker = {"CELERY_BROKER_URL": settings.CELERY_BROKER_URL, "CELERY_RESULT_BACKEND": settings.CELERY_RESULT_BACKEND}
    return WorkerProcess(name, concurrency, log_path=log_dir / f"{name}.log", env=broker)


class WebServer:
    """gunicorn on a free local port: the production server, threads for concurrent clients."""

    def __init__(self, log_dir: Path, workers: int = 2, threads: int = 4):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = open(log_dir / "web.log", "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "wonda_site.wsgi:application", "--bind", f"127.0.0.1:{self.port}",
             "--workers", str(workers), "--threads", str(threads), "--access-logfile", "-"],
            cwd=ROOT, env=_env(), stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the web server exited; see its log")
            try:
                httpx.get(f"{self.url}/accounts/login/", timeout=2)
                return
            except httpx.HTTPError:
                time.sleep(0.3)
        raise RuntimeError(f"the web server did not answer in {timeout:g}s")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        self.log.close()


def drill_writer():
    """A fresh writer with the demo scenario (three characters)."""
    user = get_user_model().objects.create_user(username=f"drill-{time.time_ns()}", password=None)
    load_demo(owner=user)
    return user


def session_cookie(user) -> dict:
    """A logged-in session for the drill's HTTP clients, without a password."""
    store = SessionStore()
    store[SESSION_KEY] = str(user.pk)
    store[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    store[HASH_SESSION_KEY] = user.get_session_auth_hash()
    store.save()
    return {settings.SESSION_COOKIE_NAME: store.session_key}


def start_runs(user, count: int, turns: int, pace_s: float = 0.0) -> list[Simulation]:
    scenario = Scenario.objects.owned_by(user).get(title=DEMO_TITLE)
    cast = list(scenario.cast.all())
    return [simulation_start(owner=user, scenario=scenario, cast=cast, settings={
        "title": f"Drill run {n + 1}", "max_turns": turns, "provider": "scripted", "retrieval_mode": "tools",
        "pace_s": pace_s}) for n in range(count)]


@dataclass
class RunCheck:
    finished: int = 0
    gaps: int = 0  # turns missing or not done in a finished run
    duplicated_turns: int = 0
    duplicated_memories: int = 0  # one line remembered twice by the same agent
    lost_memories: int = 0  # a done line some listener does not remember


def check_runs(simulations: list[Simulation]) -> RunCheck:
    check = RunCheck()
    for simulation in simulations:
        simulation.refresh_from_db()
        if simulation.status == Simulation.Status.COMPLETED:
            check.finished += 1
        done = list(Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE)
                    .values_list("index", "heard_by"))
        indices = [index for index, _ in done]
        expected = set(range(simulation.max_turns)) if simulation.status == Simulation.Status.COMPLETED \
            else set(range(len(indices)))
        check.gaps += len(expected - set(indices))
        check.duplicated_turns += len(indices) - len(set(indices))
        if simulation.bank_id is None:
            continue
        episodic = Memory.objects.in_bank(simulation.bank).filter(kind="episodic")
        check.duplicated_memories += sum(row["n"] - 1 for row in episodic.values("agent", "turn")
                                         .annotate(n=Count("id")).filter(n__gt=1))
        # A line is remembered by those who heard it: everyone present, or only the addressee of a
        # whisper (the scripted provider whispers now and then).
        everyone = len(simulation.cast_names)
        remembered = dict(episodic.values_list("turn").annotate(n=Count("id")))
        check.lost_memories += sum(max(0, (len(heard_by) if heard_by else everyone) - remembered.get(index + 1, 0))
                                   for index, heard_by in done)
    return check


def wait_finished(simulations: list[Simulation], timeout: float, tick=None) -> bool:
    deadline = time.monotonic() + timeout
    ids = [s.pk for s in simulations]
    while time.monotonic() < deadline:
        statuses = list(Simulation.objects.filter(pk__in=ids).values_list("status", flat=True))
        if all(status in Simulation.FINISHED_STATUSES or status == Simulation.Status.PAUSED for status in statuses):
            return True
        if tick:
            tick()
        time.sleep(0.5)
    return False


def delete_writer(user) -> None:
    user.delete()  # characters, scenarios, simulations and memory banks go with their owner


def percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]

"""Outage drill: runs going while the embedded Redis answers nobody (its process paused) or
PostgreSQL is stopped for a while, or the worker's main process is killed, under `manage.py serve`
as `make run` starts it.

Each part is taken down for S seconds and brought back; the drill then waits for every run to move
again. It reads the site all along (a run page and /healthz, twice a second) and checks the runs at
the end. Last line, JSON: {"lost", "duplicated_turns", "duplicated_memories", "web_errors",
"web_down_s", "resumed_after_s": {part: seconds}, "manual_steps": 0} — web_errors are answers
that are neither a page nor the designed 503; web_down_s the seconds nothing answered at all.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import psutil
from django.conf import settings
from django.core.management import BaseCommand, CommandError
from django.db import close_old_connections, connection

from chronicle import drills
from chronicle.simulation.models import Simulation, Turn
from wonda_site import embedded

RESUME_TIMEOUT_S = 240


class Poller(threading.Thread):
    """Reads two pages twice a second; counts what a user would have seen."""

    def __init__(self, base: str, cookies: dict, run_url: str):
        super().__init__(daemon=True)
        self.base, self.cookies, self.run_url = base, cookies, run_url
        self.stop = threading.Event()
        self.errors, self.down_s, self.requests = 0, 0.0, 0

    def run(self) -> None:
        with httpx.Client(base_url=self.base, cookies=self.cookies, timeout=5) as client:
            while not self.stop.wait(0.5):
                for path in (self.run_url, "/healthz"):
                    started = time.monotonic()
                    try:
                        status = client.get(path).status_code
                        self.requests += 1
                        if status >= 500 and status != 503:
                            self.errors += 1
                    except httpx.HTTPError:
                        self.down_s += max(0.5, time.monotonic() - started)


class Command(BaseCommand):
    help = "Take the embedded Redis or PostgreSQL down, or kill the worker, during runs; check they heal by themselves."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--redis", type=float, default=0, metavar="S", help="stop Redis for S seconds")
        parser.add_argument("--postgres", type=float, default=0, metavar="S", help="stop PostgreSQL for S seconds")
        parser.add_argument("--worker-main", action="store_true", help="SIGKILL the worker's main process")
        parser.add_argument("--runs", type=int, default=2)
        parser.add_argument("--pace", type=float, default=0.5, help="seconds before each line")
        parser.add_argument("--keep", action="store_true", help="keep the drill writer and its runs")

    def handle(self, *args, redis: float, postgres: float, worker_main: bool, runs: int, pace: float, keep: bool,
               **options) -> None:
        if os.environ.get("DATABASE_URL") or os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL"):
            raise CommandError("drill_outage stops the embedded PostgreSQL and Redis (var/): unset DATABASE_URL and "
                               "CELERY_BROKER_URL to drill them; an external service is yours to stop.")
        parts = [("redis", redis)] * bool(redis) + [("postgres", postgres)] * bool(postgres) \
            + [("worker-main", 0.0)] * worker_main
        if not parts:
            raise CommandError("Name a part: --redis S, --postgres S, --worker-main.")
        log_dir = Path(settings.VAR_DIR) / "drills" / f"outage-{time.strftime('%Y%m%d-%H%M%S')}"
        log_dir.mkdir(parents=True, exist_ok=True)
        user = drills.drill_writer()
        serve, port = self.serve(log_dir)
        base = f"http://127.0.0.1:{port}"
        poller = None
        try:
            self.wait(lambda: self.answers(base), 90, "the web server")
            self.wait(lambda: self.worker_of(serve), 120, "the worker")
            simulations = drills.start_runs(user, runs, 500, pace_s=pace)  # longer than the drill: it pauses them
            self.wait(lambda: all(self.done(s) >= 3 for s in simulations), 180, "the runs' first turns")
            poller = Poller(base, drills.session_cookie(user), simulations[0].get_absolute_url())
            poller.start()
            resumed = {}
            for part, seconds in parts:
                resumed[part] = self.outage(part, seconds, serve, simulations)
                self.stdout.write(f"  {part}: runs moving again {resumed[part]} s after it was back")
            poller.stop.set()
            for simulation in simulations:  # the drill is over: its runs stop where they are
                self.retry_db(lambda s=simulation: Simulation.objects.filter(pk=s.pk).update(status=Simulation.Status.PAUSED))
            time.sleep(max(3.0, 2 * pace))
            check = drills.check_runs(simulations)
            lost = check.gaps + check.lost_memories
            self.stdout.write(f"{sum(self.done(s) for s in simulations)} turns done; the site answered "
                              f"{poller.requests} reads; serve's log: {log_dir / 'serve.log'}")
            self.stdout.write(json.dumps({
                "lost": lost, "duplicated_turns": check.duplicated_turns,
                "duplicated_memories": check.duplicated_memories, "web_errors": poller.errors,
                "web_down_s": round(poller.down_s, 1), "resumed_after_s": resumed, "manual_steps": 0}))
        finally:
            if poller is not None:
                poller.stop.set()
            os.killpg(serve.pid, signal.SIGTERM)
            try:
                serve.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(serve.pid, signal.SIGKILL)
            pid = embedded.redis_pid()  # whatever happened, leave both parts up
            if pid:
                os.kill(pid, signal.SIGCONT)
            self.start_postgres()
            if not keep:
                self.retry_db(lambda: drills.delete_writer(user))

    def serve(self, log_dir: Path) -> tuple[subprocess.Popen, int]:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        # The drill's queue is the site's: stop `make run` first, or its worker takes turns too (as in drill_kill).
        env = os.environ | {"WONDA_DB_NAME": connection.settings_dict["NAME"], "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen([sys.executable, "manage.py", "serve", "--addr", f"127.0.0.1:{port}", "--mcp-port", "0",
                                 "--worker-name", f"drill-outage-{os.getpid()}@%h"],
                                cwd=settings.BASE_DIR, env=env, stdout=open(log_dir / "serve.log", "w"),
                                stderr=subprocess.STDOUT, start_new_session=True)
        return proc, port

    def outage(self, part: str, seconds: float, serve: subprocess.Popen, simulations: list[Simulation]) -> float | None:
        """Take the part down (and back after `seconds`); how long after its return every run moved."""
        self.stdout.write(f"{part}: down" + (f" for {seconds:g} s" if seconds else ""))
        self.stdout.flush()
        if part == "redis":
            # Paused, not stopped: serve would start a stopped one again at once (as it should); a
            # paused one is there but answers nobody, which nothing can mend but waiting.
            redis_pid = embedded.redis_pid()
            os.kill(redis_pid, signal.SIGSTOP)
        elif part == "postgres":
            connection.close()
            embedded.stop_postgres()
        else:
            os.kill(self.worker_of(serve), signal.SIGKILL)
        time.sleep(seconds)
        if part == "redis":
            os.kill(redis_pid, signal.SIGCONT)
        elif part == "postgres":
            self.start_postgres()
        back = time.monotonic()
        before = {s.pk: self.done(s) for s in simulations}
        try:
            self.wait(lambda: all(self.done(s) > before[s.pk] for s in simulations), RESUME_TIMEOUT_S,
                      f"every run to move after the {part} came back")
        except CommandError as exc:
            self.stdout.write(self.style.ERROR(str(exc)))
            return None
        return round(time.monotonic() - back, 1)

    @staticmethod
    def start_postgres() -> None:
        """As an operator would: a fresh process starts the embedded server (settings do, on import)."""
        subprocess.run([sys.executable, "manage.py", "check"], cwd=settings.BASE_DIR, capture_output=True, timeout=120,
                       env=os.environ | {"WONDA_DB_NAME": connection.settings_dict["NAME"]})

    def done(self, simulation: Simulation) -> int:
        return self.retry_db(lambda: Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE).count()) or 0

    @staticmethod
    def retry_db(read, attempts: int = 60):
        """A read or write of the drill's own, through a database that may be on its way back."""
        for _ in range(attempts):
            try:
                close_old_connections()
                return read()
            except Exception:
                connection.close()
                time.sleep(1)
        return None

    @staticmethod
    def worker_of(serve: subprocess.Popen) -> int | None:
        for child in psutil.Process(serve.pid).children():
            if "celery" in " ".join(child.cmdline()) and "worker" in child.cmdline():
                return child.pid
        return None

    @staticmethod
    def answers(base: str) -> bool:
        try:
            httpx.get(f"{base}/healthz", timeout=2)
            return True
        except httpx.HTTPError:
            return False

    @staticmethod
    def wait(predicate, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return
            time.sleep(0.5)
        raise CommandError(f"timed out waiting for {what}")

"""Outage drill: runs going while a part Wonda needs fails, under `manage.py serve` as `make run`
starts it: the embedded Redis paused (its process stopped: alive, answering nobody) or killed, the
embedded PostgreSQL stopped (pg_ctl, as an operator would) or its postmaster killed, or the worker's
main process killed. Kills are SIGKILL, as a crash or the OOM killer would.

A timed outage (--redis S, --postgres S) lasts S seconds unless serve brings the part back sooner;
a kill lasts until serve brings the part back. The drill brings a part back itself only when S
seconds (a kill: BACK_TIMEOUT_S) have passed and it still does not answer: each such rescue is a
manual step. It reads the site all along (a run page and /healthz, twice a second) and checks the
runs at the end. Last line, JSON: {"lost", "duplicated_turns", "duplicated_memories", "web_errors",
"web_down_s", "back_after_s", "resumed_after_s", "manual_steps"} — back_after_s: seconds from the
fault until the part answered again (the worker: until serve had started a new one);
resumed_after_s: until every run had done a turn more, counted from the fault for a kill and from
the part's return for a timed outage; web_errors are answers that are neither a page nor the
designed 503; web_down_s the seconds nothing answered at all.
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

from chronicle import drills, headless
from chronicle.simulation.run.models import Simulation, Turn
from core import embedded

RESUME_TIMEOUT_S = 240
BACK_TIMEOUT_S = 120  # a killed part serve has not brought back by then: the drill does it (a manual step)
KILLS = ("redis-kill", "postgres-kill", "worker-main")


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
        parser.add_argument("--redis", type=float, default=0, metavar="S", help="pause Redis for S seconds")
        parser.add_argument("--redis-kill", action="store_true", help="SIGKILL Redis")
        parser.add_argument("--postgres", type=float, default=0, metavar="S", help="stop PostgreSQL for S seconds")
        parser.add_argument("--postgres-kill", action="store_true", help="SIGKILL PostgreSQL's postmaster")
        parser.add_argument("--worker-main", action="store_true", help="SIGKILL the worker's main process")
        parser.add_argument("--runs", type=int, default=2)
        parser.add_argument("--pace", type=float, default=0.5, help="seconds before each line")
        parser.add_argument("--keep", action="store_true", help="keep the drill writer and its runs")

    def handle(self, *args, redis: float, redis_kill: bool, postgres: float, postgres_kill: bool, worker_main: bool,
               runs: int, pace: float, keep: bool, **options) -> None:
        if os.environ.get("DATABASE_URL") or os.environ.get("CELERY_BROKER_URL") or os.environ.get("REDIS_URL"):
            raise CommandError("drill_outage stops the embedded PostgreSQL and Redis (var/): unset DATABASE_URL and "
                               "CELERY_BROKER_URL to drill them; an external service is yours to stop.")
        parts = [("redis-kill", 0.0)] * redis_kill + [("redis", redis)] * bool(redis) \
            + [("postgres-kill", 0.0)] * postgres_kill + [("postgres", postgres)] * bool(postgres) \
            + [("worker-main", 0.0)] * worker_main
        if not parts:
            raise CommandError("Name a part: --redis S, --redis-kill, --postgres S, --postgres-kill, --worker-main.")
        headless.database_ready(self.stderr.write)  # a fresh clone: set up first, not a missing table
        log_dir = Path(settings.VAR_DIR) / "drills" / f"outage-{time.strftime('%Y%m%d-%H%M%S')}"
        log_dir.mkdir(parents=True, exist_ok=True)
        user = drills.drill_writer()
        serve, port = self.serve(log_dir)
        base = f"http://127.0.0.1:{port}"
        poller = None
        self.manual_steps = 0
        try:
            self.wait(lambda: self.answers(base), 90, "the web server")
            self.wait(lambda: self.worker_of(serve), 120, "the worker")
            simulations = drills.start_runs(user, runs, 500, pace_s=pace)  # longer than the drill: it pauses them
            self.wait(lambda: all(self.done(s) >= 3 for s in simulations), 180, "the runs' first turns")
            poller = Poller(base, drills.session_cookie(user), simulations[0].get_absolute_url())
            poller.start()
            back, resumed = {}, {}
            for part, seconds in parts:
                back[part], resumed[part] = self.outage(part, seconds, serve, simulations)
                self.stdout.write(f"  {part}: back after {back[part]} s; every run moving again "
                                  f"{resumed[part]} s after {'the kill' if part in KILLS else 'it was back'}")
                self.stdout.flush()
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
                "web_down_s": round(poller.down_s, 1), "back_after_s": back, "resumed_after_s": resumed,
                "manual_steps": self.manual_steps}))
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

    def outage(self, part: str, seconds: float, serve: subprocess.Popen,
               simulations: list[Simulation]) -> tuple[float | None, float | None]:
        """Take the part down; (seconds until it answered again, seconds until every run moved)."""
        self.stdout.write(f"{part}: down" + (f" for up to {seconds:g} s" if seconds else ""))
        self.stdout.flush()
        fault = time.monotonic()
        redis_pid, worker = embedded.redis_pid(), self.worker_of(serve)
        if part in ("postgres", "postgres-kill"):
            connection.close()
        if part == "redis":
            # Paused: there, answering nobody; serve stops and restarts one silent for its patience (10 s).
            os.kill(redis_pid, signal.SIGSTOP)
        elif part == "redis-kill":
            os.kill(redis_pid, signal.SIGKILL)
        elif part == "postgres":
            embedded.stop_postgres()
        elif part == "postgres-kill":
            os.kill(embedded.postgres_pid(), signal.SIGKILL)  # the postmaster; its backends end on their own
        else:
            os.kill(worker, signal.SIGKILL)
        probe = {"redis": embedded.redis_answers, "redis-kill": embedded.redis_answers,
                 "postgres": embedded.postgres_answers, "postgres-kill": embedded.postgres_answers,
                 "worker-main": lambda: self.worker_of(serve) not in (None, worker)}[part]
        window = fault + (seconds or BACK_TIMEOUT_S)
        back = moved = before = None
        while moved is None:
            now = time.monotonic()
            if back is None and (probe() or (now >= window and self.rescue(part, redis_pid))):
                back = time.monotonic()
            if back is not None and before is None:
                before = self.counts(simulations)  # None while the database cannot say yet
            elif before is not None:
                after = self.counts(simulations)
                if after is not None and all(after[pk] > before[pk] for pk in before):
                    moved = time.monotonic()
            if back is not None and now - back > RESUME_TIMEOUT_S:
                self.stdout.write(self.style.ERROR(f"the runs did not move within {RESUME_TIMEOUT_S} s of the {part}"))
                break
            time.sleep(0.5)
        start = fault if part in KILLS else back
        return (round(back - fault, 1) if back is not None else None,
                round(moved - start, 1) if moved is not None and start is not None else None)

    def rescue(self, part: str, redis_pid: int | None) -> bool:
        """The part is still down when the drill would bring it back: do it by hand, and count it."""
        self.manual_steps += 1
        self.stdout.write(self.style.WARNING(f"{part}: not back by itself; the drill brings it back (a manual step)"))
        if part.startswith("redis"):
            try:
                os.kill(redis_pid, signal.SIGCONT)
            except (OSError, TypeError):
                embedded.redis_url(settings.REDIS_DB)
        elif part.startswith("postgres"):
            self.start_postgres()
        return True

    def counts(self, simulations: list[Simulation]) -> dict[int, int] | None:
        """Turns done per run, or None while the database does not answer (read once, not waited for)."""
        try:
            close_old_connections()
            return {s.pk: Turn.objects.filter(simulation=s, status=Turn.Status.DONE).count() for s in simulations}
        except Exception:
            connection.close()
            return None

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
            try:
                argv = child.cmdline()
            except psutil.Error:  # the killed worker, before serve has reaped it
                continue
            if "celery" in " ".join(argv) and "worker" in argv:
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

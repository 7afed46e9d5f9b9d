"""A real `celery worker` in a subprocess, on this process's database: the tests' workers and the drills'.

It runs in its own session, so stop() and kill() take its pool processes with it; children() are
those pool processes (what a drill or a test kills to play a crash).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
from celery import current_app
from django.conf import settings
from django.db import connection

from core.pool import pool_status


def ping_workers(timeout: float = 1.0) -> set[str]:
    """The node names of the workers that answer a ping. The Celery app is the project's (the site
    makes it current when Django starts), so nothing here imports the site."""
    return {name for reply in current_app.control.ping(timeout=timeout) or [] for name in reply}


def active_tasks(names: list[str], timeout: float = 1.0) -> dict:
    """What these workers are running now, by node name (Celery's inspect().active())."""
    return current_app.control.inspect(names, timeout=timeout).active() or {}


# A worker shows no pages, so it never needs DEBUG, which would keep and format every SQL statement
# it runs (~20 ms of a turn on this 2-core machine, and a list that grows with the run).
WORKER_ENV = {"DEBUG": "0"}


class WorkerProcess:
    """`celery worker --hostname <name>-<pid>@<host>` (its node name, `.name`); its output goes to log_path.

    db_name: the database it uses (default: this process's, a test database too); env: more
    environment on top of this process's."""

    def __init__(self, name: str, concurrency: int = 1, *, log_path: Path, db_name: str | None = None,
                 env: dict | None = None):
        self.name = f"{name}-{os.getpid()}@{socket.gethostname()}"
        self.log_path = Path(log_path)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.log = open(self.log_path, "w")
        env = os.environ | {"WONDA_DB_NAME": db_name or connection.settings_dict["NAME"], "PYTHONUNBUFFERED": "1",
                            **WORKER_ENV} | (env or {})
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "wonda_site", "worker", "--loglevel", "INFO",
             "--concurrency", str(concurrency), "--hostname", self.name, "--without-gossip", "--without-mingle"],
            cwd=settings.BASE_DIR, env=env, stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True)

    def wait_ready(self, timeout: float = 90, *, pool: bool = False) -> None:
        """Until it answers a ping; pool=True: until its pool processes beat (their model loaded,
        what a drill wants before it measures)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the worker exited early; its log ({self.log_path}):\n{self._log_tail()}")
            if pool:
                status = pool_status()
                if status["ok"] and status["per_worker"].get(self.name):
                    return
                time.sleep(0.3)
            elif self.name in ping_workers(timeout=0.5):
                return
        raise RuntimeError(f"the worker did not come up in {timeout:g}s; its log ({self.log_path}):\n{self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log_path.read_text()[-3000:]

    def children(self) -> list[int]:
        """The pool's child processes (the ones that run tasks)."""
        try:
            return [child.pid for child in psutil.Process(self.proc.pid).children()]
        except psutil.NoSuchProcess:
            return []

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.close()

    def kill(self) -> None:
        """SIGKILL the worker and its pool, as a crash or an OOM kill would."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

"""Shared fixtures: the real embedded PostgreSQL + pgvector, a real Redis, real Celery workers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright + live_server


def _database_quiet(timeout: float = 30.0) -> None:
    """Wait until no other connection to the test database is inside a query or a transaction."""
    from django.db import connection

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND state IN ('active', 'idle in transaction')"
            )
            if not cursor.fetchone()[0]:
                return
        time.sleep(0.1)


@pytest.fixture(scope="session", autouse=True)
def _patient_flush(django_db_setup):
    """A transactional test's closing flush waits for the workers and retries once on a lock clash.

    A worker may still be running a task the test queued (seeding after an import, a reflection
    after a turn) when the test ends. TRUNCATE then deadlocks with the task's inserts, Postgres
    aborts the flush, and the next test starts on the last test's rows. Waiting for the other
    connections to go quiet avoids almost all of it; the retry covers a task that starts in between.
    """
    from django.core.management import CommandError
    from django.test import testcases

    original = testcases.TransactionTestCase._fixture_teardown

    def patient(self):
        _database_quiet()
        try:
            original(self)
        except CommandError:
            _database_quiet()
            original(self)

    testcases.TransactionTestCase._fixture_teardown = patient
    yield
    testcases.TransactionTestCase._fixture_teardown = original


@pytest.fixture
def user(db):
    return get_user_model().objects.create_user(username="ada", password="correct-horse-1")


@pytest.fixture
def other_user(db):
    return get_user_model().objects.create_user(username="brutus", password="correct-horse-2")


@pytest.fixture
def staff_user(db):
    return get_user_model().objects.create_user(username="sam", password="correct-horse-3", is_staff=True, is_superuser=True)


@pytest.fixture
def client_for(client):
    """`client_for(user)` logs the test client in as that user."""

    def login(u):
        client.force_login(u)
        return client

    return login


class WorkerProcess:
    """A real `celery worker` subprocess on the test database and the test broker."""

    def __init__(self, db_name: str, name: str, concurrency: int = 1, env: dict | None = None):
        self.name = f"{name}-{os.getpid()}@%h"
        env = os.environ | {"WONDA_DB_NAME": db_name, "PYTHONUNBUFFERED": "1"} | (env or {})
        ARTIFACTS.mkdir(exist_ok=True)
        self.log_path = ARTIFACTS / f"worker-{name}.log"
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "wonda_site", "worker", "--loglevel", "INFO",
             "--concurrency", str(concurrency), "--hostname", self.name, "--without-gossip", "--without-mingle"],
            cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,  # so kill() takes its pool processes with it
        )

    def wait_ready(self, timeout: float = 90) -> None:
        from wonda_site.celery import app

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"worker exited early; log:\n{self.log_path.read_text()[-3000:]}")
            replies = app.control.ping(timeout=0.5) or []
            if any(self.name.split("@")[0] in name for reply in replies for name in reply):
                return
        raise RuntimeError(f"worker did not answer in {timeout}s; log:\n{self.log_path.read_text()[-3000:]}")

    def children(self) -> list[int]:
        """The pool's child processes (the ones that run tasks)."""
        import psutil

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


@pytest.fixture(scope="session")
def start_worker(django_db_setup, django_db_blocker):
    """Factory for real workers; every worker it starts is stopped at the end of the session."""
    from django.db import connection

    started: list[WorkerProcess] = []

    def start(name: str = "worker", concurrency: int = 1, env: dict | None = None) -> WorkerProcess:
        with django_db_blocker.unblock():
            db_name = connection.settings_dict["NAME"]
        worker = WorkerProcess(db_name, name, concurrency, env)
        started.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture(scope="session")
def celery_worker(start_worker):
    """One real worker shared by the tests that need tasks run (they use transactional_db)."""
    return start_worker("shared", concurrency=1)

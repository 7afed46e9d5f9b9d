"""Shared fixtures: the real embedded PostgreSQL + pgvector, a real Redis, real Celery workers."""

from __future__ import annotations

import os
import time
import warnings
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from tests import leftovers
from core.embedded import VAR_DIR
from core.workers import WorkerProcess

ROOT = Path(__file__).resolve().parent.parent
ARTIFACTS = ROOT / "test-artifacts"
OUTSIDE, PROBLEMS = pytest.StashKey[dict](), pytest.StashKey[list]()

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")  # Playwright + live_server
leftovers.adopt_orphans()  # as early as can be: a server a test starts stays findable (tests/leftovers.py)


def pytest_sessionstart(session):
    session.config.stash[OUTSIDE] = leftovers.snapshot(ROOT, VAR_DIR)


def pytest_sessionfinish(session, exitstatus):
    """The run fails if it left a process running (but its own embedded servers) or wrote outside
    the repository and the temp dir; what it left is stopped."""
    left = leftovers.leftover_processes(VAR_DIR)
    problems = [f"left running: {leftovers.describe(p)}" for p in left]
    leftovers.end(left)
    if (before := session.config.stash.get(OUTSIDE, None)) is not None:
        problems += [f"wrote outside the repository: {w}" for w in leftovers.writes_outside(before)]
    session.config.stash[PROBLEMS] = problems
    if problems and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter):
    problems = terminalreporter.config.stash.get(PROBLEMS, [])
    if problems:
        terminalreporter.write_sep("=", "what the test run left behind", red=True)
        for problem in problems:
            terminalreporter.write_line(problem, red=True)


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
def _patient_flush(django_db_setup, django_db_blocker):
    """A transactional test's closing flush waits for the workers and retries on a lock clash.

    A worker may still be running a task the test queued (seeding after an import, a reflection
    after a turn) when the test ends. TRUNCATE then deadlocks with the task's inserts, Postgres
    aborts the flush, and the next test starts on the last test's rows. Waiting for the other
    connections to go quiet avoids almost all of it; the retries cover tasks that start in between
    (a run's last turn can queue a reflection, whose end queues more: two clashes in a row were seen).
    """
    from django.core.management import CommandError
    from django.test import testcases

    original = testcases.TransactionTestCase._fixture_teardown

    def patient(self, attempts: int = 4):
        for attempt in range(attempts):
            _database_quiet()
            try:
                return original(self)
            except CommandError:
                if attempt == attempts - 1:
                    raise

    testcases.TransactionTestCase._fixture_teardown = patient
    yield
    testcases.TransactionTestCase._fixture_teardown = original
    with django_db_blocker.unblock():
        _sessions_closed()


def _sessions_closed(timeout: float = 15.0) -> None:
    """At the end of the run, before the test database is dropped: wait for every other connection
    to it to close (a stopped worker's pool children let go a moment after their parent), then end
    any still open, so that the drop does not fail on "1 other session using the database"."""
    from django.db import connection

    query = "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    deadline = time.monotonic() + timeout
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(f"SELECT count(*) {query}")
            if not cursor.fetchone()[0]:
                return
            time.sleep(0.2)
        cursor.execute(f"SELECT application_name, state, left(query, 120), pg_terminate_backend(pid) {query}")
        for name, state, last, _ended in cursor.fetchall():
            warnings.warn(f"ended a connection to the test database still open at the end ({name or 'no name'}, "
                          f"{state}): {last}", stacklevel=1)


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


@pytest.fixture
def memory_tasks_inline(monkeypatch):
    """memory's queued tasks run here, in the test's transaction, as a worker would run them just
    after the commit (with captureOnCommitCallbacks(execute=True) around the write)."""
    from types import SimpleNamespace

    from core import queueing

    queued = queueing.task

    def task(name: str):
        found = queued(name)
        if not name.startswith("memory.tasks."):
            return found
        return SimpleNamespace(delay=lambda *args: found.apply(args=args).get())

    monkeypatch.setattr(queueing, "task", task)


@pytest.fixture(scope="session")
def start_worker(django_db_setup, django_db_blocker):
    """Factory for real workers; every worker it starts is stopped at the end of the session."""
    from django.db import connection

    started: list[WorkerProcess] = []

    def start(name: str = "worker", concurrency: int = 1, env: dict | None = None) -> WorkerProcess:
        with django_db_blocker.unblock():
            db_name = connection.settings_dict["NAME"]
        worker = WorkerProcess(name, concurrency, log_path=ARTIFACTS / f"worker-{name}.log", db_name=db_name, env=env)
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

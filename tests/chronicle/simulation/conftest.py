"""The dinner scenario as a fixture (tests/factories.py makes it) and helpers to wait for a run."""

from __future__ import annotations

import time

import pytest

from tests.factories import make_dinner


@pytest.fixture
def dinner(user):
    return make_dinner(user)


def wait_for(predicate, timeout: float = 120, every: float = 0.3, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def wait_status(simulation, *statuses, timeout: float = 180):
    def check():
        simulation.refresh_from_db()
        return simulation.status in statuses
    wait_for(check, timeout=timeout, what=f"status in {statuses} (is {simulation.status})")
    return simulation

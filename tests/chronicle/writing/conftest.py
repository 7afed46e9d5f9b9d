"""A finished six-turn dry run of the dinner scenario, driven in-process, and helpers to branch it."""

from __future__ import annotations

import pytest

from chronicle.simulation import services
from chronicle.simulation.models import Simulation
from chronicle.simulation.tasks import run_turn_task
from tests.chronicle.simulation.conftest import dinner, make_dinner, start_seeded  # noqa: F401  (fixture re-export)


def start(user, scenario, **settings) -> Simulation:
    return start_seeded(user, scenario, **{"max_turns": 6, **settings})


def run_all(simulation: Simulation) -> Simulation:
    """Run the turns still to do, in this process, as the worker would."""
    simulation.refresh_from_db()
    while simulation.status == Simulation.Status.RUNNING:
        index = services.next_index(simulation)
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
        simulation.refresh_from_db()
    return simulation


def prepare_and_run(branch: Simulation) -> Simulation:
    services.simulation_seed(simulation_id=branch.pk)  # what start_simulation_task does for a branch
    return run_all(branch)


@pytest.fixture
def finished(user, dinner):  # noqa: F811
    return run_all(start(user, dinner))

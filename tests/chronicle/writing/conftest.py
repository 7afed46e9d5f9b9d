"""A finished six-turn dry run of the dinner scenario, driven in-process, and a helper to run a branch."""

from __future__ import annotations

import pytest

from chronicle.simulation.control import services
from chronicle.simulation.run.models import Simulation
from tests.chronicle.simulation.conftest import dinner  # noqa: F401  (fixture re-export)
from tests.factories import run_all, start


def prepare_and_run(branch: Simulation) -> Simulation:
    services.simulation_seed(simulation_id=branch.pk)  # what start_simulation_task does for a branch
    return run_all(branch)


@pytest.fixture
def finished(user, dinner):  # noqa: F811
    return run_all(start(user, dinner))

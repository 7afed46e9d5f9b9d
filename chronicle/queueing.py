"""Chronicle's tasks by name, queued with core.queueing (the project's one way to queue by name).

The task bodies call the services (seed a run, run a turn, rebuild an imported bank), and the
services queue those tasks: naming them lets a service queue one without importing the tasks module
that imports it. The names are the tasks' registered names (`tests/chronicle/test_queueing.py`
checks each one is a registered task).
"""

from __future__ import annotations

from core import queueing

START_SIMULATION = "chronicle.simulation.tasks.start_simulation_task"
RUN_TURN = "chronicle.simulation.tasks.run_turn_task"
IMPORT_BANK = "chronicle.writing.tasks.import_bank_task"


def send(name: str, *args) -> None:
    """Queue task `name` now (core.queueing.send)."""
    queueing.send(name, *args)


def send_on_commit(name: str, *args) -> None:
    """Queue task `name` once the current transaction commits (core.queueing.send_on_commit)."""
    queueing.send_on_commit(name, *args)

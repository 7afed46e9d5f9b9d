"""Chronicle's tasks queued by name.

The task bodies call the services (seed a run, run a turn, rebuild an imported bank), and the
services queue those tasks: sending by name (Celery's `send_task`) lets a service queue one
without importing the tasks module that imports it. The names are the tasks' registered names
(`tests/chronicle/test_queueing.py` checks each one is a registered task).
"""

from __future__ import annotations

from functools import partial

from celery import current_app
from django.db import transaction

START_SIMULATION = "chronicle.simulation.tasks.start_simulation_task"
RUN_TURN = "chronicle.simulation.tasks.run_turn_task"
IMPORT_BANK = "chronicle.writing.tasks.import_bank_task"


def send(name: str, *args) -> None:
    """Queue task `name` with these arguments now."""
    app = current_app
    if app.conf.task_always_eager:
        # send_task ignores eager mode (CELERY_TASK_ALWAYS_EAGER): run the task here, as .delay() would.
        app.loader.import_default_modules()  # the tasks modules register their tasks (autodiscovery)
        app.tasks[name].apply(args=args)
        return
    app.send_task(name, args=args)


def send_on_commit(name: str, *args) -> None:
    """Queue task `name` once the current transaction commits (a worker then sees what it wrote)."""
    transaction.on_commit(partial(send, name, *args))

"""Queueing a Celery task by its registered name: the one way the whole project queues work.

A service queues a task whose body calls that service again, so it names the task instead of
importing its module. The task is looked up in the Celery app's registry (the tasks modules register
theirs when a worker starts, or here when first asked), and queued with `.delay`: the registry's task
object is the one `task_always_eager` and the tests act on, which `send_task` would bypass. Each task
names itself (`tests/chronicle/test_queueing.py` checks it), so a module move renames nothing queued.
"""

from __future__ import annotations

import logging
from functools import partial

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)


def task(name: str):
    """The registered task `name` ("chronicle.simulation.tasks.run_turn_task")."""
    app = current_app
    if name not in app.tasks:
        app.loader.import_default_modules()  # the tasks modules register their tasks, as a worker's start does
    return app.tasks[name]


def send(name: str, *args, failure: str | None = None) -> None:
    """Queue task `name` with these arguments now. failure: when given, a broker that is down is
    logged with this message instead of raising (the caller's work is kept; what the task would add
    is made later or never)."""
    try:
        task(name).delay(*args)
    except Exception:
        if failure is None:
            raise
        log.exception(failure)


def send_on_commit(name: str, *args, robust: bool = False) -> None:
    """Queue task `name` once the current transaction commits (a worker then sees what it wrote;
    nothing if it rolls back). robust: a broker that is down loses the request, never the commit's
    response."""
    transaction.on_commit(partial(send, name, *args), robust=robust)

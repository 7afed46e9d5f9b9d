"""Memory's background work, queued by task name.

The services queue tasks and memory.tasks calls the services, so the services must not import
memory.tasks. They name the task instead and this module finds it in the Celery app's registry
(memory.tasks is loaded by MemoryConfig.ready in every process). The registry's task object is the
one the tests and `task_always_eager` act on, which `send_task` by name would bypass.
"""

from __future__ import annotations

import logging

from celery import current_app
from django.db import transaction

log = logging.getLogger(__name__)


def task(name: str):
    """A task of memory.tasks by its registered name ("seed_bank_task")."""
    return current_app.tasks[f"memory.tasks.{name}"]


def queue(name: str, *args, failure: str | None = None) -> None:
    """Queue the task now. failure: when given, a broker that is down is logged with this message
    instead of raising (the caller's work is kept; what the task adds is made later or never)."""
    try:
        task(name).delay(*args)
    except Exception:
        if failure is None:
            raise
        log.exception(failure)


def queue_on_commit(name: str, *args, robust: bool = False) -> None:
    """Queue the task once the current transaction commits (nothing if it rolls back). robust: a
    broker that is down loses the request, never the commit's response."""
    transaction.on_commit(lambda: task(name).delay(*args), robust=robust)

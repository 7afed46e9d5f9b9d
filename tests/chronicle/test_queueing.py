"""Services queue chronicle's tasks by name: each name must be a task a worker runs."""

from __future__ import annotations

from chronicle import queueing
from wonda_site.celery import app


def test_each_name_the_services_queue_is_a_registered_task():
    app.loader.import_default_modules()  # what a worker does at start: the tasks modules register theirs
    for name in (queueing.START_SIMULATION, queueing.RUN_TURN, queueing.IMPORT_BANK):
        assert name in app.tasks

"""Writer-side background work: forming a writer memory, rebuilding an imported bank."""

from __future__ import annotations

from celery import shared_task
from django.contrib.auth import get_user_model

from chronicle.simulation.run.models import Simulation
from chronicle.writing.exports import import_bank
from chronicle.writing.services import writer_memory_form
from memory.models import Memory


@shared_task(name="chronicle.writing.tasks.form_memory_task",
             soft_time_limit=300, time_limit=330)
def form_memory_task(simulation_id: int, actor_id: int | None, data: dict) -> int | None:
    simulation = Simulation.objects.filter(pk=simulation_id).first()
    if simulation is None or simulation.bank_id is None:
        return None
    actor = get_user_model().objects.filter(pk=actor_id).first() if actor_id else None
    return writer_memory_form(simulation=simulation, actor=actor, **data).pk


@shared_task(name="chronicle.writing.tasks.import_bank_task",
             soft_time_limit=1800, time_limit=1900)
def import_bank_task(simulation_id: int, memories: list[dict], relationships: list[dict] | None = None,
                     accesses: list[dict] | None = None) -> int:
    simulation = Simulation.objects.filter(pk=simulation_id).first()
    if simulation is None or simulation.bank_id is None:
        return 0
    if Memory.objects.in_bank(simulation.bank).exists():
        return 0  # already imported (a redelivered task)
    return len(import_bank(simulation=simulation, memories=memories, relationships=relationships or [],
                           accesses=accesses or []))

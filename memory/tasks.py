"""Celery tasks: ids and plain JSON in, services do the work.

Each is registered under an explicit name (its module path when it was written), so work queued
before a deploy still finds its task after code moves; memory.queue queues them by that name, and
the other apps ask for them through its request services (memory.api), never by the task.
"""

from __future__ import annotations

from celery import shared_task
from django.db import transaction

from memory.embedding.errors import EmbeddingError
from memory.embedding.yielding import background
from memory.forming.capture import memory_keys_add
from memory.forming.extraction import extract_after_turn
from memory.forming.seeding import bank_seed
from memory.living.consolidation import consolidate, consolidation_due
from memory.living.pruning import prune_all
from memory.measuring.projection import project
from memory.models import Memory, MemoryBank
from memory.recalling.indexing import build_bank_index, drop_bank_index
from memory.services import bank_hold, memory_reembed
from memory.services.keys import keys_attach


@shared_task(name="memory.tasks.seed_bank_task", soft_time_limit=1800, time_limit=1900)
def seed_bank_task(bank_id: int, payload: dict) -> dict:
    """Seed (or re-seed) a bank from plain sheet dicts; a failure is written on the bank, readable."""
    return bank_seed(bank_id=bank_id, payload=payload)


@shared_task(name="memory.tasks.build_bank_index_task", soft_time_limit=1800, time_limit=1900)
def build_bank_index_task(bank_id: int) -> None:
    """A big bank's own HNSW indexes (memory.recalling.indexing); nothing happens if the bank is gone."""
    if MemoryBank.objects.filter(pk=bank_id).exists():
        build_bank_index(bank_id)


@shared_task(name="memory.tasks.drop_bank_index_task")
def drop_bank_index_task(bank_id: int) -> None:
    drop_bank_index(bank_id)


@shared_task(name="memory.tasks.memory_keys_task", soft_time_limit=300, time_limit=330)
def memory_keys_task(memory_ids: list[int]) -> int:
    """The in-reply-to keys of a turn's lines (capture_prepare(defer_keys=True)), off the turn's path."""
    with background():
        return memory_keys_add(memory_ids=[int(pk) for pk in memory_ids])


@shared_task(name="memory.tasks.keys_attach_task", soft_time_limit=300, time_limit=330)
def keys_attach_task(pairs: list) -> int:
    """Keys a write left for later (memories_create's later_keys: a stage direction's "just after")."""
    with background():
        return len(keys_attach(pairs=[(int(pk), str(text)) for pk, text in pairs]))


@shared_task(name="memory.tasks.reembed_memory_task", soft_time_limit=300, time_limit=330)
def reembed_memory_task(memory_id: int) -> bool:
    """An edited memory's vectors (memory_update marks it stale and out of search until this runs)."""
    memory = Memory.objects.filter(pk=memory_id).first()
    if memory is None:
        return False
    memory_reembed(memory=memory)
    return True


@shared_task(name="memory.tasks.consolidate_bank_task", soft_time_limit=300, time_limit=330)
def consolidate_bank_task(bank_id: int, agent: str, before_turn: int, budget: int | None = None) -> int:
    """The budget trigger: when the agent holds more than `budget` (default CONSOLIDATION_BUDGET)
    memories, consolidate its old ones (offline summaries: no model call in the worker's turn path).
    Returns the summaries made."""
    with background(), transaction.atomic():
        if not bank_hold(bank_id):
            return 0  # the run was deleted meanwhile
        bank = MemoryBank.objects.get(pk=bank_id)
        if not consolidation_due(bank, agent, budget):
            return 0
        return len(consolidate(bank, agent, before_turn=before_turn))


@shared_task(name="memory.tasks.extract_task", soft_time_limit=300, time_limit=330)
def extract_task(bank_id: int, turn: int, speaker: str, text: str, facts: dict | None = None) -> int:
    """A turn's feelings, lesson and learned facts (memory.forming.extraction), after its commit."""
    try:
        with background():
            return len(extract_after_turn(bank_id=bank_id, turn=turn, speaker=speaker, text=text, facts=facts))
    except EmbeddingError:  # degraded mode: the feelings are not made, the line itself was kept
        return 0


@shared_task(name="memory.tasks.bank_map_task", soft_time_limit=600, time_limit=660)
def bank_map_task(bank_id: int) -> int:
    """A big bank's memory map (memory.measuring.projection), asked for by its page. Returns the points."""
    if not MemoryBank.objects.filter(pk=bank_id).exists():
        return 0  # deleted meanwhile
    return len(project(bank_id).points)


@shared_task(name="memory.tasks.reembed_stale_task", soft_time_limit=1800, time_limit=1860)
def reembed_stale_task() -> int:
    """The embedder is back (memory.embedding.health): every memory stored or edited without its
    vector meanwhile gets it, and a line kept then gets its reply keys. Returns the memories done."""
    done = 0
    with background():
        for memory in Memory.objects.filter(embedding_stale=True).order_by("id").iterator(chunk_size=200):
            memory_reembed(memory=memory)
            if memory.kind == Memory.Kind.EPISODIC and (memory.metadata or {}).get("keyword_only"):
                memory_keys_add(memory_ids=[memory.pk])
            done += 1
    return done


@shared_task(name="memory.tasks.prune_banks_task", soft_time_limit=1800, time_limit=1860)
def prune_banks_task() -> int:
    """The periodic pruning (Celery beat, every WONDA_PRUNE_EVERY_HOURS): every bank's faded,
    unimportant earned memories archived (memory.living.pruning). Returns how many."""
    return sum(prune_all().values())

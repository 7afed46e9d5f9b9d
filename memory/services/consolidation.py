"""Consolidation's writes: a summary memory over its originals, and the way back (memory.consolidation
chooses what to consolidate). The originals' rows and vectors are never touched, only their status."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from memory.models import MAX_CONTENT_CHARS, Memory, MemoryBank
from memory.services.memories import memory_archive, memory_create
from memory.retrieval.scoring import CONSOLIDATED_RATE_FACTOR


@transaction.atomic
def memory_consolidate(*, bank: MemoryBank, originals: list[Memory], content: str, agent: str, kind: str,
                       turn: int | None, importance: float, metadata: dict | None = None, **extra) -> Memory:
    """One summary memory (source "consolidation", embedded) linked to its originals, which become "consolidated"."""
    if not originals:
        raise ValidationError("Nothing to consolidate.")
    if any(m.bank_id != bank.pk for m in originals):
        raise ValidationError("Memories from different banks cannot be consolidated together.")
    # Seed 004: the summary decays 20 % slower than its originals did.
    extra.setdefault("decay_rate", round(sum(m.decay_rate for m in originals) / len(originals)
                                         * CONSOLIDATED_RATE_FACTOR, 6))
    summary = memory_create(bank=bank, content=content[:MAX_CONTENT_CHARS], agent=agent, kind=kind, turn=turn,
                            importance=importance, source=Memory.Source.CONSOLIDATION, metadata=metadata or {},
                            evidence=originals, **extra)
    Memory.objects.filter(pk__in=[m.pk for m in originals]).update(
        status=Memory.Status.CONSOLIDATED, updated_at=timezone.now())
    for memory in originals:
        memory.status = Memory.Status.CONSOLIDATED
    return summary


@transaction.atomic
def memory_unconsolidate(*, summary: Memory) -> list[Memory]:
    """The originals active again (their vectors as they were) and the summary archived (kept, never deleted)."""
    if summary.source != Memory.Source.CONSOLIDATION:
        raise ValidationError("Only a consolidation summary can be undone.")
    originals = list(summary.evidence.filter(status=Memory.Status.CONSOLIDATED))
    Memory.objects.filter(pk__in=[m.pk for m in originals]).update(status=Memory.Status.ACTIVE, updated_at=timezone.now())
    for memory in originals:
        memory.status = Memory.Status.ACTIVE
    if summary.status != Memory.Status.ARCHIVED:
        memory_archive(memory=summary)
    return originals


@transaction.atomic
def memory_statuses_set(*, bank: MemoryBank, statuses: Mapping[int | str, str]) -> int:
    """Put several memories of one bank back to given statuses at once (a writer's undo of a consolidation)."""
    allowed = set(Memory.Status.values)
    wanted: dict[str, list[int]] = {}
    for memory_id, status in statuses.items():
        if status not in allowed:
            raise ValidationError(f"Unknown memory status {status!r}.")
        wanted.setdefault(status, []).append(int(memory_id))
    changed = 0
    for status, ids in wanted.items():
        changed += Memory.objects.in_bank(bank).filter(pk__in=ids).update(status=status, updated_at=timezone.now())
    return changed


def statuses_of(memories: Iterable[Memory]) -> dict[str, str]:
    """{id: status} as a JSON object keeps it (string keys)."""
    return {str(m.pk): m.status for m in memories}

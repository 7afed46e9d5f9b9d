"""Pruning (seed 004's min_importance_threshold, seed 002's selective forgetting): what an agent
lived that has faded and never mattered much is archived, out of every search, never deleted.

A memory's current importance is seed 004's, as the `decayed` preset reads it
(memory.recalling.scoring.decay_sql): its importance (0–1) × its decay since it was formed (in
turns, slowed by emotion, floored for a goal) × the boost of its recalls. Only earned memories are
pruned: a sheet, the writer's, a reflection or a summary stays whatever its age. Each pruned memory
keeps in its metadata when it was pruned and what it had faded to, so "Restore pruned memories"
brings back exactly these (and a writer can restore one on its card).
"""

from __future__ import annotations

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from memory.models import Memory, MemoryBank
from memory.recalling.scoring import DECAY_COLUMNS, decay_sql

PRUNED = "pruned"  # the metadata key: {"turn": the bank's turn then, "importance": what it had faded to, "at": when}


def latest_turn(bank: MemoryBank) -> int:
    """The bank's latest turn, where its memories' ages are counted from (0: none yet)."""
    return Memory.objects.in_bank(bank).aggregate(latest=Max("turn"))["latest"] or 0


def faded(bank: MemoryBank, *, threshold: float | None = None, current_turn: int | None = None,
          skips: list[float] | None = None) -> list[tuple[int, float]]:
    """(id, current importance 0–1) of the bank's active earned memories below `threshold`
    (settings.PRUNE_MIN_IMPORTANCE unless given), at `current_turn` (the bank's latest unless given)."""
    threshold = settings.PRUNE_MIN_IMPORTANCE if threshold is None else float(threshold)
    if current_turn is None:
        current_turn = latest_turn(bank)
    value = f"LEAST(1.0::float8, m.importance / 10.0 * {decay_sql()})"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT m.id, {value} FROM (SELECT m.id, m.importance, m.decay_rate, m.turn, m.access_count, "
            f"m.last_accessed_turn {DECAY_COLUMNS} FROM memory_memory m WHERE m.bank_id = %(bank)s "
            "AND m.status = 'active' AND m.source = 'earned') m "
            f"WHERE {value} < %(threshold)s ORDER BY m.id",
            {"bank": bank.pk, "turn": int(current_turn), "skips": skips, "threshold": threshold})
        return [(pk, float(v)) for pk, v in cursor.fetchall()]


@transaction.atomic
def memories_prune(*, bank: MemoryBank, threshold: float | None = None, current_turn: int | None = None,
                   skips: list[float] | None = None) -> int:
    """Archive the bank's faded memories (faded()), each marked as pruned; returns how many."""
    found = faded(bank, threshold=threshold, current_turn=current_turn, skips=skips)
    if not found:
        return 0
    turn = current_turn if current_turn is not None else latest_turn(bank)
    now = timezone.now()
    with connection.cursor() as cursor:  # one statement: a big bank prunes thousands at once
        cursor.execute(
            "UPDATE memory_memory m SET status = 'archived', updated_at = %(now)s, "
            "metadata = m.metadata || jsonb_build_object(%(key)s::text, jsonb_build_object("
            "'turn', %(turn)s::int, 'importance', round(p.v::numeric, 4), 'at', %(at)s::text)) "
            "FROM unnest(%(ids)s::bigint[], %(values)s::float8[]) AS p(id, v) WHERE m.id = p.id",
            {"now": now, "key": PRUNED, "turn": turn, "at": now.isoformat(timespec="seconds"),
             "ids": [pk for pk, _v in found], "values": [v for _pk, v in found]})
    return len(found)


@transaction.atomic
def memories_unprune(*, bank: MemoryBank) -> int:
    """Every pruned memory of the bank still archived: active again, its pruned mark removed."""
    with connection.cursor() as cursor:
        cursor.execute("UPDATE memory_memory SET status = 'active', updated_at = %s, metadata = metadata - %s::text "
                       "WHERE bank_id = %s AND status = 'archived' AND metadata ? %s::text",
                       [timezone.now(), PRUNED, bank.pk, PRUNED])
        return cursor.rowcount


def pruned_count(bank: MemoryBank) -> int:
    return Memory.objects.in_bank(bank).filter(status=Memory.Status.ARCHIVED, metadata__has_key=PRUNED).count()


def prune_all(threshold: float | None = None) -> dict[int, int]:
    """The periodic pass: every bank with active earned memories, pruned; {bank id: how many}."""
    done = {}
    banks = MemoryBank.objects.filter(memories__source=Memory.Source.EARNED, memories__status=Memory.Status.ACTIVE)
    for bank in banks.distinct().order_by("pk"):
        if pruned := memories_prune(bank=bank, threshold=threshold):
            done[bank.pk] = pruned
    return done

"""Integrity of the memory store (seed 002's checks): find what went wrong, and mend it with --repair.

Each check counts one kind of damage across every bank and, repairing, fixes it the one way that
loses nothing the writer made:

- **stale vectors** — a memory edited long ago whose new vector never came (its worker died): the
  memory is left out of every search until re-embedded. Repair: re-embed it (and its keys).
- **empty vectors** — an all-zero vector (a failed embedding stored as zeros) has no direction, so
  no search can find it. Repair: re-embed it.
- **keys in the wrong bank** — a key's own bank column (what the bank's key index filters on) that
  is not its memory's bank. Repair: set it from the memory.
- **BM25 statistics drift** — memory_termstat (kept by triggers) no longer equal to the counts of
  a bank's active memories. Repair: recount the bank.
- **banks stuck seeding** — pending or running for more than STUCK_SEEDING with no worker on it.
  Repair: mark the bank failed with a reason its run page shows, so it can be started again.
- **orphan vector indexes** — a per-bank HNSW index whose bank is gone. Repair: drop it.

An archived memory keeps its keys: it is in no search (every search reads active memories only),
and restored it is found as before. Archiving is ordinary use (an edited sheet, a consolidation),
not damage.

A vector of another size cannot be stored at all (the columns are `vector(WONDA_EMBEDDING_DIM)`, and
the model's size is checked against them when a worker starts), so there is no check for it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta

from django.db import connection, transaction
from django.utils import timezone

from memory.models import Memory, MemoryBank, MemoryKey
from memory.services.memories import memory_reembed

STALE_AFTER = timedelta(minutes=10)   # an edit's vector normally comes within a second or two
STUCK_SEEDING = timedelta(minutes=30)  # seeding 100,000 memories takes a few minutes


@dataclass
class Finding:
    check: str
    found: int
    fixed: int = 0
    detail: list[str] = field(default_factory=list)


def _stale(repair: bool) -> Finding:
    rows = Memory.objects.filter(embedding_stale=True, updated_at__lt=timezone.now() - STALE_AFTER)
    finding = Finding("stale vectors", rows.count(), detail=[f"#{pk}" for pk in rows.values_list("pk", flat=True)[:10]])
    if repair:
        for memory in rows:
            memory_reembed(memory=memory)
            finding.fixed += 1
    return finding


def _empty(repair: bool) -> Finding:
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_memory WHERE vector_norm(embedding) = 0 ORDER BY id")
        ids = [row[0] for row in cursor.fetchall()]
    finding = Finding("empty vectors", len(ids), detail=[f"#{pk}" for pk in ids[:10]])
    if repair:
        for memory in Memory.objects.filter(pk__in=ids):
            memory_reembed(memory=memory)
            finding.fixed += 1
    return finding


def _key_banks(repair: bool) -> Finding:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM memory_memorykey k JOIN memory_memory m ON m.id = k.memory_id "
                       "WHERE k.bank_id IS DISTINCT FROM m.bank_id")
        found = cursor.fetchone()[0]
        fixed = 0
        if repair and found:
            cursor.execute("UPDATE memory_memorykey k SET bank_id = m.bank_id FROM memory_memory m "
                           "WHERE m.id = k.memory_id AND k.bank_id IS DISTINCT FROM m.bank_id")
            fixed = cursor.rowcount
    return Finding("keys in the wrong bank", found, fixed)


_COUNTS = """
    SELECT bank_id, agent, kind, count(*) AS df, coalesce(sum(length(search)), 0) AS len
      FROM memory_memory WHERE status = 'active' GROUP BY 1, 2, 3
"""


def _termstat(repair: bool) -> Finding:
    """The documents-and-lengths row (term '') of each (bank, agent, kind) against the memories."""
    with connection.cursor() as cursor:
        cursor.execute(f"""
            SELECT coalesce(c.bank_id, s.bank_id) FROM ({_COUNTS}) c
              FULL JOIN (SELECT bank_id, agent, kind, df, length FROM memory_termstat WHERE term = '') s
                ON s.bank_id = c.bank_id AND s.agent = c.agent AND s.kind = c.kind
             WHERE c.df IS DISTINCT FROM s.df OR c.len IS DISTINCT FROM s.length
             GROUP BY 1 ORDER BY 1""")
        banks = [row[0] for row in cursor.fetchall()]
    finding = Finding("BM25 statistics drift", len(banks), detail=[f"bank {b}" for b in banks[:10]])
    if repair:
        for bank_id in banks:
            recount_termstat(bank_id)
            finding.fixed += 1
    return finding


@transaction.atomic
def recount_termstat(bank_id: int) -> None:
    """A bank's BM25 statistics counted again from its active memories (what the triggers keep)."""
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM memory_termstat WHERE bank_id = %s", [bank_id])
        cursor.execute("""
            INSERT INTO memory_termstat (bank_id, agent, kind, term, df, length)
            SELECT bank_id, agent, kind, term, sum(df), sum(len) FROM (
                SELECT bank_id, agent, kind, ''::text AS term, 1 AS df, length(search) AS len
                  FROM memory_memory WHERE bank_id = %s AND status = 'active'
                UNION ALL
                SELECT m.bank_id, m.agent, m.kind, t.term, 1, 0
                  FROM memory_memory m CROSS JOIN LATERAL unnest(tsvector_to_array(m.search)) AS t(term)
                 WHERE m.bank_id = %s AND m.status = 'active'
            ) d GROUP BY 1, 2, 3, 4""", [bank_id, bank_id])


def _stuck(repair: bool) -> Finding:
    rows = MemoryBank.objects.filter(seed_status__in=[MemoryBank.SeedStatus.PENDING, MemoryBank.SeedStatus.RUNNING],
                                     created_at__lt=timezone.now() - STUCK_SEEDING)
    finding = Finding("banks stuck seeding", rows.count(), detail=[f"bank {b.pk} ({b.name})" for b in rows[:10]])
    if repair and finding.found:
        finding.fixed = rows.update(seed_status=MemoryBank.SeedStatus.FAILED,
                                    seed_error="Seeding stopped without finishing (found by memory_check): "
                                               "start the run again.")
    return finding


def _orphan_indexes(repair: bool) -> Finding:
    with connection.cursor() as cursor:
        cursor.execute(r"""
            SELECT c.relname FROM pg_class c
             WHERE c.relkind = 'i' AND c.relname ~ '^(memory|memorykey)_bank\d+_hnsw$'
               AND NOT EXISTS (SELECT 1 FROM memory_memorybank b
                                WHERE b.id = substring(c.relname from 'bank(\d+)_hnsw')::bigint)
             ORDER BY 1""")
        names = [row[0] for row in cursor.fetchall()]
        fixed = 0
        if repair:
            for name in names:
                cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
                fixed += 1
    return Finding("orphan vector indexes", len(names), fixed, names[:10])


CHECKS = (_stale, _empty, _key_banks, _termstat, _stuck, _orphan_indexes)


def memory_check(*, repair: bool = False) -> list[Finding]:
    """Every check, in order; with repair, each fixes what it found."""
    return [check(repair) for check in CHECKS]

"""Per-bank vector indexes: a big bank's own HNSW graphs over its memories and over their keys.

One HNSW index over every bank serves a bank's search poorly once the table holds many banks:
pgvector checks the filter after walking the graph, so a bank with 2.5 % of the rows (10,000 of
400,000) took 10–60 ms and still missed 12 % of its top 50, and the planner preferred an exact
sort (15 ms). A partial index per big bank (``WHERE bank_id = N``, pgvector's advice for filters)
keeps the walk inside the bank: ~1 ms, 0.98 of the exact top 50 (bench_memory).

The first search of a bank above RETRIEVAL_FUSION_EXACT_LIMIT candidates schedules the build
(a Celery task, CREATE INDEX CONCURRENTLY: nothing is locked); until it exists that search scans
exactly. Deleting a bank schedules the drop.
"""

from __future__ import annotations

import logging

from django.db import connection, transaction

logger = logging.getLogger(__name__)

_ready: set[int] = set()      # banks whose indexes this process has seen valid
_requested: set[int] = set()  # builds this process has scheduled


def index_names(bank_id: int) -> tuple[str, str]:
    bank_id = int(bank_id)
    return f"memory_bank{bank_id}_hnsw", f"memorykey_bank{bank_id}_hnsw"


def has_bank_index(bank_id: int) -> bool:
    """Both of the bank's indexes exist and are valid (a build in progress is not)."""
    if bank_id in _ready:
        return True
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname = ANY(%s) AND i.indisvalid AND i.indisready",
            [list(index_names(bank_id))],
        )
        ready = cursor.fetchone()[0] == 2
    if ready:
        _ready.add(bank_id)
    return ready


def request_bank_index(bank_id: int) -> None:
    """Schedule the build once per process, when the current transaction commits."""
    if bank_id in _requested:
        return
    _requested.add(bank_id)
    from memory.tasks import build_bank_index_task

    transaction.on_commit(lambda: build_bank_index_task.delay(bank_id))


def build_bank_index(bank_id: int) -> None:
    """Create the bank's two partial HNSW indexes, concurrently (needs autocommit: a task or a
    command, not a request's transaction). An invalid index left by a failed build is redone."""
    memory_index, key_index = index_names(bank_id)
    with connection.cursor() as cursor:
        for name, table in ((memory_index, "memory_memory"), (key_index, "memory_memorykey")):
            cursor.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                           [name])
            row = cursor.fetchone()
            if row and row[0]:
                continue
            if row:  # a build that failed or was interrupted
                cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            cursor.execute(
                f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING hnsw (embedding vector_cosine_ops) "
                f"WITH (m = 16, ef_construction = 64) WHERE bank_id = {int(bank_id)}"
            )
            cursor.execute(f"ANALYZE {table}")  # the planner learns the new index's size
    logger.info("vector indexes of bank %s are ready", bank_id)


def drop_bank_index(bank_id: int) -> None:
    """Drop the bank's indexes if it has any: concurrently, unless inside a transaction (a plain
    DROP INDEX then, which briefly locks the table)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s)", [list(index_names(bank_id))])
        for (name,) in cursor.fetchall():
            concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
            cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
    _ready.discard(bank_id)
    _requested.discard(bank_id)

"""Per-bank vector indexes: a big bank's own HNSW graphs over its memories and over their keys.

One HNSW index over every bank serves a bank's search poorly once the table holds many banks:
pgvector checks the filter after walking the graph, so a bank with 2.5 % of the rows (10,000 of
400,000) took 10–60 ms and still missed 12 % of its top 50, and the planner preferred an exact
sort (15 ms). A partial index per big bank (``WHERE bank_id = N``, pgvector's advice for filters)
keeps the walk inside the bank: ~1 ms, 0.98 of the exact top 50 (bench_memory).

A write that grows a bank past RETRIEVAL_FUSION_EXACT_LIMIT memories schedules the build
(`bank_index_wanted`; a Celery task, CREATE INDEX CONCURRENTLY: nothing is locked); until it exists
searches scan exactly. A search only reads whether the indexes exist. Deleting a bank schedules the drop.

Inside a big bank, an agent's search walks the bank's graph and skips the other agents' memories:
at 100,000 memories and 8 agents, 5–15 ms where the whole bank takes 1 ms. So an agent with more
than AGENT_INDEX_MIN memories, and at most AGENT_INDEX_SHARE of its bank, also gets its own
partial index (``WHERE bank_id = N AND agent = '…'``), which the planner takes for any search with
that agent (a search then costs about what a bank-wide one does). The same build makes them; a
bank's writes ask a worker to look again for agents grown past it every AGENT_RECHECK_S.
"""

from __future__ import annotations

import hashlib
import logging
import time

from django.conf import settings
from django.db import connection
from psycopg import sql

from memory.queue import queue_on_commit
from memory.recalling.lexical import termstat_count

logger = logging.getLogger(__name__)

_ready: set[int] = set()            # banks whose indexes this process has seen valid
_requested: dict[int, float] = {}   # bank → when this process last asked for its build
_small: dict[int, tuple[int, float]] = {}  # bank → (rows it had, plus this process's since; when looked)
SMALL_RECHECK_S = 10.0              # other processes' writes are looked for again after this
REQUEST_AGAIN_S = 600               # a build lost with its worker is asked for again after this
_LOCK_CLASS = 0x57D1                # pg_advisory_lock(class, bank): one build per bank at a time
AGENT_INDEX_MIN = 2_000             # an agent's own index above this many memories (below: exact scans)
AGENT_INDEX_SHARE = 0.5             # ... unless it holds most of its bank: the bank's index then serves it as well
AGENT_RECHECK_S = 300.0             # an indexed bank's writes look for newly big agents this often (per process)
_agents_checked: dict[int, float] = {}  # bank → when this process last looked at its agents


def index_names(bank_id: int) -> tuple[str, str]:
    bank_id = int(bank_id)
    return f"memory_bank{bank_id}_hnsw", f"memorykey_bank{bank_id}_hnsw"


def agent_index_name(bank_id: int, agent: str) -> str:
    """An agent's index in a bank; the name hashes the agent's (any text, any length)."""
    return f"memory_bank{int(bank_id)}_a{hashlib.sha1(agent.encode()).hexdigest()[:12]}_hnsw"


def agent_index_prefix(bank_id: int) -> str:
    """LIKE pattern of a bank's agent indexes ("_" escaped: bank 1's are not bank 12's)."""
    return f"memory\\_bank{int(bank_id)}\\_a%"


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
    """Schedule the build when the current transaction commits, at most every REQUEST_AGAIN_S per
    process. A broker that is down loses the request, not the search (robust on_commit)."""
    now = time.monotonic()
    if now - _requested.get(bank_id, -REQUEST_AGAIN_S) < REQUEST_AGAIN_S:
        return
    _requested[bank_id] = now
    queue_on_commit("build_bank_index_task", bank_id, robust=True)


def bank_index_wanted(bank_id: int, *, added: int | None = None) -> None:
    """After a write to the bank: ask for its own indexes once it is big enough to need them.

    added: the caller wrote this many rows (a turn's line). While a recent look plus what this
    process added since stays well below the index size, no look is needed (one query less a turn)."""
    if bank_id in _ready:
        # Indexed already: an agent may have grown big enough for its own. Now and then the worker
        # is asked to look (build_bank_index counts the agents; nothing here on the turn's path).
        now = time.monotonic()
        if now - _agents_checked.setdefault(bank_id, now) >= AGENT_RECHECK_S:
            _agents_checked[bank_id] = now
            _requested.pop(bank_id, None)
            request_bank_index(bank_id)
        return
    limit = settings.RETRIEVAL_FUSION_EXACT_LIMIT
    if added is not None and bank_id in _small:
        size, when = _small[bank_id]
        if size + added < 0.9 * limit and time.monotonic() - when < SMALL_RECHECK_S:
            _small[bank_id] = (size + added, when)
            return
    _matching, size = termstat_count(bank_id, None, None)
    _small[bank_id] = (size, time.monotonic())
    if size > limit and not has_bank_index(bank_id):
        request_bank_index(bank_id)


def agents_wanting_index(bank_id: int) -> list[str]:
    """The bank's agents big enough for an index of their own that have none (valid) yet."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT agent, count(*) FROM memory_memory WHERE bank_id = %s GROUP BY agent", [int(bank_id)])
        counts = dict(cursor.fetchall())
        total = sum(counts.values())
        big = [agent for agent, n in counts.items()
               if agent and n > AGENT_INDEX_MIN and n <= AGENT_INDEX_SHARE * total]
        if not big:
            return []
        cursor.execute(
            "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "WHERE c.relname LIKE %s AND i.indisvalid", [agent_index_prefix(bank_id)])
        built = {row[0] for row in cursor.fetchall()}
    return [agent for agent in big if agent_index_name(bank_id, agent) not in built]


def build_bank_index(bank_id: int) -> None:
    """Create the bank's two partial HNSW indexes, and its big agents' (agents_wanting_index),
    concurrently (needs autocommit: a task or a command, not a request's transaction). An invalid
    index left by a failed build is redone."""
    memory_index, key_index = index_names(bank_id)
    with connection.cursor() as cursor:
        # Web and worker processes may each ask: one builds, the others leave (an index being built
        # looks like a failed one, invalid, and must not be dropped under its builder).
        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", [_LOCK_CLASS, int(bank_id)])
        if not cursor.fetchone()[0]:
            logger.info("vector indexes of bank %s are being built by another process", bank_id)
            return
        try:
            _build(cursor, bank_id, memory_index, key_index)
            for agent in agents_wanting_index(bank_id):
                _build_one(cursor, agent_index_name(bank_id, agent), "memory_memory",
                           f"bank_id = {int(bank_id)} AND agent = %s", [agent])
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s, %s)", [_LOCK_CLASS, int(bank_id)])
    logger.info("vector indexes of bank %s are ready", bank_id)


def _build(cursor, bank_id: int, memory_index: str, key_index: str) -> None:
    """Under the bank's advisory lock: an invalid index here is a failed or interrupted build."""
    # HNSW builds in memory while the graph fits maintenance_work_mem (64 MB by default: ~40,000
    # vectors); past it, it goes on far slower on disk. This session only.
    cursor.execute("SELECT set_config('maintenance_work_mem', %s, false)", [settings.INDEX_BUILD_MEMORY])
    for name, table in ((memory_index, "memory_memory"), (key_index, "memory_memorykey")):
        _build_one(cursor, name, table, f"bank_id = {int(bank_id)}", [])


def _build_one(cursor, name: str, table: str, predicate: str, params: list) -> None:
    """One partial HNSW index WHERE predicate (its %s bound from params, as a literal: an index's
    predicate cannot take parameters), unless a valid one exists; an invalid one is dropped first."""
    cursor.execute("SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relname = %s",
                   [name])
    row = cursor.fetchone()
    if row and row[0]:
        return
    if row:
        cursor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
    # A statement with no parameters: the agent's name goes in as a literal, quoted by psycopg (the
    # server binds parameters, and DDL takes none).
    where = sql.SQL(predicate.replace("%s", "{}")).format(*map(sql.Literal, params)).as_string(cursor.connection)
    cursor.execute(
        f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} ON {table} USING hnsw (embedding vector_cosine_ops) "
        f"WITH (m = 16, ef_construction = 64) WHERE {where}")
    cursor.execute(f"ANALYZE {table}")  # the planner learns the new index's size


def drop_bank_index(bank_id: int) -> None:
    """Drop the bank's indexes if it has any: concurrently, unless inside a transaction (a plain
    DROP INDEX then, which briefly locks the table)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT relname FROM pg_class WHERE relname = ANY(%s) OR relname LIKE %s",
                       [list(index_names(bank_id)), agent_index_prefix(bank_id)])
        for (name,) in cursor.fetchall():
            concurrently = "" if connection.in_atomic_block else "CONCURRENTLY "
            cursor.execute(f"DROP INDEX {concurrently}IF EXISTS {name}")
    _ready.discard(bank_id)
    _requested.pop(bank_id, None)
    _agents_checked.pop(bank_id, None)

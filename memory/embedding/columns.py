"""The vector columns' size as the database holds it, and moving them to another size.

One size for the whole deployment (settings.EMBEDDING_DIM): pgvector indexes (HNSW) only a column
of a fixed size, and each big bank's partial index (memory.recalling.indexing) serves searches that
compare `embedding` as it is. A column without a size could hold a size per bank, but then every
index would be an expression (`embedding::vector(768)`) and every search would have to cast to the
bank's size to reach it; one size keeps the searches as they are, and a change of model is rare.
"""

from __future__ import annotations

from django.db import connection

# (table, column) of every stored vector; the cache last: it is emptied, never re-embedded.
MEMORY_TABLES = (("memory_memory", "embedding"), ("memory_memorykey", "embedding"))
CACHE_TABLE = ("memory_embeddingcache", "vector")
NEXT = "embedding_next"  # where `reembed` writes a new size's vectors until every row has one


def column_dimension(cursor=None) -> int | None:
    """The size of memory_memory.embedding in the database (None: a column without one)."""
    if cursor is None:
        with connection.cursor() as own:
            return column_dimension(own)
    cursor.execute("SELECT atttypmod FROM pg_attribute WHERE attrelid = 'memory_memory'::regclass "
                   "AND attname = 'embedding'")
    row = cursor.fetchone()
    return int(row[0]) if row and row[0] > 0 else None


def resize_empty(cursor, size: int) -> bool:
    """Give the vector columns `size` if no memory is stored yet (a fresh database, at `migrate`);
    with memories, leave them: the workers' start check says to run `manage.py reembed`."""
    if column_dimension(cursor) == size:
        return False
    cursor.execute("SELECT EXISTS (SELECT 1 FROM memory_memory) OR EXISTS (SELECT 1 FROM memory_memorykey)")
    if cursor.fetchone()[0]:
        return False
    _resize_cache(cursor, size)
    for table, column in MEMORY_TABLES:
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(size)})")
    return True


def _resize_cache(cursor, size: int) -> None:
    table, column = CACHE_TABLE
    cursor.execute(f"TRUNCATE {table}")  # another model's vectors: of no use to the new one
    cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(size)})")


def add_next(cursor, size: int) -> None:
    """A column beside each table's vectors for the new size's (kept across runs: `reembed` resumes)."""
    _settle(cursor)
    for table, _column in MEMORY_TABLES:
        cursor.execute(f"SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
                       f"WHERE attrelid = '{table}'::regclass AND attname = %s AND NOT attisdropped", [NEXT])
        row = cursor.fetchone()
        if row and row[0] != f"vector({int(size)})":  # left by a move to yet another size
            cursor.execute(f"ALTER TABLE {table} DROP COLUMN {NEXT}")
        cursor.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {NEXT} vector({int(size)})")


def swap_next(cursor, size: int) -> None:
    """Every row has its new vector: the new ones become the vectors, at the new size (in the
    caller's transaction; the tables are locked until it commits). Indexes on the old vectors are
    dropped first: rebuilding a big bank's graph inside this lock would hold every search."""
    _settle(cursor)
    for table, _column in MEMORY_TABLES:
        cursor.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
    cursor.execute("SELECT c.relname FROM pg_class c JOIN pg_am am ON am.oid = c.relam "
                   "JOIN pg_index i ON i.indexrelid = c.oid "
                   "WHERE am.amname = 'hnsw' AND i.indrelid = ANY(ARRAY['memory_memory'::regclass, "
                   "'memory_memorykey'::regclass])")
    for (name,) in cursor.fetchall():
        cursor.execute(f'DROP INDEX IF EXISTS "{name}"')
    for table, column in MEMORY_TABLES:
        cursor.execute(f"ALTER TABLE {table} ALTER COLUMN {column} TYPE vector({int(size)}) USING {NEXT}")
        cursor.execute(f"ALTER TABLE {table} DROP COLUMN {NEXT}")
    _resize_cache(cursor, size)


def _settle(cursor) -> None:
    # Inside a transaction that wrote rows (a test's), foreign keys checked at commit leave events
    # that ALTER TABLE refuses to run past: check them now.
    if connection.in_atomic_block:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")

"""Re-embedding a bank (or every bank) with the configured model: `manage.py reembed`.

When the embedding model changes (WONDA_EMBEDDING_BACKEND / WONDA_EMBEDDING_MODEL), the stored
vectors are the old model's and a search with the new one would compare two spaces. This recomputes
every memory's vector from its content and every key's from its text, in batches of `batch` rows in
id order, each batch its own transaction. After each batch the last id done is written to a small
state file in the var directory (per database, bank and model), so a run that stops (a crash,
Ctrl-C, `--limit`) goes on from there when started again; the file is removed when all is done.

The model's vectors must be of settings.EMBEDDING_DIM (WONDA_EMBEDDING_DIM), checked before anything
is written. When that is not the size the tables hold (a move to a model of another size), every
bank moves together (the size is the deployment's: memory.embedding.columns): the new vectors go to
a column beside the old ones, batch by batch and resumable as above, then, in one transaction, the
rows written meanwhile get theirs, the new column takes the old one's place and the big banks'
indexes are asked for again (searches scan exactly until they are built).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import connection, transaction

from memory import embedding
from memory.embedding import columns
from memory.embedding.cache import embed_texts, vector_cursor
from memory.models import Memory, MemoryBank, MemoryKey
from memory.recalling import indexing

BATCH = 256


class DimensionMismatch(Exception):
    """The model's vectors are not the size of the vector column."""


@dataclass
class Progress:
    table: str        # "memories" or "keys"
    done: int         # rows re-embedded so far, this run and the runs it resumes
    total: int        # rows to re-embed in all
    last_id: int


def state_path(bank_id: int | None) -> Path:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{settings.DATABASES['default']['NAME']}-{bank_id or 'all'}-"
                                              f"{embedding.model_name()}")
    return Path(settings.VAR_DIR) / "reembed" / f"{name}.json"


def _load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _save(path: Path, state: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state))
    tmp.replace(path)  # never a half-written file: a crash leaves the last whole state


def reembed(*, bank_id: int | None = None, batch: int = BATCH, limit: int | None = None, restart: bool = False,
            report: Callable[[Progress], None] = lambda p: None) -> dict:
    """Re-embed memories, then keys (see the module). limit: stop after this many rows (the rest on
    the next run). Answers the state: {"memories": last id, "keys": last id, "done": bool,
    "resumed": bool, "size": the vectors' size, "resized": whether the tables moved to it}."""
    size, column = _sizes(bank_id)
    resize = size != column
    path = state_path(bank_id)
    state = {} if restart else _load(path)
    if state.get("size", size) != size:
        state = {}  # an earlier run towards another size: its column is replaced, its rows redone
    resumed = bool(state)
    state["size"] = size
    if resize:
        with connection.cursor() as cursor:
            columns.add_next(cursor, size)
    budget = limit if limit is not None else float("inf")
    for table, rows, text in (("memories", Memory.objects.all(), "content"), ("keys", MemoryKey.objects.all(), "query")):
        if bank_id is not None:
            rows = rows.filter(bank_id=bank_id) if table == "memories" else rows.filter(memory__bank_id=bank_id)
        total = rows.count()
        last = int(state.get(table, 0))
        done = rows.filter(pk__lte=last).count()
        while budget > 0:
            chunk = list(rows.filter(pk__gt=last).order_by("pk").values_list("pk", text)[:int(min(batch, budget))])
            if not chunk:
                break
            _write(table, [pk for pk, _t in chunk], _vectors([t for _pk, t in chunk], resize), resize)
            last, done, budget = chunk[-1][0], done + len(chunk), budget - len(chunk)
            state[table] = last
            _save(path, state)
            report(Progress(table=table, done=done, total=total, last_id=last))
        if budget <= 0:
            return {**state, "done": False, "resumed": resumed, "resized": False}
    if resize:
        _swap(size)
    path.unlink(missing_ok=True)
    return {**state, "done": True, "resumed": resumed, "resized": resize}


def _sizes(bank_id: int | None) -> tuple[int, int | None]:
    """The model's size (one text straight from the model) and the tables', checked before anything
    is written."""
    size = embedding.encode(["dimension probe"]).shape[1]
    if size != settings.EMBEDDING_DIM:
        raise DimensionMismatch(
            f"The model {embedding.model_name()} gives {size}-dimensional vectors; WONDA_EMBEDDING_DIM says "
            f"{settings.EMBEDDING_DIM}. Nothing was changed: set WONDA_EMBEDDING_DIM={size} to move to this model, "
            f"or choose a model of {settings.EMBEDDING_DIM} dimensions.")
    column = columns.column_dimension()
    if column != size and bank_id is not None:
        raise DimensionMismatch(
            f"The model {embedding.model_name()} gives {size}-dimensional vectors and the stored memories hold "
            f"{column}. Nothing was changed: the size is the whole installation's, so every bank moves together; "
            f"run `manage.py reembed` without --bank.")
    return size, column


def _vectors(texts: list[str], resize: bool) -> np.ndarray:
    # Towards another size, straight from the model: the vectors' cache is the old size until the swap.
    return embedding.encode(texts) if resize else embed_texts(texts)


def _swap(size: int) -> None:
    """The last rows (written while this ran), then the new column in the old one's place."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            for table, _column in columns.MEMORY_TABLES:
                cursor.execute(f"LOCK TABLE {table} IN SHARE ROW EXCLUSIVE MODE")  # no new rows from here on
            for table, text in (("memories", "content"), ("keys", "query")):
                db_table = Memory._meta.db_table if table == "memories" else MemoryKey._meta.db_table
                edited = " OR embedding_stale" if table == "memories" else ""  # edited since its new vector
                cursor.execute(f"SELECT id, {text} FROM {db_table} WHERE {columns.NEXT} IS NULL{edited} ORDER BY id")
                rows = cursor.fetchall()
                for start in range(0, len(rows), BATCH):
                    part = rows[start:start + BATCH]
                    _write(table, [pk for pk, _t in part], embedding.encode([t for _pk, t in part]), True)
            columns.swap_next(cursor, size)
        for bank_id in MemoryBank.objects.values_list("pk", flat=True):
            indexing.drop_bank_index(bank_id)  # gone with the old column: forget them
            indexing.bank_index_wanted(bank_id)  # a big bank's are built again once this commits


@transaction.atomic
def _write(table: str, ids: list[int], vectors: np.ndarray, resize: bool = False) -> None:
    db_table = Memory._meta.db_table if table == "memories" else MemoryKey._meta.db_table
    # A memory edited and waiting for its vector has it now, from the content it holds.
    fresh = ", embedding_stale = false" if table == "memories" else ""
    target = columns.NEXT if resize else "embedding"
    with vector_cursor() as cursor:
        cursor.executemany(f"UPDATE {db_table} SET {target} = %s{fresh} WHERE id = %s",
                           [(np.asarray(v, dtype=np.float32), pk) for pk, v in zip(ids, vectors)])

"""Re-embedding a bank (or every bank) with the configured model: `manage.py reembed`.

When the embedding model changes (WONDA_EMBEDDING_BACKEND / WONDA_EMBEDDING_MODEL), the stored
vectors are the old model's and a search with the new one would compare two spaces. This recomputes
every memory's vector from its content and every key's from its text, in batches of `batch` rows in
id order, each batch its own transaction. After each batch the last id done is written to a small
state file in the var directory (per database, bank and model), so a run that stops (a crash,
Ctrl-C, `--limit`) goes on from there when started again; the file is removed when all is done.

The model's vectors must fit the vector column (settings.EMBEDDING_DIM): the first batch checks,
before anything is written, and says what to do if they do not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from django.conf import settings
from django.db import transaction

from memory import embedding
from memory.embedding.cache import embed_texts, vector_cursor
from memory.models import Memory, MemoryKey

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
    the next run). Answers the state: {"memories": last id, "keys": last id, "done": bool, "resumed": bool}."""
    path = state_path(bank_id)
    state = {} if restart else _load(path)
    resumed = bool(state)
    budget = limit if limit is not None else float("inf")
    checked = False
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
            if not checked:
                _check_dimension(chunk[0][1])
                checked = True
            vectors = embed_texts([t for _pk, t in chunk])
            _write(table, [pk for pk, _t in chunk], vectors)
            last, done, budget = chunk[-1][0], done + len(chunk), budget - len(chunk)
            state[table] = last
            _save(path, state)
            report(Progress(table=table, done=done, total=total, last_id=last))
        if budget <= 0:
            return {**state, "done": False, "resumed": resumed}
    path.unlink(missing_ok=True)
    return {**state, "done": True, "resumed": resumed}


def _check_dimension(text: str) -> None:
    """The model's vectors against the column, on one text straight from the model (the cache's
    arrays are the column's size), before anything is written."""
    size = embedding.encode([text]).shape[1]
    if size != settings.EMBEDDING_DIM:
        raise DimensionMismatch(
            f"The model {embedding.model_name()} gives {size}-dimensional vectors; the vector column holds "
            f"{settings.EMBEDDING_DIM}. Nothing was changed: choose a model of {settings.EMBEDDING_DIM} dimensions, "
            f"or migrate the column to {size} first.")


@transaction.atomic
def _write(table: str, ids: list[int], vectors: np.ndarray) -> None:
    db_table = Memory._meta.db_table if table == "memories" else MemoryKey._meta.db_table
    # A memory edited and waiting for its vector has it now, from the content it holds.
    fresh = ", embedding_stale = false" if table == "memories" else ""
    with vector_cursor() as cursor:
        cursor.executemany(f"UPDATE {db_table} SET embedding = %s{fresh} WHERE id = %s",
                           [(np.asarray(v, dtype=np.float32), pk) for pk, v in zip(ids, vectors)])

"""A bank's memory map: its vectors projected on their first two principal components (PCA).

PCA and not UMAP/t-SNE: it needs nothing beyond numpy, is deterministic (the same bank gives the same
map, so a writer can come back to it), and takes ~0.1 s for 2,000 memories on this machine's 2 cores.
Its axes mean something (the two directions in which the memories differ most), at the price of
crowding: neighbours on the map are close in meaning, but close memories may sit apart.

Small banks are projected by the request that asks; bigger ones by a worker (memory.tasks.bank_map_task),
and the result is kept (BankMap) until a memory is added, edited, re-embedded or archived.
"""

from __future__ import annotations

import time
from datetime import timedelta

import numpy as np
from threadpoolctl import threadpool_limits
from django.db import connection
from django.utils import timezone

from memory.embedding.cache import vector_cursor
from memory.models import BankMap

INLINE_LIMIT = 2_000  # up to this many active memories the page projects them itself
REQUEST_AGAIN = timedelta(minutes=10)  # a worker's map that never came (the worker died) is asked for again


def map_version(bank_id: int) -> tuple[int, str]:
    """How many active memories the bank holds, and a version that changes with any of them."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), coalesce(sum(id), 0), max(updated_at), "
                       "count(*) FILTER (WHERE embedding_stale) FROM memory_memory "
                       "WHERE bank_id = %s AND status = 'active'", [bank_id])
        count, ids, latest, stale = cursor.fetchone()
    return int(count), f"{count}:{ids}:{latest.timestamp() if latest else 0}:{stale}"


def project(bank_id: int) -> BankMap:
    """Compute and keep the bank's map now."""
    started = time.perf_counter()
    _count, version = map_version(bank_id)
    with vector_cursor() as cursor:  # vectors in binary: ~10× faster than the ORM's text form
        cursor.execute("SELECT id, embedding FROM memory_memory WHERE bank_id = %s AND status = 'active' "
                       "AND NOT embedding_stale ORDER BY id", [bank_id], binary=True)
        rows = cursor.fetchall()
    points, explained = [], []
    if rows:
        ids = [row[0] for row in rows]
        vectors = np.vstack([np.asarray(row[1], dtype=np.float32) for row in rows])
        xy, explained = pca_2d(vectors)
        points = [[pk, round(float(x), 4), round(float(y), 4)] for pk, (x, y) in zip(ids, xy)]
    bank_map, _created = BankMap.objects.update_or_create(bank_id=bank_id, defaults={
        "version": version, "points": points, "explained": [round(float(e), 4) for e in explained],
        "computed_at": timezone.now(), "requested_at": None, "seconds": round(time.perf_counter() - started, 3)})
    return bank_map


def pca_2d(vectors: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """Rows on the first two principal components, scaled into 0..1 (one scale for both axes, so
    distances keep their proportions), and each component's share of the variance."""
    centred = vectors - vectors.mean(axis=0)
    if len(vectors) < 2:
        return np.full((len(vectors), 2), 0.5), [0.0, 0.0]
    # One BLAS thread: on a busy 2-core machine OpenBLAS's thread pool turned a 7 ms SVD of 109
    # memories into 1.7 s (the map's first load), contending with the database and the workers.
    with threadpool_limits(limits=1, user_api="blas"):
        _u, s, vt = np.linalg.svd(centred, full_matrices=False)
    components = vt[:2]
    # SVD's signs are arbitrary: fix them so the same bank is never drawn mirrored.
    signs = np.sign(components[np.arange(len(components)), np.abs(components).argmax(axis=1)])
    xy = centred @ (components * signs[:, None]).T
    if xy.shape[1] < 2:
        xy = np.hstack([xy, np.zeros((len(xy), 1))])
    variance = s ** 2
    explained = list(variance[:2] / variance.sum()) if variance.sum() else [0.0, 0.0]
    low, span = xy.min(axis=0), xy.max(axis=0) - xy.min(axis=0)
    scale = span.max() or 1.0
    xy = (xy - low) / scale + (1 - span / scale) / 2  # centred in the square
    return xy, explained + [0.0] * (2 - len(explained))


def bank_map(bank_id: int, *, queue) -> tuple[BankMap | None, bool]:
    """The bank's map and whether it is current. A small bank's is computed here; a big bank's by
    `queue(bank_id)` (a worker), meanwhile the last map (or None) is answered as not current."""
    count, version = map_version(bank_id)
    current = BankMap.objects.filter(bank_id=bank_id).first()
    if current is not None and current.version == version:
        return current, True
    if count <= INLINE_LIMIT:
        return project(bank_id), True
    now = timezone.now()
    asked = BankMap.objects.filter(bank_id=bank_id, requested_at__gt=now - REQUEST_AGAIN).exists()
    if not asked:
        if current is None:
            current = BankMap.objects.create(bank_id=bank_id, version="", requested_at=now)
        else:
            BankMap.objects.filter(pk=current.pk).update(requested_at=now)
        queue(bank_id)
    return (current if current is not None and current.points else None), False

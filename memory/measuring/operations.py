"""Seed 004's operation metrics, counted in Redis so that every process adds to the same series.

Retains, recalls, reflections and consolidations happen in web requests, MCP calls and Celery
workers; the web process that serves /metrics sees none of the others' memory. Each operation adds
to one Redis hash (one pipelined round trip, ~0.2 ms), and wonda_site.metrics reads the hash at
scrape time as Prometheus counters and histograms. A Redis that is down loses counts, never an
operation: every write here swallows its error.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

import redis
from django.conf import settings

from core import tracing

log = logging.getLogger(__name__)

OPERATIONS = ("retain", "recall", "reflect", "consolidate")
DURATION_BUCKETS_S = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
RESULT_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100)
IMPORTANCE_BUCKETS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)
# Each histogram's buckets by its field's head (wonda_site.metrics cumulates them when read).
BUCKETS = {"duration": DURATION_BUCKETS_S, "results": RESULT_BUCKETS, "importance": IMPORTANCE_BUCKETS}
_client: redis.Redis | None = None


def key() -> str:
    # Per database, as the embedder's health key: test runs and installations may share one Redis.
    return f"wonda:{settings.DATABASES['default']['NAME']}:memory-metrics"


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=0.5, socket_timeout=0.5)
    return _client


def _observe(fields: dict[str, float], name: str, value: float, buckets) -> None:
    """A histogram's fields: the first bucket it fits (cumulated when read), its sum and count."""
    bound = next((str(b) for b in buckets if value <= b), "+Inf")
    for field, amount in ((f"{name}|le|{bound}", 1), (f"{name}|sum", value), (f"{name}|count", 1)):
        fields[field] = fields.get(field, 0) + amount


def _add(fields: dict[str, float]) -> None:
    if not fields:
        return
    try:
        pipe = _redis().pipeline(transaction=False)
        for field, amount in fields.items():
            pipe.hincrbyfloat(key(), field, amount)
        pipe.execute()
    except Exception:  # no Redis: the operation stands, its count is lost
        log.debug("memory metrics not recorded", exc_info=True)


def operation(name: str, seconds: float, fields: dict[str, float] | None = None, **attributes) -> None:
    """One operation: counted for /metrics, and an OpenTelemetry span of its duration (core.tracing)."""
    tracing.record(f"memory.{name}", seconds, **{f"memory.{k}": v for k, v in attributes.items()})
    fields = dict(fields or {})
    fields[f"ops|{name}"] = fields.get(f"ops|{name}", 0) + 1
    _observe(fields, f"duration|{name}", seconds, DURATION_BUCKETS_S)
    _add(fields)


def retained(memories: Iterable, *, seconds: float) -> None:
    """Memories stored: one retain operation, each memory's kind and importance."""
    fields: dict[str, float] = {}
    for memory in memories:
        fields[f"retentions|{memory.kind}"] = fields.get(f"retentions|{memory.kind}", 0) + 1
        _observe(fields, f"importance|{memory.kind}", float(memory.importance), IMPORTANCE_BUCKETS)
    operation("retain", seconds, fields, memories=sum(v for k, v in fields.items() if k.startswith("retentions|")))


def recalled(count: int, *, mode: str, seconds: float) -> None:
    """A recall: how many results, by its tag mode ("none" when it filtered no tag)."""
    fields: dict[str, float] = {}
    _observe(fields, f"results|{mode}", float(count), RESULT_BUCKETS)
    operation("recall", seconds, fields, results=count, tag_mode=mode)


def consolidated(groups: int, memories: int, *, seconds: float) -> None:
    operation("consolidate", seconds, {"consolidation_groups": groups, "consolidation_memories": memories},
              groups=groups, memories=memories)


def captured(kept: int, skipped: Iterable[str]) -> None:
    """A line heard (seed 003's filter effectiveness): how many listeners kept it, and each one's
    reason for not keeping it (duplicate, importance, unconcerned)."""
    fields: dict[str, float] = {"capture|kept": float(kept)} if kept else {}
    for reason in skipped:
        fields[f"capture|{reason}"] = fields.get(f"capture|{reason}", 0) + 1
    _add(fields)


def embedded(count: int) -> None:
    """Vectors the model computed (a query's, a memory's; memory.embedding.encode counts them)."""
    if count:
        _add({"embeddings": count})


def read() -> dict[str, float]:
    """The hash as {field: value} (empty when Redis cannot be reached)."""
    try:
        raw = _redis().hgetall(key())
    except Exception:
        return {}
    return {k.decode(): float(v) for k, v in raw.items()}

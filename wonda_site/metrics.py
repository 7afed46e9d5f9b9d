"""Prometheus metrics at /metrics (prometheus-client), read from the database and the broker at
scrape time.

Turns, retrievals and embeddings happen in Celery worker processes, not in the web process that
serves /metrics; what they record in the database (a turn's status, times and memory_ms, each
retrieval's latency and path, the memories and cached vectors) is the one place every process
writes, so this collector needs no shared multiprocess directory and loses nothing on a restart.
Histograms cover the latest RECENT rows (a scrape stays cheap on a long history).

Not public: staff (a logged-in session) or a scraper with `Authorization: Bearer $WONDA_METRICS_TOKEN`.
"""

from __future__ import annotations

import hmac
import re

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

RECENT = 5000
LATENCY_BUCKETS_MS = (1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000)
TURN_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)
# How a failed turn's reason reads, by kind (chronicle.simulation.providers words them).
LLM_ERROR_KINDS = (("timeout", r"time[sd]? ?out"), ("connection", r"connect"), ("rate_limit", r"\b429\b|rate limit"),
                   ("server", r"\b5\d\d\b"), ("auth", r"\b40[13]\b|api key"), ("embedding", r"embedding"),
                   ("empty_answer", r"no line|empty"))


def _histogram(name: str, doc: str, values_by_label: dict[tuple, list[float]], buckets, labels: list[str]):
    family = HistogramMetricFamily(name, doc, labels=labels)
    for label_values, values in values_by_label.items():
        counts, total = [], 0.0
        for bound in buckets:
            counts.append((str(bound), sum(1 for v in values if v <= bound)))
        counts.append(("+Inf", len(values)))
        total = sum(values)
        family.add_metric(list(label_values), counts, total)
    return family


class WondaCollector:
    def collect(self):
        from chronicle.simulation.run.models import Retrieval, Turn  # the web process has them loaded anyway
        from memory.models import EmbeddingCache, Memory

        turns = GaugeMetricFamily("wonda_turns", "Simulation turns by status", labels=["status"])
        for status, n in Turn.objects.values_list("status").annotate(n=Count("id")).order_by():
            turns.add_metric([status], n)
        yield turns

        done = list(Turn.objects.filter(status="done", started__isnull=False, finished__isnull=False)
                    .order_by("-id").values_list("started", "finished", "context")[:RECENT])
        yield _histogram("wonda_turn_seconds", "Time a turn took, model calls included (latest turns)",
                         {(): [(f - s).total_seconds() for s, f, _c in done]}, TURN_BUCKETS_S, [])
        yield _histogram("wonda_turn_memory_ms", "The memory system's own time in a turn, model calls excluded",
                         {(): [float(c["memory_ms"]) for _s, _f, c in done if isinstance(c, dict) and c.get("memory_ms")]},
                         LATENCY_BUCKETS_MS, [])

        by_tool: dict[tuple, list[float]] = {}
        by_path: dict[tuple, list[float]] = {}
        for tool, latency, path in (Retrieval.objects.order_by("-id")
                                    .values_list("tool", "latency_ms", "path")[:RECENT]):
            by_tool.setdefault((tool,), []).append(float(latency or 0))
            if path:
                by_path.setdefault((path,), []).append(float(latency or 0))
        yield _histogram("wonda_tool_latency_ms", "A memory tool call's (or pre-populated section's) latency",
                         by_tool, LATENCY_BUCKETS_MS, ["tool"])
        yield _histogram("wonda_retrieval_latency_ms", "Retrieval latency by path (exact scan or vector index)",
                         by_path, LATENCY_BUCKETS_MS, ["path"])

        errors = CounterMetricFamily("wonda_llm_errors", "Failed turns by kind of error", labels=["kind"])
        counts = {kind: 0 for kind, _p in LLM_ERROR_KINDS} | {"other": 0}
        for reason in Turn.objects.filter(status="failed").values_list("error", flat=True):
            kind = next((k for k, pattern in LLM_ERROR_KINDS if re.search(pattern, reason or "", re.IGNORECASE)), "other")
            counts[kind] += 1
        for kind, n in counts.items():
            errors.add_metric([kind], n)
        yield errors

        queue = GaugeMetricFamily("wonda_queue_depth", "Celery tasks waiting in the broker's default queue")
        queue.add_metric([], _queue_depth())
        yield queue

        memories = CounterMetricFamily("wonda_memories", "Memories ever stored (rate(): memories embedded per second)")
        memories.add_metric([], Memory.objects.count())
        yield memories
        cached = CounterMetricFamily("wonda_embeddings_cached", "Vectors in the embedding cache")
        cached.add_metric([], EmbeddingCache.objects.count())
        yield cached
        yield from memory_operation_series()


def _seed_mode(mode: str) -> str:
    """A tag mode as seed 004 spells it (any_strict: AnyStrict; none: no tag filter)."""
    return "".join(part.capitalize() for part in mode.split("_"))


def memory_operation_series():
    """Seed 004's store metrics, from the counts every process adds to in Redis (memory.measuring.operations)."""
    from memory.measuring.operations import BUCKETS as OPERATION_BUCKETS
    from memory.measuring.operations import read as operation_counts

    counts = operation_counts()
    split: dict[str, dict[str, dict[str, float]]] = {}  # "results|any|le|5" → split["results"]["any"]["le|5"]
    for field, value in counts.items():
        head, _sep, rest = field.partition("|")
        label, _sep, part = rest.partition("|")
        split.setdefault(head, {}).setdefault(label, {})[part] = value

    def counter(name: str, doc: str, source: str, label: str | None = None):
        family = CounterMetricFamily(name, doc, labels=[label] if label else [])
        if label:
            for value_label, parts in sorted(split.get(source, {}).items()):
                family.add_metric([value_label], parts.get("", 0.0))
        else:
            family.add_metric([], counts.get(source, 0.0))
        return family

    def histogram(name: str, doc: str, source: str, label: str, spell=lambda v: v):
        family = HistogramMetricFamily(name, doc, labels=[label])
        for value_label, parts in sorted(split.get(source, {}).items()):
            running, buckets = 0.0, []
            for bound in OPERATION_BUCKETS[source]:  # stored per bucket, cumulated here
                running += parts.get(f"le|{bound}", 0.0)
                buckets.append((f"{bound:g}", running))
            buckets.append(("+Inf", parts.get("count", 0.0)))
            family.add_metric([spell(value_label)], buckets, parts.get("sum", 0.0))
        return family

    yield counter("memory_operations", "Store operations (retain, recall, reflect, consolidate)", "ops", "operation")
    yield histogram("memory_operation_duration_seconds", "A store operation's duration", "duration", "operation")
    yield counter("memory_retentions", "Memories stored, by kind", "retentions", "kind")
    yield histogram("memory_importance", "Importance (0-10) of the memories stored, by kind", "importance", "kind")
    yield histogram("memory_recall_results", "Results a recall returned, by its tag mode", "results", "filter_mode",
                    spell=_seed_mode)
    yield counter("memory_consolidation_groups", "Groups of similar memories consolidated into one", "consolidation_groups")
    yield counter("memory_consolidation_memories", "Memories consolidated into summaries", "consolidation_memories")
    yield counter("memory_embeddings_generated", "Vectors the embedding model computed", "embeddings")
    # Seed 003's filter effectiveness: filtered / (kept + filtered); its reflection frequency is
    # memory_retentions_total{kind="reflection"} over time.
    yield counter("memory_capture_lines", "Listeners' copies of a line heard, kept or filtered out (by reason)",
                  "capture", "outcome")


def _queue_depth() -> float:
    try:
        import redis

        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=1)
        return float(client.llen(settings.CELERY_TASK_DEFAULT_QUEUE))
    except Exception:  # the broker is down: /healthz says so; the metric reads NaN
        return float("nan")


_registry = CollectorRegistry(auto_describe=False)
_registry.register(WondaCollector())


@login_not_required
def metrics(request: HttpRequest) -> HttpResponse:
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    by_token = bool(token) and hmac.compare_digest(header, f"Bearer {token}")
    if not (by_token or (request.user.is_authenticated and request.user.is_staff)):
        return HttpResponse("Metrics are for staff, or a scraper with WONDA_METRICS_TOKEN.\n", status=403,
                            content_type="text/plain")
    return HttpResponse(generate_latest(_registry), content_type=CONTENT_TYPE_LATEST)

import logging
import os
import threading

from celery import Celery
from celery.signals import (
    task_postrun, task_prerun, worker_init, worker_process_init, worker_process_shutdown, worker_ready, worker_shutdown,
)

from core.pool import PoolHeartbeat

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wonda_site.settings")

app = Celery("wonda")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Simulation and writing tasks live in sub-packages of chronicle; name them so workers register them.
app.autodiscover_tasks(["chronicle.simulation.control", "chronicle.writing"])

log = logging.getLogger(__name__)
_model_info: dict = {}  # what the parent checked; children inherit it through fork
_worker: dict = {}  # the parent's hostname, for its children's heartbeats


@worker_init.connect
def _validate_embedding_model(sender=None, **_kwargs) -> None:
    # Once, in the worker's main process, before the pool forks: check the model's size against the
    # vector column (from its files: no torch here, so a restarted worker is up in seconds). A wrong
    # model stops the worker with a clear message (raised per child it made Celery restart children
    # forever). Each child loads what it uses itself (_warm_then_beat).
    # Here, not at the top: every process imports this module (wonda_site/__init__) before the apps are ready.
    from memory.embedding import EmbeddingConfigError, EmbeddingError, validate_before_fork

    _worker["hostname"] = getattr(sender, "hostname", "") or ""
    try:
        _model_info.update(validate_before_fork())
    except EmbeddingConfigError as exc:  # a wrong model: no waiting fixes it
        log.critical("Wonda's worker cannot start: %s", exc)
        raise SystemExit(f"Wonda's worker cannot start: {exc}") from exc
    except EmbeddingError as exc:  # an outage (the model will not load, its server is down): degraded mode
        log.critical("The embedding model is unavailable (%s): this worker starts anyway; searches use keywords "
                     "only and new memories wait for their vectors until it is back", exc)


def _warm_then_beat(hostname: str) -> None:
    # Only the ONNX sessions (a turn's searches, its line, its background work): torch is loaded by the
    # first encode that needs it (a big batch). Loaded here, beside a turn, its import held the GIL from
    # a low-priority thread and a turn waited 19 s for it.
    from memory.embedding import warm_query_encoder  # not at the top: see _validate_embedding_model

    info = dict(_model_info)
    try:
        info["query_encoder"] = warm_query_encoder()  # this process's own ONNX sessions, from var/models
    except Exception:  # never keep a child from working: queries then use torch
        log.exception("query encoder warm-up failed")
    _worker["heartbeat"] = PoolHeartbeat(hostname, info).start()


@worker_process_init.connect
def _pool_process_started(**_kwargs) -> None:
    # In a thread, so the child reports "up" to its parent at once (Celery kills a child that is
    # silent for worker_proc_alive_timeout); the first search waits on the encoder's lock instead.
    threading.Thread(target=_warm_then_beat, args=(_worker.get("hostname", ""),), name="wonda-warm", daemon=True).start()


@worker_ready.connect
def _worker_ready(sender=None, **_kwargs) -> None:
    # solo/threads pools have no child processes: the worker itself is the pool.
    hostname = getattr(sender, "hostname", "") or ""
    pool = getattr(getattr(sender, "controller", None), "pool_cls", None)
    name = getattr(pool, "__module__", "") if pool is not None else ""
    if name and "prefork" not in name:
        _warm_then_beat(hostname)


@worker_process_shutdown.connect
@worker_shutdown.connect
def _stop_beating(**_kwargs) -> None:
    # A process that stops takes its stamp with it, so /healthz (and run_simulation's "is a worker
    # up?") do not count it for the three beats it would otherwise linger.
    heartbeat = _worker.pop("heartbeat", None)
    if heartbeat is not None:
        heartbeat.finish()


@task_prerun.connect
@task_postrun.connect
def _tidy_connections(task=None, **_kwargs) -> None:
    # What Django does around each request: drop a connection that errored, is broken or is older
    # than CONN_MAX_AGE; keep the rest (CELERY_DB_REUSE_MAX stops Celery closing every one). Not
    # around a task run in place (eager): it shares its caller's connection and transaction.
    if task is not None and getattr(task.request, "is_eager", False):
        return
    from django.db import close_old_connections

    close_old_connections()

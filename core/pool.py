"""The worker pool's own word on whether it can run tasks: a heartbeat per pool process in Redis.

Each pool process (a Celery child, or the worker itself with the solo/threads pools) stamps
`wonda:pool:<hostname>:<pid>` every `POOL_HEARTBEAT_SECONDS` once it is up. `/healthz` reads the
stamps in one Redis round trip instead of pinging workers (which waited out a 1.5 s time-out on
every call, and said "ok" while every child was being killed at start-up and no task could run).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time

import redis
from django.conf import settings

log = logging.getLogger(__name__)

KEY_PREFIX = "wonda:pool:"


def _client(timeout: float = 1.0):
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=timeout, socket_timeout=timeout)


def every() -> float:
    return settings.POOL_HEARTBEAT_SECONDS


def window() -> float:
    """A process whose last stamp is older than this is gone (three missed beats)."""
    return 3 * every()


class PoolHeartbeat:
    """Stamps this pool process as able to run tasks, from a daemon thread, until the process ends."""

    def __init__(self, hostname: str, info: dict | None = None):
        self.key = f"{KEY_PREFIX}{hostname or socket.gethostname()}:{os.getpid()}"
        self.info = dict(info or {}, hostname=hostname, pid=os.getpid(), since=time.time(),
                         database=settings.DATABASES["default"]["NAME"])
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, name="wonda-pool-heartbeat", daemon=True)

    def beat(self, client) -> None:
        value = json.dumps(dict(self.info, at=time.time()))
        client.set(self.key, value, ex=max(1, int(window() + 1)))

    def run(self) -> None:
        client = _client()
        while True:
            try:
                self.beat(client)
            except Exception as exc:  # the broker is down for a while: keep trying, say it once a beat
                log.warning("pool heartbeat could not be written: %s", exc)
            if self.stop.wait(every()):
                break
        try:
            client.delete(self.key)  # a clean stop leaves no ghost behind
        except Exception:
            pass

    def start(self) -> "PoolHeartbeat":
        self.thread.start()
        return self

    def finish(self) -> None:
        """Stop beating and remove the stamp now (the process is shutting down)."""
        self.stop.set()
        try:
            client = _client()
            client.delete(self.key)
            client.close()
        except Exception:  # the broker is gone too: the stamp expires on its own
            pass


def pool_status(client=None, *, database: str | None = None) -> dict:
    """The live pool processes by worker, from their stamps; ok when at least one can run tasks
    (on `database`, when given: a worker of another database would not run this one's tasks)."""
    own = client is None
    client = client or _client()
    try:
        keys = list(client.scan_iter(match=f"{KEY_PREFIX}*", count=500))
        values = client.mget(keys) if keys else []
    finally:
        if own:
            client.close()
    now = time.time()
    processes = []
    for raw in values:
        if not raw:
            continue
        try:
            info = json.loads(raw)
        except ValueError:
            continue
        if now - float(info.get("at", 0)) <= window() and (database is None or info.get("database") == database):
            processes.append(info)
    if not processes:
        return {"ok": False, "error": f"no worker process has been able to run tasks in the last {window():g} s "
                                      "(is a worker running? see its log)"}
    workers: dict[str, int] = {}
    for info in processes:
        workers[info.get("hostname") or "?"] = workers.get(info.get("hostname") or "?", 0) + 1
    first = processes[0]
    return {"ok": True, "workers": sorted(workers), "processes": len(processes), "per_worker": workers,
            "embedding": {k: first[k] for k in ("backend", "model", "dimension", "query_encoder") if k in first}}

"""Whether the embedder works, as every process sees it (degraded mode, seed 002's keyword fallback).

A failed embedding sets a key in Redis with the reason, for HOLD_S; this process's next success
removes it (and asks a worker to re-embed what was stored without a vector meanwhile). The web's
banner and /healthz read the key; searches that cannot embed their query rank by keywords alone.
"""

from __future__ import annotations

import json
import logging
import time

import redis
from django.conf import settings

from memory.queue import queue

log = logging.getLogger(__name__)

HOLD_S = 120  # a failure is "the embedder is down" for this long unless a success says otherwise
_seen_down = False  # this process saw a failure: its next success clears the key


def _key() -> str:
    # Per database: test runs and several installations may share one Redis.
    return f"wonda:{settings.DATABASES['default']['NAME']}:embedder-down"


def _client() -> redis.Redis:
    # The broker's Redis, where the worker pool's heartbeats are kept too; short timeouts, so a page
    # that asks never waits on a Redis that is down.
    return redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=0.5, socket_timeout=0.5)


def mark_down(reason: str) -> None:
    global _seen_down
    _seen_down = True
    try:
        _client().set(_key(), json.dumps({"reason": reason[:500], "since": time.time()}), ex=HOLD_S)
    except Exception:  # no Redis: the search still falls back; only the banner does not know
        log.warning("could not record that the embedder is down: %s", reason)


def mark_up() -> None:
    """After a success: if this process had seen the embedder down, it is up again."""
    global _seen_down
    if not _seen_down:
        return
    _seen_down = False
    try:
        was_down = _client().delete(_key())
    except Exception:
        return
    if was_down:
        _queue_catch_up()


def down() -> dict | None:
    """{"reason", "since"} while the embedder is known to be down, else None."""
    try:
        raw = _client().get(_key())
    except Exception:
        return None
    return json.loads(raw) if raw else None


def _queue_catch_up() -> None:
    # No broker: `manage.py memory_check --repair` re-embeds them.
    queue("reembed_stale_task", failure="could not queue the re-embedding of memories stored while the embedder was down")

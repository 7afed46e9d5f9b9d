from __future__ import annotations

import time

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from memory.embedding import health
from core.pool import pool_status


def _check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        return {"ok": False, "error": "the pgvector extension is not installed (run migrations)"}
    return {"ok": True, "vendor": connection.vendor, "pgvector": row[0]}


def _check_redis_and_pool() -> tuple[dict, dict, dict]:
    """Redis, then the worker pool and its embedding model from the pool's heartbeats (one client)."""
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
        version = client.info("server").get("redis_version")
        # Only workers on this site's database can run its tasks.
        pool = pool_status(client, database=settings.DATABASES["default"]["NAME"])
    except redis.RedisError as exc:
        down = {"ok": False, "error": "broker unreachable"}
        return {"ok": False, "error": f"broker unreachable: {exc}"}, down, dict(down)
    finally:
        client.close()
    embedding = pool.pop("embedding", None)
    if not pool["ok"]:
        embedding = {"ok": False, "error": "no worker to report it"}
    elif embedding.get("dimension") != settings.EMBEDDING_DIM:
        embedding = {"ok": False, **embedding,
                     "error": f"model dimension {embedding.get('dimension')} != column {settings.EMBEDDING_DIM}"}
    else:
        embedding = {"ok": True, **embedding}
    return {"ok": True, "version": version}, pool, embedding


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Each part Wonda needs, with a version where it has one; 503 names what is down.

    The worker part comes from the pool processes' own heartbeats (core/pool.py): no task
    round trip, so it answers in milliseconds, and a pool whose children cannot start is "down"."""
    started = time.perf_counter()
    parts: dict[str, dict] = {}
    try:
        parts["database"] = _check_database()
    except Exception as exc:
        parts["database"] = {"ok": False, "error": str(exc)}
    parts["redis"], parts["worker"], parts["embedding"] = _check_redis_and_pool()
    degraded = []
    failing = health.down() if parts["redis"]["ok"] else None
    if failing:
        # Degraded, not down (when nothing else is): the site works and searches fall back to
        # keywords, so a load balancer should keep sending traffic: 200, with the mode named.
        if parts["embedding"]["ok"]:
            degraded.append("embedding")
        parts["embedding"] = {**parts["embedding"], "ok": False, "mode": "keyword only",
                              "error": failing["reason"], "since": failing["since"]}
    down = [name for name, part in parts.items() if not part["ok"] and name not in degraded]
    body = {
        "status": "down" if down else "degraded" if degraded else "ok",
        "down": down,
        "degraded": degraded,
        "parts": parts,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return JsonResponse(body, status=200 if not down else 503)

from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET


def _check_database() -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = cursor.fetchone()
    if row is None:
        return {"ok": False, "error": "the pgvector extension is not installed (run migrations)"}
    return {"ok": True, "vendor": connection.vendor, "pgvector": row[0]}


def _check_redis() -> dict:
    import redis

    url = settings.CELERY_BROKER_URL
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        client.ping()
    except redis.RedisError as exc:
        return {"ok": False, "error": f"broker unreachable: {exc}"}
    else:
        version = client.info("server").get("redis_version")
    finally:
        client.close()
    return {"ok": True, "version": version}


def _check_worker() -> dict:
    from wonda_site.celery import app

    replies = app.control.ping(timeout=1.5)
    if not replies:
        return {"ok": False, "error": "no Celery worker answered a ping"}
    return {"ok": True, "workers": sorted(name for reply in replies for name in reply)}


def _check_embedding() -> dict:
    from wonda_site.tasks import health_probe

    try:
        info = health_probe.apply_async(expires=10).get(timeout=8)
    except Exception as exc:  # a time-out or a worker-side error: both mean "not usable now"
        return {"ok": False, "error": f"the worker could not report its embedding model: {exc}"}
    if info.get("dimension") != settings.EMBEDDING_DIM:
        return {"ok": False, "error": f"model dimension {info.get('dimension')} != column {settings.EMBEDDING_DIM}", **info}
    return {"ok": True, **info}


@login_not_required
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    """Each part Wonda needs, with a version where it has one; 503 names what is down."""
    started = time.perf_counter()
    parts: dict[str, dict] = {}
    try:
        parts["database"] = _check_database()
    except Exception as exc:
        parts["database"] = {"ok": False, "error": str(exc)}
    parts["redis"] = _check_redis()
    if parts["redis"]["ok"]:
        parts["worker"] = _check_worker()
        parts["embedding"] = _check_embedding() if parts["worker"]["ok"] else {"ok": False, "error": "no worker to ask"}
    else:
        parts["worker"] = {"ok": False, "error": "broker unreachable"}
        parts["embedding"] = {"ok": False, "error": "broker unreachable"}
    down = [name for name, part in parts.items() if not part["ok"]]
    body = {
        "status": "ok" if not down else "down",
        "down": down,
        "parts": parts,
        "seconds": round(time.perf_counter() - started, 3),
    }
    return JsonResponse(body, status=200 if not down else 503)

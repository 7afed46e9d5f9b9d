"""Which part Wonda needs an exception says is down (the database, the task broker), and the 503 that
names it: the site's middleware (wonda_site.outage), the API and a turn that waits out an outage
all use them."""

from __future__ import annotations

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string


def part_of(exc: BaseException | None) -> str | None:
    """Which dependency an exception says is down, or None for any other error."""
    import psycopg
    import redis
    from kombu.exceptions import OperationalError as BrokerError

    # psycopg's own errors too: memory's vector queries use a raw cursor, which Django does not wrap.
    if isinstance(exc, (OperationalError, InterfaceError, psycopg.OperationalError, psycopg.InterfaceError)):
        return "database"
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, BrokerError, ConnectionError)):
        return "broker"
    return None


WHAT = {"database": "The database (PostgreSQL)", "broker": "The task broker (Redis)"}
RETRY_AFTER_S = 15


def unavailable(request: HttpRequest, part: str) -> HttpResponse:
    if request.path.startswith("/api/") or "application/json" in request.headers.get("Accept", ""):
        response = JsonResponse({"detail": f"{WHAT[part]} is unavailable; try again in a moment.", "down": [part]},
                                status=503)
    else:
        response = HttpResponse(render_to_string("503.html", {"part": part, "what": WHAT[part]}), status=503)
    response["Retry-After"] = str(RETRY_AFTER_S)
    return response

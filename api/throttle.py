"""One request budget per API token, shared by the HTTP API and MCP over HTTP (WONDA_API_RATE,
"120/min"), counted in Redis so that the web server and the MCP server count together."""

from __future__ import annotations

import logging
from types import SimpleNamespace

from django.conf import settings
from django.core.cache import caches
from ninja.throttling import AuthRateThrottle

log = logging.getLogger(__name__)


class TokenRateThrottle(AuthRateThrottle):
    """The setting is read at each call, so a changed one applies at once."""

    def __init__(self):
        super().__init__(settings.API_RATE)
        self.cache = caches["throttle"]

    def get_cache_key(self, request) -> str:
        token = getattr(request, "auth", None)
        # The digest too: a test database (or a restored one) reuses ids, never secrets.
        return f"throttle_token_{token.pk}_{token.digest[:16]}" if token is not None else super().get_cache_key(request)

    def allow_request(self, request) -> bool:
        self.num_requests, self.duration = self.parse_rate(settings.API_RATE)
        try:
            return super().allow_request(request)
        except Exception as exc:  # the counter's store (Redis) is down: serve the call rather than refuse it
            log.warning("rate limit not counted: %s", exc)
            return True


def allowed(token) -> tuple[bool, float | None]:
    """For a caller outside Django's request cycle (MCP over HTTP): may this token make one more
    call now, and if not, in how many seconds."""
    throttle = TokenRateThrottle()
    ok = throttle.allow_request(SimpleNamespace(auth=token, META={}))
    return ok, None if ok else throttle.wait()

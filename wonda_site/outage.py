"""What a request gets while a part Wonda needs is down: a 503 that names it (a page, or JSON for
the API and /healthz), never a traceback, in DEBUG as in production.

An exception raised anywhere below (a view, the session or login middleware reading the session
table) becomes a 500 response inside Django's handler; `got_request_exception` is sent while it is
being handled, so the exception is kept on the request and DependencyDownMiddleware, outermost,
turns that 500 into a 503 when a dependency caused it. /healthz is answered before the session and
login middleware, so a caller with a session cookie gets its report, not an error. /livez says only
that the web process answers (serve's supervisor asks it): no database, no broker, no session.
"""

from __future__ import annotations

import sys

from django.core.signals import got_request_exception
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse

from core.outage import part_of, unavailable


@receiver(got_request_exception)
def _keep_exception(sender, request=None, **kwargs):
    if request is not None:
        request.wonda_exception = sys.exc_info()[1]


class DependencyDownMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path == "/livez":
            return HttpResponse("ok", content_type="text/plain")  # the process answers; nothing else is asked
        if request.path == "/healthz" and request.method == "GET":
            from wonda_site.views import healthz

            return healthz(request)  # no session, no login: the same report for every caller
        response = self.get_response(request)
        if response.status_code >= 500:
            part = part_of(getattr(request, "wonda_exception", None))
            if part is not None:
                return unavailable(request, part)
        return response

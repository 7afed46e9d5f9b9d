"""A request body over DATA_UPLOAD_MAX_MEMORY_SIZE is a 413 page that says so, not Django's 400.

Django raises RequestDataTooBig when something first reads the form (the CSRF check, a view) and
answers it as a bad request, in DEBUG a traceback. Read here first, the same limit gives the writer
a page saying what happened and that nothing was saved. The API answers its own 413 in JSON.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string


class BodyTooBigMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.method == "POST" and not request.path.startswith("/api/"):
            try:
                request.POST  # noqa: B018  (parsed once; the CSRF check and the view reuse it)
            except RequestDataTooBig:
                limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE / (1024 * 1024)
                return HttpResponse(render_to_string("413.html", {"limit": f"{limit:g}"}), status=413)
        return self.get_response(request)

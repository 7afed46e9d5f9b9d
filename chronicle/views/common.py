"""Helpers shared by the character and scenario pages."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.vary import vary_on_headers
from django_htmx.middleware import HtmxDetails
from django_htmx.http import HttpResponseStopPolling

FINISHED = ("done", "failed")

# For every view that answers a full page or an htmx partial at the same URL: without it a browser
# or proxy cache can hand the partial back for a full page load (or the reverse).
vary_on_htmx = vary_on_headers("HX-Request")


class HtmxHttpRequest(HttpRequest):
    """For type hints: the request that HtmxMiddleware has given `.htmx`."""

    htmx: HtmxDetails


def field_errors_response(request: HttpRequest, form) -> HttpResponse:
    """The error partial for the one field the writer just changed (inline validation)."""
    name = request.POST.get("_field", "")
    form.is_valid()
    errors = form.errors.get(name, []) if name in form.fields else []
    if name == "pair_notes":
        errors = form.non_field_errors()
    return TemplateResponse(request, "chronicle/_field.html#field-errors", {"name": name, "errors": errors})


def preview_response(request: HttpRequest, template: str, context: dict) -> HttpResponse:
    """The preview partial; once seeding has finished, tell htmx to stop polling (status 286)."""
    bank = context.get("bank")
    response = TemplateResponse(request, template, context)
    if request.htmx and (bank is None or bank.seed_status in FINISHED):
        response.render()
        stop = HttpResponseStopPolling(response.content)
        return stop
    return response

"""Staff-only pages of the memory store."""

from __future__ import annotations

from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods

from memory.measuring.integrity import memory_check


@staff_member_required
@require_http_methods(["GET", "POST"])
def integrity(request: HttpRequest) -> HttpResponse:
    """memory_check as a page: GET checks, the Repair button (POST) mends."""
    repair = request.method == "POST"
    findings = memory_check(repair=repair)
    return TemplateResponse(request, "memory/integrity.html", {
        "findings": findings, "repaired": repair, "damaged": sum(f.found for f in findings)})

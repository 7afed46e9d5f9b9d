"""What a call must be before the API reads it: its body JSON."""

from __future__ import annotations

from functools import wraps

from django.http import JsonResponse


def json_only(run):
    """A body in any other format is a 415, before anything reads it: django-ninja parses any
    Content-Type as JSON, so a form post or a text file could pass for a call."""
    @wraps(run)
    def check(request, *args, **kwargs):
        length = request.META.get("CONTENT_LENGTH") or "0"
        has_body = length != "0" or "HTTP_TRANSFER_ENCODING" in request.META
        if has_body and request.content_type != "application/json":
            return JsonResponse({"detail": "Send the body as JSON (Content-Type: application/json), not "
                                           f"{request.content_type or 'no type'}."}, status=415)
        return run(request, *args, **kwargs)
    return check

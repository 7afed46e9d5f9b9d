"""The API tokens page: make one (its secret shown once), see them, revoke one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods, require_POST

from api.models import ApiToken


@login_required
@require_http_methods(["GET", "POST"])
def tokens(request: HttpRequest) -> HttpResponse:
    secret, status = "", 200
    if request.method == "POST":
        try:
            token, secret = ApiToken.issue(user=request.user, name=request.POST.get("name", ""))
        except ValidationError as exc:
            messages.error(request, f"Token name: {' '.join(exc.message_dict['name'])}")
            status = 400
        else:
            messages.success(request, f"Token “{token.name}” made: copy it now, it is not shown again.")
    return TemplateResponse(request, "api/tokens.html", {
        "tokens": ApiToken.objects.filter(user=request.user), "secret": secret,
        "base": request.build_absolute_uri("/api/")}, status=status)


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.filter(user=request.user), pk=pk)
    token.revoke()
    messages.success(request, f"Token “{token.name}” revoked: calls with it are refused from now on.")
    return redirect("api_tokens")

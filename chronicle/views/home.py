from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET

from chronicle.selectors import home_summary


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    return TemplateResponse(request, "chronicle/home.html", home_summary(user=request.user))

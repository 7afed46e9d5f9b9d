"""Scenario pages: list, create, edit (cast + per-pair notes), detail (preview memories), delete."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chronicle.forms import ScenarioForm
from chronicle.models import Character, Scenario
from chronicle.selectors import run_settings_rows, scenario_preview_sections
from chronicle.services.scenarios import (scenario_create as create_scenario,
                                          scenario_delete as delete_scenario, scenario_request_preview,
                                          scenario_update)
from chronicle.views.common import HtmxHttpRequest, field_errors_response, preview_response, vary_on_htmx


def _owned(request: HtmxHttpRequest, pk: int) -> Scenario:
    return get_object_or_404(Scenario.objects.owned_by(request.user).select_related("preview_bank"), pk=pk)


def pair_rows(cast: list[Character], notes: dict, standing: dict | None = None) -> list[dict]:
    """For each cast member, one note per other member: what the first knows about the second, and
    how the first stands with the second when the story starts (trust, affinity)."""
    standing = standing or {}
    return [{"knower": a, "others": [{"about": b, "text": (notes.get(a.name) or {}).get(b.name, ""),
                                      **((standing.get(a.name) or {}).get(b.name) or {"trust": "", "affinity": ""})}
                                     for b in cast if b.pk != a.pk]} for a in cast]


@login_required
@require_GET
def scenario_list(request: HtmxHttpRequest) -> HttpResponse:
    scenarios = Scenario.objects.owned_by(request.user).select_related("preview_bank").prefetch_related("cast")
    return TemplateResponse(request, "chronicle/scenario_list.html", {"scenarios": scenarios})


def _form_page(request, form: ScenarioForm, scenario: Scenario | None, status: int = 200) -> HttpResponse:
    if form.is_bound:
        cast = list(form.cleaned_data.get("cast") or []) if hasattr(form, "cleaned_data") else []
        notes, standing = form.pair_notes_from_data(cast), form.pair_standing_typed(cast)
    else:
        cast = list(scenario.cast.all()) if scenario else []
        notes, standing = (scenario.pair_notes, scenario.pair_standing) if scenario else ({}, {})
    return TemplateResponse(request, "chronicle/scenario_form.html", {
        "form": form, "scenario": scenario, "pairs": pair_rows(cast, notes, standing),
        "has_characters": Character.objects.owned_by(request.user).exists(),
        "validate_url": reverse("scenario_validate", args=[scenario.pk]) if scenario else reverse("scenario_validate_new"),
    }, status=status)


def _save(request, form: ScenarioForm, scenario: Scenario | None) -> HttpResponse:
    data = {k: form.cleaned_data[k] for k in ("title", "location", "atmosphere", "time_of_day", "description",
                                              "user_name", "pair_notes", "pair_standing")}
    try:
        if scenario is None:
            scenario = create_scenario(owner=request.user, data=data, cast=form.cleaned_data["cast"])
        else:
            scenario = scenario_update(scenario=scenario, data=data, cast=form.cleaned_data["cast"])
    except ValidationError as exc:
        form.add_error(None, exc)
        return _form_page(request, form, scenario, status=400)
    messages.success(request, f"Saved {scenario.title}.")
    return redirect("scenario_detail", pk=scenario.pk)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_create(request: HtmxHttpRequest) -> HttpResponse:
    form = ScenarioForm(request.POST or None, owner=request.user)
    if request.method == "POST" and form.is_valid():
        return _save(request, form, None)
    return _form_page(request, form, None, status=400 if form.is_bound else 200)


@login_required
@require_http_methods(["GET", "POST"])
def scenario_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scenario = _owned(request, pk)
    form = ScenarioForm(request.POST or None, instance=scenario, owner=request.user)
    if request.method == "POST" and form.is_valid():
        return _save(request, form, scenario)
    return _form_page(request, form, scenario, status=400 if form.is_bound else 200)


@login_required
@require_POST
def scenario_validate(request: HtmxHttpRequest, pk: int | None = None) -> HttpResponse:
    scenario = _owned(request, pk) if pk is not None else None
    return field_errors_response(request, ScenarioForm(request.POST, instance=scenario, owner=request.user))


@login_required
@require_GET
def scenario_pairs(request: HtmxHttpRequest) -> HttpResponse:
    """The per-pair notes for the cast ticked so far (typed notes are kept)."""
    form = ScenarioForm(request.GET, owner=request.user)
    ids = [i for i in request.GET.getlist("cast") if i.isdigit()]
    cast = list(Character.objects.owned_by(request.user).filter(pk__in=ids))
    return TemplateResponse(request, "chronicle/scenario_form.html#pair-notes",
                            {"pairs": pair_rows(cast, form.pair_notes_from_data(cast), form.pair_standing_typed(cast))})


def _preview_context(scenario: Scenario) -> dict:
    bank = scenario.preview_bank
    done = bank is not None and bank.seed_status == "done"
    return {"scenario": scenario, "bank": bank, "sections": scenario_preview_sections(scenario=scenario) if done else []}


@login_required
@require_GET
def scenario_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scenario = _owned(request, pk)
    context = _preview_context(scenario) | {"run_settings": run_settings_rows(settings=scenario.run_settings)}
    return TemplateResponse(request, "chronicle/scenario_detail.html", context)


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_htmx
def scenario_preview(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scenario = _owned(request, pk)
    if request.method == "POST":
        scenario_request_preview(scenario=scenario)
        scenario.refresh_from_db()
        if not request.htmx:
            return redirect("scenario_detail", pk=scenario.pk)
    return preview_response(request, "chronicle/scenario_detail.html#preview", _preview_context(scenario))


@login_required
@require_http_methods(["GET", "POST"])
def scenario_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scenario = _owned(request, pk)
    if request.method == "POST":
        title = scenario.title
        delete_scenario(scenario=scenario)
        messages.success(request, f"Deleted {title}. Its characters are kept.")
        return redirect("scenario_list")
    return TemplateResponse(request, "chronicle/scenario_delete.html", {"scenario": scenario})

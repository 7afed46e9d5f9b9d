"""Import a file (Wonda JSON, Card V2 JSON/PNG); export characters and scenarios."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.utils.text import slugify
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods

from chronicle.views.common import HtmxHttpRequest
from chronicle.forms import ImportCopyForm, ImportForm
from chronicle.models import Character, Scenario
from chronicle.services.card_export import (character_export as wonda_character, character_to_card,
                                             character_to_card_png, scenario_export as wonda_scenario)
from chronicle.services.cards import CardImportError, card_import, import_held, import_match, import_hold, import_release


def _download(content: bytes, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _json(data: dict) -> bytes:
    return json.dumps(data, ensure_ascii=False, indent=2).encode("utf-8")


@login_required
@require_GET
def character_export(request: HtmxHttpRequest, pk: int, fmt: str) -> HttpResponse:
    character = get_object_or_404(Character.objects.owned_by(request.user), pk=pk)
    stem = slugify(character.name) or f"character-{character.pk}"
    if fmt == "json":
        return _download(_json(wonda_character(character)), "application/json", f"{stem}.wonda.json")
    if fmt == "card.json":
        return _download(_json(character_to_card(character)), "application/json", f"{stem}.card.json")
    if fmt == "card.png":
        return _download(character_to_card_png(character), "image/png", f"{stem}.card.png")
    raise Http404("Unknown export format")


@login_required
@require_GET
def scenario_export(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    scenario = get_object_or_404(Scenario.objects.owned_by(request.user), pk=pk)
    stem = slugify(scenario.title) or f"scenario-{scenario.pk}"
    return _download(_json(wonda_scenario(scenario)), "application/json", f"{stem}.wonda.json")


def _imported(request: HtmxHttpRequest, result) -> HttpResponse:
    """Back to the import page, which lists what came in with a link to each (kept in the session for
    that one page: the redirect keeps a reload from importing the file twice)."""
    items = [{"kind": "scenario", "name": result.scenario.title,
              "url": reverse("scenario_detail", args=[result.scenario.pk])}] if result.scenario is not None else []
    items += [{"kind": "character", "name": c.name, "url": reverse("character_detail", args=[c.pk])}
              for c in result.characters]
    request.session["imported"] = items
    what = result.scenario.title if result.scenario is not None else result.characters[0].name
    messages.success(request, f"Imported {what}.")
    return redirect("import")


def _held_scenario(owner, raw: bytes) -> dict | None:
    """The writer's scenario that this file holds already, unchanged (cards.import_match), to link to."""
    match = import_match(owner=owner, raw=raw)
    if match is None:
        return None
    scenario = match[0].scenario
    return {"title": scenario.title, "url": reverse("scenario_detail", args=[scenario.pk])}


@login_required
@require_http_methods(["GET", "POST"])
def import_page(request: HtmxHttpRequest) -> HttpResponse:
    """Upload a file; on a name clash, the page offers to import it as a copy (the `import_copy`
    button), from the file kept for that step so the writer need not choose it again."""
    form = ImportForm(request.POST or None, request.FILES or None)
    errors: list[str] = []
    clash: dict | None = None
    if request.method == "POST" and "import_copy" in request.POST:
        copy_form = ImportCopyForm(request.POST)
        token = copy_form.cleaned_data["pending"] if copy_form.is_valid() else ""
        raw = import_held(owner=request.user, token=token) if token else None
        form = ImportForm()
        if raw is None:
            errors = ["That file is no longer kept (it is kept for an hour); choose it again."]
        else:
            try:
                result = card_import(owner=request.user, raw=raw, as_copy=True)
            except CardImportError as exc:
                errors = exc.errors
            else:
                import_release(owner=request.user, token=token)
                return _imported(request, result)
    elif request.method == "POST" and form.is_valid():
        raw = form.cleaned_data["file"].read()  # its size is checked by the form, before it is read
        try:
            result = card_import(owner=request.user, raw=raw, as_copy=form.cleaned_data["as_copy"])
        except CardImportError as exc:
            errors = exc.errors
            if exc.clashes and len(exc.clashes) == len(exc.errors):
                clash = {"names": exc.clashes, "pending": import_hold(owner=request.user, raw=raw),
                         "copies": exc.copies, "held": _held_scenario(request.user, raw)}
                errors = []
        else:
            return _imported(request, result)
    status = 400 if (errors or form.errors) else (409 if clash else 200)
    imported = request.session.pop("imported", None) if request.method == "GET" else None
    return TemplateResponse(request, "chronicle/import.html", {"form": form, "errors": errors, "clash": clash,
                                                               "imported": imported}, status=status)

"""Character pages: list, create, edit, detail (preview memories + ask), delete."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from chronicle.forms import LIST_FIELDS, CharacterForm
from chronicle.models import Character, Portrait
from chronicle.selectors import preview_groups
from chronicle.services.portraits import portrait_png, portrait_set
from chronicle.services.characters import (character_create as create_character,
                                           character_delete as delete_character, character_request_preview,
                                           character_update)
from chronicle.views.common import HtmxHttpRequest, field_errors_response, preview_response, vary_on_htmx
from chronicle.writing.ask import ask, writer_provider
from memory.api import recollection

ASK_K = 8


def _owned(request: HtmxHttpRequest, pk: int) -> Character:
    return get_object_or_404(Character.objects.owned_by(request.user).select_related("preview_bank"), pk=pk)


@login_required
@require_GET
def character_list(request: HtmxHttpRequest) -> HttpResponse:
    characters = Character.objects.owned_by(request.user).select_related("preview_bank").with_portrait_flag()
    return TemplateResponse(request, "chronicle/character_list.html", {"characters": characters})


@login_required
@require_GET
def character_portrait(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """The character's picture (from its card), for its writer only."""
    png = portrait_png(_owned(request, pk))
    if png is None:
        raise Http404("This character has no portrait.")
    response = HttpResponse(png, content_type="image/png")
    response["Cache-Control"] = "private, max-age=300"
    return response


def _form_page(request: HtmxHttpRequest, form: CharacterForm, character: Character | None, status: int = 200):
    others = Character.objects.owned_by(request.user).values_list("name", flat=True)
    if character is not None:
        others = others.exclude(pk=character.pk)
    validate_url = (reverse("character_validate", args=[character.pk]) if character
                    else reverse("character_validate_new"))
    return TemplateResponse(request, "chronicle/character_form.html", {
        "form": form, "character": character, "list_fields": (*LIST_FIELDS, "secrets", "alternate_greetings", "card_tags"),
        "has_portrait": character is not None and Portrait.objects.filter(character=character).exists(),
        "other_names": list(others),
        "validate_url": validate_url, "character_name": character.name if character else "",
    }, status=status)


def _save(request: HtmxHttpRequest, form: CharacterForm, character: Character | None) -> HttpResponse:
    try:
        if character is None:
            character = create_character(owner=request.user, data=form.cleaned_data)
        else:
            character = character_update(character=character, data=form.cleaned_data)
    except ValidationError as exc:  # e.g. a name taken between validation and save
        form.add_error(None, exc)
        return _form_page(request, form, character, status=400)
    if form.cleaned_data.get("portrait"):
        portrait_set(character=character, png=form.cleaned_data["portrait"])
    elif form.cleaned_data.get("remove_portrait"):
        portrait_set(character=character, png=None)
    messages.success(request, f"Saved {character.name}.")
    return redirect("character_detail", pk=character.pk)


@login_required
@require_http_methods(["GET", "POST"])
def character_create(request: HtmxHttpRequest) -> HttpResponse:
    form = CharacterForm(request.POST or None, request.FILES or None, owner=request.user)
    if request.method == "POST" and form.is_valid():
        return _save(request, form, None)
    return _form_page(request, form, None, status=400 if form.is_bound else 200)


@login_required
@require_http_methods(["GET", "POST"])
def character_edit(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    character = _owned(request, pk)
    form = CharacterForm(request.POST or None, request.FILES or None, instance=character, owner=request.user)
    if request.method == "POST" and form.is_valid():
        return _save(request, form, character)
    return _form_page(request, form, character, status=400 if form.is_bound else 200)


@login_required
@require_POST
def character_validate(request: HtmxHttpRequest, pk: int | None = None) -> HttpResponse:
    character = _owned(request, pk) if pk is not None else None
    return field_errors_response(request, CharacterForm(request.POST, instance=character, owner=request.user))


def _preview_context(character: Character) -> dict:
    bank = character.preview_bank
    done = bank is not None and bank.seed_status == "done"
    return {"character": character, "bank": bank, "has_portrait": Portrait.objects.filter(character=character).exists(),
            "groups": preview_groups(bank=bank, agent=character.name) if done else []}


@login_required
@require_GET
def character_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    character = _owned(request, pk)
    return TemplateResponse(request, "chronicle/character_detail.html", _preview_context(character))


@login_required
@require_http_methods(["GET", "POST"])
@vary_on_htmx
def character_preview(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """GET: the preview section (polled while seeding). POST (retry/reseed): seed again."""
    character = _owned(request, pk)
    if request.method == "POST":
        character_request_preview(character=character)
        character.refresh_from_db()
        if not request.htmx:
            return redirect("character_detail", pk=character.pk)
    return preview_response(request, "chronicle/character_detail.html#preview", _preview_context(character))


@login_required
@require_GET
@vary_on_htmx
def character_ask(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Ask as the character: the preview memories a question retrieves, ranked with their scores, and
    beside them the character's answer in its own voice, citing them (the default provider; offline,
    the scripted answer). A provider that fails says why; the ranked memories are shown all the same."""
    character = _owned(request, pk)
    query = request.GET.get("q", "").strip()[:500]
    results, error, answer = [], "", None
    bank = character.preview_bank
    if query and bank is not None:
        # A pure read: asking from the authoring page changes no access count.
        results = recollection.recall(bank, query, agent=character.name, k=ASK_K)
        answer = ask(agent=character.name, question=query, memories=[r.memory for r in results],
                     provider=writer_provider(request.user))
    elif query:
        error = "This character has no preview memories yet; save it to seed them."
    # The Ask section lives in its own include; htmx asks for its results partial.
    template = "chronicle/_ask.html#ask-results" if request.htmx else "chronicle/character_detail.html"
    return TemplateResponse(request, template, {**_preview_context(character), "query": query, "answer": answer,
                                                "results": results, "ask_error": error, "asked": True})


@login_required
@require_http_methods(["GET", "POST"])
def character_delete(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    character = _owned(request, pk)
    if request.method == "POST":
        name = character.name
        delete_character(character=character)
        messages.success(request, f"Deleted {name}.")
        return redirect("character_list")
    return TemplateResponse(request, "chronicle/character_delete.html", {"character": character})

"""The writer's pages: turn inspector, reading view, history, branches, exports, import (the memory
bank's pages are in bank_views.py, which shares this module's lookups and the inspector's context).

Every lookup starts from `Simulation.objects.owned_by(request.user)`: another writer gets a 404.
"""

from __future__ import annotations


from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from chronicle.simulation.pages import line_pages
from chronicle.simulation.run import costs
from chronicle.simulation.run import selectors as simulation_selectors
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.views.common import vary_on_htmx
from chronicle.writing import actions, export_stream, exports, selectors, services
from chronicle.writing.forms import ImportForm, LineOverrideForm, MemoryFormForm
from chronicle.writing.models import Edit
from memory.models import Memory


def _simulation(request: HttpRequest, pk: int) -> Simulation:
    return get_object_or_404(Simulation.objects.owned_by(request.user).select_related("bank", "parent"), pk=pk)


def _turn(simulation: Simulation, index: int) -> Turn:
    turn = selectors.turns_with_entries(simulation).filter(index=index).first()
    if turn is None:
        raise Http404("No such turn.")
    return turn


def _memory(simulation: Simulation, memory_id: int) -> Memory:
    if simulation.bank_id is None:
        raise Http404("No memory bank.")
    return get_object_or_404(Memory.objects.in_bank(simulation.bank), pk=memory_id)


def _errors(exc: ValidationError) -> str:
    return "; ".join(exc.messages)


def _next(request: HttpRequest, default: str) -> str:
    """Where a form sends the writer back: a path on this site only (never an outside address)."""
    url = request.POST.get("next") or ""
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure()):
        return url
    return default


# --- turn inspector -------------------------------------------------------------------------

def _inspector_context(request, simulation: Simulation, turn: Turn, *, form: MemoryFormForm | None = None,
                       line_form: LineOverrideForm | None = None) -> dict:
    overrides = selectors.inspector_overrides(simulation, turn.index, turn.agent)
    query = request.GET.get("q", "").strip()[:500]
    search_results = selectors.turn_search(simulation, turn, query)
    selectors.mark_retrievals(simulation, turn)
    form = form or MemoryFormForm(simulation=simulation, initial={"agent": turn.agent})
    return {
        "simulation": simulation, "turn": turn, "excluded": overrides.excluded, "pinned_ids": overrides.pinned_ids,
        "pinned": overrides.pinned, "query": query, "search_results": search_results,
        # "Ask as" the agent: its answer from the memories the search found, with the run's provider
        "answer": actions.turn_ask(simulation=simulation, turn=turn, question=query, rows=search_results)
        if query and request.GET.get("ask") else None,
        # a refused hand-written line: show what the writer typed, with the error
        "line_override": line_form.data.get("line", "") if line_form is not None else overrides.line,
        "form": form, "reach_warning": _reach_warning(simulation, form),
        "line_form": line_form,
        "history": selectors.history(simulation).filter(target_id=turn.pk).exclude(target_type="memory")[:20],
        "can_regenerate": not simulation.is_live and turn.status in (Turn.Status.DONE, Turn.Status.FAILED),
        "turn_cost": costs.cost(simulation, prompt=turn.prompt_tokens, completion=turn.completion_tokens,
                                side=simulation_selectors.side_tokens(turn)),
    }


def _reach_warning(simulation: Simulation, form: MemoryFormForm) -> str:
    """The warning for the form's kind and owner as they stand (typed, or the initial ones)."""
    kind = form["kind"].value() or "semantic"
    agent = form["agent"].value() or ""
    return selectors.reach(simulation).warning(kind, agent)


@login_required
@require_GET
@vary_on_htmx
def turn_inspect(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """The one page of a turn. htmx asks for a part: the search results (`q`), or else the side panel
    of the run page (what the agent read and why; the writer's tools stay on this page)."""
    simulation = _simulation(request, pk)
    turn = _turn(simulation, index)
    template = "chronicle/writing/turn_inspect.html"
    if request.htmx and request.GET.get("q") is not None:
        template += "#search"
    elif request.htmx:
        selectors.mark_retrievals(simulation, turn)
        return TemplateResponse(request, template + "#turn-panel", {"simulation": simulation, "turn": turn,
                                                                    "panel": True})
    return TemplateResponse(request, template, _inspector_context(request, simulation, turn))


@login_required
@require_POST
@vary_on_htmx
def turn_override(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """Exclude / pin a memory on this turn (htmx: returns its row), or set the hand-written line."""
    simulation = _simulation(request, pk)
    turn = _turn(simulation, index)
    if "line" in request.POST:
        return _line_override(request, simulation, turn)
    refusal = ""
    try:
        memory = _memory(simulation, int(request.POST.get("memory_id", "")))
        services.override_toggle(turn=turn, kind=request.POST.get("kind", ""), memory_id=memory.pk,
                                 actor=request.user, on=request.POST.get("on") == "1")
    except services.PinRefused as exc:  # the writer reads why, next to the memory
        refusal = str(exc)
    except (ValueError, services.WritingError) as exc:
        raise Http404(str(exc)) from exc
    if not request.htmx:
        if refusal:
            messages.error(request, refusal)
        return redirect("turn_inspect", pk=pk, index=index)
    # htmx swaps only 2xx answers (its default responseHandling): the row with the refusal comes back as 200.
    retrieval_id = request.POST.get("retrieval")
    row = "chronicle/writing/_memory_row.html"
    html = render_to_string(row, selectors.override_row(simulation=simulation, turn=turn, memory=memory,
                                                        retrieval_id=retrieval_id) | {"pin_error": refusal},
                            request=request)
    if refusal:
        return HttpResponse(html)
    # The same memory under the turn's other searches reads the same (out of band, by row id; a <tr>
    # travels inside a <template>, which htmx unwraps).
    for other in selectors.other_retrievals_with(turn, memory, retrieval_id):
        context = selectors.override_row(simulation=simulation, turn=turn, memory=memory, retrieval_id=other)
        html += f"<template>{render_to_string(row, context | {'oob': True}, request=request)}</template>"
    return trigger_client_event(HttpResponse(html), "overrides-changed")


LINE_OVERRIDE_SAID = {
    "saved": "Hand-written line saved: regenerate from this turn to use it.",
    "removed": "Hand-written line removed: regenerating from this turn asks the model for the line again.",
    "unchanged": "That is the hand-written line already: regenerate from this turn to use it.",
    "empty": "Nothing to save: write the line you want in the box first.",
}


def _line_override(request: HttpRequest, simulation: Simulation, turn: Turn) -> HttpResponse:
    line_form = LineOverrideForm(request.POST)
    if not line_form.is_valid():  # the page again, with the error and the typed line (nothing cut)
        return TemplateResponse(request, "chronicle/writing/turn_inspect.html",
                                _inspector_context(request, simulation, turn, line_form=line_form), status=400)
    done = services.line_override_set(turn=turn, text=line_form.cleaned_data["line"], actor=request.user)
    (messages.success if done in ("saved", "removed") else messages.warning)(request, LINE_OVERRIDE_SAID[done])
    return redirect("turn_inspect", pk=simulation.pk, index=turn.index)


@login_required
@require_POST
@vary_on_htmx
def turn_regenerate(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    try:
        branch = services.simulation_branch(parent=simulation, index=index, actor=request.user)
    except services.WritingError as exc:
        messages.error(request, str(exc))
        return redirect("turn_inspect", pk=pk, index=index)
    messages.success(request, f"Regenerating from turn {index + 1} in a new branch.")
    if request.htmx:
        return HttpResponseClientRedirect(branch.get_absolute_url())
    return redirect(branch)


@login_required
@require_POST
def replay_undistorted(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    try:
        branch = services.simulation_replay_undistorted(parent=simulation, actor=request.user)
    except services.WritingError as exc:
        messages.error(request, str(exc))
        return redirect(simulation)
    messages.success(request, "Replaying the run without its distortion filters, in a new branch.")
    return redirect(branch)


# --- the chronicle --------------------------------------------------------------------------

def _review_context(request: HttpRequest, simulation: Simulation, draft: dict | None = None) -> dict:
    # One page of lines, from the first (a chronicle reads from the start); a refused edit shows its own.
    params = {"turn": draft["index"] + 1} if draft else request.GET
    page = line_pages.line_page(simulation, params, latest=False)
    rows = [(t, selectors.entry_text(t), selectors.entry_for(t))
            for t in page.of(selectors.lines_with_entries(simulation))]
    # The stage directions between the lines, as the exports have them.
    simulation_selectors.attach_stage(simulation, [t for t, _text, _entry in rows])
    return {"simulation": simulation, "rows": rows, "draft": draft, "page": page,
            "tree": simulation_selectors.branch_tree(simulation, request.user)}


@login_required
@require_GET
def chronicle_review(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    if request.GET.get("turn"):  # "Go to turn N": its page, at its line
        page = line_pages.line_page(simulation, request.GET, latest=False)
        return redirect(f"{reverse('chronicle_review', args=[pk])}?page={page.number}#line-{page.turn_index(request.GET)}")
    return TemplateResponse(request, "chronicle/writing/chronicle_review.html", _review_context(request, simulation))


@login_required
@require_POST
@vary_on_htmx
def line_update(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """Inline edit of one line: text, annotation, star, strike; answers with the line's row."""
    simulation = _simulation(request, pk)
    turn = _turn(simulation, index)
    if turn.status != Turn.Status.DONE:
        raise Http404("Only a finished line can be edited.")
    try:
        actions.line_edit(turn=turn, actor=request.user, data=request.POST)
        draft = None
    except ValidationError as exc:  # the row keeps what the writer typed, its editor open, next to the error
        draft = {"index": index, "error": _errors(exc), "text": request.POST.get("text"),
                 "annotation": request.POST.get("annotation")}
    if not request.htmx and draft:
        return TemplateResponse(request, "chronicle/writing/chronicle_review.html",
                                _review_context(request, simulation, draft), status=400)
    if not request.htmx:
        page = line_pages.page_at(index + 1, {"turn": index + 1}, latest=False)
        return redirect(reverse("chronicle_review", args=[pk]) + f"?page={page.number}#line-{index}")
    # htmx swaps only 2xx answers (its default responseHandling): the row with the error comes back as 200.
    turn = _turn(simulation, index)
    return TemplateResponse(request, "chronicle/writing/chronicle_review.html#line-row", {
        "simulation": simulation, "turn": turn, "text": selectors.entry_text(turn),
        "entry": selectors.entry_for(turn), "draft": draft})


@login_required
@require_GET
def edit_history(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's edits, newest first; `?memory=<id>`: one memory's (the inspector links there)."""
    simulation = _simulation(request, pk)
    try:
        memory_id = int(request.GET.get("memory") or 0) or None
    except ValueError:
        memory_id = None
    edits = selectors.history(simulation, target_type=Edit.Target.MEMORY, target_id=memory_id) if memory_id \
        else selectors.history(simulation)
    return TemplateResponse(request, "chronicle/writing/edit_history.html",
                            {"simulation": simulation, "edits": edits[:500], "memory_id": memory_id})


@login_required
@require_POST
def edit_undo(request: HttpRequest, pk: int, edit_id: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    edit = get_object_or_404(Edit.objects.for_simulation(simulation), pk=edit_id)
    if edit.field == "regenerate":
        messages.error(request, "A branch is not undone: it stays in the tree.")
    else:
        try:
            services.edit_undo(edit=edit, actor=request.user)
            messages.success(request, f"Undone: {edit.label} {edit.field}.")
        except (ValidationError, Turn.DoesNotExist, Memory.DoesNotExist) as exc:
            messages.error(request, f"Could not undo: {exc}")
    return redirect(_next(request, reverse("chronicle_history", args=[pk])))


@login_required
@require_GET
def branch_compare(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    tree = simulation_selectors.branch_tree(simulation, request.user)
    # Only its relatives (the same tree): an unrelated run shares no turns worth aligning.
    relatives = {run.pk: run for run in tree.runs() if run.pk != simulation.pk}
    other_id = request.GET.get("other") or simulation.parent_id or next(iter(relatives), None)
    try:
        other = relatives[int(other_id)] if other_id else None
    except (KeyError, ValueError) as exc:
        raise Http404("Not a branch of this run.") from exc
    # A page of aligned lines at a time, over the longer run's turns: unless asked, the page where a
    # branch parts from its parent (the lines before it are the same).
    params = request.GET
    if other is not None and not (params.get("page") or params.get("turn")):
        child = simulation if simulation.parent_id == other.pk else other if other.parent_id == simulation.pk else None
        params = {"turn": (child.branch_turn or 0) + 1} if child is not None else params
    page = line_pages.page_at(max(_lines(simulation), _lines(other) if other else 0), params, latest=False)
    return TemplateResponse(request, "chronicle/writing/branch_compare.html", {
        "simulation": simulation, "other": other, "tree": tree, "choices": list(relatives.values()), "page": page,
        "rows": selectors.compare(simulation, other, page) if other else []})


def _lines(simulation: Simulation) -> int:
    return line_pages.line_page(simulation, {}).lines


# --- export / import ------------------------------------------------------------------------

EXPORTS = {  # the JSON export is streamed as it is read (a long run's is tens of MB)
    "md": (exports.to_markdown, "text/markdown; charset=utf-8"),
    "fountain": (exports.to_fountain, "text/plain; charset=utf-8"),
    "json": (export_stream.json_chunks, "application/json"),
}


@login_required
@require_GET
def chronicle_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    simulation = _simulation(request, pk)
    if fmt not in EXPORTS:
        raise Http404("Unknown export format.")
    render, content_type = EXPORTS[fmt]
    body = render(simulation)
    response = (HttpResponse if isinstance(body, str) else StreamingHttpResponse)(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{exports.filename(simulation, fmt)}"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def simulation_import(request: HttpRequest) -> HttpResponse:
    """Like the card importer: all or nothing, and a refused file answers 400 with the reason."""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            simulation = actions.simulation_import_file(owner=request.user, upload=form.cleaned_data["file"])
        except ValidationError as exc:
            form.add_error("file", _errors(exc))
        else:
            messages.success(request, "Imported. Its memory bank is being rebuilt in the background.")
            return redirect(simulation)
    return TemplateResponse(request, "chronicle/writing/simulation_import.html", {"form": form},
                            status=400 if form.errors else 200)

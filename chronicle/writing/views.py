"""The writer's pages: turn inspector, memories, reading view, history, branches, exports, import.

Every lookup starts from `Simulation.objects.owned_by(request.user)`: another writer gets a 404.
"""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import Resolver404, resolve, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from chronicle.simulation.models import Simulation, Turn
from chronicle.views.common import vary_on_htmx
from chronicle.writing import exports, selectors, services
from chronicle.writing.forms import ImportForm, LineForm, LineOverrideForm, MemoryEditForm, MemoryFormForm
from chronicle.writing.models import Edit, TurnOverride
from memory.models import Memory

SEARCH_K = 10


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


def _form_errors(form) -> str:
    return "; ".join(e for errs in form.errors.values() for e in errs)


def _next(request: HttpRequest, default: str) -> str:
    """Where a form sends the writer back: a path on this site only (never an outside address)."""
    url = request.POST.get("next") or ""
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure()):
        return url
    return default


# --- turn inspector -------------------------------------------------------------------------

def _snapshot(memory: Memory) -> dict:
    return {"memory_id": memory.pk, "content": memory.content, "agent": memory.agent, "kind": memory.kind,
            "category": memory.category, "turn": memory.turn, "speaker": memory.speaker, "status": memory.status}


def _search(simulation: Simulation, query: str, agent: str | None = None) -> list[dict]:
    from memory.retrieval import MemoryFilter, recall

    if not query or simulation.bank_id is None:
        return []
    # One query vector for an interactive search (STYLE.md allows this one in a request).
    results = recall(simulation.bank, query, filter=MemoryFilter(agent=agent) if agent else None, k=SEARCH_K,
                     touch=False)
    return [r.snapshot() for r in results]


def _inspector_context(request, simulation: Simulation, turn: Turn, *, form: MemoryFormForm | None = None,
                       line_form: LineOverrideForm | None = None) -> dict:
    overrides = list(TurnOverride.objects.at(simulation, turn.index))
    excluded = {o.memory_id for o in overrides if o.kind == TurnOverride.Kind.EXCLUDE}
    pinned = [o for o in overrides if o.kind == TurnOverride.Kind.PIN]
    line = next((o.content for o in overrides if o.kind == TurnOverride.Kind.LINE), "")
    if line_form is not None:  # a refused hand-written line: show what the writer typed, with the error
        line = line_form.data.get("line", "")
    query = request.GET.get("q", "").strip()
    return {
        "simulation": simulation, "turn": turn, "excluded": excluded, "pinned_ids": {o.memory_id for o in pinned},
        "pinned": pinned, "line_override": line, "query": query,
        "search_results": _search(simulation, query, request.GET.get("agent") or None),
        "form": form or MemoryFormForm(simulation=simulation, initial={"agent": turn.agent}),
        "line_form": line_form,
        "history": selectors.history(simulation).filter(target_id=turn.pk).exclude(target_type="memory")[:20],
        "can_regenerate": not simulation.is_live and turn.status in (Turn.Status.DONE, Turn.Status.FAILED),
    }


@login_required
@require_GET
@vary_on_htmx
def turn_inspect(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    turn = _turn(simulation, index)
    template = "chronicle/writing/turn_inspect.html"
    if request.htmx and request.GET.get("q") is not None:
        template += "#search"
    return TemplateResponse(request, template, _inspector_context(request, simulation, turn))


@login_required
@require_POST
@vary_on_htmx
def turn_override(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """Exclude / pin a memory on this turn (returns its row), or set the hand-written line."""
    simulation = _simulation(request, pk)
    turn = _turn(simulation, index)
    if "line" in request.POST:
        line_form = LineOverrideForm(request.POST)
        if not line_form.is_valid():  # the page again, with the error and the typed line (nothing cut)
            return TemplateResponse(request, "chronicle/writing/turn_inspect.html",
                                    _inspector_context(request, simulation, turn, line_form=line_form), status=400)
        services.line_override_set(turn=turn, text=line_form.cleaned_data["line"], actor=request.user)
        messages.success(request, "Hand-written line saved: regenerate from this turn to use it.")
        return redirect("turn_inspect", pk=pk, index=index)
    kind = request.POST.get("kind", "")
    try:
        memory = _memory(simulation, int(request.POST.get("memory_id", "")))
        services.override_toggle(turn=turn, kind=kind, memory_id=memory.pk, actor=request.user,
                                 on=request.POST.get("on") == "1")
    except (ValueError, services.WritingError) as exc:
        raise Http404(str(exc)) from exc
    if not request.htmx:
        return redirect("turn_inspect", pk=pk, index=index)
    row = _snapshot(memory)
    retrieval = turn.retrievals.filter(pk=request.POST.get("retrieval") or 0).first()
    if retrieval:
        row = next((r for r in retrieval.results if r.get("memory_id") == memory.pk), row)
    ids: dict[str, set] = {}
    for o in TurnOverride.objects.at(simulation, index):
        ids.setdefault(o.kind, set()).add(o.memory_id)
    response = TemplateResponse(request, "chronicle/writing/_memory_row.html", {
        "simulation": simulation, "turn": turn, "r": row, "retrieval": retrieval,
        "excluded": ids.get("exclude", set()), "pinned_ids": ids.get("pin", set())})
    return trigger_client_event(response, "overrides-changed")


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


# --- memories -------------------------------------------------------------------------------

def _memory_list_context(request: HttpRequest, simulation: Simulation, *, form: MemoryFormForm | None = None,
                         draft: dict | None = None) -> dict:
    """The memory bank page; `draft` is a refused edit of one card (its error and what was typed)."""
    query = request.GET.get("q", "").strip()
    agent = request.GET.get("agent", "")
    memories = Memory.objects.in_bank(simulation.bank).active() if simulation.bank_id else Memory.objects.none()
    if agent:
        memories = memories.for_agent("" if agent == "(shared)" else agent)
    found = _search(simulation, query, agent if agent and agent != "(shared)" else None)
    if found:
        order = [r["memory_id"] for r in found]
        by_id = {m.pk: m for m in memories.filter(pk__in=order)}
        memories = [by_id[i] for i in order if i in by_id]
    elif query:
        memories = []
    else:
        memories = list(memories.order_by("agent", "turn", "id")[:300])
    if draft and all(m.pk != draft["memory"].pk for m in memories):
        memories = [draft["memory"], *memories]  # the card with the error is on the page, whatever the list
    return {"simulation": simulation, "memories": memories, "query": query, "agent": agent,
            "form": form or MemoryFormForm(simulation=simulation), "draft": draft}


@login_required
@require_GET
def memory_list(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    return TemplateResponse(request, "chronicle/writing/memory_list.html", _memory_list_context(request, simulation))


@login_required
@require_POST
@vary_on_htmx
def memory_update(request: HttpRequest, pk: int, memory_id: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    memory = _memory(simulation, memory_id)
    error = ""
    if "archive" in request.POST:
        services.memory_archive_edit(simulation=simulation, memory=memory, actor=request.user)
    else:
        form = MemoryEditForm(request.POST)
        if form.is_valid():
            try:
                services.memory_edit(simulation=simulation, memory=memory, actor=request.user, **form.cleaned_data)
            except ValidationError as exc:
                error = _errors(exc)
        else:
            error = _form_errors(form)
    memory.refresh_from_db()
    # A refused edit keeps what the writer typed in the card, next to the error.
    draft = {"memory": memory, "error": error, **{k: request.POST.get(k, "") for k in ("content", "importance", "tags")}}
    if not request.htmx:
        if error:
            return TemplateResponse(request, "chronicle/writing/memory_list.html",
                                    _memory_list_context(request, simulation, draft=draft), status=400)
        return redirect(_next(request, reverse("chronicle_memories", args=[pk])))
    # htmx swaps only 2xx answers (its default responseHandling): the error card comes back as 200.
    response = TemplateResponse(request, "chronicle/writing/_memory_card.html",
                                {"simulation": simulation, "memory": memory, "draft": draft if error else None})
    return trigger_client_event(response, "memory-updated") if not error else response


@login_required
@require_POST
def memory_form(request: HttpRequest, pk: int) -> HttpResponse:
    """The writer forms a memory; it is embedded in a worker and appears in the bank shortly."""
    from chronicle.writing.tasks import form_memory_task

    simulation = _simulation(request, pk)
    form = MemoryFormForm(request.POST, simulation=simulation)
    next_url = _next(request, reverse("chronicle_memories", args=[pk]))
    if not form.is_valid():
        # The page the form was on again (400), with the field errors and everything typed.
        return TemplateResponse(request, *_memory_form_page(request, simulation, next_url, form), status=400)
    form_memory_task.delay_on_commit(simulation.pk, request.user.pk, form.cleaned_data)
    messages.success(request, "Memory written: it is being embedded and will be in the bank in a moment.")
    return redirect(next_url)


def _memory_form_page(request: HttpRequest, simulation: Simulation, next_url: str,
                      form: MemoryFormForm) -> tuple[str, dict]:
    """The turn inspector or the memory bank page (whichever `next` names), holding the refused form."""
    try:
        match = resolve(next_url.split("?")[0].split("#")[0])
    except Resolver404:
        match = None
    if match and match.url_name == "turn_inspect" and match.kwargs.get("pk") == simulation.pk:
        turn = _turn(simulation, match.kwargs["index"])
        return "chronicle/writing/turn_inspect.html", _inspector_context(request, simulation, turn, form=form)
    return "chronicle/writing/memory_list.html", _memory_list_context(request, simulation, form=form)


# --- the chronicle --------------------------------------------------------------------------

def _review_rows(simulation: Simulation):
    return [(t, selectors.entry_text(t), selectors.entry_for(t)) for t in selectors.turns_with_entries(simulation)]


@login_required
@require_GET
def chronicle_review(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    return TemplateResponse(request, "chronicle/writing/chronicle_review.html", {
        "simulation": simulation, "rows": _review_rows(simulation),
        "tree": selectors.branch_tree(simulation, request.user)})


@login_required
@require_POST
@vary_on_htmx
def line_update(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """Inline edit of one line: text, annotation, star, strike; answers with the line's row."""
    simulation = _simulation(request, pk)
    turn = _turn(simulation, index)
    if turn.status != Turn.Status.DONE:
        raise Http404("Only a finished line can be edited.")
    entry = selectors.entry_for(turn)
    changes: dict = {}
    error = ""
    if "star" in request.POST:
        changes["starred"] = not (entry and entry.starred)
    elif "strike" in request.POST:
        changes["struck"] = not (entry and entry.struck)
    else:
        form = LineForm(request.POST)
        if form.is_valid():
            changes = {k: v for k, v in form.cleaned_data.items() if k in request.POST}
        else:
            error = _form_errors(form)
    if not error:
        try:
            services.entry_update(turn=turn, actor=request.user, **changes)
        except ValidationError as exc:
            error = _errors(exc)
    # A refused edit keeps what the writer typed in the row's editor, open, next to the error.
    draft = {"index": index, "error": error, "text": request.POST.get("text"),
             "annotation": request.POST.get("annotation")} if error else None
    if not request.htmx:
        if error:
            return TemplateResponse(request, "chronicle/writing/chronicle_review.html", {
                "simulation": simulation, "rows": _review_rows(simulation), "draft": draft,
                "tree": selectors.branch_tree(simulation, request.user)}, status=400)
        return redirect(reverse("chronicle_review", args=[pk]) + f"#line-{index}")
    # htmx swaps only 2xx answers (its default responseHandling): the row with the error comes back as 200.
    turn = _turn(simulation, index)
    return TemplateResponse(request, "chronicle/writing/chronicle_review.html#line-row", {
        "simulation": simulation, "turn": turn, "text": selectors.entry_text(turn),
        "entry": selectors.entry_for(turn), "draft": draft})


@login_required
@require_GET
def edit_history(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    return TemplateResponse(request, "chronicle/writing/edit_history.html",
                            {"simulation": simulation, "edits": selectors.history(simulation)[:500]})


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
    tree = selectors.branch_tree(simulation, request.user)
    other_id = request.GET.get("other") or simulation.parent_id or (
        simulation.branches.values_list("pk", flat=True).first())
    other = get_object_or_404(Simulation.objects.owned_by(request.user), pk=other_id) if other_id else None
    return TemplateResponse(request, "chronicle/writing/branch_compare.html", {
        "simulation": simulation, "other": other, "tree": tree,
        "rows": selectors.compare(simulation, other) if other else [],
        "choices": Simulation.objects.owned_by(request.user).exclude(pk=simulation.pk).order_by("-created")[:100]})


# --- export / import ------------------------------------------------------------------------

EXPORTS = {
    "md": (exports.to_markdown, "text/markdown; charset=utf-8"),
    "fountain": (exports.to_fountain, "text/plain; charset=utf-8"),
    "json": (lambda s: json.dumps(exports.to_json(s), indent=2, ensure_ascii=False), "application/json"),
}


@login_required
@require_GET
def chronicle_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    simulation = _simulation(request, pk)
    if fmt not in EXPORTS:
        raise Http404("Unknown export format.")
    render, content_type = EXPORTS[fmt]
    response = HttpResponse(render(simulation), content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{exports.filename(simulation, fmt)}"'
    return response


@login_required
@require_http_methods(["GET", "POST"])
def simulation_import(request: HttpRequest) -> HttpResponse:
    """Like the card importer: all or nothing, and a refused file answers 400 with the reason."""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        upload = form.cleaned_data["file"]  # its size is checked by the form (WONDA_UPLOAD_LIMIT_MB), before reading
        try:
            data = json.loads(upload.read().decode("utf-8-sig"))
        except UnicodeDecodeError:
            form.add_error("file", "This is not a JSON file (it is not UTF-8 text).")
        except ValueError as exc:
            form.add_error("file", f"This is not a JSON file: {exc}")
        else:
            try:
                simulation = exports.simulation_import(owner=request.user, data=data)
            except ValidationError as exc:
                form.add_error("file", _errors(exc))
            else:
                messages.success(request, "Imported. Its memory bank is being rebuilt in the background.")
                return redirect(simulation)
    return TemplateResponse(request, "chronicle/writing/simulation_import.html", {"form": form},
                            status=400 if form.errors else 200)

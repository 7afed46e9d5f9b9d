"""The memory bank's pages: the bank (filters, cards, edits, forming and consolidating memories), a
memory's links, the memory map and the run's analytics.

Lookups go through chronicle.writing.views' helpers (owned_by: another writer gets a 404)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import Resolver404, resolve, reverse
from django.views.decorators.http import require_GET, require_POST
from django_htmx.http import trigger_client_event

from chronicle.simulation.aftermath.storage import storage_report
from chronicle.simulation.run.models import Simulation
from chronicle.templatetags.chronicle_tags import memory_link
from chronicle.views.common import vary_on_htmx
from chronicle.writing import actions, selectors
from chronicle.writing.analytics import analytics, memory_map
from chronicle.writing.forms import MemoryFormForm
from chronicle.writing.timeline import bank_timeline
# A refused memory form is shown again on the page it came from, the turn inspector included.
from chronicle.writing.views import _errors, _inspector_context, _memory, _next, _reach_warning, _simulation, _turn
from memory.models import Memory
from memory.api import banks


# --- memories -------------------------------------------------------------------------------

def _memory_list_context(request: HttpRequest, simulation: Simulation, *, form: MemoryFormForm | None = None,
                         draft: dict | None = None) -> dict:
    """The memory bank page, filtered and paged; `draft` is a refused edit of one card (its error and
    what was typed), shown first whatever the filters."""
    filters = selectors.BankFilters.from_request(request.GET)
    focus = request.GET.get("memory", "")
    # A refused edit's card, or the memory a link points to (map, analytics, evidence): first on page 1.
    first = draft["memory"].pk if draft else int(focus) if focus.isdigit() else None
    page = selectors.bank_card_page(simulation, filters, 1 if draft else request.GET.get("page"),
                                    size=selectors.BANK_PAGE_SIZE, first=first)
    if draft:
        holder = next((c for c in page.object_list if draft["memory"].pk in {m.pk for m in c.copies}), None)
        if holder is None:  # filtered out: shown all the same, with its error
            page.object_list = [selectors.BankCard(draft["memory"], [draft["memory"]]), *page.object_list]
        else:
            holder.memory = draft["memory"]  # the card shows the copy that was edited, with its error
    if first is not None and not draft:
        for card in page.object_list:  # the memory a link points to: highlighted, its editor open
            card.focused = first in {m.pk for m in card.copies}
    back = request.GET.get("from_turn", "")
    params = request.GET.copy()
    params.pop("page", None)
    form = form or MemoryFormForm(simulation=simulation)
    return {"simulation": simulation, "page": page, "cards": page.object_list, "filters": filters,
            "query": filters.query, "agent": filters.agent, "page_query": params.urlencode(),
            "kinds": Memory.Kind.values, "sources": Memory.Source.values, "statuses": Memory.Status.values,
            "form": form, "reach_warning": _reach_warning(simulation, form), "draft": draft,
            "timeline": bank_timeline(simulation, agent=filters.agent),
            "pruned": banks.pruned_count(simulation.bank) if simulation.bank_id else 0,
            "back_turn": int(back) if back.isdigit() and simulation.turns.filter(index=int(back)).exists() else None}


@login_required
@require_GET
def memory_list(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    return TemplateResponse(request, "chronicle/writing/memory_list.html", _memory_list_context(request, simulation))


@login_required
@require_GET
def simulation_analytics(request: HttpRequest, pk: int) -> HttpResponse:
    """The run's numbers as charts with their tables, for everyone or one agent (?agent=)."""
    simulation = _simulation(request, pk)
    data = analytics(simulation, agent=request.GET.get("agent", ""))
    # Seed 002's MemoryStats: the chosen agent's, or each of the cast's (offline themes: no model call on a page).
    stats = [banks.memory_stats(simulation.bank, name) for name in ([data.agent] if data.agent else simulation.cast_names)] \
        if simulation.bank_id else []
    return TemplateResponse(request, "chronicle/writing/analytics.html",
                            {"simulation": simulation, "data": data, "stats": stats, "bands": banks.IMPORTANCE_BANDS,
                             "storage": storage_report(simulation, agent=data.agent)})


@login_required
@require_GET
def bank_map(request: HttpRequest, pk: int) -> HttpResponse:
    """The memory map (memory.measuring.projection); htmx polls its part while a worker computes a big bank's."""
    simulation = _simulation(request, pk)
    colour = "kind" if request.GET.get("colour") == "kind" else "agent"
    agent = request.GET.get("agent", "") if request.GET.get("agent", "") in simulation.cast_names else ""
    kept, current = (None, True) if simulation.bank_id is None else banks.bank_map(
        simulation.bank_id, queue=banks.bank_map_request)
    drawn = memory_map(simulation, kept, colour=colour, agent=agent,
                       href=lambda row: memory_link(pk, row["pk"], row["agent"]))
    template = "chronicle/writing/bank_map.html" + ("#map" if request.htmx else "")
    return TemplateResponse(request, template, {"simulation": simulation, "map": drawn, "current": current,
                                                "computed": kept, "colour": colour, "agent": agent})


@login_required
def memory_links(request: HttpRequest, pk: int, memory_id: int) -> HttpResponse:
    """A memory's links as a small graph (loaded into its card when the writer opens "Links")."""
    simulation = _simulation(request, pk)
    memory = _memory(simulation, memory_id)
    return TemplateResponse(request, "chronicle/writing/_memory_links.html",
                            {"simulation": simulation, "memory": memory, "nodes": selectors.memory_links(memory),
                             "size": 320})


@login_required
@require_POST
@vary_on_htmx
def memory_update(request: HttpRequest, pk: int, memory_id: int) -> HttpResponse:
    simulation = _simulation(request, pk)
    memory = _memory(simulation, memory_id)
    try:
        actions.memory_change(simulation=simulation, memory=memory, actor=request.user, data=request.POST)
        error = ""
    except ValidationError as exc:
        error = _errors(exc)
    memory.refresh_from_db()
    # A refused edit keeps what the writer typed in the card, next to the error.
    draft = {"memory": memory, "error": error, **{k: request.POST.get(k, "") for k in ("content", "importance", "tags")}}
    card = selectors.BankCard(memory, selectors.line_copies(memory) if request.POST.get("all_copies") else [memory])
    if not request.htmx and error:
        return TemplateResponse(request, "chronicle/writing/memory_list.html",
                                _memory_list_context(request, simulation, draft=draft), status=400)
    if not request.htmx:
        return redirect(_next(request, reverse("chronicle_memories", args=[pk])))
    # htmx swaps only 2xx answers (its default responseHandling): the error card comes back as 200.
    response = TemplateResponse(request, "chronicle/writing/_memory_card.html",
                                {"simulation": simulation, "card": card, "memory": memory,
                                 "draft": draft if error else None, "saved": not error})
    return trigger_client_event(response, "memory-updated") if not error else response


@login_required
@require_POST
def memory_form(request: HttpRequest, pk: int) -> HttpResponse:
    """The writer forms a memory; it is embedded in a worker and appears in the bank shortly."""
    simulation = _simulation(request, pk)
    form = MemoryFormForm(request.POST, simulation=simulation)
    next_url = _next(request, reverse("chronicle_memories", args=[pk]))
    if not form.is_valid():
        # The page the form was on again (400), with the field errors and everything typed.
        return TemplateResponse(request, *_memory_form_page(request, simulation, next_url, form), status=400)
    actions.memory_form_request(simulation=simulation, actor=request.user, data=form.cleaned_data)
    messages.success(request, "Memory written: it is being embedded and will be in the bank in a moment.")
    warning = selectors.reach(simulation).warning(form.cleaned_data["kind"], form.cleaned_data["agent"])
    if warning:
        messages.warning(request, warning)
    return redirect(next_url)


@login_required
@require_POST
def memory_consolidate(request: HttpRequest, pk: int) -> HttpResponse:
    """Consolidate one agent's old memories now (synchronously: no model is loaded), then back to the bank."""
    simulation = _simulation(request, pk)
    try:
        said, made = actions.memory_consolidate(simulation=simulation, actor=request.user, data=request.POST)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
        return redirect(_next(request, reverse("chronicle_memories", args=[pk])))
    messages.success(request, said)
    if made:  # the summaries just made, each with what it rests on
        query = urlencode({"agent": request.POST.get("agent", ""), "source": "consolidation"})
        return redirect(f"{reverse('chronicle_memories', args=[pk])}?{query}")
    return redirect(_next(request, reverse("chronicle_memories", args=[pk])))


@login_required
@require_POST
def memory_prune(request: HttpRequest, pk: int) -> HttpResponse:
    """Prune the bank's faded memories now (or restore the pruned ones), then back to the bank."""
    simulation = _simulation(request, pk)
    try:
        said = actions.memories_prune(simulation=simulation, restore="restore" in request.POST)
    except ValidationError as exc:
        messages.error(request, _errors(exc))
    else:
        messages.success(request, said)
    return redirect(_next(request, reverse("chronicle_memories", args=[pk])))


@login_required
@require_GET
def memory_reach(request: HttpRequest, pk: int) -> HttpResponse:
    """The "Form a memory" warning for a kind and owner (htmx, as the writer picks them)."""
    simulation = _simulation(request, pk)
    warning = selectors.reach(simulation).warning(request.GET.get("kind", "semantic"), request.GET.get("agent", ""))
    return TemplateResponse(request, "chronicle/writing/_form_memory.html#reach-warning",
                            {"simulation": simulation, "reach_warning": warning})


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

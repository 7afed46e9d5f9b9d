"""Simulation pages: list, new, live page (with its controls); the old address of one turn.

One turn has one page, the writer's turn inspector (chronicle/writing/views.py `turn_inspect`); the live
page's side panel is that page's `turn-panel` partial. This package links to it by URL name only.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.cache import patch_vary_headers
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, HttpResponseStopPolling

from chronicle.models import Scenario
from chronicle.simulation.pages import line_pages, run_panels
from chronicle.simulation.control import seats, services, stage_edits
from chronicle.simulation.run import selectors
from chronicle.simulation.providers.connection import check_connection
from chronicle.simulation.pages.forms import LLMSettingsForm, ReplayForm, SimulationForm, carry_over, initial_from
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.run.run_settings import MAX_TURNS, NOT_INHERITED, SETTING_FIELDS

CONTROLS = {
    "pause": services.simulation_pause,
    "resume": services.simulation_resume,
    "cancel": services.simulation_cancel,
    "one_more": services.simulation_one_more_turn,
}


@login_required
@require_GET
def simulation_list(request: HttpRequest) -> HttpResponse:
    simulations = Simulation.objects.owned_by(request.user).select_related("scenario")
    return TemplateResponse(request, "chronicle/simulation_list.html", {"simulations": simulations})


@sensitive_post_parameters("api_key")  # never in an error report
@login_required
@require_http_methods(["GET", "POST"])
def simulation_create(request: HttpRequest) -> HttpResponse:
    form = SimulationForm(request.POST or None, owner=request.user, initial=_create_initial(request))
    if request.method == "POST" and form.is_valid():
        simulation = services.simulation_start(owner=request.user, scenario=form.cleaned_data["scenario"],
                                               cast=form.cleaned_data["cast"], settings=form.simulation_settings(),
                                               sequel_of=form.cleaned_data.get("sequel_of"))
        return redirect("simulation_detail", pk=simulation.pk)
    # A scenario chosen in the list (the cast is swapped in, the rest of the form stays as typed): its
    # own run settings are offered, not put over what the writer typed.
    chosen = form.chosen_scenario
    offer = chosen if request.htmx and chosen is not None and chosen.run_settings else None
    # What named the old cast goes with it (the planted beliefs, the distortions), said so.
    dropped = carry_over(form, request.GET) if request.htmx and request.method == "GET" else []
    return TemplateResponse(request, "chronicle/simulation_create.html",
                            {"form": form, "settings_offer": offer, "dropped_notes": dropped})


def _create_initial(request: HttpRequest) -> dict | None:
    """The new-run form's starting values: a scenario's own run settings ("Run this scenario"), or a
    finished run's settings for its sequel ("Start a sequel")."""
    scenario, sequel_of = request.GET.get("scenario", ""), request.GET.get("sequel_of", "")
    if sequel_of.isdigit():
        parent = get_object_or_404(Simulation.objects.owned_by(request.user), pk=sequel_of)
        settings = {name: getattr(parent, name) for name in SETTING_FIELDS if name not in NOT_INHERITED}
        return initial_from(settings) | {"scenario": parent.scenario_id, "sequel_of": parent.pk}
    if scenario.isdigit():
        chosen = Scenario.objects.owned_by(request.user).filter(pk=scenario).first()
        return initial_from(chosen.run_settings if chosen else {}) | {"scenario": scenario}
    # The scenario the form starts on (the first of the list) runs with its own settings too.
    first = Scenario.objects.owned_by(request.user).first()
    return initial_from(first.run_settings) | {"scenario": first.pk} if first and first.run_settings else None


@login_required
@require_POST
def simulation_test_connection(request: HttpRequest) -> HttpResponse:
    """"Test connection" beside the model settings: the server's models, one tiny reply, tool calling.
    A paused run's blank key field means its stored key (as saving the form would). "which":
    "bookkeeping" tests the bookkeeping model's fields instead of the run's model's."""
    which = "bookkeeping" if request.POST.get("which", request.POST.get("test_connection")) == "bookkeeping" else "model"
    prefix = "bookkeeping_" if which == "bookkeeping" else ""
    key = request.POST.get(f"{prefix}api_key", "")
    run = request.POST.get("simulation", "")
    if not key and run.isdigit():
        key = getattr(Simulation.objects.owned_by(request.user).filter(pk=run).first(), f"{prefix}api_key", "") or ""
    report = check_connection(base_url=request.POST.get(f"{prefix}base_url", ""),
                              model=request.POST.get(f"{prefix}model", "").strip(), api_key=key)
    template = "chronicle/simulation/_connection.html" if request.htmx else "chronicle/simulation/connection_page.html"
    return TemplateResponse(request, template, {"report": report, "which": which})


@login_required
@require_POST
def simulation_demo(request: HttpRequest) -> HttpResponse:
    try:
        simulation = services.demo_simulation_start(owner=request.user)
    except services.ControlError as exc:
        messages.error(request, str(exc))
        return redirect("simulation_list")
    if request.htmx:
        return HttpResponseClientRedirect(simulation.get_absolute_url())
    return redirect(simulation)


def page_context(simulation: Simulation, llm_form: LLMSettingsForm | None = None, *, poll: bool = False,
                 params=None) -> dict:
    """The run page, or (poll) only what its 2 s poll swaps (the branch tree, outside `#live`, is added
    out of band by simulation_detail when the run has one). One page of lines (`params`: ?page=, ?turn=;
    else the latest); the figures are the whole run's, counted in SQL."""
    page = line_pages.line_page(simulation, params or {})
    turns = list(selectors.turns_for_page(simulation, page))
    turns = selectors.attach_stage(simulation, selectors.attach_reflections(simulation, turns))
    figures = line_pages.run_figures(simulation)
    if llm_form is None and simulation.status in (Simulation.Status.PAUSED, Simulation.Status.FAILED):
        llm_form = LLMSettingsForm(instance=simulation)
    context = {"simulation": simulation, "turns": turns, "page": page, "tokens": line_pages.run_tokens(simulation),
               "beliefs": run_panels.beliefs_as_shown(run_panels.who_believes(simulation, shown=run_panels.HISTORY_SHOWN))
               if simulation.planted_beliefs else [],
               "progress": selectors.progress(simulation, figures), "llm_form": llm_form,
               "replay_form": ReplayForm(instance=simulation) if simulation.is_finished and page.lines else None,
               "seat": seats.seat_view(simulation) if simulation.status == Simulation.Status.RUNNING else None,
               "upcoming": selectors.upcoming_stage(simulation, turns) if page.is_latest else []}
    context["portraits"] = selectors.cast_portraits(simulation)
    if not poll:
        context["tree"] = selectors.branch_tree(simulation, simulation.owner)
        context["relationships"] = run_panels.relationship_charts(simulation)
    return context


@login_required
@require_http_methods(["GET", "POST"])
def simulation_detail(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = get_object_or_404(Simulation.objects.owned_by(request.user).select_related("bank", "parent"), pk=pk)
    if request.method == "POST":
        return _control(request, simulation)
    if not request.htmx and request.GET.get("turn"):
        # "Go to turn N": the page that holds it, scrolled to the line (an address that stays right).
        page = line_pages.line_page(simulation, request.GET)
        return redirect(f"{simulation.get_absolute_url()}?page={page.number}#turn-{page.turn_index(request.GET)}")
    if request.htmx:
        context = page_context(simulation, poll=True, params=request.GET)
        html = render_to_string("chronicle/simulation_detail.html#live", context, request=request)
        if simulation.parent_id or simulation.branches.exists():
            # The branch tree sits outside the polled region: sent along out of band, so a branch
            # that finished (or this run's own status) reads right without a reload.
            tree = selectors.branch_tree(simulation, simulation.owner)
            html += render_to_string("chronicle/simulation_detail.html#branches",
                                     context | {"tree": tree, "oob": True}, request=request)
        if context["seat"] is not None:
            # The writer's turn came: what the seated character would be given fills the side panel.
            html += render_to_string("chronicle/simulation_detail.html#side", context | {"oob": True}, request=request)
        # 286 once the run is over (and its insights are in): htmx swaps this last version and stops polling.
        response = HttpResponse(html) if simulation.polls else HttpResponseStopPolling(html)
    else:
        response = TemplateResponse(request, "chronicle/simulation_detail.html",
                                    page_context(simulation, params=request.GET))
    # The polled fragment and the page share a URL: without this, Back can show the bare fragment.
    patch_vary_headers(response, ("HX-Request",))
    return response


def _control(request: HttpRequest, simulation: Simulation) -> HttpResponse:
    """The run page's buttons, told apart by name: pause, resume, cancel, one more turn."""
    if "more" in request.POST or "until_paused" in request.POST:
        try:
            turns = None if "until_paused" in request.POST else int(request.POST.get("turns") or "")
            services.simulation_more_turns(simulation=simulation, turns=turns)
            if turns is None:  # the turn limit is raised: said, not silent
                messages.info(request, f"Running until you pause: press Pause when you have read enough "
                                       f"(it stops by itself at {MAX_TURNS:,} turns"
                                       f"{', a line every few seconds in a dry run' if simulation.is_dry_run else ''}).")
        except ValueError:
            messages.error(request, "Say how many more turns to run: a whole number.")
        except services.ControlError as exc:
            messages.error(request, str(exc))
        return redirect(simulation)
    action = next((name for name in CONTROLS if name in request.POST), None)
    if action is None:
        messages.error(request, "Unknown action.")
    else:
        try:
            CONTROLS[action](simulation=simulation)
        except services.ControlError as exc:
            messages.error(request, str(exc))
    return redirect(simulation)


@login_required
@require_http_methods(["GET", "POST"])
def simulation_delete(request: HttpRequest, pk: int) -> HttpResponse:
    """Asks first (GET), then deletes the run and its memory bank (POST)."""
    simulation = get_object_or_404(Simulation.objects.owned_by(request.user).select_related("bank"), pk=pk)
    if request.method == "POST":
        title = str(simulation)
        try:
            services.simulation_delete(simulation=simulation)
        except services.ControlError as exc:
            messages.error(request, str(exc))
            return redirect(simulation)
        messages.success(request, f"Deleted {title}.")
        return redirect("simulation_list")
    return TemplateResponse(request, "chronicle/simulation_delete.html", {
        "simulation": simulation, "turns": simulation.turns.count(), "branches": simulation.branches.count(),
        "memories": simulation.bank.memories.count() if simulation.bank_id else 0})


@sensitive_post_parameters("api_key")
@login_required
@require_POST
def simulation_llm(request: HttpRequest, pk: int) -> HttpResponse:
    """Save a paused run's model settings; errors re-show the run page with the form and what was typed."""
    simulation = get_object_or_404(Simulation.objects.owned_by(request.user).select_related("bank", "parent"), pk=pk)
    form = LLMSettingsForm(request.POST, instance=Simulation.objects.get(pk=simulation.pk))
    if form.is_valid():
        try:
            simulation = services.simulation_llm_update(simulation=simulation, settings=form.llm_settings())
        except services.ControlError as exc:
            messages.error(request, str(exc))
        else:
            where = "the scripted provider" if simulation.is_dry_run else f"{simulation.model} at {simulation.base_url}"
            messages.success(request, f"Model settings saved: {where}. Resume to go on with them.")
        return redirect(simulation)
    simulation.refresh_from_db()
    response = TemplateResponse(request, "chronicle/simulation_detail.html", page_context(simulation, form), status=400)
    return response


@login_required
@require_POST
def simulation_stage(request: HttpRequest, pk: int) -> HttpResponse:
    """Save a paused or finished run's stage directions, or take one back ("undo": its line)."""
    simulation = get_object_or_404(Simulation.objects.owned_by(request.user), pk=pk)
    try:
        if "undo" in request.POST:
            stage_edits.stage_direction_undo(simulation=simulation, line=request.POST["undo"])
            messages.success(request, f"Taken back: {request.POST['undo']}. The next turns run without it.")
        else:
            stage_edits.stage_directions_update(simulation=simulation, text=request.POST.get("stage_directions", ""))
            messages.success(request, "Stage directions saved: the next turns follow them.")
    except services.ControlError as exc:
        messages.error(request, str(exc))
    return redirect(simulation)


@login_required
@require_GET
@vary_on_headers("HX-Request")
def turn_detail(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """The old address of a turn (bookmarks): the page is the turn inspector now. htmx gets the
    inspector's side panel here (no redirect round trip); a browser is sent to the inspector."""
    simulation = get_object_or_404(Simulation.objects.owned_by(request.user), pk=pk)
    turn = selectors.turn_with_retrievals(simulation, index)
    if turn is None:
        raise Http404("No such turn.")
    if request.htmx:
        return TemplateResponse(request, "chronicle/writing/turn_inspect.html#turn-panel",
                                {"simulation": simulation, "turn": turn, "panel": True})
    query = request.GET.urlencode()
    return redirect(reverse("turn_inspect", args=[pk, index]) + (f"?{query}" if query else ""))


@login_required
@require_POST
def simulation_replay(request: HttpRequest, pk: int) -> HttpResponse:
    """Replay a finished run's lines under other memory settings: a new run, at no model cost."""
    source = get_object_or_404(Simulation.objects.owned_by(request.user), pk=pk)
    form = ReplayForm(request.POST, instance=Simulation(cast_snapshot=source.cast_snapshot))
    if not form.is_valid():
        problems = "; ".join(f"{form.fields[name].label if name in form.fields else name}: {' '.join(errors)}"
                             for name, errors in form.errors.items())
        messages.error(request, f"The replay was not started: {problems}")
        return redirect(source)
    try:
        run = services.simulation_replay(source=source, changes={name: form.cleaned_data[name] for name in form.Meta.fields})
    except services.ControlError as exc:
        messages.error(request, str(exc))
        return redirect(source)
    return redirect(run)

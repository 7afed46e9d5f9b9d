"""The writer's seat on the run page: take or leave a character's seat, say its line, search its
memories, ask the model for a suggestion. Each works as a plain form post; with htmx, only the part
that changed is swapped."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.views.decorators.http import require_GET, require_POST

from chronicle.simulation.control import seats
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.pages.views import page_context


def _owned(request: HttpRequest, pk: int) -> Simulation:
    # Another writer's run (and so its seat) is a 404, as every run page is.
    return get_object_or_404(Simulation.objects.owned_by(request.user).select_related("bank", "parent"), pk=pk)


def _page(request: HttpRequest, simulation: Simulation, **extra) -> HttpResponse:
    return TemplateResponse(request, "chronicle/simulation_detail.html", page_context(simulation) | extra)


@login_required
@require_POST
def seat_change(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _owned(request, pk)
    agent = request.POST.get("agent", "")
    take = "take" in request.POST
    try:
        seats.seat_change(simulation=simulation, agent=agent, take=take)
    except seats.SeatError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"You play {agent} from their next turn." if take else
                         f"{agent} is played by the agent again.")
    return redirect(simulation)


@login_required
@require_POST
def seat_line(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _owned(request, pk)
    try:
        seats.seat_speak(simulation=simulation, line=request.POST.get("line", ""), actor=request.user)
    except seats.SeatError as exc:
        # Said beside the box (an htmx answer swaps only the live part, not the page's messages), and
        # what was typed stays in it.
        return _page(request, simulation, seat_line=request.POST.get("line", ""), seat_problem=str(exc))
    if request.htmx:
        # The line is under way: the live part polls again, and the side panel no longer shows the seat.
        context = page_context(simulation, poll=True)
        html = render_to_string("chronicle/simulation_detail.html#live", context, request=request)
        html += render_to_string("chronicle/simulation_detail.html#side", context | {"oob": True}, request=request)
        return HttpResponse(html)
    return redirect(simulation)


@login_required
@require_GET
def seat_search(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _owned(request, pk)
    tool, text = request.GET.get("tool", ""), request.GET.get("q", "")
    try:
        found = seats.seat_search(simulation, tool=tool, text=text)
    except seats.SeatError as exc:
        found = {"tool": tool, "text": text, "error": str(exc), "results": []}
    if request.htmx:
        return TemplateResponse(request, "chronicle/simulation/_seat_memory.html#seat-results",
                                {"simulation": simulation, "found": found})
    return _page(request, simulation, found=found)


@login_required
@require_POST
def seat_suggest(request: HttpRequest, pk: int) -> HttpResponse:
    simulation = _owned(request, pk)
    typed = request.POST.get("line", "")
    try:
        suggestion, problem = seats.seat_suggest(simulation), ""
    except seats.SeatError as exc:
        suggestion, problem = typed, str(exc)
    context = {"simulation": simulation, "seat_line": suggestion, "suggest_problem": problem,
               "seat": seats.seat_view(simulation)}
    if request.htmx:
        return TemplateResponse(request, "chronicle/simulation/_seat.html#seat-box", context)
    return _page(request, simulation, seat_line=suggestion, suggest_problem=problem)

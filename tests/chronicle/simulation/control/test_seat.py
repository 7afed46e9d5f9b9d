"""The writer's seat, with a real worker: the run waits at the seated character's turn (no worker
busy, the page stops polling), shows what it would be given, and takes the writer's line like an
agent's; leaving the seat hands the character back to its agent."""

from __future__ import annotations

import re
import time

import pytest
from django.urls import reverse

from chronicle.simulation.control import seats, services
from chronicle.simulation.run.models import Simulation, Turn
from memory.models import Memory
from tests.chronicle.simulation.conftest import wait_for, wait_status
from tests.factories import make_dinner

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]

HX = {"HTTP_HX_REQUEST": "true"}


def seat_turn(simulation, index: int) -> Turn:
    return wait_for(lambda: simulation.turns.filter(index=index, status="seat").first(), timeout=120,
                    what=f"turn {index + 1} waiting for the writer")


def test_the_run_waits_for_the_writers_line_and_takes_it_like_an_agents(celery_worker, user, client_for):
    client = client_for(user)
    scenario = make_dinner(user)
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()), settings={
        "max_turns": 6, "retrieval_mode": "tools", "seats": ["Sam"], "distortions": "Sam: paranoia"})

    waiting = seat_turn(simulation, 2)  # Alex and Jordan (agents) spoke; Sam's turn waits
    simulation.refresh_from_db()
    assert simulation.status == "running" and not simulation.polls
    assert waiting.agent == "Sam" and not waiting.claim and waiting.heartbeat is None  # no worker holds it
    assert list(simulation.turns.filter(status="done").values_list("agent", flat=True)) == ["Alex", "Jordan"]

    poll = client.get(simulation.get_absolute_url(), **HX)
    assert poll.status_code == 286  # the page stops polling while the writer types
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert "Your turn as Sam" in page and 'id="seat"' in page
    assert "You are Sam" in page  # the fixed header Sam's agent would get
    assert "Here with you: <strong>Alex, Jordan</strong>" in page
    assert "spend less than fifteen euros" in page  # what Sam wants, from Sam's own memories
    assert "[turn 2] Jordan:" in page  # the transcript Sam witnessed
    # and how Sam took it, as Sam's agent would be told (Sam's paranoia bent Sam's copy of the line).
    assert "How you took it" in page and "(turn 2) Jordan said:" in page and "(Sam suspects there is something" in page
    shown = page[page.index('class="seat-header"'):]
    shown = shown[:shown.index("</pre>")]
    assert "You are Sam" in shown and "Here with you" in shown and "## " not in shown  # the model's marks left out

    found = client.get(reverse("seat_search", args=[simulation.pk]), {"tool": "query_character", "q": "Jordan"}, **HX)
    assert "Jordan" in found.content.decode() and 'data-memory="' in found.content.decode()
    nothing = client.get(reverse("seat_search", args=[simulation.pk]), {"tool": "form_memory", "q": "x"}, **HX)
    assert "not one of this run&#x27;s reading tools" in nothing.content.decode()

    empty = client.post(reverse("seat_line", args=[simulation.pk]), {"line": "  "})
    assert "Write Sam&#x27;s line first." in empty.content.decode()
    # The page swaps in only its live part: the reason is said there, beside the box.
    empty = client.post(reverse("seat_line", args=[simulation.pk]), {"line": "  "}, **HX).content.decode()
    live = empty[empty.index('<section id="live"'):]
    assert 'id="seat-problem"' in live and "Write Sam&#x27;s line first." in live
    client.post(reverse("seat_line", args=[simulation.pk]), {"line": "*whispers to Alex* I only have twelve euros."})
    said = wait_for(lambda: simulation.turns.filter(index=2, status="done").first(), what="Sam's line said")
    assert said.agent == "Sam" and said.whisper_to == "Alex" and said.utterance.startswith("*whispers to Alex*")
    assert "Line written by the writer" in said.note and not said.usage.get("calls")
    # Recorded as the writer's: on the run page and in the chronicle's review.
    run_page = client.get(simulation.get_absolute_url()).content.decode()
    assert run_page.split('id="turn-2"', 1)[1].split("</div>", 1)[0].count("your line") == 1
    assert 'id="turn-1"' in run_page and "your line" not in run_page.split('id="turn-1"', 1)[1].split("</div>", 1)[0]
    review = client.get(reverse("chronicle_review", args=[simulation.pk])).content.decode()
    assert "your line" in review.split('id="line-2"', 1)[1].split("</div>", 1)[0]
    bank = Memory.objects.in_bank(simulation.bank)
    alex = bank.filter(agent="Alex", kind="episodic", turn=3).values_list("content", flat=True)
    jordan = bank.filter(agent="Jordan", turn=3).values_list("content", flat=True)
    assert any("twelve euros" in text for text in alex)
    assert jordan and not any("twelve euros" in text for text in jordan)
    assert any("whisper" in text for text in jordan)  # Jordan saw a whisper, not what it said

    # Sam's next turn waits again; leaving the seat hands it to Sam's agent and the run ends.
    seat_turn(simulation, 5)
    client.post(reverse("seat_change", args=[simulation.pk]), {"agent": "Sam", "leave": "1"})
    wait_status(simulation, "completed")
    last = simulation.turns.get(index=5)
    assert last.agent == "Sam" and last.usage.get("calls") and "Redone" not in last.note
    assert simulation.seats == []


def test_another_writers_seat_is_a_404(celery_worker, user, other_user, client_for):
    scenario = make_dinner(user)
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()), settings={
        "max_turns": 3, "retrieval_mode": "prepopulate", "seats": ["Alex"], "pace_s": 20})
    seat_turn(simulation, 0)
    stranger = client_for(other_user)
    for name, method in [("seat_line", "post"), ("seat_change", "post"), ("seat_suggest", "post"), ("seat_search", "get")]:
        response = getattr(stranger, method)(reverse(name, args=[simulation.pk]), {"line": "Hijacked.", "agent": "Alex",
                                                                                   "tool": "query_memory", "q": "x"})
        assert response.status_code == 404, name
    assert not simulation.turns.filter(status="done").exists()
    # The owner's suggestion: what the run's (scripted) model would say, not kept; the writer waits
    # for it, so the run's pace (20 s before each agent's line) does not hold it up.
    asked = time.monotonic()
    mine = client_for(user).post(reverse("seat_suggest", args=[simulation.pk]), **HX).content.decode()
    assert time.monotonic() - asked < simulation.pace_s  # the pace was not waited out
    assert 'id="seat-line"' in mine and "Alex" in mine
    assert simulation.turns.get(index=0).status == "seat"


def test_a_seat_is_taken_on_a_paused_run_and_kept_by_its_branch(celery_worker, user, client_for):
    scenario = make_dinner(user)
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()), settings={
        "max_turns": 4, "retrieval_mode": "prepopulate", "pause_after": 1})
    wait_status(simulation, "paused")
    seats.seat_change(simulation=simulation, agent="Jordan", take=True)
    services.simulation_resume(simulation=simulation)
    seat_turn(simulation, 1)
    services.simulation_pause(simulation=Simulation.objects.get(pk=simulation.pk))
    with pytest.raises(seats.SeatError, match="resume it"):
        seats.seat_speak(simulation=simulation, line="Pasta!", actor=None)
    from chronicle.simulation.control.branching import simulation_branch

    branch, _ = simulation_branch(parent=Simulation.objects.get(pk=simulation.pk), index=1)
    assert branch.seats == ["Jordan"]
    with pytest.raises(seats.SeatError, match="not in this run's cast"):
        seats.seat_change(simulation=simulation, agent="Nobody", take=True)
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Your line as Jordan is due here: resume the run to say it." in page
    # Leaving the seat while paused: Jordan's agent says the waiting line when the run goes on.
    seats.seat_change(simulation=simulation, agent="Jordan", take=False)
    assert "Jordan's agent says this line when the run goes on." in \
        client_for(user).get(simulation.get_absolute_url()).content.decode()
    services.simulation_resume(simulation=Simulation.objects.get(pk=simulation.pk))
    wait_status(simulation, "completed")
    assert simulation.turns.get(index=1).usage.get("calls")


def test_the_seats_search_suggests_asking_about_someone_in_the_scene(celery_worker, user, client_for):
    scenario = make_dinner(user)
    cast = [c for c in scenario.cast.all() if c.name != "Alex"]  # Jordan and Sam only
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=cast, settings={
        "max_turns": 4, "retrieval_mode": "tools", "seats": ["Sam"]})
    seat_turn(simulation, 1)
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    placeholder = re.search(r'id="seat-q"[^>]*placeholder="([^"]*)"', page).group(1)
    assert "Jordan" in placeholder and "Alex" not in placeholder

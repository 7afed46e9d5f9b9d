"""The seat with a model configured (the fake OpenAI-compatible server, over HTTP): the suggestion is
the model's answer as the seated character, with its tools, and leaves nothing behind; the writer's
own line then costs no model call. Turns run in-process (the task's body), one at a time."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.simulation.control import seats, services
from chronicle.simulation.run.models import Retrieval
from chronicle.simulation.control.tasks import run_turn_task
from devtools.fake_llm import error, ok, tool_call

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_backoff")]


def seated_run(user, scenario, server):
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()), settings={
        "retrieval_mode": "tools", "provider": "openai", "base_url": server.base_url, "model": "fake-model",
        "max_turns": 2, "timeout_s": 5, "seats": ["Alex"]})
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation


def test_the_models_suggestion_is_offered_not_kept(user, dinner, server, client_for):
    simulation = seated_run(user, dinner, server)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "waiting for the writer"
    assert server.requests == []  # waiting costs no model call

    server.script(ok(tool_calls=[tool_call("query_memory", {"query": "where are we going tonight?"})]),
                  ok("Right, let's settle this: Bella's at eight?"))
    page = client_for(user).post(reverse("seat_suggest", args=[simulation.pk]), HTTP_HX_REQUEST="true").content.decode()
    assert "Right, let&#x27;s settle this: Bella&#x27;s at eight?" in page
    assert len(server.requests) == 2 and server.requests[0]["tools"]  # with Alex's tools, as an agent
    assert "You are Alex" in server.requests[0]["messages"][0]["content"]
    turn = simulation.turns.get(index=0)
    assert turn.status == "seat" and not Retrieval.objects.filter(turn=turn).exists()

    server.script(error(500, "model down"), error(500, "model down"), error(500, "model down"))
    with pytest.raises(seats.SeatError, match="The model gave no suggestion: .*model down"):
        seats.seat_suggest(simulation)

    seats.seat_speak(simulation=simulation, line="Bella's at eight, and I'm booking now.", actor=user)
    calls = len(server.requests)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn.refresh_from_db()
    assert turn.utterance == "Bella's at eight, and I'm booking now." and len(server.requests) - calls <= 1
    assert not turn.usage.get("calls")  # the line itself: no model call (at most the listeners' judgement)


def test_a_cancelled_run_takes_no_more_lines_and_says_so(user, dinner, server, client_for):
    simulation = seated_run(user, dinner, server)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "waiting for the writer"
    services.simulation_cancel(simulation=simulation)
    with pytest.raises(seats.SeatError, match="This run is cancelled: it takes no more lines."):
        seats.seat_speak(simulation=simulation, line="Too late?", actor=user)
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Not said: the run ended before this line." in page and 'id="seat"' not in page

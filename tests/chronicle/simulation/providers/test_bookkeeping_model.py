"""The bookkeeping model: a second, smaller model on its own server judges each line after it is said
(the judgement, with the reflections that ride it), chosen on the new-run form, tested by its own
"Test connection", its calls counted apart on the run page and in run_simulation's report. Two fake
OpenAI-compatible servers over real HTTP: the speakers' and the bookkeeper's."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.headless import run_report
from chronicle.simulation.control import services
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.run.run_settings import NEEDS_BOOKKEEPING_SERVER
from devtools.fake_llm import ok, tool_call
from memory.models import Memory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_backoff")]

HX = {"HTTP_HX_REQUEST": "true"}


def form_data(dinner, server, **values) -> dict:
    return {"scenario": dinner.pk, "max_turns": 2, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "openai", "base_url": server.base_url, "model": "fake-model",
            "timeout_s": 5, "max_tool_calls": 3, "tool_set": ["query_memory"], "temperature": 0.7, "max_tokens": 200,
            "pace_s": 0, **values}


def test_the_judgement_of_each_line_goes_to_the_bookkeeping_model_and_is_counted_apart(
        user, dinner, server, bookkeeper, client_for):
    client = client_for(user)
    response = client.post(reverse("simulation_create"), form_data(
        dinner, server, bookkeeping_base_url=bookkeeper.base_url, bookkeeping_model="small-model",
        bookkeeping_api_key="sk-small-key-5678"))
    assert response.status_code == 302, response.context["form"].errors
    simulation = Simulation.objects.owned_by(user).get()
    assert simulation.bookkeeping_api_key == "sk-small-key-5678" and simulation.has_bookkeeping_model
    services.simulation_seed(simulation_id=simulation.pk)

    server.script(ok("Bella's closed in May, Jordan. The owner moved to Lyon."))
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    # The speaker's call went to the speakers' server, the judgement of the line to the bookkeeper's.
    assert [body["model"] for body in server.requests] == ["fake-model"] and server.scored == []
    assert [body["model"] for body in bookkeeper.scored] == ["small-model"] and bookkeeper.requests == []
    assert simulation.turns.get(index=0).context["aux_calls"] == 1
    scores = set(Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1).values_list("importance", flat=True))
    assert scores == {6}  # the bookkeeper's judgement was used

    page = client.get(simulation.get_absolute_url()).content.decode()
    assert "on the bookkeeping model small-model" in page and "bookkeeping: small-model at" in page
    assert "sk-small-key" not in page
    report = run_report(simulation)
    assert report["tokens"]["bookkeeping_model"] == "small-model" and report["tokens"]["besides_the_speakers"] > 0


def test_without_a_bookkeeping_model_the_runs_own_model_judges(user, dinner, server, client_for):
    response = client_for(user).post(reverse("simulation_create"), form_data(dinner, server))
    assert response.status_code == 302
    simulation = Simulation.objects.owned_by(user).get()
    services.simulation_seed(simulation_id=simulation.pk)
    server.script(ok("Bella's closed in May, Jordan."))
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    assert len(server.scored) == 1 and not simulation.has_bookkeeping_model
    assert run_report(simulation)["tokens"]["bookkeeping_model"] is None


def test_a_bookkeeping_model_without_its_server_is_refused_in_words(user, dinner, server, client_for):
    response = client_for(user).post(reverse("simulation_create"), form_data(dinner, server, bookkeeping_model="small-model"))
    assert response.status_code == 200 and not Simulation.objects.exists()
    assert response.context["form"].errors["bookkeeping_model"] == [NEEDS_BOOKKEEPING_SERVER]


def test_test_connection_asks_the_bookkeeping_server_with_its_own_fields(user, server, bookkeeper, client_for):
    client = client_for(user)
    page = client.get(reverse("simulation_create")).content.decode()
    assert 'value="bookkeeping"' in page and "Bookkeeping model" in page
    bookkeeper.script(ok("OK"), ok(tool_calls=[tool_call("get_time")]))
    fragment = client.post(reverse("simulation_test_connection"), {
        "which": "bookkeeping", "base_url": server.base_url, "model": "fake-model",
        "bookkeeping_base_url": bookkeeper.base_url, "bookkeeping_model": "small-model"}, **HX).content.decode()
    assert "Connected." in fragment and "<code>small-model</code>" in fragment
    assert "model-options" not in fragment  # the speakers' model list is left as it was
    assert server.requests == [] and {body["model"] for body in bookkeeper.requests} == {"small-model"}
    # Without JavaScript the button's own value says which model to test.
    full = client.post(reverse("simulation_test_connection"), {
        "test_connection": "bookkeeping", "bookkeeping_base_url": bookkeeper.base_url,
        "bookkeeping_model": "large-model"}).content.decode()
    assert "Not connected." in full and "has no model “large-model”" in full

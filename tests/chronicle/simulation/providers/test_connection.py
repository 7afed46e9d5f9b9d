""""Test connection" beside a run's model settings, against a real local OpenAI-compatible server:
the server's models, one tiny reply, whether the model calls tools; a closed port said in words."""

from __future__ import annotations

import socket

import pytest
from django.urls import reverse

from chronicle.simulation.providers.connection import check_connection
from devtools.fake_llm import ok, tool_call

HX = {"HTTP_HX_REQUEST": "true"}


def test_a_model_that_answers_and_calls_tools(server):
    server.models = ["fake-model", "tiny-model"]
    server.script(ok("OK"), ok(tool_calls=[tool_call("get_time")]))
    report = check_connection(base_url=server.base_url, model="fake-model")
    assert report.ok and report.replied and report.tools is True
    assert report.models == ["fake-model", "tiny-model"] and "can call tools" in report.message
    assert server.requests[-1]["tools"][0]["function"]["name"] == "get_time"


def test_a_model_without_tool_calling_is_told_prepopulate_will_be_used(server):
    server.script(ok("OK"), ok("It is noon."))
    report = check_connection(base_url=server.base_url, model="fake-model")
    assert report.ok and report.tools is False and "Pre-populate" in report.message


def test_a_model_the_server_lacks_is_named_with_the_ones_it_has(server):
    report = check_connection(base_url=server.base_url, model="llama3.1")
    assert not report.ok and report.message == "The server has no model “llama3.1”. It has: fake-model."
    assert server.requests == []  # nothing sent to a model that is not there


def test_a_closed_port_is_said_in_words():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    report = check_connection(base_url=f"http://127.0.0.1:{port}/v1", model="any", timeout=3)
    assert not report.ok
    assert report.message == f"Nothing answers at http://127.0.0.1:{port}/v1: is the server running, and is the address right?"


@pytest.mark.django_db
def test_the_button_answers_on_the_new_run_page_and_without_javascript(user, client_for, server):
    client = client_for(user)
    page = client.get(reverse("simulation_create")).content.decode()
    assert 'name="test_connection"' in page and reverse("simulation_test_connection") in page
    assert ">API key<" in page and "Api key" not in page  # the model settings in plain words
    server.script(ok("OK"), ok(tool_calls=[tool_call("get_time")]))
    fragment = client.post(reverse("simulation_test_connection"),
                           {"base_url": server.base_url, "model": "fake-model"}, **HX).content.decode()
    assert "Connected." in fragment and "<code>fake-model</code>" in fragment and "Tool calling: yes" in fragment
    full = client.post(reverse("simulation_test_connection"), {"base_url": "not a url", "model": ""}).content.decode()
    assert "Not connected." in full and "Give the server" in full and "<html" in full
    assert client.get(reverse("simulation_test_connection")).status_code == 405


def test_a_listening_local_server_is_found_on_its_usual_port(monkeypatch):
    from chronicle.simulation.providers import connection

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        monkeypatch.setattr(connection, "LOCAL_SERVERS", (("Ollama", port, "/v1"), ("LM Studio", 9, "/v1")))
        assert connection.local_servers() == [("Ollama", f"http://127.0.0.1:{port}/v1")]


@pytest.mark.django_db
def test_the_model_a_writer_chose_is_the_default_of_their_next_run(user, other_user, client_for, server, dinner):
    """The new-run form starts from the writer's last model (server, name, time-out), offers the
    models used before and those a tested server lists, and a blank key means last time's key."""
    from chronicle.simulation.control import services
    from chronicle.simulation.run.models import Simulation

    client = client_for(user)
    fresh = client.get(reverse("simulation_create")).context["form"]
    assert fresh["provider"].value() == "scripted" and fresh.known_models == []
    services.simulation_start(owner=user, scenario=dinner, cast=list(dinner.cast.all()), settings={
        "provider": "openai", "base_url": server.base_url, "model": "fake-model", "api_key": "sk-remembered-1234",
        "timeout_s": 42, "max_turns": 2})
    page = client.get(reverse("simulation_create"))
    form = page.context["form"]
    assert (form["provider"].value(), form["base_url"].value(), form["model"].value(), form["timeout_s"].value()) == \
        ("openai", server.base_url, "fake-model", 42)
    html = page.content.decode()
    assert 'list="model-options"' in html and '<option value="fake-model">' in html
    assert "Blank: the key of your last run with" in html and "sk-…1234" in html and "sk-remembered" not in html

    server.models = ["fake-model", "bigger-model"]
    server.script(ok("OK"), ok(tool_calls=[tool_call("get_time")]))
    fragment = client.post(reverse("simulation_test_connection"),
                           {"base_url": server.base_url, "model": "fake-model"}, **HX).content.decode()
    assert 'id="model-options" hx-swap-oob="true"' in fragment and '<option value="bigger-model">' in fragment

    data = {"scenario": dinner.pk, "max_turns": 2, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "openai", "base_url": server.base_url, "model": "bigger-model",
            "timeout_s": 30, "max_tool_calls": 3, "tool_set": ["query_memory"], "temperature": 0.7, "max_tokens": 200,
            "pace_s": 0}
    response = client.post(reverse("simulation_create"), data)
    assert response.status_code == 302, response.context["form"].errors
    run = Simulation.objects.owned_by(user).order_by("-created", "-id").first()
    assert run.model == "bigger-model" and run.api_key == "sk-remembered-1234"  # blank: last time's key
    # Another writer starts from the server's defaults, with nobody's key.
    other = client_for(other_user).get(reverse("simulation_create")).context["form"]
    assert other["provider"].value() == "scripted" and other.last_model_run is None

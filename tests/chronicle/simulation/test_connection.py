""""Test connection" beside a run's model settings, against a real local OpenAI-compatible server:
the server's models, one tiny reply, whether the model calls tools; a closed port said in words."""

from __future__ import annotations

import socket

import pytest
from django.urls import reverse

from chronicle.simulation.connection import check_connection
from tests.chronicle.simulation.fake_openai import ok, tool_call

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
    from chronicle.simulation import connection

    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        monkeypatch.setattr(connection, "LOCAL_SERVERS", (("Ollama", port, "/v1"), ("LM Studio", 9, "/v1")))
        assert connection.local_servers() == [("Ollama", f"http://127.0.0.1:{port}/v1")]

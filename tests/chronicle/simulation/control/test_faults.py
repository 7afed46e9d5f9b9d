"""Every fault an LLM server can produce ends in words a writer can act on, on the run page.

The fault server (devtools/fake_llm.py) is a real HTTP server; the model name picks
the fault. Turns run in-process through the real task body.
"""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from chronicle.simulation.turn.engine import MAX_UTTERANCE
from devtools.fake_llm import FakeLLM
from tests.factories import run
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_backoff")]

PYTHON_NAMES = re.compile(r"Traceback|[A-Z][a-z]+Error\b|Exception\b|'str' object|NoneType")


@pytest.fixture(scope="module")
def fault_server():
    server = FakeLLM(faults=True, slow_seconds=3).start()
    yield server
    server.stop()


def start(user, scenario, server, model: str, **extra):
    """A short run whose model name picks the fault the server plays."""
    return factories.start(user, scenario, server, **{"model": model, "max_turns": 2, "timeout_s": 2, "max_tool_calls": 3,
                                                     **extra})


def page_text(client, simulation) -> str:
    page = client.get(simulation.get_absolute_url()).content.decode()
    return re.sub(r"\s+", " ", html.unescape(page))


@pytest.mark.parametrize("fault, words", [
    ("garbage", "the LLM server's reply was not a chat completion: text instead of JSON: '<html>"),
    ("bad_body", "the LLM server's reply was not a chat completion: a body that is not JSON"),
    ("no_choices", 'JSON without a "choices" list'),
    ("error500", "LLM server answered 500: the model crashed (tried 3 times)"),
    ("rate_limit", "LLM server answered 429: rate limit reached"),
    ("slow", "the LLM server did not answer within 2s (tried 3 times)"),
    ("bad_json", "the model never gave a line to say: 3 tool calls with malformed arguments (query_memory: "
                 "Expecting ',' delimiter: line 1 column 30 (char 29)); 3 more after the limit of 3 tool calls a turn"),
    ("unknown_tool", "the model never gave a line to say: 3 tool calls to tools that do not exist "
                     "(launch_rockets); 3 more after the limit of 3 tool calls a turn"),
    ("empty", "the model never gave a line to say: 2 empty replies"),
])
def test_each_fault_pauses_the_run_with_a_readable_reason(fault, words, user, dinner, fault_server, client_for):
    simulation = start(user, dinner, fault_server, f"drill:{fault}")
    assert run(simulation) == "failed"
    simulation.refresh_from_db()
    assert simulation.status == "paused"
    assert simulation.pause_reason.startswith("Turn 1 (Alex) failed: ")
    text = page_text(client_for(user), simulation)
    assert words in text, simulation.pause_reason
    reason_html = re.search(r'id="pause-reason">(.*?)</p>', text).group(1)
    assert not PYTHON_NAMES.search(reason_html), reason_html


def test_bad_tool_calls_are_counted_past_the_limit(user, dinner, fault_server):
    simulation = start(user, dinner, fault_server, "drill:unknown_tool", max_tool_calls=2)
    assert run(simulation) == "failed"
    turn = simulation.turns.get(index=0)
    # 2 calls within the limit, then the model ignored "speak now" (tool_choice none) 3 more times.
    assert "2 tool calls to tools that do not exist" in turn.error
    assert "3 more after the limit of 2 tool calls a turn" in turn.error
    assert turn.retrievals.count() == 5  # every call recorded for the inspector


def test_a_huge_reply_is_kept_shortened_and_says_so(user, dinner, fault_server, client_for):
    simulation = start(user, dinner, fault_server, "drill:huge")
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert len(turn.utterance) == MAX_UTTERANCE
    assert "The model's reply was 20,000 characters; it was shortened to the first 4,000." in turn.note
    assert "shortened to the first 4,000" in page_text(client_for(user), simulation)


def test_a_paused_runs_model_can_be_fixed_then_resume_completes_it(user, dinner, fault_server, client_for):
    simulation = start(user, dinner, fault_server, "drill:garbage", api_key="sk-old-key-1234")
    assert run(simulation) == "failed"
    client = client_for(user)
    page = client.get(simulation.get_absolute_url()).content.decode()
    assert 'id="llm-settings"' in page and "sk-old-key-1234" not in page

    # A bad edit is refused with the field's error and changes nothing.
    url = reverse("simulation_llm", args=[simulation.pk])
    response = client.post(url, {"provider": "openai", "base_url": "", "model": "drill:ok", "timeout_s": 2,
                                 "temperature": 0.7, "max_tokens": 300, "max_tool_calls": 3})
    assert response.status_code == 400
    assert "needs a base URL and a model name" in response.content.decode()
    simulation.refresh_from_db()
    assert simulation.model == "drill:garbage"

    response = client.post(url, {"provider": "openai", "base_url": fault_server.base_url, "model": "drill:ok",
                                 "timeout_s": 5, "temperature": 0.7, "max_tokens": 300, "max_tool_calls": 3},
                           follow=True)
    assert "Model settings saved: drill:ok" in response.content.decode()
    simulation.refresh_from_db()
    assert (simulation.model, simulation.timeout_s, simulation.api_key) == ("drill:ok", 5, "sk-old-key-1234")

    client.post(simulation.get_absolute_url(), {"resume": "1"})
    assert run(simulation, 0) == "done"
    assert run(simulation, 1) == "done"
    simulation.refresh_from_db()
    assert simulation.status == "completed"
    first = simulation.turns.get(index=0)
    assert first.attempts == 2 and first.utterance.startswith("I remember this much: You are Alex")


def test_model_settings_cannot_change_under_a_running_run(user, dinner, fault_server, client_for):
    simulation = start(user, dinner, fault_server, "drill:ok")
    assert simulation.status == "running"
    response = client_for(user).post(reverse("simulation_llm", args=[simulation.pk]), {
        "provider": "openai", "base_url": fault_server.base_url, "model": "drill:other", "timeout_s": 5,
        "temperature": 0.7, "max_tokens": 300, "max_tool_calls": 3}, follow=True)
    assert "can be changed while the run is paused" in response.content.decode()
    simulation.refresh_from_db()
    assert simulation.model == "drill:ok"


def test_another_writer_cannot_change_the_model(user, other_user, dinner, fault_server, client_for):
    simulation = start(user, dinner, fault_server, "drill:garbage")
    run(simulation)
    response = client_for(other_user).post(reverse("simulation_llm", args=[simulation.pk]), {
        "provider": "openai", "base_url": fault_server.base_url, "model": "drill:ok", "timeout_s": 5,
        "temperature": 0.7, "max_tokens": 300, "max_tool_calls": 3})
    assert response.status_code == 404
    simulation.refresh_from_db()
    assert simulation.model == "drill:garbage"

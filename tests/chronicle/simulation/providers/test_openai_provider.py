"""The `openai` provider against a local OpenAI-compatible server over real HTTP."""

from __future__ import annotations

import json

import pytest

from chronicle.simulation.control import services
from chronicle.simulation.run.models import Simulation
from devtools.fake_llm import error, ok, slow, tool_call
from chronicle.simulation.providers import ProviderError
from tests.factories import run
from tests import factories

pytestmark = pytest.mark.usefixtures("quick_backoff")


def start(user, scenario, server, **settings) -> Simulation:
    """A run whose requests must carry its key, temperature and seed."""
    return factories.start(user, scenario, server, **{"api_key": "sk-test-secret-abcd", "temperature": 0.3, "seed": 7,
                                                     "max_turns": 3, **settings})


@pytest.mark.django_db
def test_tool_calls_run_and_line_is_stored(user, dinner, server):
    server.script(ok(tool_calls=[tool_call("query_self")], prompt_tokens=120),
                  ok(tool_calls=[tool_call("query_scene"), tool_call("query_character", {"name": "Jordan"}, "c3")],
                     prompt_tokens=200),
                  ok("Hi, I'm Alex. Shall we decide on dinner?", prompt_tokens=300, completion_tokens=12))
    simulation = start(user, dinner, server)
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert turn.status == "done" and turn.utterance == "Hi, I'm Alex. Shall we decide on dinner?"
    assert list(turn.retrievals.values_list("tool", flat=True)) == ["query_self", "query_scene", "query_character"]
    self_call = turn.retrievals.get(tool="query_self")
    assert self_call.results[0]["content"].startswith("You are Alex")
    assert turn.usage == {"prompt_tokens": 620, "completion_tokens": 32, "calls": 3, "estimated": False}
    # What went over the wire: tools, settings, the key, and the tool answers fed back.
    first, _second, third = server.requests
    assert {t["function"]["name"] for t in first["tools"]} >= {"query_self", "query_memory", "query_character"}
    assert first["model"] == "fake-model" and first["temperature"] == 0.3 and first["seed"] == 7
    assert server.headers[0]["authorization"] == "Bearer sk-test-secret-abcd"
    tool_answers = [m for m in third["messages"] if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tool_answers] == ["call_query_self", "call_query_scene", "c3"]
    assert "Alex's apartment" in json.loads(tool_answers[1]["content"])["memories"][0]["content"]
    # The stored context is exactly what the last call sent, plus the reply.
    assert turn.prompt_messages[:-1] == third["messages"]


@pytest.mark.django_db
def test_by_default_the_model_scores_every_listeners_copy_in_one_call(user, dinner, server):
    """The LLM scorer is the default for a real model: one judgement after the line for everyone who
    heard it (not one call per listener), each listener's score stored as its copy's importance."""
    from memory.models import Memory

    server.script(ok("We should book Bella's before eight."))
    simulation = start(user, dinner, server)
    assert simulation.importance_scorer == "llm"
    server.importance = "8"
    assert run(simulation) == "done"
    copies = Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1)
    assert {m.agent for m in copies} == set(simulation.cast_names) and len(server.scored) == 1
    for memory in copies:
        assert memory.importance == 8 and memory.metadata["importance"]["scorer"] == "llm-batch"
    prompt = server.scored[0]["messages"][-1]["content"]
    assert "We should book Bella's before eight." in prompt
    assert f"Listeners: {', '.join(simulation.cast_names)}" in prompt
    assert simulation.turns.get(index=0).context["aux_calls"] == 1


@pytest.mark.django_db
def test_with_a_real_model_a_formation_filter_has_the_model_retell_the_line(user, dinner, server):
    """Distortion: Jordan's paranoia asks the run's model to retell what Jordan heard;
    the stored copy is the model's version, the original kept; the others keep the line as said."""
    from memory.models import Memory

    server.script(ok("We should book Bella's before eight."),
                  ok("Alex insisted on Bella's before eight, surely to keep me from seeing something."))
    simulation = start(user, dinner, server, distortions="Jordan: paranoia")
    assert run(simulation) == "done"
    rewrite = server.requests[-1]["messages"][-1]["content"]
    assert rewrite.startswith("You rewrite a memory") and "Jordan is paranoid" in rewrite
    # Told how to keep its form: two models in the loop mixed "Alex said" with Jordan's own "I".
    assert 'stays "NAME said: …", told in the third person, not as Jordan speaking' in rewrite
    jordan = Memory.objects.in_bank(simulation.bank).get(kind="episodic", turn=1, agent="Jordan")
    assert jordan.content == "Alex insisted on Bella's before eight, surely to keep me from seeing something."
    assert jordan.metadata["distortion"]["original"] == "Alex said: We should book Bella's before eight."
    sam = Memory.objects.in_bank(simulation.bank).get(kind="episodic", turn=1, agent="Sam")
    assert sam.content == "Alex said: We should book Bella's before eight."


@pytest.mark.django_db
def test_malformed_tool_call_and_unknown_tool_get_tool_errors_the_model_can_read(user, dinner, server):
    server.script(ok(tool_calls=[tool_call("query_memory", '{"query": "what did', "bad"),
                                 tool_call("launch_rockets", "{}", "nope")]),
                  ok(tool_calls=[tool_call("query_self", "{}", "good")]),
                  ok("Right, I'm Alex."))
    simulation = start(user, dinner, server)
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    bad, unknown, good = turn.retrievals.order_by("order")
    assert "malformed arguments for query_memory" in bad.error and bad.arguments == {"raw": '{"query": "what did'}
    assert "unknown tool 'launch_rockets'" in unknown.error
    assert good.error == "" and good.results
    answers = {m["tool_call_id"]: json.loads(m["content"]) for m in server.requests[1]["messages"] if m["role"] == "tool"}
    assert "malformed arguments" in answers["bad"]["error"]
    assert "unknown tool" in answers["nope"]["error"]
    assert turn.utterance == "Right, I'm Alex."


@pytest.mark.django_db
def test_a_500_is_retried_and_recorded(user, dinner, server):
    server.script(error(500, "model crashed"), ok("Hello all."))
    simulation = start(user, dinner, server)
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert turn.utterance == "Hello all."
    assert "500" in turn.note and "model crashed" in turn.note
    assert len(server.requests) == 2


@pytest.mark.django_db
def test_time_outs_fail_the_turn_pause_the_run_and_resume_redoes_it(user, dinner, server, client_for):
    server.script(*[slow(2.5) for _ in range(3)])
    simulation = start(user, dinner, server, timeout_s=1)
    assert run(simulation) == "failed"
    simulation.refresh_from_db()
    turn = simulation.turns.get(index=0)
    assert turn.status == "failed" and "did not answer within 1s" in turn.error
    assert "call 1, attempts 1–3: the LLM server did not answer within 1s" in turn.note  # every attempt, said once
    assert simulation.status == "paused" and "Turn 1 (Alex) failed" in simulation.pause_reason
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "did not answer within 1s" in page and 'name="resume"' in page

    server.script(ok("Sorry, I drifted off. I'm Alex."))
    services.simulation_resume(simulation=simulation)
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert simulation.turns.count() == 1 and turn.attempts == 2 and turn.error == ""
    assert turn.utterance == "Sorry, I drifted off. I'm Alex."


@pytest.mark.django_db
def test_a_model_without_tool_calling_falls_back_to_prepopulate(user, dinner, server, client_for):
    server.script(error(400, "this model does not support tools"), ok("Hello, I'm Alex."), ok("Jordan here."))
    simulation = start(user, dinner, server)
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert "fell back to prepopulate" in turn.note
    retry = server.requests[1]
    assert "tools" not in retry and "## Who you are" in retry["messages"][0]["content"]
    assert set(turn.retrievals.values_list("tool", flat=True)) == {"prepopulate"}
    simulation.refresh_from_db()
    assert simulation.tools_unsupported
    assert run(simulation, 1) == "done"  # later turns go straight to prepopulate
    assert "tools" not in server.requests[2]
    assert "fell back to prepopulate" in simulation.turns.get(index=1).note
    assert "fell back to prepopulate" in client_for(user).get(simulation.get_absolute_url()).content.decode()


@pytest.mark.django_db
def test_a_4xx_is_not_retried(user, dinner, server):
    server.script(error(401, "invalid api key"))
    simulation = start(user, dinner, server)
    assert run(simulation) == "failed"
    assert len(server.requests) == 1
    simulation.refresh_from_db()
    assert "401" in simulation.pause_reason and "invalid api key" in simulation.pause_reason


def test_every_runs_model_shares_one_connection_pool_and_keeps_its_own_key_and_time_out(server):
    """A client per provider cost a new SSL context (~50 ms) each turn, and again for its judgement."""
    from chronicle.simulation.providers.openai_provider import OpenAIProvider

    mine = OpenAIProvider(base_url=server.base_url, api_key="sk-run-one", model="fake-model", timeout=5)
    theirs = OpenAIProvider(base_url=server.base_url, api_key="sk-run-two", model="fake-model", timeout=1)
    server.script(ok("from the first run"), slow(2.5), ok("from the first run again"))
    assert mine.client._client is theirs.client._client
    assert mine.complete("Hello?") == "from the first run"
    with pytest.raises(ProviderError, match="did not answer within 1s"):
        theirs.complete("Hello?")
    assert mine.complete("Hello again?") == "from the first run again"  # its own 5 s, not the other's 1 s
    assert [h["authorization"] for h in server.headers] == ["Bearer sk-run-one", "Bearer sk-run-two", "Bearer sk-run-one"]

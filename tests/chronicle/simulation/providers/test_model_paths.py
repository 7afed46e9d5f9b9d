"""Every path that asks a model goes to the run's configured one, over real HTTP to the fake
OpenAI-compatible server: speaker choice, reflection, consolidation (the run's automatic one, the
writer's button, the API's) and the API's reflect on a run's bank."""

from __future__ import annotations

import pytest
from django.test import Client

from api.models import ApiToken
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import consolidate_task, run_turn_task
from chronicle.writing.services import memory_consolidate_edit
from memory.models import Memory
from memory.services import memory_create
from tests.factories import start_with_model
from devtools.fake_llm import ok

pytestmark = [pytest.mark.usefixtures("quick_backoff"), pytest.mark.django_db]

SUMMARY = "Alex kept hearing about the weather and the ferry on those early days."


start = start_with_model


def chatter(simulation: Simulation, agent: str = "Alex", lines: int = 4) -> None:
    """Old, alike, unimportant lines: what consolidation takes."""
    for turn in range(1, lines + 1):
        memory_create(bank=simulation.bank, agent=agent, kind="episodic", category="heard", source="earned",
                      turn=turn, importance=2.0, speaker="Jordan",
                      content=f"Jordan said: lovely weather for the ferry today, day {turn}.")


def asked(server) -> list[str]:
    return [str(body["messages"][-1]["content"]) for body in server.requests]


def test_the_model_chooses_who_speaks_next(user, dinner, server):
    server.script(ok("Where shall we eat?"), ok("Sam."), ok("Thai, please: I'm counting coins this week."))
    simulation = start(user, dinner, server, speaking_order="model_picks")
    for index in (0, 1):  # the first speaker is the cast's first; then the model picks
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    turn = simulation.turns.get(index=1)
    assert turn.agent == "Sam" and turn.utterance.startswith("Thai, please")
    assert "Alex: Where shall we eat?\n\nWho should speak next? Choose one of: Alex, Jordan, Sam" in asked(server)[1]


def test_the_runs_consolidation_and_the_writers_button_ask_the_runs_model(user, dinner, server):
    simulation = start(user, dinner, server, consolidation_budget=2)
    chatter(simulation)
    server.script(ok(SUMMARY))
    assert consolidate_task.apply(args=(simulation.pk, "Alex", 20)).get() == 1
    summary = Memory.objects.in_bank(simulation.bank).get(agent="Alex", status="active", kind="episodic")
    assert summary.content == SUMMARY and summary.metadata["consolidation"]["summarizer"] == "llm"
    assert "consolidating 4 similar memories into a single, concise memory" in asked(server)[0]
    assert "lovely weather for the ferry today, day 3" in asked(server)[0]

    chatter(simulation, agent="Jordan")
    simulation.turns.create(index=29, agent="Alex", status="done")  # the writer's button keeps the last 10 turns
    server.script(ok("Jordan talked about the weather for the ferry, four days running."))
    results = memory_consolidate_edit(simulation=simulation, agent="Jordan", actor=user)
    assert [r.summarizer for r in results] == ["llm"] and results[0].summary.content.startswith("Jordan talked")


def test_the_api_reflects_and_consolidates_with_the_model_of_the_run_a_bank_belongs_to(user, dinner, server):
    simulation = start(user, dinner, server)
    chatter(simulation)
    token = ApiToken.issue(user=user, name="tests")[1]
    c, auth = Client(), {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    server.script(ok("What does Alex make of the weather?"),
                  ok("Alex notices Jordan cares about the ferry (because of 1, 2)"))
    made = c.post(f"/api/banks/{simulation.bank_id}/reflect", {"agent": "Alex", "turn": 5},
                  content_type="application/json", **auth)
    assert made.status_code == 201
    assert [m["content"] for m in made.json()["insights"]] == ["Alex notices Jordan cares about the ferry"]
    assert "most salient high-level questions" in asked(server)[0] and "high-level insights" in asked(server)[1]

    server.script(ok(SUMMARY))
    summaries = c.post(f"/api/banks/{simulation.bank_id}/consolidate", {"agent": "Alex", "before_turn": 9},
                       content_type="application/json", **auth)
    assert summaries.status_code == 200 and [s["content"] for s in summaries.json()] == [SUMMARY]
    assert "consolidating" in asked(server)[-1]


def test_a_runs_token_figures_count_what_was_sent_not_what_the_server_reported(user, dinner, server):
    """A server's own prompt_tokens (another tokenizer, or a relay's four characters a token) would not
    compare with the full definition, which is counted here: the run's figures count each call the
    same way. The fake server reports 100 whatever it is sent."""
    from chronicle.simulation.prompting.context import request_tokens
    from chronicle.simulation.measuring.measures import run_figures

    server.script(ok("Where shall we eat?"))
    simulation = start(user, dinner, server, max_turns=1)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn = simulation.turns.get(index=0)
    assert turn.prompt_tokens == 100  # what the server said
    sent = turn.prompt_messages[:-1]  # the call: everything before the reply
    assert run_figures(simulation)["prompt_per_turn"] == [request_tokens(sent, None)]
    assert request_tokens(sent, None) > 300  # the sheet, the scene and the ask: not the server's 100

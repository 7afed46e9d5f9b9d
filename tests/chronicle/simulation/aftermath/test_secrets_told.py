"""A character's secret once told: the model's judgement of the line says so, and from then on the
secret reads as told wherever its owner reads it — over real HTTP to the fake server."""

from __future__ import annotations

import json

import pytest

from chronicle.models import Character
from devtools.fake_llm import ok
from chronicle.simulation.control.tasks import run_turn_task
from memory.living.after_turn import parse
from memory.models import Memory
from memory.recalling.tools import ToolContext, call_tool
from tests.factories import start_with_model

pytestmark = pytest.mark.usefixtures("quick_backoff")

DEPOSIT = "Alex has already put down a deposit at the Thai place around the corner and has not told anyone."
# As Alex's prompt says it: in Alex's own person, as its label does ("My secret: I have …").
DEPOSIT_OWN = "I have already put down a deposit at the Thai place around the corner and have not told anyone."
BONUS = "Alex turned down a promotion last spring."
CONFESSION = "Honestly? I already paid a deposit at the Thai place. Just in case."


def _judgement(revealed: list) -> str:
    return json.dumps({"listeners": {name: {"importance": 5} for name in ("Alex", "Jordan", "Sam")},
                       "revealed": revealed})


def _run(simulation, first: int, last: int) -> None:
    """Turns first..last (indexes), each run as the worker would."""
    for index in range(first, last + 1):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"


@pytest.mark.django_db
def test_a_secret_the_judgement_says_was_told_reads_as_told_to_its_owner_from_then_on(user, dinner, server):
    from memory.services import bank_copy, bank_create

    Character.objects.filter(owner=user, name="Alex").update(secrets=[DEPOSIT, BONUS])
    server.script(ok(CONFESSION), ok("A deposit? Alex!"), ok("Wait, what deposit?"), ok("Yes, the Thai place."),
                  ok("Fine."), ok("Thai it is."), ok("Good."))
    server.judgement = _judgement([1])
    simulation = start_with_model(user, dinner, server, max_turns=7)
    _run(simulation, 0, 0)
    # The judgement was asked which of Alex's secrets the line tells, each by number, label left off.
    asked = server.scored[0]["messages"][-1]["content"]
    assert f"Alex's secrets, numbered:\n1. {DEPOSIT}\n2. {BONUS}" in asked and '"revealed": []' in asked
    deposit, bonus = Memory.objects.in_bank(simulation.bank).filter(agent="Alex", category="secrets").order_by("id")
    assert deposit.metadata["told"] == {"Jordan": 1, "Sam": 1} and "told" not in bonus.metadata
    note = simulation.turns.get(index=0).note
    assert "Jordan and Sam now know Alex's secret: “Alex has already put down a deposit at the Thai place" in note

    server.judgement = _judgement([])  # nothing more is told
    _run(simulation, 1, 3)
    alex_again = simulation.turns.get(index=3)
    assert alex_again.agent == "Alex"
    # Alex's next note says whom Alex told, in the conversation; the sheet in the system message stays
    # as written (so a prefix cache keeps serving it), the untold secret too.
    told = f"## Secrets you have told\n- You have told Jordan at turn 1, Sam at turn 1: {DEPOSIT_OWN}"
    kept = alex_again.prompt_messages[1]["content"]
    assert "Before your turn 4, you recall:" in kept and told in kept.split("Before your turn 4, you recall:")[1]
    first_system = simulation.turns.get(index=0).prompt_messages[0]["content"]
    assert alex_again.prompt_messages[0]["content"] == first_system and f"My secret: {DEPOSIT_OWN}" in first_system
    assert "You have told" not in kept.replace(told, "")  # the untold secret is not said to be told
    _run(simulation, 4, 6)
    later = simulation.turns.get(index=6).prompt_messages[1]["content"]
    assert later.count(told) == 1  # kept where it was said, not said again
    # Only the secret nobody hearing has been told is asked about again.
    last = server.scored[-1]["messages"][-1]["content"]
    assert f"1. {BONUS}" in last and DEPOSIT not in last
    # query_self gives it with whom it was told to.
    answer = call_tool("query_self", {"aspect": "secrets"},
                       context=ToolContext(bank=simulation.bank, agent="Alex", current_turn=5))
    told = {m["content"]: m.get("told_to") for m in answer.response["memories"]}
    assert told == {f"My secret: {DEPOSIT}": "Jordan at turn 1, Sam at turn 1", f"My secret: {BONUS}": None}
    # A branch from the turn it was told has it untold again.
    before = bank_create(name="before the confession", owner=user)
    bank_copy(source=simulation.bank, target=before, as_of_turn=1)
    copied = Memory.objects.in_bank(before).get(agent="Alex", category="secrets", content__contains="deposit")
    assert "told" not in copied.metadata


@pytest.mark.django_db
def test_a_line_the_judgement_does_not_call_a_telling_tells_nothing(user, dinner, server):
    """However close in meaning (no rule guesses it: a line on a secret's topic is as close to it as one
    that tells it), and a whisper tells only the one it is whispered to."""
    Character.objects.filter(owner=user, name="Alex").update(secrets=[DEPOSIT])
    server.script(ok("The Thai place around the corner does a deposit for tables, you know."),
                  ok("Does it?"), ok("Hm."), ok("*whispers to Sam* I already paid a deposit there."))
    server.judgement = _judgement([])
    simulation = start_with_model(user, dinner, server, max_turns=4)
    _run(simulation, 0, 2)
    secret = Memory.objects.in_bank(simulation.bank).get(agent="Alex", category="secrets")
    assert "told" not in secret.metadata and "now know" not in simulation.turns.get(index=0).note
    server.judgement = _judgement([1, 7, "x"])  # numbers not asked about are ignored
    _run(simulation, 3, 3)
    secret.refresh_from_db()
    assert secret.metadata["told"] == {"Sam": 4}
    assert "Sam now knows Alex's secret" in simulation.turns.get(index=3).note


def test_parse_reads_the_secrets_the_line_tells_by_the_numbers_asked_about():
    secrets = ["Alex paid a deposit.", "Alex turned down a promotion."]
    answer = json.dumps({"listeners": {"Sam": {"importance": 4}}, "revealed": ["2", 2, 0, 5, "two", True]})
    assert parse(answer, names=["Sam"], speaker="Alex", secrets=secrets).revealed == [secrets[1]]
    assert parse(answer, names=["Sam"], speaker="Alex").revealed == []  # nothing was asked about
    assert parse('{"listeners": {}}', names=["Sam"], speaker="Alex", secrets=secrets).revealed == []

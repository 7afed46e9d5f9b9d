"""Planted beliefs spread by retelling, with who told whom and a falling confidence (issue 15)."""

from __future__ import annotations

import pytest

from chronicle.simulation import beliefs, turns
from chronicle.simulation.engine import TurnOutcome
from memory.models import Memory
from tests.chronicle.simulation.conftest import start_seeded

pytestmark = pytest.mark.django_db

CLAIM = "Bella's trattoria is closing down at the end of the month."


def say(simulation, index, agent, line):
    beliefs.plant(simulation)
    claim = turns.turn_claim(simulation_id=simulation.pk, index=index, agent=agent)
    return turns.turn_finish(turn_id=claim.turn.pk, token=claim.token, outcome=TurnOutcome(utterance=line))


def held(simulation, agent):
    return [m.metadata["belief"] for m in Memory.objects.in_bank(simulation.bank).filter(agent=agent, category="belief")]


def test_a_false_belief_retold_twice_reaches_a_third_character_with_its_chain(user, dinner, client_for):
    simulation = start_seeded(user, dinner, max_turns=4, planted_beliefs=f"Sam: {CLAIM} [false]")
    say(simulation, 0, "Alex", "Shall we decide on dinner tonight?")
    assert held(simulation, "Sam")[0] | {} == {"id": 1, "claim": CLAIM, "true": False, "source_chain": [],
                                               "confidence": 1.0, "hops": 0}
    assert held(simulation, "Jordan") == held(simulation, "Alex") == []  # small talk retells nothing
    # Sam whispers it to Jordan: Jordan believes it, from Sam; Alex heard nothing.
    told = say(simulation, 1, "Sam", f"*whispers to Jordan* Did you know? {CLAIM}")
    (jordan,) = held(simulation, "Jordan")
    assert jordan["source_chain"] == ["Sam"] and jordan["confidence"] == 0.7 and jordan["true"] is False
    assert held(simulation, "Alex") == [] and "Jordan now believes (heard from Sam)" in told.note
    # Jordan says it aloud: Alex believes it, from Jordan who had it from Sam, less sure.
    say(simulation, 2, "Jordan", f"Everyone, listen: {CLAIM} We should go while we can!")
    (alex,) = held(simulation, "Alex")
    assert alex["source_chain"] == ["Jordan", "Sam"] and alex["confidence"] == pytest.approx(0.49)
    memory = Memory.objects.in_bank(simulation.bank).get(agent="Alex", category="belief")
    assert memory.content == f"Jordan told me: {CLAIM}"
    assert list(memory.evidence.values_list("agent", flat=True)) == ["Jordan"]  # linked to the teller's belief
    # The run page's "who believes what" view marks it false and shows each chain.
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Who believes what" in page and 'data-true="false"' in page
    assert "heard from Jordan ← Sam (turn 3) · confidence 0.49" in page


def test_a_bad_planted_belief_is_named(user, dinner):
    with pytest.raises(beliefs.BeliefError, match=r"Line 2: Robin is not in this run's cast"):
        beliefs.parse(f"Sam: {CLAIM} [false]\nRobin: nothing", cast=["Alex", "Jordan", "Sam"])
    with pytest.raises(beliefs.BeliefError, match="Line 1: write"):
        beliefs.parse("just a sentence", cast=["Alex"])

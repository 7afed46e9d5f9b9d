"""Plans in a run: each agent has a plan for the scene before its first turn, said in its header
and kept in the bank (editable like any memory); a story day that changes brings a new one; off
with WONDA_PLANS=0."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from django.urls import reverse

from chronicle.simulation.aftermath.planning import plan_before_turn
from chronicle.simulation.control import turns
from chronicle.simulation.turn.briefing import now_text
from chronicle.simulation.turn.inputs import turn_input
from memory.models import Memory
from tests.factories import run, start

pytestmark = pytest.mark.django_db


def plans_of(simulation, agent: str):
    return list(Memory.objects.filter(bank=simulation.bank, agent=agent, kind="plan").order_by("turn", "id"))


def test_an_agent_plans_before_its_first_turn_and_its_header_says_the_plan(user, dinner, client_for):
    simulation = start(user, dinner, retrieval_mode="prepopulate", max_turns=2)
    assert run(simulation, 0) == "done"
    speaker = simulation.turns.get(index=0).agent
    made = plans_of(simulation, speaker)
    assert len(made) == 1 and made[0].turn == 1
    goal = next(c["goals"][0] for c in simulation.cast_snapshot if c["name"] == speaker)
    # The place's first clause ("Alex's apartment, living room"): a plan names where, not the whole room.
    assert made[0].content.startswith("My plan at Alex's apartment: " + goal[0].lower() + goal[1:])
    # The same agent's next turn: its plan is kept (one a day), and the header says it.
    claim = turns.turn_claim(simulation_id=simulation.pk, index=1, agent=speaker)
    assert not plan_before_turn(simulation, 2, speaker)
    header = now_text(turn_input(turn=claim.turn))
    assert "Your plan: " + goal[0].lower() + goal[1:] in header
    # In the bank, as a plan the writer can edit.
    page = client_for(user).get(reverse("chronicle_memories", args=[simulation.pk]) + "?kind=plan").content.decode()
    assert "My plan at Alex" in page


def test_a_new_story_day_brings_a_new_plan(user, dinner):
    simulation = start(user, dinner, retrieval_mode="prepopulate", max_turns=4, minutes_per_turn=5,
                       story_start=datetime(2025, 1, 13, 18, 0, tzinfo=timezone.utc),
                       stage_directions="3: The next morning")
    assert plan_before_turn(simulation, 1, "Sam") and not plan_before_turn(simulation, 2, "Sam")
    assert plan_before_turn(simulation, 3, "Sam")
    first, second = plans_of(simulation, "Sam")
    assert first.metadata["superseded_turn"] == 3 and second.metadata["plan"]["day"] == "2025-01-14"


def test_with_plans_off_nobody_plans(user, dinner, settings):
    settings.PLANS_ENABLED = False
    simulation = start(user, dinner, retrieval_mode="prepopulate", max_turns=1)
    assert run(simulation, 0) == "done"
    assert not Memory.objects.filter(bank=simulation.bank, kind__in=["plan", "goal_progress"]).exists()

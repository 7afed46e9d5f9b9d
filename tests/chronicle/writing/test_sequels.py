"""Sequels and continuity (seed 000 "Persistence"): a new run continues a finished one,
each character carrying what it earned there (all, reflections only, none); the writer makes an
earned memory permanent, and the next run's agent is given it."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.models import Character
from chronicle.simulation.control import services
from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from memory.services import memory_create
from memory.recalling.tools import ToolContext, call_tool

pytestmark = pytest.mark.django_db


def sequel(user, dinner, finished, carry: str = "") -> Simulation:
    simulation = services.simulation_start(owner=user, scenario=dinner, cast=list(dinner.cast.all()),
                                           settings={"max_turns": 4, "retrieval_mode": "tools", "sequel_carry": carry},
                                           sequel_of=finished)
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation


def test_a_sequels_agent_recalls_what_it_earned_in_the_first_run(user, dinner, finished):
    said = Memory.objects.in_bank(finished.bank).get(agent="Alex", kind="episodic", turn=2)
    insight = memory_create(bank=finished.bank, agent="Jordan", kind="reflection", source="reflection", turn=6,
                            content="Jordan realises Alex always ends up deciding.", evidence=[said])
    follow = sequel(user, dinner, finished, carry="Jordan: reflections\nSam: none")
    assert follow.status == Simulation.Status.RUNNING and follow.sequel_of == finished

    carried = Memory.objects.in_bank(follow.bank).filter(metadata__has_key="carried_from")
    alex_before = Memory.objects.in_bank(finished.bank).filter(agent="Alex").exclude(source="gifted").count()
    assert carried.filter(agent="Alex").count() == alex_before > 0
    assert list(carried.filter(agent="Jordan").values_list("content", flat=True)) == [insight.content]
    assert not carried.filter(agent="Sam").exists()
    # Turns continue: the first run's last turn (6) is 0 here, its turn 2 is −4; the new run starts at 1.
    copy = carried.get(agent="Alex", metadata__carried_from__memory=said.pk)
    assert copy.turn == 2 - 6 and copy.content == said.content and copy.metadata["carried_from"]["turn"] == 2

    found = call_tool("query_memory", {"query": said.content.split(": ", 1)[1]},
                      context=ToolContext(bank=follow.bank, agent="Alex", current_turn=1))
    assert copy.pk in [r.memory.pk for r in found.results]
    # Seeding again (a redelivered task) carries nothing twice.
    assert services.sequel_carry(follow) == {}


def test_the_form_starts_a_sequel_and_names_a_bad_carry_line(user, dinner, finished, client_for):
    base = {"scenario": dinner.pk, "max_turns": 4, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "scripted", "sequel_of": finished.pk, "temperature": 0.7,
            "max_tokens": 300, "max_tool_calls": 6, "timeout_s": 60, "pace_s": 0}
    bad = client_for(user).post(reverse("simulation_create"), {**base, "sequel_carry": "Bob: all"})
    assert bad.status_code == 200 and "for someone in the cast" in bad.content.decode()
    page = client_for(user).get(reverse("simulation_create")).content.decode()
    assert f'<option value="{finished.pk}">' in page  # the runs one can continue
    ok = client_for(user).post(reverse("simulation_create"), {**base, "sequel_carry": "Sam: none"})
    assert ok.status_code == 302, ok.context["form"].errors
    follow = Simulation.objects.get(sequel_of=finished)
    assert ok.status_code == 302 and follow.sequel_carry == "Sam: none"
    header = client_for(user).get(follow.get_absolute_url()).content.decode().split('id="sequel-of"', 1)[1].split("</p>", 1)[0]
    # What each one carries, in a sentence (the whole cast; not the lines as typed).
    assert "Alex carries all they earned; Jordan, all they earned; Sam, nothing." in header and "<br>" not in header


def test_an_earned_memory_made_permanent_is_given_to_the_next_run(user, dinner, finished, client_for):
    line = Memory.objects.in_bank(finished.bank).get(agent="Sam", kind="episodic", turn=3)
    client_for(user).post(reverse("chronicle_memory", args=[finished.pk, line.pk]), {"promote": "1"})
    sam = Character.objects.owned_by(user).get(name="Sam")
    assert {"content": line.content, "keys": []} in sam.extra_memories
    line.refresh_from_db()
    assert line.metadata["promoted"]["character"] == sam.pk
    fresh = services.simulation_start(owner=user, scenario=dinner, cast=list(dinner.cast.all()),
                                      settings={"max_turns": 2, "retrieval_mode": "tools"})
    services.simulation_seed(simulation_id=fresh.pk)
    gifted = Memory.objects.in_bank(fresh.bank).filter(agent="Sam", content=line.content)
    assert gifted.count() == 1 and gifted.get().source == "gifted"

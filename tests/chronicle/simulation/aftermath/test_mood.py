"""Mood in a run: a hurtful line leaves its listener's memory of it with a feeling and the listener
in a mood, which the next turn's header says, which the inspector shows per turn and the analytics
page draws over the run; the model's judgement gives the feeling where a model judges; off, nothing."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from chronicle.simulation.control import turns
from chronicle.simulation.turn.briefing import now_text
from chronicle.simulation.turn.inputs import turn_input
from devtools.fake_llm import ok
from memory.models import Memory
from tests.factories import run, say, start, start_with_model

pytestmark = pytest.mark.django_db

HURT = "Sam, you lied to me and you cheated all of us. I hate what you did."


def sams_memory_of(simulation, number: int) -> Memory:
    return Memory.objects.get(bank=simulation.bank, agent="Sam", kind="episodic", turn=number)


def header_for(simulation, index: int, agent: str) -> str:
    claim = turns.turn_claim(simulation_id=simulation.pk, index=index, agent=agent)
    return now_text(turn_input(turn=claim.turn))


def test_a_hurtful_line_puts_its_listener_in_a_mood_the_header_inspector_and_analytics_show(user, dinner, client_for):
    simulation = start(user, dinner, retrieval_mode="prepopulate")
    first = say(simulation, 0, "Jordan", HURT)
    memory = sams_memory_of(simulation, 1)
    assert memory.emotional_valence < -0.3  # the offline judge's reading: Sam was hurt
    valence, word = first.context["moods"]["Sam"]
    assert valence < -0.3 and word in ("uneasy", "upset", "distraught")
    assert first.context["moods"]["Alex"] == [0.0, "calm"]  # said to Sam, not to Alex
    assert f"You feel: {word}" in header_for(simulation, 1, "Sam")

    client = client_for(user)
    page = client.get(reverse("turn_inspect", args=[simulation.pk, 0])).content.decode()
    assert "How each feels after this line" in page and f"<strong>{word}</strong>" in page
    analytics = client.get(reverse("chronicle_analytics", args=[simulation.pk])).content.decode()
    assert "Mood over the run" in analytics and "<polyline" in analytics


def test_the_mood_fades_back_towards_calm_when_nothing_moves_it(user, dinner):
    simulation = start(user, dinner, retrieval_mode="prepopulate", max_turns=8)
    hurt = say(simulation, 0, "Jordan", HURT).context["moods"]["Sam"][0]
    seen = [hurt]
    for index in range(1, 8):
        seen.append(say(simulation, index, "Alex" if index % 2 else "Jordan",
                        "Shall we look at the menu again?").context["moods"]["Sam"][0])
    assert all(later > earlier for earlier, later in zip(seen, seen[1:]))  # every quiet turn, a little less low
    assert abs(seen[-1]) < abs(hurt) / 4


def test_with_mood_off_no_feeling_is_recorded_and_the_header_says_nothing(user, dinner, settings):
    settings.MOOD_ENABLED = False
    simulation = start(user, dinner, retrieval_mode="prepopulate")
    first = say(simulation, 0, "Jordan", HURT)
    assert "moods" not in first.context
    assert sams_memory_of(simulation, 1).emotional_valence == 0
    assert "You feel" not in header_for(simulation, 1, "Sam")


@pytest.mark.usefixtures("quick_backoff")
def test_the_models_judgement_gives_the_feeling_and_its_word(user, dinner, server):
    server.script(ok("Jordan, the booking is made for eight."))
    server.judgement = json.dumps({"listeners": {
        "Jordan": {"importance": 6, "valence": 0.7, "feeling": "relieved"},
        "Sam": {"importance": 4, "valence": -0.4, "feeling": "left out"},
        "Alex": {"importance": 3}}})
    simulation = start_with_model(user, dinner, server, max_turns=1)
    assert run(simulation, 0) == "done"
    turn = simulation.turns.get(index=0)
    speaker = turn.agent
    feelings = {m.agent: (m.emotional_valence, (m.metadata or {}).get("feeling"))
                for m in Memory.objects.filter(bank=simulation.bank, kind="episodic", turn=1)}
    for name, expected in (("Jordan", (0.7, "relieved")), ("Sam", (-0.4, "left out"))):
        if name != speaker:
            assert feelings[name] == expected
            assert turn.context["moods"][name][1] == expected[1]
    # Asked in the one judgement call: no call of its own.
    assert len(server.scored) == 1

"""Opinions over the real database: a listener moved by a line forms an opinion of its speaker,
kept apart from facts and beliefs, whose confidence grows as later lines bear it out and falls when
one goes against it; the model's words where it judged the line; found by what one asks."""

from __future__ import annotations

import json

import pytest

from memory.living.after_turn import parse
from memory.living.opinions import SEED004_NETWORKS, current, opinions_after_line
from memory.living.relationships import relationships_update
from memory.models import Memory, MemoryBank
from memory.recalling.filters import MemoryFilter
from memory.recalling.search import recall
from memory.recalling.sheet_recall import QUERY_MEMORY_KINDS
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank():
    return MemoryBank.objects.create(name="orchard")


def hear(bank, turn: int, text: str, judged=None):
    memory = memory_create(bank=bank, agent="Maeve", kind="episodic", speaker="Rowan", content=f"Rowan said: {text}",
                           source="earned", turn=turn, importance=5)
    moved = relationships_update(bank=bank, speaker="Rowan", text=text, listeners=["Maeve"], turn=turn,
                                 evidence={"Maeve": memory})
    return opinions_after_line(bank=bank, moved=moved, turn=turn, memories=[memory], judged=judged)


def test_evidence_moves_the_confidence_of_an_opinion_both_ways(bank):
    first, = hear(bank, 1, "Maeve, you lied to me about the field.")
    assert first.kind == "opinion" and first.about == "Rowan"
    assert first.content.startswith("What I think of Rowan: ") and first.content.endswith("A first impression.")
    assert first.metadata["opinion"]["confidence"] == 0.4 and first.metadata["opinion"]["sign"] == -1
    second, = hear(bank, 2, "Maeve, you cheated us all and you lied again.")
    assert second.metadata["opinion"]["confidence"] == 0.55 and second.content.endswith("I'm fairly sure.")
    first.refresh_from_db()
    assert first.metadata["superseded_turn"] == 2 and current(bank, "Maeve", "Rowan").pk == second.pk
    third, = hear(bank, 3, "Thank you, Maeve, I'm grateful for everything you did.")
    assert third.metadata["opinion"]["confidence"] == 0.25  # it went against what she thought
    assert list(third.evidence.values_list("content", flat=True)) == [
        "Rowan said: Thank you, Maeve, I'm grateful for everything you did."]
    assert hear(bank, 4, "The weather is turning.") == []  # nothing moved, no evidence
    found = recall(bank, "what do I think of Rowan?", agent="Maeve", filter=MemoryFilter(kinds=["opinion"]), k=1)
    assert found[0].memory.pk == third.pk


def test_the_models_words_and_the_four_networks(bank):
    judged = parse(json.dumps({"listeners": {"Maeve": {"importance": 7, "opinion": "He's hiding something about the field."},
                                             "Rowan": {"importance": 3, "opinion": "I'm clever"}}}),
                   names=["Maeve", "Rowan"], speaker="Rowan")
    assert judged.opinions == {"Maeve": "He's hiding something about the field"}
    made, = hear(bank, 1, "Maeve, you lied to me.", judged=judged.opinions)
    assert made.content == "What I think of Rowan: He's hiding something about the field. A first impression."
    assert made.metadata["opinion"]["by"] == "model"
    # An opinion is none of the facts or beliefs; every kind a search reaches belongs to one of seed 004's networks.
    assert not Memory.objects.filter(bank=bank, kind__in=["semantic"]).exists()
    networks = [kind for kinds in SEED004_NETWORKS.values() for kind in kinds]
    assert sorted(networks) == sorted(set(networks)) and set(QUERY_MEMORY_KINDS) <= set(networks)


def test_an_opinion_said_again_in_the_same_words_is_revised_not_piled_up(bank):
    """A long friendship: line after warm line, what Maeve thinks of Rowan stays one memory (more
    sure each time) until its words change, so a search finds it once, not a hundred times."""
    for turn, text in enumerate(["Thank you, Maeve, that was kind.", "Thank you again, Maeve, you are kind.",
                                 "Thanks, Maeve, kind as ever."], start=1):
        hear(bank, turn, text, judged={"Maeve": "He is a kind man"})
    held = Memory.objects.filter(bank=bank, agent="Maeve", kind="opinion")
    assert held.count() == 1
    only = held.get()
    assert only.content == "What I think of Rowan: He is a kind man. I'm fairly sure."
    assert only.metadata["opinion"]["evidence"] == 3 and only.evidence.count() == 3
    hear(bank, 4, "Maeve, you lied to me about the field.", judged={"Maeve": "He lies when it suits him"})
    assert held.count() == 2 and current(bank, "Maeve", "Rowan").content.startswith("What I think of Rowan: He lies")

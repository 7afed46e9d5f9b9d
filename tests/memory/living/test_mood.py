"""Mood over the real database and embedding model: a line's feeling in each listener's memory of
it (the model's word, else the offline judge's move), the goals it touches, the mood those feelings
add up to and fade from, and the searches it primes."""

from __future__ import annotations

import json

import pytest

from memory.embedding.cache import embed_one
from memory.living.after_turn import parse
from memory.living.mood import FADE, feel_line, moods, prime, word_for
from memory.living.relationships import relationships_update
from memory.models import Memory, MemoryBank
from memory.recalling.search import recall
from memory.services.memories import memory_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def bank():
    bank = MemoryBank.objects.create(name="orchard")
    memory_create(bank=bank, agent="Maeve", kind="character", category="goals", source="gifted",
                  content="My goals: keep the orchard whole; find out who sold the east field.",
                  related_goals=["keep the orchard whole", "find out who sold the east field"])
    return bank


def heard(bank, turn: int, text: str, agent: str = "Maeve", speaker: str = "Ruairi") -> Memory:
    return memory_create(bank=bank, agent=agent, kind="episodic", category="dialogue", speaker=speaker,
                         content=f"{speaker} said: {text}", source="earned", turn=turn, importance=5)


def test_an_insult_leaves_the_listener_hurt_and_the_mood_fades_back_over_turns(bank):
    line = "Maeve, you lied to me and you cheated the whole family. I hate what you did."
    memory = heard(bank, 1, line)
    moved = relationships_update(bank=bank, speaker="Ruairi", text=line, listeners=["Maeve"], turn=1,
                                 evidence={"Maeve": memory})
    felt = feel_line(bank=bank, memories=[memory], moved=moved, vector=memory.embedding)
    memory.refresh_from_db()
    assert felt["Maeve"] < -0.3 and memory.emotional_valence == felt["Maeve"]
    low = moods(bank, ["Maeve", "Nobody"], 1)
    assert low["Maeve"].valence < -0.3 and low["Maeve"].word in ("uneasy", "upset", "distraught")
    assert low["Nobody"].valence == 0 and low["Nobody"].word == "calm"
    # Nothing else moves her: the mood fades by FADE a turn, back to calm.
    later = moods(bank, ["Maeve"], 4)["Maeve"]
    assert abs(later.valence) < abs(low["Maeve"].valence) * FADE ** 2 + 0.01
    assert moods(bank, ["Maeve"], 15)["Maeve"].word == "calm"


def test_the_models_feeling_wins_over_the_rule_and_names_the_mood(bank):
    memory = heard(bank, 2, "The buyer pulled out. The orchard stays ours.")
    feel_line(bank=bank, memories=[memory], moved=[], judged={"Maeve": 0.8}, words={"Maeve": "relieved"},
              vector=memory.embedding)
    memory.refresh_from_db()
    assert memory.emotional_valence == 0.8 and memory.metadata["feeling"] == "relieved"
    assert moods(bank, ["Maeve"], 2)["Maeve"].word == "relieved"
    # Where the model's word and the mood disagree (two bad lines since), the band's word stands.
    for turn in (3, 4):
        low = heard(bank, turn, "Another field is gone.")
        feel_line(bank=bank, memories=[low], moved=[], judged={"Maeve": -0.9}, vector=None)
    assert moods(bank, ["Maeve"], 4)["Maeve"].word == word_for(moods(bank, ["Maeve"], 4)["Maeve"].valence)


def test_a_line_near_a_goal_carries_it_and_one_that_is_not_does_not(bank):
    near = heard(bank, 1, "Someone sold the east field behind your back, and I know who.")
    away = heard(bank, 1, "Pass the salt, would you?")
    feel_line(bank=bank, memories=[near], moved=[], vector=near.embedding)
    feel_line(bank=bank, memories=[away], moved=[], vector=away.embedding)
    near.refresh_from_db()
    away.refresh_from_db()
    assert "find out who sold the east field" in near.related_goals
    assert away.related_goals == []


def test_a_mood_primes_the_memories_that_match_it_with_its_own_score_part(bank):
    sad = memory_create(bank=bank, agent="Maeve", kind="episodic", content="Ruairi said: the harvest failed again.",
                        source="earned", turn=1, importance=5, emotional_valence=-0.8)
    glad = memory_create(bank=bank, agent="Maeve", kind="episodic", content="Ruairi said: the harvest was a joy again.",
                         source="earned", turn=1, importance=5, emotional_valence=0.8)
    query = "what happened with the harvest?"
    plain = recall(bank, query, agent="Maeve", k=2)
    low = recall(bank, query, agent="Maeve", k=2, mood=-0.7)
    high = recall(bank, query, agent="Maeve", k=2, mood=0.7)
    assert all("mood" not in r.components for r in plain)
    assert low[0].memory.pk == sad.pk and low[0].components["mood"] > 0
    assert high[0].memory.pk == glad.pk and high[0].components["mood"] > 0
    # The gain is the part's: the same memory's score moves by exactly it.
    base = {r.memory.pk: r.score for r in plain}
    assert low[0].score == pytest.approx(base[sad.pk] + low[0].components["mood"], abs=1e-6)
    # A calm agent's search is the plain one.
    assert [r.memory.pk for r in prime(list(plain), 0.01)] == [r.memory.pk for r in plain]


def test_the_judgements_answer_gives_each_listeners_feeling():
    answer = json.dumps({"listeners": {
        "Maeve": {"importance": 8, "valence": -1.7, "feeling": "Betrayed."},
        "Ruairi": {"importance": 3, "valence": 0.5, "feeling": "smug"},
        "Tess": {"importance": 2, "valence": "not a number"}}})
    judged = parse(answer, names=["Maeve", "Ruairi", "Tess"], speaker="Ruairi")
    assert judged.feelings == {"Maeve": -1.0}  # clamped; the speaker's own and a non-number are not kept
    assert judged.feeling_words == {"Maeve": "betrayed"}


def test_embedding_vectors_are_those_stored(bank):
    """(The goal test's premise: a memory's vector is its text's.)"""
    memory = heard(bank, 1, "Hello there.")
    assert memory.embedding is not None and len(memory.embedding) == len(embed_one("x"))

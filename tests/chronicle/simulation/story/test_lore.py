"""Card lore woken by its keys (SillyTavern's world info): an entry whose key the latest lines say is
put before the agent in the pre-populated prompt, and the inspector records which woke; an entry
whose key nobody says stays where a search would leave it."""

from __future__ import annotations

import pytest

from chronicle.models import Character
from chronicle.simulation.turn.briefing import LORE
from chronicle.simulation.control.tasks import run_turn_task
from memory.recalling.lore import lore_triggered
from memory.models import Memory
from tests.factories import start as start_seeded

pytestmark = pytest.mark.django_db

GATE = "The Obsidian Gate under the old mill opens only at midnight, and only for those who knock thrice."
WELL = "The wishing well in the square is dry since the drought of '09."
# Lore nearer to a dinner conversation than the gate is: what a search brings first.
FOOD = ["Bella's trattoria makes its pasta fresh every morning.", "The noodle bar on Fifth closes at ten.",
        "The pizza place by the station has a two-for-one deal on Tuesdays.", "Sam's favourite dinner is cheap ramen.",
        "The Thai place does the best green curry in town.", "Alex likes to book tables a day ahead.",
        "The burger van at the park sells out by eight.", "The sushi bar downtown is expensive but good."]


@pytest.fixture
def lore_run(user, dinner):
    for character in Character.objects.filter(scenarios=dinner):
        character.extra_memories = [{"content": GATE, "keys": ["Obsidian Gate", "old mill"]},
                                    {"content": WELL, "keys": ["wishing well"]},
                                    *({"content": text, "keys": [f"dinner note {i}"]} for i, text in enumerate(FOOD))]
        character.save(update_fields=["extra_memories"])
    return start_seeded(user, dinner, max_turns=3, retrieval_mode="prepopulate",
                        stage_directions="2: A stranger at the door asks the way to the obsidian gate.")


def test_a_key_in_the_latest_lines_wakes_its_entry(lore_run):
    for index in range(2):
        assert run_turn_task.apply(args=(lore_run.pk, index)).get() == "done"
    first, second = lore_run.turns.get(index=0), lore_run.turns.get(index=1)
    assert not [r for r in first.retrievals.all() if r.arguments.get("section") == LORE]  # nobody said a key yet
    woke = [r for r in second.retrievals.all() if r.arguments.get("section") == LORE]
    assert len(woke) == 1 and [m["content"] for m in woke[0].results] == [GATE] and woke[0].path == "keys"
    known = next(r for r in second.retrievals.all() if r.arguments.get("section") == "What you know")
    assert GATE not in [m["content"] for m in known.results]  # the search alone would have left it out
    note = second.context["note"]["text"]
    assert f"## {LORE}\n- {GATE}" in note and WELL not in note


def test_keys_match_whole_words_in_any_case(lore_run):
    bank, agent = lore_run.bank, lore_run.cast_names[0]
    assert [m.content for m in lore_triggered(bank, agent, "Meet me by the OLD MILL.")] == [GATE]
    assert lore_triggered(bank, agent, "The gateway to the mills is closed.") == []
    both = lore_triggered(bank, agent, "The obsidian gate by the old mill, then the wishing well.")
    assert [m.content for m in both] == [GATE, WELL]  # two keys said before one
    Memory.objects.filter(content=GATE).update(status="archived")
    assert [m.content for m in lore_triggered(bank, agent, "the old mill")] == []

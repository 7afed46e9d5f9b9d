"""Everything the writer authors reaches the agent: each field of the sheet, card lore, pair notes,
the scene and the writer's own memories, in `tools` and in `prepopulate` mode (issue 13, reach)."""

from __future__ import annotations

import json

import pytest

from chronicle.models import Character, Scenario
from chronicle.simulation import services
from chronicle.simulation.tasks import run_turn_task
from chronicle.writing import services as writing
from memory.models import Memory
from memory.tools import SIMULATION_TOOLS, ToolContext, call_tool

pytestmark = pytest.mark.django_db

# One marker word per authored field of Mira's sheet.
MIRA = {
    "name": "Mira", "role": "a lamplighter", "archetype": "The keeper",
    "description": "Mira lights the harbour lamps every dusk.",
    "background": "Mira grew up in Tallowmere, a village of candle makers.",
    "communication_style": "Speaks in vermilion riddles.",
    "decision_style": "Decides by tossing an obsidian coin.",
    "traits": ["zanzibarish"], "skills": ["quillwork"], "values": ["plumbline honesty"],
    "goals": ["find the marigold key"],
    "knowledge": {"Oren": "Oren hides a saffron letter."},
    "extra_memories": [{"content": "The lighthouse bell rings thrice for a drowned ship.", "keys": ["bell"]}],
}
OREN = {"name": "Oren", "role": "a ferryman", "description": "Oren rows the night ferry."}
SHEET_MARKERS = {"identity": "lamplighter", "background": "Tallowmere", "communication": "vermilion",
                 "decision_style": "obsidian", "traits": "zanzibarish", "skills": "quillwork",
                 "values": "plumbline", "goals": "marigold"}
SCENE_MARKER = "Gullwick"


@pytest.fixture
def harbour(user):
    cast = [Character.objects.create(owner=user, **MIRA), Character.objects.create(owner=user, **OREN)]
    scenario = Scenario.objects.create(owner=user, title="Harbour", location=f"The {SCENE_MARKER} pier",
                                       atmosphere="Foggy", time_of_day="Dusk", description="Two keepers meet.")
    scenario.cast.set(cast)
    return scenario


def started(user, scenario, **settings):
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()),
                                           settings={"max_turns": 2, "provider": "scripted", **settings})
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation


def writer_memories(simulation, user) -> dict[str, str]:
    """One writer-formed memory of each kind a run can hold, some for Mira, some for everyone."""
    words = {}
    for kind in ("semantic", "procedural", "emotional", "observation", "reflection", "plan", "episodic", "action",
                 "character", "scene", "character_knowledge"):
        word = f"writer{kind}marker"
        writing.writer_memory_form(simulation=simulation, actor=user, content=f"Mira remembers the {word}.",
                                   agent="" if kind in ("semantic", "scene") else "Mira", kind=kind, importance=6)
        words[kind] = word
    return words


def context_text(turn) -> str:
    return "\n".join(m.get("content") or "" for m in turn.prompt_messages)


def test_every_authored_field_is_reachable_through_the_tools(user, harbour):
    simulation = started(user, harbour)
    words = writer_memories(simulation, user)
    ctx = ToolContext(bank=simulation.bank, agent="Mira", current_turn=1, known_characters=["Mira", "Oren"])

    def answer(tool, arguments=None) -> str:
        result = call_tool(tool, arguments or {}, context=ctx)
        assert not result.error, result.error
        return json.dumps(result.response)

    whole_sheet = answer("query_self")
    for field, marker in SHEET_MARKERS.items():
        assert marker in whole_sheet, field
        assert marker in answer("query_self", {"aspect": field}), field
    assert SCENE_MARKER in answer("query_scene")
    assert "saffron" in answer("query_character", {"name": "Oren"})  # the pair note
    assert "lighthouse bell" in answer("recall_facts", {"topic": "the bell"})  # card lore
    # Every kind the inspector's "Form a memory" offers reaches the agent through some offered tool.
    by_kind = {"semantic": ("recall_facts", "topic"), "character_knowledge": ("recall_facts", "topic"),
               "character": ("query_self", None), "scene": ("query_scene", None)}
    assert set(words) == {k.value for k in Memory.Kind}
    for kind, word in words.items():
        tool, key = by_kind.get(kind, ("query_memory", "query"))
        assert tool in SIMULATION_TOOLS
        assert word in answer(tool, {key: f"the {word}"} if key else {}), kind
    # Another character's sheet is not Mira's to read.
    assert "ferryman" not in whole_sheet


def test_the_first_turn_in_tools_mode_reads_the_whole_sheet(user, harbour):
    simulation = started(user, harbour, retrieval_mode="tools")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    text = context_text(simulation.turns.get(index=0))
    for field, marker in SHEET_MARKERS.items():
        assert marker in text, field
    assert SCENE_MARKER in text and "saffron" in text


@pytest.mark.parametrize("mode", ["prepopulate", "both"])
def test_prepopulated_context_holds_the_sheet_scene_lore_and_the_writers_memories(mode, user, harbour):
    simulation = started(user, harbour, retrieval_mode=mode)
    words = writer_memories(simulation, user)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    system = simulation.turns.get(index=0).prompt_messages[0]["content"]
    for field, marker in SHEET_MARKERS.items():
        assert marker in system, field
    assert SCENE_MARKER in system  # "Where you are" is no longer empty
    assert "saffron" in system  # what Mira knows of Oren
    assert "lighthouse bell" in system or any(w in system for w in words.values())  # "What you know"
    sections = {r.arguments.get("section"): r for r in simulation.turns.get(index=0).retrievals.filter(tool="prepopulate")}
    assert sections["Where you are"].results and sections["What you know"].results


def test_what_you_know_finds_lore_and_writer_memories_by_the_last_line(user, harbour):
    simulation = started(user, harbour, retrieval_mode="prepopulate")
    words = writer_memories(simulation, user)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"  # Mira speaks first
    turn = simulation.turns.get(index=0)
    known = [r["content"] for r in turn.retrievals.get(arguments__section="What you know").results]
    assert any("lighthouse bell" in c for c in known) or any(w in c for w in words.values() for c in known)

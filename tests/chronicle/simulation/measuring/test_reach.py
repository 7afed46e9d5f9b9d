"""Everything the writer authors reaches the agent: each field of the sheet, card lore, pair notes,
the scene and the writer's own memories, in `tools` and in `prepopulate` mode (reach)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from chronicle.models import Character, Scenario
from chronicle.simulation.control import services
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.writing import services as writing
from memory.models import Memory
from memory.recalling.tools import SIMULATION_TOOLS, ToolContext, call_tool
from tests.prompting import given_text, sent_text

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
                 "character", "scene", "character_knowledge", "goal_progress", "metacognition", "opinion"):
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
    system = sent_text(simulation.turns.get(index=0))
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


# --- characters: public face (to others), secrets (owner only), the card's scenario and
# example dialogue, and lore entries as edited on the character page ----------------------------

CARD_MARKERS = {"public_face": "tangerine", "secret": "wolframite", "card_scenario": "driftglass",
                "mes_example": "periwinkle", "edited_lore": "moonwort", "new_lore": "bridgetroll"}


@pytest.fixture
def authored_harbour(user, harbour, client):
    """Mira's public face, a secret, card scenario and example dialogue; her lore edited through the
    character page (the card entry rewritten, one added, one disabled)."""
    mira = harbour.cast.get(name="Mira")
    mira.extra_memories = mira.extra_memories + [{"content": "The fog hides a kraken named Gorvald.", "keys": ["fog"],
                                                  "card": {}}]
    mira.save()
    client.force_login(user)
    response = client.post(reverse("character_edit", args=[mira.pk]), {
        "name": "Mira", "role": MIRA["role"], "archetype": MIRA["archetype"], "description": MIRA["description"],
        "background": MIRA["background"], "communication_style": MIRA["communication_style"],
        "decision_style": MIRA["decision_style"], **{f: MIRA[f] for f in ("traits", "skills", "values", "goals")},
        "knowledge_name": ["Oren"], "knowledge_text": [MIRA["knowledge"]["Oren"]],
        "public_face": "Mira wears a tangerine scarf and greets every boat.",
        "secrets": ["Mira hid the wolframite key under the pier."],
        "card_scenario": "{{char}} waits for {{user}} by the driftglass beacon.",
        "mes_example": "<START>\n{{user}}: Lit yet?\n{{char}}: Not till the periwinkle hour.",
        "extra_memories_index": ["0", "1", ""], "extra_memories_keys": ["bell", "fog", "bridge"],
        "extra_memories_content": ["The moonwort bell rings thrice for a drowned ship.",
                                   "The fog hides a kraken named Gorvald.", "A bridgetroll tolls the ferry."],
        "extra_memories_state": ["on", "off", "on"],
    })
    assert response.status_code == 302, response.content.decode()[:2000]
    return harbour


def test_authored_card_fields_reach_through_the_tools_and_the_secret_only_its_owner(user, authored_harbour):
    simulation = started(user, authored_harbour)

    def answer(agent, tool, arguments=None) -> str:
        ctx = ToolContext(bank=simulation.bank, agent=agent, current_turn=1, known_characters=["Mira", "Oren"])
        result = call_tool(tool, arguments or {}, context=ctx)
        assert not result.error, result.error
        return json.dumps([r.memory.content for r in result.results])

    assert "tangerine" in answer("Oren", "query_character", {"name": "Mira"})
    assert "wolframite" in answer("Mira", "query_self", {"aspect": "secrets"})
    assert "driftglass" in answer("Mira", "query_background")
    assert "periwinkle" in answer("Mira", "query_communication_style")
    assert "Oren waits for" not in answer("Mira", "query_background")  # {{char}} is Mira, {{user}} is Oren
    assert "Mira waits for Oren by the driftglass beacon" in answer("Mira", "query_self", {"aspect": "background"})
    facts = answer("Mira", "recall_facts", {"topic": "the bell and the bridge"})
    assert "moonwort" in facts and "bridgetroll" in facts
    assert "lighthouse bell" not in facts and "Gorvald" not in answer("Mira", "recall_facts", {"topic": "fog kraken"})
    for tool, arguments in [("query_self", {}), ("recall_facts", {"topic": "the wolframite key"}),
                            ("query_memory", {"query": "the wolframite key"}), ("query_character", {"name": "Mira"})]:
        assert "wolframite" not in answer("Oren", tool, arguments), tool


@pytest.mark.parametrize("mode", ["tools", "prepopulate", "both"])
def test_authored_card_fields_reach_each_mode_and_the_secret_stays_with_its_owner(mode, user, authored_harbour):
    simulation = started(user, authored_harbour, retrieval_mode=mode)
    for index in (0, 1):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    mira, oren = simulation.turns.get(index=0), simulation.turns.get(index=1)
    assert (mira.agent, oren.agent) == ("Mira", "Oren")
    mira_seen = context_text(mira) + json.dumps([r.results for r in mira.retrievals.all()])
    for marker in ("wolframite", "driftglass", "periwinkle"):
        assert marker in mira_seen, marker
    if mode != "tools":  # pre-populated "What you know": the edited and the added lore entry
        assert "moonwort" in mira_seen and "bridgetroll" in mira_seen
    assert "Gorvald" not in mira_seen  # the disabled entry
    oren_retrieved = json.dumps([r.results for r in oren.retrievals.all()])
    assert "tangerine" in context_text(oren) + oren_retrieved  # Mira's public face
    assert "wolframite" not in oren_retrieved and "wolframite" not in given_text(oren)


@pytest.mark.parametrize("mode", ["tools", "prepopulate"])
def test_a_long_background_does_not_crowd_out_the_rest_of_the_sheet(mode, user, harbour):
    mira = Character.objects.get(owner=user, name="Mira")
    mira.background = " ".join(f"In year {n} Mira mended the seawall and counted the gulls again." for n in range(120))
    mira.secrets = ["I sank the tallow barge."]
    mira.save()
    simulation = started(user, harbour, retrieval_mode=mode)
    assert Memory.objects.in_bank(simulation.bank).filter(agent="Mira", category="background").count() > 20
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    text = context_text(simulation.turns.get(index=0))
    for field, marker in SHEET_MARKERS.items():
        if field != "background":  # replaced: some of the long one is there instead
            assert marker in text, field
    assert "seawall" in text and "tallow barge" in text

"""Secrets stay with their owner, the others see a public face, and card macros are resolved where
card text becomes a memory or a prompt while exports keep the raw text."""

from __future__ import annotations

import json

import pytest

from chronicle.models import Character, Scenario
from chronicle.services.card_export import character_to_card
from chronicle.services.cards import card_import
from chronicle.simulation.control import services
from chronicle.simulation.control.tasks import run_turn_task
from memory.models import Memory
from memory.forming.seed_specs import character_specs
from memory.forming.seeding import seed_bank
from memory.forming.sheets import CharacterSheet
from memory.recalling.tools import SIMULATION_TOOLS, ToolContext, call_tool
from tests.prompting import given_text

pytestmark = pytest.mark.django_db

SECRET = "Mira sank the harbourmaster's boat and hid the wolframite key under the pier."
MIRA = {"name": "Mira", "role": "a lamplighter", "archetype": "The schemer",
        "description": "Mira is a quietly jealous lamplighter with a taste for revenge.",
        "public_face": "Everyone knows Mira by her lantern and her cheerful whistling.",
        "background": "Mira was raised by smugglers in Tallowmere.", "secrets": [SECRET]}
OREN = {"name": "Oren", "role": "a ferryman", "description": "Oren rows the night ferry."}
PRIVATE_WORDS = ["wolframite", "jealous", "schemer", "smugglers"]  # secret, description, archetype, background


def test_others_know_a_character_by_name_role_and_public_face_only():
    mira, oren = CharacterSheet(**MIRA), CharacterSheet(**OREN)
    (who_is_mira,) = [s for s in character_specs(oren, [mira, oren]) if s.about == "Mira"]
    assert "lamplighter" in who_is_mira.content and "cheerful whistling" in who_is_mira.content
    for word in PRIVATE_WORDS:
        assert word not in who_is_mira.content
    secrets = [s for s in character_specs(mira, [mira, oren]) if s.category == "secrets"]
    assert [(s.agent, s.kind) for s in secrets] == [("Mira", "character")] and "wolframite" in secrets[0].content
    assert not any("wolframite" in s.content for s in character_specs(oren, [mira, oren]))


@pytest.fixture
def harbour(user):
    cast = [Character.objects.create(owner=user, **MIRA), Character.objects.create(owner=user, **OREN)]
    scenario = Scenario.objects.create(owner=user, title="Harbour", location="The pier", description="Two meet.")
    scenario.cast.set(cast)
    return scenario


def _started(user, scenario, **settings):
    simulation = services.simulation_start(owner=user, scenario=scenario, cast=list(scenario.cast.all()),
                                           settings={"max_turns": 4, "provider": "scripted", **settings})
    services.simulation_seed(simulation_id=simulation.pk)
    simulation.refresh_from_db()
    return simulation


def _every_read(agent: str, other: str, secret_id: int) -> dict[str, dict]:
    """Each offered tool with arguments aimed as straight at the secret as an agent could aim them."""
    aimed = "the wolframite key under the pier, the sunken boat"
    calls = {
        "query_self": [{}] + [{"aspect": a} for a in ("secrets", "background", "identity")],
        "query_background": [{}], "query_communication_style": [{}], "query_scene": [{}],
        "query_character": [{"name": other}], "query_memory": [{"query": aimed}],
        "recall_episodes": [{"query": aimed}], "recall_facts": [{"topic": aimed}],
        "recall_interactions": [{"character_name": other}], "check_similar_situations": [{"current_context": aimed}],
        "form_memory": [], "reinforce_memory": [{"memory_id": secret_id}],
        "associate_memories": [{"memory_id_1": secret_id, "memory_id_2": secret_id}],
    }
    assert set(calls) == set(SIMULATION_TOOLS), "a new tool must be added to this leak check"
    return calls


def test_a_secret_reaches_its_owner_and_no_one_else(user, harbour):
    simulation = _started(user, harbour)
    secret = Memory.objects.in_bank(simulation.bank).get(category="secrets")
    assert secret.agent == "Mira" and "wolframite" in secret.content

    mira = ToolContext(bank=simulation.bank, agent="Mira", current_turn=1, known_characters=["Mira", "Oren"])
    own = call_tool("query_self", {"aspect": "secrets"}, context=mira)
    assert not own.error and "wolframite" in json.dumps(own.response)
    assert "wolframite" in json.dumps(call_tool("query_self", {}, context=mira).response)

    oren = ToolContext(bank=simulation.bank, agent="Oren", current_turn=1, known_characters=["Mira", "Oren"])
    for tool, calls in _every_read("Oren", "Mira", secret.pk).items():
        for arguments in calls:
            result = call_tool(tool, arguments, context=oren)
            answer = json.dumps({k: v for k, v in result.response.items() if k not in ("query", "topic")})
            assert "wolframite" not in answer, (tool, arguments)  # (the query itself is echoed back)
            assert not any("wolframite" in r.memory.content for r in result.results), (tool, arguments)
    who_is_mira = json.dumps(call_tool("query_character", {"name": "Mira"}, context=oren).response)
    assert "cheerful whistling" in who_is_mira  # the public face is what Oren gets
    for word in PRIVATE_WORDS:
        assert word not in who_is_mira
    # Nothing gifted to Oren (or to everyone) holds it.
    others = Memory.objects.in_bank(simulation.bank).exclude(agent="Mira")
    assert not others.filter(content__icontains="wolframite").exists()


@pytest.mark.parametrize("mode", ["prepopulate", "both"])
def test_a_secret_is_in_its_owners_prompt_and_never_in_anothers(user, harbour, mode):
    simulation = _started(user, harbour, retrieval_mode=mode)
    for index in (0, 1):  # Mira, then Oren
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    mira_turn, oren_turn = simulation.turns.get(index=0), simulation.turns.get(index=1)
    assert (mira_turn.agent, oren_turn.agent) == ("Mira", "Oren")
    assert "wolframite" in given_text(mira_turn)
    oren_context = "\n".join(m.get("content") or "" for m in oren_turn.prompt_messages)
    assert "cheerful whistling" in oren_context
    # Mira's own line may say it aloud: what matters is that no gifted memory or prompt section gives it.
    oren_system = given_text(oren_turn)
    for word in PRIVATE_WORDS:
        assert word not in oren_system
    retrieved = [r["content"] for call in oren_turn.retrievals.all() for r in call.results]
    assert retrieved and not any("wolframite" in c for c in retrieved)


# --- macros ----------------------------------------------------------------------------------

SERAPHINA = {
    "spec": "chara_card_v2", "spec_version": "2.0",
    "data": {
        "name": "Seraphina",
        "description": "{{char}} is a guardian of Eldoria's glade. {{char}} found {{user}} hurt and brought "
                       "{{User}} to her hut. <BOT> guards <USER>.",
        "personality": "", "scenario": "{{user}} wakes in {{char}}'s hut.",
        "first_mes": "*{{char}} smiles at {{user}}.* You're awake!",
        "mes_example": "<START>\n{{user}}: Who are you?\n{{char}}: I am the glade's keeper.",
        "character_book": {"entries": [
            {"keys": ["glade"], "content": "The glade shields {{user}} while {{char}} watches."},
            {"keys": ["shadows"], "content": "{{char}} fears the shadowmoss creeping into the glade."},
        ]},
    },
}


def _contents(bank) -> list[str]:
    return list(Memory.objects.in_bank(bank).values_list("content", flat=True))


def test_macros_are_resolved_in_memories_and_kept_raw_for_export(user):
    (seraphina,) = card_import(owner=user, raw=json.dumps(SERAPHINA).encode()).characters
    sheet = seraphina.to_sheet()  # the preview: no scenario, {{user}} is "the user"
    assert sheet.description.startswith("Seraphina is a guardian") and "found the user hurt" in sheet.description
    assert "brought the user to her hut. Seraphina guards the user." in sheet.description
    assert sheet.first_mes == "*Seraphina smiles at the user.* You're awake!"
    seed_bank(bank=seraphina.preview_bank, characters=[sheet], scenario=None)
    contents = _contents(seraphina.preview_bank)
    assert not any("{{" in c or "<BOT>" in c for c in contents)
    assert any("The glade shields the user while Seraphina watches." == c for c in contents)  # lore
    assert any("the user wakes in Seraphina's hut" in c for c in contents)  # the card's scenario
    assert any("the user: Who are you?" in c and "<START>" not in c for c in contents)  # mes_example
    # The model and every export keep the macros as written.
    seraphina.refresh_from_db()
    assert seraphina.description == SERAPHINA["data"]["description"]
    card = character_to_card(seraphina)["data"]
    assert card["description"] == SERAPHINA["data"]["description"]
    assert card["first_mes"] == SERAPHINA["data"]["first_mes"]
    assert [e["content"] for e in card["character_book"]["entries"]] == [
        e["content"] for e in SERAPHINA["data"]["character_book"]["entries"]]


def test_user_is_the_one_addressed_or_the_scenarios_name(user, make_character):
    (seraphina,) = card_import(owner=user, raw=json.dumps(SERAPHINA).encode()).characters
    alex = make_character(user)
    scenario = Scenario.objects.create(owner=user, title="Glade")
    sheets = {s.name: s for s in scenario.cast_sheets([seraphina, alex])}
    assert sheets["Seraphina"].first_mes == "*Seraphina smiles at Alex.* You're awake!"
    sam = make_character(user, name="Sam")
    sheets = {s.name: s for s in scenario.cast_sheets([seraphina, alex, sam])}
    assert sheets["Seraphina"].first_mes == "*Seraphina smiles at someone.* You're awake!"
    scenario.user_name = "the wanderer"
    sheets = {s.name: s for s in scenario.cast_sheets([seraphina, alex, sam])}
    assert "found the wanderer hurt" in sheets["Seraphina"].description


def test_a_simulation_opens_with_the_resolved_greeting(user, make_character):
    (seraphina,) = card_import(owner=user, raw=json.dumps(SERAPHINA).encode()).characters
    alex = make_character(user)
    scenario = Scenario.objects.create(owner=user, title="Glade", location="A glade")
    scenario.cast.set([seraphina, alex])
    simulation = _started(user, scenario, greeting_by="Seraphina")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn = simulation.turns.get(index=0)
    assert turn.agent == "Seraphina" and turn.utterance == "*Seraphina smiles at Alex.* You're awake!"
    assert not any("{{" in c for c in _contents(simulation.bank))

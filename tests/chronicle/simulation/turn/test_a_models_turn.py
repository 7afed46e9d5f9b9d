"""What a model is told each turn: the tools as offered, the markup, a fixed header, the stage in its
transcript; and how the words it says move relationships and reach whom they should."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chronicle import headless
from chronicle.simulation.turn.tool_calls import SEED_000_TOOLS, compact_schemas
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.prompting.prompts import MARKUP, system_prompt
from chronicle.simulation.control.services import simulation_start
from chronicle.simulation.story.stage import deliver
from memory.living.relationships import judge
from memory.recalling.tools import SIMULATION_TOOLS, openai_tool_schemas
from tests.chronicle.simulation.conftest import wait_status
from tests.prompting import last_user

EVERY_KIND = Path(__file__).resolve().parents[3] / "fixtures" / "probes" / "every_kind.json"


@pytest.mark.parametrize("line", ["What kind of budget are we talking about?", "Trust me, it'll be fine.",
                                  "I swear the risotto is worth it.", "What a lovely place this is."])
def test_everyday_words_move_no_relationship(line):
    assert not judge(line, listener="Alex").changes


@pytest.mark.parametrize("line, trust, affinity", [
    ("Thank you, Alex, really.", 0, +1),
    ("You betrayed me, Alex.", -1, 0),
    ("Touch my inn again and you'll regret it.", -1, -1),
])
def test_a_thank_you_a_betrayal_and_a_threat_do(line, trust, affinity):
    moved = judge(line, listener="Alex")
    assert (moved.trust > 0) - (moved.trust < 0) == trust and (moved.affinity > 0) - (moved.affinity < 0) == affinity


def test_a_line_said_to_someone_else_by_name_moves_only_them():
    assert not judge("Thank you, Oren, that was kind of you.", listener="Tess", others=["Oren", "Tess"]).changes
    assert judge("Thank you, Oren, that was kind of you.", listener="Oren", others=["Oren", "Tess"]).affinity > 0


@pytest.mark.parametrize("line", ["*whispers to Sam:* Bella's is closing.", "(whispering to Sam) Bella's is closing.",
                                  "*leans over to Sam and whispers* Bella's is closing.",
                                  "*whispers in Sam's ear* Bella's is closing."])
def test_the_whispers_models_write_reach_only_their_addressee(line):
    heard = deliver(line, speaker="Alex", present=["Alex", "Jordan", "Sam"])
    assert heard.whisper_to == "Sam" and heard.heard_by == ["Alex", "Sam"] and heard.text == "Bella's is closing."


def test_an_action_mid_line_is_seen():
    heard = deliver("Fine. *slams the menu down* We go Thai.", speaker="Alex", present=["Alex", "Jordan"])
    assert heard.actions == ["slams the menu down"] and heard.heard_by == ["Alex", "Jordan"]


def test_the_prompt_names_exactly_the_tools_offered_with_their_parameters_and_the_budget():
    offered = ["query_self", "query_memory", "recall_episodes"]
    tools = compact_schemas(openai_tool_schemas(offered))
    text = system_prompt(mode="tools", agent="Alex", tools=tools, budget=3)
    assert "query_self(aspect?)" in text and "query_memory(query, tags?, tag_mode?)" in text
    assert "recall_episodes(query, time_range?, importance_threshold?, tags?, tag_mode?)" in text
    assert "at most 3 tool calls this turn, then speak" in text
    assert not any(f"{name}(" in text for name in SIMULATION_TOOLS if name not in offered)
    assert "query_memory(question)" not in text and MARKUP in text
    # Seed 000's minimal prompt stays, for writers who study discovery.
    minimal = system_prompt(mode="tools", agent="Alex", tools=tools, budget=3, minimal=True)
    assert "query_memory(question)" in minimal and MARKUP not in minimal
    assert set(SEED_000_TOOLS) <= set(SIMULATION_TOOLS)


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_stage_directions_reach_the_transcript_of_those_who_witnessed_them(user, celery_worker):
    imported = headless.scenario_import(raw=EVERY_KIND.read_bytes(), username=user.username)
    values = headless.run_settings(imported=imported, turns=None, provider=None, mode="tools")
    simulation = simulation_start(owner=user, scenario=imported.scenario, cast=list(imported.scenario.cast.all()),
                                  settings=values)
    wait_status(simulation, Simulation.Status.COMPLETED)
    turns = {t.number: t for t in simulation.turns.all()}

    def told(number: int) -> tuple[str, str]:
        messages = turns[number].prompt_messages
        return messages[0]["content"] + "\n" + last_user(turns[number]), \
            next(m["content"] for m in messages if m["role"] == "user")

    system, user_message = told(5)  # Alex, after "4: Sam steps out"
    # Where it happened, without a turn number of its own: just before turn 4's line, not "[turn 4] *…*".
    assert "\n*Sam steps out*\n[turn 4] " in user_message and "] *Sam steps out*" not in user_message
    assert "## You\nYou are Alex: Project manager" in system and "Here with you: Jordan\n" in system
    # With tools alone, what Alex wants is in the header: no round spent asking for it every turn.
    goals = next(c for c in json.loads(EVERY_KIND.read_text())["characters"] if c["name"] == "Alex")["goals"]
    assert f"\nYou want: {'; '.join(goals)}\n" in system
    # and what else its sheet holds, by the aspect query_self takes: the secret is there to ask for.
    assert "\nAlso on your sheet, for query_self: background, communication, decision_style, traits, skills, " \
           "values, secrets\nWhere: " in system
    # The place and the writer's time each labelled: "Early evening" is not a name mid-sentence.
    assert "\nWhere: Alex's apartment, living room\nWhen: Early evening, around seven" in system
    system, user_message = told(7)  # Alex, after the alarm at 6
    assert "*The neighbour's smoke alarm goes off upstairs*" in user_message
    # Sam, back at 9: its own exit and return, not what happened while it was out.
    system, user_message = told(9)
    assert "*Sam steps out*" in user_message and "*Sam comes back*" in user_message
    # and that turns went on meanwhile, which the two directions side by side did not say.
    assert "*Sam steps out*\n(turns 4–8 went on without you)\n*Sam comes back*" in user_message
    assert "smoke alarm" not in user_message and "cousin Priya" not in user_message
    assert "Here with you: Alex, Jordan" in system
    # query_scene says who is here: at turn 6, with Sam out, Alex is with Jordan.
    from chronicle.simulation.turn.engine import tool_context
    from chronicle.simulation.run.models import Turn
    from chronicle.simulation.turn.inputs import turn_input
    from memory.recalling.tools import call_tool

    at_six = turn_input(turn=Turn(simulation=simulation, index=5, agent="Alex"))
    scene = call_tool("query_scene", {}, context=tool_context(at_six, deferred=[]))
    assert scene.response["who_is_here"] == ["Jordan"] and scene.response["memories"]
    # And the time now, as the header's clock tells it (the scene's own time is when it began).
    assert scene.response["time_now"] == "turn 6"
    skipped = turn_input(turn=Turn(simulation=simulation, index=5, agent="Alex"))
    skipped.stage = [*skipped.stage, (6, "Two hours later")]
    later = call_tool("query_scene", {}, context=tool_context(skipped, deferred=[]))
    assert later.response["time_now"] == "turn 6, 2 hours since the scene began"


def test_the_header_clock_moves_with_the_writers_time_skips():
    from chronicle.simulation.turn.briefing import now_header
    from chronicle.simulation.turn.types import TurnInput
    from memory.forming.sheets import CharacterSheet, ScenarioSheet

    def header_at(index, stage, minutes_per_turn=0.0, clock=None):
        turn = TurnInput(bank=None, agent="Alex", index=index, cast=[CharacterSheet(name="Alex"), CharacterSheet(name="Sam")],
                         scenario=ScenarioSheet(title="Dinner", location="Bella's", time_of_day="Evening"),
                         transcript=[], mode="prepopulate", stage=stage, minutes_per_turn=minutes_per_turn, clock=clock)
        return now_header(turn).splitlines()[-1]

    assert header_at(3, []) == "Time: turn 4"
    assert header_at(5, [(3, "The lights go out."), (5, "Three hours later")]) == \
        "Time: turn 6, 3 hours since the scene began"
    # With minutes per turn, the turns and the skips (in turns' worth) both count.
    assert header_at(4, [], minutes_per_turn=10, clock=[0, 0, 0, 0, 0, 0]) == "Time: turn 5, 40 minutes since the scene began"


def test_the_header_names_what_else_a_sheet_holds_only_where_a_tool_is_the_way_to_it():
    from chronicle.simulation.turn.briefing import identity_header
    from chronicle.simulation.turn.types import TurnInput
    from memory.forming.sheets import CharacterSheet

    sheet = CharacterSheet(name="Tess", role="Innkeeper", description="Tess keeps the Harbour Inn.",
                           background="Tess came from the islands.", goals=["keep the peace"],
                           secrets=["Tess owes the smugglers money."])

    def header(mode="tools", tools=("query_self", "query_memory")):
        return identity_header(TurnInput(bank=None, agent="Tess", index=0, cast=[sheet], scenario=None,
                                         transcript=[], mode=mode, tool_set=list(tools)))

    # Only what the writer filled in, and not what the header already says (who she is, what she wants).
    assert "\nAlso on your sheet, for query_self: background, secrets\n" in header()
    assert "Also on your sheet" not in header(mode="prepopulate")  # the sheet is in the prompt there
    assert "Also on your sheet" not in header(tools=("query_memory",))  # no tool to ask with
    assert "Also on your sheet" not in identity_header(TurnInput(
        bank=None, agent="Ann", index=0, cast=[CharacterSheet(name="Ann", role="Guest")], scenario=None,
        transcript=[], mode="tools"))


def test_query_selfs_aspects_are_named_once_a_call_where_the_header_lists_them():
    from chronicle.simulation.turn.types import TurnInput
    from chronicle.simulation.turn.tool_calls import offered_tools
    from memory.forming.sheets import CharacterSheet

    sheet = CharacterSheet(name="Tess", role="Innkeeper", background="Tess came from the islands.",
                           secrets=["Tess owes the smugglers money."])

    def aspect(mode, cast=(sheet,)):
        turn = TurnInput(bank=None, agent="Tess", index=0, cast=list(cast), scenario=None, transcript=[], mode=mode,
                         tool_set=["query_self", "query_memory"])
        schema = next(t for t in offered_tools(turn, mode) if t["function"]["name"] == "query_self")
        return schema["function"]["parameters"]["properties"]["aspect"]

    # In tools mode the header says "Also on your sheet, for query_self: background, secrets": the
    # schema points there instead of listing every aspect there is with both calls of a turn.
    assert "enum" not in aspect("tools") and "also on your sheet" in aspect("tools")["description"]
    # Where no header lists them (both modes carry the sheet; a sheet of a name alone), the enum stays.
    assert "secrets" in aspect("both")["enum"]
    assert "secrets" in aspect("tools", cast=[CharacterSheet(name="Tess")])["enum"]


@pytest.mark.django_db
def test_a_slow_servers_long_timeout_still_starts_a_run_at_the_longest_wait_a_turn_allows(user, settings):
    """WONDA_LLM_TIMEOUT=1800, set for a slow server, gives runs the longest wait a turn allows
    (600 s) rather than settings that fail validation."""
    settings.LLM_TIMEOUT = 1800
    imported = headless.scenario_import(raw=EVERY_KIND.read_bytes(), username=user.username)
    values = headless.run_settings(imported=imported, turns=2, provider="openai", mode="prepopulate")
    assert values["timeout_s"] == 600
    simulation = Simulation(owner=user, **{k: v for k, v in values.items() if k not in ("script",)})
    simulation.full_clean(exclude=["scenario", "bank"])


@pytest.mark.django_db
@pytest.mark.parametrize("mode, header_has_goals", [("tools", True), ("prepopulate", False)])
def test_a_search_leaves_out_the_goals_the_header_already_states(user, dinner, mode, header_has_goals):
    from chronicle.simulation.turn.briefing import identity_header
    from chronicle.simulation.turn.engine import tool_context
    from chronicle.simulation.run.models import Turn
    from chronicle.simulation.turn.inputs import turn_input
    from memory.api import call_tool
    from tests.factories import start

    simulation = start(user, dinner, retrieval_mode=mode)
    turn = turn_input(turn=Turn(simulation=simulation, index=0, agent="Alex"))
    context = tool_context(turn, deferred=[])
    found = call_tool("query_memory", {"query": "What are my goals tonight?"}, context=context)
    categories = [r.memory.category for r in found.results]
    assert ("goals" in categories) is not header_has_goals
    assert ("get everyone fed by eight" in identity_header(turn)) is header_has_goals
    # Asked for by name, they still come back.
    asked = call_tool("query_self", {"aspect": "goals"}, context=context)
    assert any("fed by eight" in r.memory.content for r in asked.results)

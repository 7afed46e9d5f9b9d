"""A simulation's tool set: what is offered is what the model sees; the write tools store their
memories with the turn (never twice, never from a failed attempt); a card greeting opens a run."""

from __future__ import annotations

import json
import re

import pytest
from django.core.exceptions import ValidationError

from chronicle.models import Character
from chronicle.simulation.control import services
from chronicle.simulation.pages.forms import SimulationForm
from chronicle.simulation.run.models import Simulation
from memory.models import Memory
from memory.recalling.tools import DEFAULT_SIMULATION_TOOLS, READ_TOOLS, SIMULATION_TOOLS, WRITE_TOOLS
from devtools.fake_llm import error, ok, tool_call
from tests.factories import run
from tests import factories

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("quick_backoff")]


def start(user, scenario, server=None, **settings) -> Simulation:
    return factories.start(user, scenario, server, **{"max_turns": 3, **settings})


def offered(request: dict) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools") or []}


def test_by_default_the_six_most_used_tools_are_offered_and_every_tool_can_be(user, dinner, server):
    server.script(ok("Hello."), ok("Hi."))
    simulation = start(user, dinner, server)
    assert simulation.tool_set == DEFAULT_SIMULATION_TOOLS
    assert run(simulation) == "done"
    assert offered(server.requests[0]) == {"query_self", "query_scene", "query_character", "query_memory",
                                           "recall_facts", "recall_interactions"}
    everything = start(user, dinner, server, tool_set=list(SIMULATION_TOOLS))
    assert run(everything) == "done"
    assert offered(server.requests[-1]) == set(READ_TOOLS) | set(WRITE_TOOLS)


def test_a_narrowed_tool_set_is_what_the_model_is_offered(user, dinner, server):
    server.script(ok(tool_calls=[tool_call("form_memory", {"content": "x", "importance": 5})]), ok("Fine."))
    simulation = start(user, dinner, server, tool_set=["query_self", "query_memory"])
    assert run(simulation) == "done"
    assert offered(server.requests[0]) == {"query_self", "query_memory"}
    # A tool outside the set is refused, readably, and writes nothing.
    (refused,) = simulation.turns.get(index=0).retrievals.all()
    assert "unknown tool 'form_memory'" in refused.error
    assert not Memory.objects.in_bank(simulation.bank).filter(category="formed").exists()


def test_no_tools_at_all_means_no_tool_round_nor_tool_instructions(user, dinner, server):
    server.script(ok("Straight to it."))
    simulation = start(user, dinner, server, tool_set=[], retrieval_mode="both")
    assert run(simulation) == "done"
    assert "tools" not in server.requests[0] or not server.requests[0]["tools"]
    system = server.requests[0]["messages"][0]["content"]
    assert "Who you are" in system and "query_self" not in system


def test_tools_mode_without_a_tool_or_with_an_unknown_one_is_refused(user, dinner):
    for tool_set, message in (([], "The Tools mode needs at least one tool"), (["launch_rockets"], "Unknown tool"),
                              ("query_self", "A list of tool names")):
        with pytest.raises(ValidationError, match=message):
            start(user, dinner, retrieval_mode="tools", tool_set=tool_set)


def test_form_memory_in_a_turn_is_stored_with_the_turn_and_recalled_later(user, dinner, server):
    server.script(
        ok(tool_calls=[tool_call("form_memory", {"content": "Jordan's trattoria closes at ten on Sundays.",
                                                 "importance": 8, "type": "semantic"})]),
        ok("Noted."),
        ok("Sure."),  # turn 2 (Jordan)
        ok(tool_calls=[tool_call("recall_facts", {"topic": "when does the trattoria close?"})]),  # turn 3 (Sam)
        ok("Hm."))
    simulation = start(user, dinner, server, tool_set=list(SIMULATION_TOOLS))
    assert run(simulation, 0) == "done"
    turn = simulation.turns.get(index=0)
    formed = Memory.objects.in_bank(simulation.bank).get(category="formed")
    assert (formed.agent, formed.kind, formed.turn, formed.source) == ("Alex", "semantic", 1, "earned")
    assert formed.importance == 8
    write = turn.retrievals.get(tool="form_memory")
    assert write.error == "" and write.response["stored"] is True
    # The memory is Alex's: Sam's recall_facts does not see it, Alex's would.
    assert run(simulation, 1) == "done" and run(simulation, 2) == "done"
    facts = simulation.turns.get(index=2).retrievals.get(tool="recall_facts")
    assert all("closes at ten" not in r["content"] for r in facts.results)


def test_a_failed_attempt_leaves_no_written_memory_and_the_redo_writes_once(user, dinner, server):
    remember = tool_call("form_memory", {"content": "I promised to book the table.", "importance": 7})
    server.script(ok(tool_calls=[remember]), error(400, "bad request"))  # the model fails after asking to write
    simulation = start(user, dinner, server, tool_set=list(SIMULATION_TOOLS))
    assert run(simulation) == "failed"
    assert not Memory.objects.in_bank(simulation.bank).filter(category="formed").exists()

    server.script(ok(tool_calls=[remember]), ok("Booked."))
    services.simulation_resume(simulation=simulation)
    assert run(simulation) == "done"
    assert Memory.objects.in_bank(simulation.bank).filter(category="formed").count() == 1


def test_reinforce_and_associate_apply_to_the_agents_own_memories_at_the_end_of_the_turn(user, dinner, server):
    simulation = start(user, dinner, server, tool_set=list(SIMULATION_TOOLS))
    own = list(Memory.objects.in_bank(simulation.bank).filter(agent="Alex", kind="character").order_by("pk")[:2])
    before = own[0].decay_rate
    server.script(ok(tool_calls=[tool_call("reinforce_memory", {"memory_id": own[0].pk}),
                                 tool_call("associate_memories", {"memory_id_1": own[0].pk, "memory_id_2": own[1].pk},
                                           "c2")]),
                  ok("Right."))
    assert run(simulation) == "done"
    own[0].refresh_from_db()
    assert own[0].decay_rate == pytest.approx(before * 0.8)  # reinforced once, with the turn
    assert set(own[0].evidence.values_list("pk", flat=True)) == {own[1].pk}


def test_an_agent_cannot_reinforce_someone_elses_memory(user, dinner, server):
    simulation = start(user, dinner, server, tool_set=list(SIMULATION_TOOLS))
    other = Memory.objects.in_bank(simulation.bank).filter(agent="Sam").first()
    server.script(ok(tool_calls=[tool_call("reinforce_memory", {"memory_id": other.pk})]), ok("Hm."))
    assert run(simulation) == "done"
    refused = simulation.turns.get(index=0).retrievals.get(tool="reinforce_memory")
    assert f"No memory {other.pk} among your memories" in refused.error


def test_the_form_saves_the_ticked_tools(user, dinner):
    form = SimulationForm(owner=user, data={
        "scenario": dinner.pk, "max_turns": 3, "speaking_order": "round_robin", "retrieval_mode": "tools",
        "scoring": "similarity", "provider": "scripted", "temperature": 0.7, "max_tokens": 300, "timeout_s": 60,
        "max_tool_calls": 6, "pace_s": 0, "tool_set": ["query_self", "recall_facts", "form_memory"]})
    assert form.is_valid(), form.errors
    settings = form.simulation_settings()
    assert settings["tool_set"] == ["query_self", "recall_facts", "form_memory"]
    simulation = services.simulation_start(owner=user, scenario=dinner, cast=form.cleaned_data["cast"], settings=settings)
    assert simulation.tool_set == ["query_self", "recall_facts", "form_memory"]


def test_a_card_greeting_opens_the_run_as_turn_one(user, dinner, server):
    jordan = Character.objects.get(owner=user, name="Jordan")
    jordan.card_extras = {"first_mes": "Welcome, welcome! Sit, the pasta is nearly ready."}
    jordan.save()
    form = SimulationForm(owner=user, data={
        "scenario": dinner.pk, "max_turns": 3, "speaking_order": "round_robin", "retrieval_mode": "tools",
        "scoring": "similarity", "provider": "scripted", "temperature": 0.7, "max_tokens": 300, "timeout_s": 60,
        "max_tool_calls": 6, "pace_s": 0, "greeting_by": "Jordan", "tool_set": ["query_self"]})
    assert form.is_valid(), form.errors
    server.script(ok("Smells great."))
    simulation = start(user, dinner, server, greeting_by=form.simulation_settings()["greeting_by"])
    assert run(simulation, 0) == "done"
    first = simulation.turns.get(index=0)
    assert first.agent == "Jordan" and first.utterance == "Welcome, welcome! Sit, the pasta is nearly ready."
    assert first.usage["calls"] == 0 and "greeting" in first.note
    assert not server.requests  # no model call for the greeting
    # Everyone heard it; the rotation goes on from Jordan.
    assert Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1).count() == 3
    assert run(simulation, 1) == "done"
    assert simulation.turns.get(index=1).agent == "Sam"


def test_a_greeting_from_outside_the_cast_is_refused_by_the_form(user, dinner):
    Character.objects.create(owner=user, name="Nobody", card_extras={"first_mes": "Hi."})
    form = SimulationForm(owner=user, data={
        "scenario": dinner.pk, "max_turns": 3, "speaking_order": "round_robin", "retrieval_mode": "tools",
        "scoring": "similarity", "provider": "scripted", "temperature": 0.7, "max_tokens": 300, "timeout_s": 60,
        "max_tool_calls": 6, "pace_s": 0, "greeting_by": "Nobody"})
    assert not form.is_valid()
    assert "Nobody is not in this run's cast." in form.errors["greeting_by"]


def test_the_dry_run_uses_only_the_offered_tools_once_each(user, dinner):
    simulation = start(user, dinner, provider="scripted", tool_set=["query_self", "query_character"])
    assert run(simulation, 0) == "done"
    tools = list(simulation.turns.get(index=0).retrievals.values_list("tool", flat=True))
    assert sorted(tools) == ["query_character", "query_character", "query_self"]  # no scene, nobody asked twice


def test_the_run_page_says_which_tools_and_options_the_run_has(user, dinner, client_for):
    page = client_for(user).get("/simulations/new/").content.decode()

    def inputs(name: str) -> list[str]:
        return re.findall(rf'<(?:input|option)[^>]*(?:name="{name}"|value="{name}")[^>]*>', page)

    # A new run: pre-populate, every tool on offer and the default six ticked, turn boost and
    # synonyms on, scene context off.
    assert (mode := inputs("prepopulate")) and all("selected" in tag for tag in mode)
    assert len(inputs("tool_set")) == len(SIMULATION_TOOLS)
    ticked = {name for name in SIMULATION_TOOLS if any("checked" in tag for tag in inputs(name))}
    assert ticked == set(DEFAULT_SIMULATION_TOOLS)
    assert "checked" in inputs("query_temporal")[0] and "checked" in inputs("query_synonyms")[0]
    assert "checked" not in inputs("query_context")[0]

    simulation = start(user, dinner, retrieval_mode="both", tool_set=["query_self", "recall_facts"],
                       query_synonyms=False, consult_memories=True)
    run_page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "tools: query_self, recall_facts" in run_page
    assert "query enhancement: turn boost ·" in run_page and "consults memories" in run_page


def test_what_one_tool_gave_this_turn_another_does_not_give_again(user, dinner, server):
    server.script(ok(tool_calls=[tool_call("query_character", {"name": "Sam"}), tool_call("recall_facts", {"topic": "Sam"})]),
                  ok("Sam, you pick."))
    simulation = start(user, dinner, server)
    assert run(simulation) == "done"
    first, second = [json.loads(m["content"]) for m in server.requests[1]["messages"] if m["role"] == "tool"]
    known = {m["memory_id"] for m in first["memories"]}
    assert known
    # The facts leave out what the model already read above, and say why when nothing else is left.
    assert not known & {f["memory_id"] for f in second["facts"]}
    if not second["facts"]:
        assert "already have in front of you" in second["note"]
    rows = {r.tool: r for r in simulation.turns.get(index=0).retrievals.all()}
    repeated = [s for s in rows["recall_facts"].results if s.get("repeated")]
    assert repeated and {s["memory_id"] for s in repeated} <= known
    # And it names them: the answer to this call is there, above, under the other one.
    assert second["already_given"] == [s["memory_id"] for s in repeated if not s.get("excluded")]
    # Only the model's copy drops what its call already says; the record keeps the topic.
    assert "topic" not in second and rows["recall_facts"].response["topic"] == "Sam"


def test_of_calls_made_together_the_one_that_names_what_it_wants_holds_it(user, dinner, server):
    """The model searches first and asks for its secrets second, in one round: the secret is given
    under query_self, which named it, and the search points to it; the record keeps the model's order."""
    dinner.cast.update(secrets=["I already put down a deposit at the Thai place around the corner."])
    server.script(ok(tool_calls=[tool_call("query_memory", {"query": "the deposit I put down at the Thai place"}),
                                 tool_call("query_self", {"aspect": "secrets"})]), ok("Let's decide."))
    simulation = start(user, dinner, server)
    assert run(simulation) == "done"
    search, secrets = [json.loads(m["content"]) for m in server.requests[1]["messages"] if m["role"] == "tool"]
    secret_ids = {m["memory_id"] for m in secrets["memories"]}
    assert secret_ids and "Thai" in " ".join(m["content"] for m in secrets["memories"])
    assert not secret_ids & {m["memory_id"] for m in search["memories"]}
    # Not "already given": the model reads the search's answer first. It is given below, and said so.
    assert secret_ids <= set(search["given_below"]) and not secret_ids & set(search.get("already_given", []))
    assert "in the query_self answer below" in search["note"]
    rows = list(simulation.turns.get(index=0).retrievals.order_by("order"))
    assert [r.tool for r in rows] == ["query_memory", "query_self"]


def test_in_both_modes_a_tool_does_not_give_back_what_the_notes_show(user, dinner, server):
    server.script(ok(tool_calls=[tool_call("query_self", {})]), ok("Let's decide."))
    simulation = start(user, dinner, server, retrieval_mode="both")
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    noted = {s["memory_id"] for r in turn.retrievals.filter(tool="prepopulate") for s in r.results}
    (asked,) = turn.retrievals.filter(tool="query_self")
    answer = json.loads(next(m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"))
    # The sheet is in the notes on the first turn: query_self gives none of it again, and says so.
    assert noted and {s["memory_id"] for s in asked.results} <= noted
    assert all(s.get("repeated") for s in asked.results) and not answer["memories"]
    assert "already have in front of you" in answer["note"] and set(answer["already_given"]) <= noted


def test_a_tool_does_not_give_back_what_the_writer_pinned_onto_the_turn(user, dinner, server):
    from chronicle.simulation.run.turn_models import TurnOverride

    server.script(ok(tool_calls=[tool_call("query_self", {})]), ok("Let's decide."))
    simulation = start(user, dinner, server)  # tools mode: no notes, only the pinned memory in front of it
    speaker = simulation.cast_names[0]
    pinned = Memory.objects.in_bank(simulation.bank).filter(agent=speaker, kind="character").order_by("pk").first()
    TurnOverride.objects.create(simulation=simulation, turn_index=0, kind=TurnOverride.Kind.PIN, memory_id=pinned.pk)
    assert run(simulation) == "done"
    turn = simulation.turns.get(index=0)
    assert turn.agent == speaker and any(pinned.content in (m["content"] or "") for m in server.requests[0]["messages"])
    (asked,) = turn.retrievals.filter(tool="query_self")
    answer = json.loads(next(m["content"] for m in server.requests[1]["messages"] if m["role"] == "tool"))
    # query_self finds the pinned memory, but the model already reads it: it is not handed over twice.
    assert pinned.pk not in {m["memory_id"] for m in answer["memories"]}
    assert any(s["memory_id"] == pinned.pk and s.get("repeated") for s in asked.results)


def test_what_is_left_out_as_given_already_is_said_by_the_turns_the_notes_show():
    """In the notes a memory has no id: two models in a row found `already_given`'s bare ids
    meaningless, so the note says which turns they are."""
    from chronicle.simulation.turn.tool_calls import leave_out_repeats

    snapshots = [{"memory_id": 7, "turn": 69}, {"memory_id": 8, "turn": 96}, {"memory_id": 9, "turn": 12}]
    response = {"memories": [{"memory_id": 7}, {"memory_id": 8}, {"memory_id": 9}]}
    _marked, some = leave_out_repeats(snapshots, response, {7, 8})
    assert some["already_given"] == [7, 8] and some["note"] == "Also found, and above already: turns 69, 96."
    assert [m["memory_id"] for m in some["memories"]] == [9]
    _marked, every = leave_out_repeats(snapshots, response, {7, 8, 9})
    assert every["note"] == "Nothing besides what you already have in front of you this turn (turns 12, 69, 96)."


@pytest.mark.django_db
def test_what_a_tool_found_stays_with_the_agent_so_it_need_not_look_it_up_again(user, dinner, server):
    """Tools mode: an agent asked query_self(secrets) nearly every turn, its answer gone by the next."""
    from chronicle.models import Character
    from devtools.fake_llm import ok, tool_call
    from chronicle.simulation.control.tasks import run_turn_task
    from tests.factories import start_with_model

    secret = "Alex already paid a deposit at the Thai place."
    Character.objects.filter(owner=user, name="Alex").update(secrets=[secret])
    server.script(ok(tool_calls=[tool_call("query_self", {"aspect": "secrets"})]), ok("Let's decide, then."),
                  ok("Bella's!"), ok("Kebabs."),
                  ok(tool_calls=[tool_call("query_self", {"aspect": "secrets"}, "again")]), ok("Fine, Thai it is."))
    simulation = start_with_model(user, dinner, server, retrieval_mode="tools", max_turns=4)
    for index in range(4):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    first, later = simulation.turns.get(index=0), simulation.turns.get(index=3)
    assert first.agent == later.agent == "Alex"
    # Kept in Alex's conversation before the line it came before, as the pre-populated notes are.
    conversation = later.prompt_messages[1]["content"]
    assert re.search(r"Before your turn 1, you recall:\n## What you looked up\n- #\d+ My secret: " + re.escape(secret),
                     conversation)
    assert conversation.index("What you looked up") < conversation.index("[turn 1] Alex: Let's decide, then.")
    # Asked again anyway, the tool says it is already in front of Alex rather than send it twice.
    again = later.retrievals.get(tool="query_self")
    assert all(snap.get("repeated") or secret not in snap["content"] for snap in again.results)

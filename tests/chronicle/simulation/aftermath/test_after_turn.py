"""One model call after each line (memory.living.after_turn): every listener's importance, how the line
moved each listener's standing, and the facts each learned — over real HTTP to the fake server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from chronicle.simulation.control.tasks import run_turn_task
from memory.living.after_turn import parse
from memory.embedding.cache import embed_one
from memory.models import Memory, Relationship
from memory.recalling.tools import ToolContext, call_tool
from tests.chronicle.simulation.conftest import wait_for, wait_status
from tests.factories import start_with_model
from devtools.fake_llm import ok

pytestmark = pytest.mark.usefixtures("quick_backoff")

LINE = "Jordan, you lied to me about Bella's. It closed in May, and the owner moved to Lyon."


start = start_with_model


@pytest.mark.django_db(transaction=True)  # the facts are made by a worker after the turn's commit
def test_the_models_judgement_moves_relationships_and_leaves_facts_the_listener_can_recall(user, dinner, server,
                                                                                             celery_worker):
    server.script(ok(LINE))
    server.judgement = json.dumps({"listeners": {
        "Alex": {"importance": 6, "facts": ["Bella's trattoria closed in May."]},
        "Jordan": {"importance": 9, "trust": -0.3, "affinity": -0.2, "evidence": "you lied to me",
                   "facts": []},
        "Sam": {"importance": 7, "trust": 0, "affinity": 0, "evidence": "",
                "facts": ["Bella's trattoria closed in May.", "The owner of Bella's moved to Lyon.", "ok"]},
    }})
    simulation = start(user, dinner, server, max_turns=1)
    wait_status(simulation, "completed")  # seeding queued turn 1 for the live worker
    turn = simulation.turns.get(index=0)
    assert turn.agent == "Alex" and turn.context["aux_calls"] == 1 and len(server.scored) == 1
    scores = dict(Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1)
                  .values_list("agent", "importance"))
    assert scores == {"Alex": 6, "Jordan": 9, "Sam": 7}
    # Jordan's standing towards Alex moved as the model judged, the words it named kept as the reason.
    row = Relationship.objects.get(bank=simulation.bank, agent="Jordan", other="Alex")
    assert (row.trust, row.affinity) == (-0.3, -0.2) and "you lied to me" in row.reason
    assert row.evidence.agent == "Jordan" and row.evidence.turn == 1
    # Sam was not moved ("no change" is the model's answer, not a gap for the word lists to fill).
    assert not Relationship.objects.filter(bank=simulation.bank, agent="Sam").exists()
    # Sam's two facts (not the two-word one) are semantic memories Sam's recall_facts returns.
    learned = wait_for(lambda: list(Memory.objects.in_bank(simulation.bank).filter(agent="Sam", category="learned")),
                       what="Sam's learned facts")
    assert sorted(m.content for m in learned) == ["Bella's trattoria closed in May.", "The owner of Bella's moved to Lyon."]
    assert all(m.kind == "semantic" and m.metadata["heard_from"] == "Alex" and m.embedding is not None for m in learned)
    assert learned[0].evidence.get().content.startswith("Alex said: Jordan, you lied")
    answer = call_tool("recall_facts", {"topic": "where did Bella's owner go"},
                       context=ToolContext(bank=simulation.bank, agent="Sam", current_turn=2))
    assert "The owner of Bella's moved to Lyon." in [item["content"] for item in answer.response["facts"]]


@pytest.mark.django_db
def test_an_unreadable_judgement_falls_back_to_the_rules_and_says_so(user, dinner, server):
    server.script(ok(LINE))
    server.judgement = "Sure! Jordan is upset, Sam learns about Lyon."
    simulation = start(user, dinner, server)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn = simulation.turns.get(index=0)
    assert "The model's judgement of the line could not be used (the answer was not the JSON asked for)" in turn.note
    copies = Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1)
    assert {m.metadata["importance"]["scorer"] for m in copies} == {"heuristic-fallback"}
    # The word lists judge instead: "lied" and "you lied to me" said to Jordan by name cost trust.
    row = Relationship.objects.get(bank=simulation.bank, agent="Jordan", other="Alex")
    assert row.trust < 0 and "lied" in row.reason


@pytest.mark.django_db
def test_a_line_nobody_else_hears_costs_no_call(user, dinner, server):
    server.script(ok("Right. Nobody here. I'll book Bella's myself."))
    simulation = start(user, dinner, server, stage_directions="1: Jordan leaves\n1: Sam leaves")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn = simulation.turns.get(index=0)
    assert turn.agent == "Alex" and turn.heard_by == ["Alex"]
    assert server.scored == [] and turn.context["aux_calls"] == 0


def test_parse_takes_what_is_usable_and_clamps_it():
    answer = """```json
    {"listeners": {"sam": {"importance": "14", "trust": 2, "affinity": -0.1, "evidence": "  trust   me ",
                           "facts": ["The bus leaves at nine.", 3, "no"]},
                   "Nobody": {"importance": 5},
                   "Alex": {"importance": 4, "trust": 0.3}}}
    ```"""
    judged = parse(answer, names=["Alex", "Sam", "Jordan"], speaker="Alex")
    assert judged.importance == {"Alex": 4.0, "Sam": 10.0} and judged.error == ""
    assert set(judged.moves) == {"Sam"}  # the speaker has no standing towards itself; Jordan was left out
    assert (judged.moves["Sam"].trust, judged.moves["Sam"].affinity) == (0.3, -0.1)
    assert judged.moves["Sam"].why == "“trust me”"  # the words an agent reads, no machinery
    assert judged.facts == {"Sam": ["The bus leaves at nine."]}
    assert parse("", names=["Sam"], speaker="Alex").error == "no answer"


def test_parse_reads_who_left_among_the_listeners_and_who_came_by_any_name():
    answer = json.dumps({"listeners": {}, "left": ["sam", "Nobody", 3, "Sam"], "came": ["Okafor", "alex", ""]})
    judged = parse(answer, names=["Alex", "Sam"], speaker="Alex")
    assert judged.left == ["Sam"]  # one who heard it; its spelling as the run has it
    assert judged.came == ["Okafor"]  # one who was not there to hear it (the run checks the cast)
    assert parse('{"listeners": {}}', names=["Sam"], speaker="Alex").left == []


@pytest.mark.django_db
def test_whoever_is_due_reflects_in_the_judgement_of_the_next_line_not_in_calls_of_its_own(user, dinner, server):
    lines = ["We should book Bella's before eight.", "Eight is late for me, Alex.", "Then half past seven, Sam.",
             "Bella's prices are steep for me.", "Thai is cheaper, and closer.", "Thai it is, then?"]
    server.script(*(ok(line) for line in lines))
    simulation = start(user, dinner, server, reflection_threshold=5, max_turns=6)
    for index in range(5):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    # Seed 003: five memories lived before one reflects, however important the first ones were.
    assert not any("has not reflected" in request["messages"][-1]["content"] for request in server.scored)
    assert not Memory.objects.in_bank(simulation.bank).filter(kind="reflection").exists()
    assert run_turn_task.apply(args=(simulation.pk, 5)).get() == "done"
    sixth = server.scored[5]["messages"][-1]["content"]
    assert "Alex has not reflected for a while" in sixth and "1. Alex said: We should book Bella's" in sixth
    # The one reflecting is told who it is (its sheet), not only what it remembers.
    who = sixth.split("Who Alex is:", 1)[1].split("What Alex remembers", 1)[0]
    assert "Goals:" in who or "goals" in who.lower()
    insights = Memory.objects.in_bank(simulation.bank).filter(kind="reflection", agent="Alex")
    assert [m.content for m in insights] == ["Alex sees where this evening is going."]
    assert insights[0].turn == 6 and insights[0].metadata["batched"] is True
    # It cited statements 1 and 2: the first two things Alex lived (its plan for the scene, its first line).
    assert "Alex said: We should book Bella's before eight." in [m.content for m in insights[0].evidence.all()]
    # Six judgements, no reflection calls: only the lines and their judgements went to the model.
    assert len(server.requests) == 6 and len(server.scored) == 6
    assert [t.context["aux_calls"] for t in simulation.turns.order_by("index")] == [1] * 6


def test_a_reflection_answer_is_kept_only_where_it_cites_what_it_was_given():
    answer = json.dumps({"listeners": {"Sam": {"importance": 4}}, "reflections": {
        "alex": [{"insight": "Alex is steering everyone to Bella's.", "because": [1, 3, 9]},
                 {"insight": "No evidence at all here.", "because": []}, "nonsense"],
        "Nobody": [{"insight": "Not asked for.", "because": [1]}]}})
    judged = parse(answer, names=["Alex", "Sam"], speaker="Alex", statements={"Alex": 4})
    assert judged.insights == {"Alex": [("Alex is steering everyone to Bella's.", [1, 3])]}


@pytest.mark.django_db
def test_the_models_stance_on_a_claim_revises_beliefs_where_the_words_alone_would_not(user, dinner, server):
    from chronicle.simulation.story import beliefs

    claim = "Bella's trattoria is closing down at the end of the month."
    line = "I ate at Bella's trattoria last night and booked them for December."
    server.script(ok(line))
    server.judgement = json.dumps({"listeners": {name: {"importance": 5} for name in ("Alex", "Jordan", "Sam")},
                                   "stances": {"1": "denies"}})
    simulation = start(user, dinner, server, planted_beliefs=f"Sam: {claim} [false]")
    beliefs.plant(simulation)
    assert beliefs.stance(line, claim) == "none"  # the rule reads no denial in it
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    # The judgement was asked about the claim Sam holds, and said the line denies it.
    prompt = server.scored[-1]["messages"][-1]["content"]
    assert f"1. {claim}" in prompt and '"stances": {"1": "none"}' in prompt and "{{" not in prompt
    sam = Memory.objects.in_bank(simulation.bank).get(agent="Sam", category="belief").metadata["belief"]
    assert sam["disputed"] == {"turn": 1, "by": "Alex"} and sam["confidence"] < 1.0
    assert "Sam is less sure (1.00 →" in simulation.turns.get(index=0).note



@pytest.mark.django_db
@pytest.mark.parametrize("line, stance, rule", [
    # The model hears a retelling the words alone miss, a question where the words look like a claim…
    ("You'll never guess what I heard about Bella's this week. End of an era, friends.", "asserts", "none"),
    ("So Bella's trattoria is closing down at the end of the month, you reckon, Jordan.", "questions", "asserts"),
    # …and a claim passed on as someone else's word, with doubt.
    ("Bella's trattoria is closing down at the end of the month, or so Sam's cousin claims.", "doubts", "asserts"),
])
def test_the_models_stance_decides_whether_a_claim_is_passed_on(user, dinner, server, line, stance, rule):
    from chronicle.simulation.story import beliefs

    claim = "Bella's trattoria is closing down at the end of the month."
    server.script(ok(line))
    server.judgement = json.dumps({"listeners": {name: {"importance": 5} for name in ("Alex", "Jordan", "Sam")},
                                   "stances": {"1": stance}})
    simulation = start(user, dinner, server, planted_beliefs=f"Alex: {claim} [false]")  # Alex speaks first
    beliefs.plant(simulation)
    similarity = float(np.dot(embed_one(f"Alex said: {line}"), embed_one(claim)))
    assert beliefs.stance(line, claim, similarity=similarity) == rule
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    held = dict(Memory.objects.in_bank(simulation.bank).filter(category="belief").exclude(agent="Alex")
                .values_list("agent", "metadata__belief__confidence"))
    assert sorted(held) == (["Jordan", "Sam"] if stance in ("asserts", "doubts") else [])
    # Heard with doubt, it is held too unsure to be passed on as true.
    assert all((c < beliefs.SURE) == (stance == "doubts") for c in held.values())


@pytest.mark.django_db
def test_a_reply_is_judged_with_the_line_it_answers(user, dinner, server):
    """An apology moves trust as a reply to an accusation: the judgement reads the line the speaker
    heard just before it (none before the first line; of a whisper between others, only that it was),
    then the directions of its turn."""
    server.script(ok("You lied to me about Bella's, Jordan."), ok("*whispers to Alex* I'm sorry. I should have told you."),
                  ok("What are you two whispering about?"))
    simulation = start(user, dinner, server, max_turns=3, stage_directions="3: The lights flicker.")
    for index in range(3):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    first, second, third = [r["messages"][-1]["content"] for r in server.scored]
    assert "Just before it" not in first
    assert ("Just before it (context only):\n- Alex said: You lied to me about Bella's, Jordan.\n"
            "The line (turn 2): Jordan whispered to Alex: I'm sorry.") in second
    # Sam saw the whisper, no more; then the lights: one a line, not run into one sentence.
    assert "Just before it (context only):\n- Jordan whispers something to Alex\n- *The lights flicker*\n" in third
    # The answer's example gives trust and affinity to one who heard the line, not to its speaker.
    assert '{"listeners": {"Alex": {' in second


@pytest.mark.django_db
def test_a_listener_who_heard_the_line_its_own_way_is_judged_by_how_it_took_it(user, dinner, server):
    """Jordan's paranoia retells Alex's kind words as a threat: the one judgement after the line reads
    Jordan's version for Jordan (so Jordan's trust can fall), and the plain line for Sam."""
    line = "I booked us a table at Bella's for eight, my treat."
    took = "Alex said he booked Bella's for eight, his treat, which is how he keeps me where he can watch me."
    server.script(ok(line), ok(took))  # the line, then Jordan's retelling
    simulation = start(user, dinner, server, distortions="Jordan: paranoia")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    prompt = server.scored[-1]["messages"][-1]["content"]
    assert f"The line (turn 1): Alex said: {line}" in prompt
    assert f"Some heard it their own way; judge them by how they took it:\n- Jordan took it as: {took}" in prompt
    assert "Sam took it as" not in prompt and "Alex took it as" not in prompt
    # Each listener is described about itself, not in its sheet's "You are …" and "My goals: …".
    listeners = prompt[prompt.index("Listeners:"):prompt.index("Some heard it")]
    assert "- Jordan: " in listeners and "Goals: " in listeners
    assert "You are" not in listeners and "My goals" not in listeners

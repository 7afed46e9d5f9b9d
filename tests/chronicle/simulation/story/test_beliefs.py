"""Planted beliefs spread by retelling, with who told whom and a falling confidence; a question
plants nothing, a doubt plants an unsure belief, a denial revises what each listener believes, and
every belief keeps its history."""

from __future__ import annotations

import numpy as np
import pytest

from chronicle import headless
from chronicle.simulation.story import beliefs
from chronicle.simulation.control import turns
from chronicle.simulation.turn.types import TurnOutcome
from memory.embedding.cache import embed_one
from memory.models import Memory
from memory.recalling.tools import ToolContext, call_tool
from tests.factories import start
from tests import factories

pytestmark = pytest.mark.django_db

CLAIM = "Bella's trattoria is closing down at the end of the month."


def say(simulation, index, agent, line):
    beliefs.plant(simulation)  # what seeding does; planting again finds the beliefs planted
    return factories.say(simulation, index, agent, line)


def held(simulation, agent):
    return [m.metadata["belief"] for m in Memory.objects.in_bank(simulation.bank).filter(agent=agent, category="belief")]


def test_a_false_belief_retold_twice_reaches_a_third_character_with_its_chain(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=4, planted_beliefs=f"Sam: {CLAIM} [false]")
    say(simulation, 0, "Alex", "Shall we decide on dinner tonight?")
    planted = held(simulation, "Sam")[0]
    assert {k: planted[k] for k in ("id", "claim", "true", "source_chain", "confidence", "hops", "disputed")} == {
        "id": 1, "claim": CLAIM, "true": False, "source_chain": [], "confidence": 1.0, "hops": 0, "disputed": None}
    assert held(simulation, "Jordan") == held(simulation, "Alex") == []  # small talk retells nothing
    # Sam whispers it to Jordan: Jordan believes it, from Sam; Alex heard nothing.
    told = say(simulation, 1, "Sam", f"*whispers to Jordan* Did you know? {CLAIM}")
    (jordan,) = held(simulation, "Jordan")
    assert jordan["source_chain"] == ["Sam"] and jordan["confidence"] == 0.7 and jordan["true"] is False
    assert held(simulation, "Alex") == [] and "Jordan now believes (heard from Sam)" in told.note
    # Jordan says it aloud: Alex believes it, from Jordan who had it from Sam, less sure.
    say(simulation, 2, "Jordan", f"Everyone, listen: {CLAIM} We should go while we can!")
    (alex,) = held(simulation, "Alex")
    assert alex["source_chain"] == ["Jordan", "Sam"] and alex["confidence"] == pytest.approx(0.49)
    memory = Memory.objects.in_bank(simulation.bank).get(agent="Alex", category="belief")
    assert memory.content == f"Jordan told me: {CLAIM}"
    assert list(memory.evidence.values_list("agent", flat=True)) == ["Jordan"]  # linked to the teller's belief
    # The run page's "who believes what" view marks it false and shows each chain.
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Who believes what" in page and 'data-true="false"' in page
    assert "heard from Jordan ← Sam (turn 3) · confidence 0.49" in page


def test_a_rumour_told_back_to_whoever_it_came_from_plants_nothing_in_them(user, dinner):
    """As in a sequel that carried Sam's reflections but not Sam's belief: Jordan, who had it from Sam,
    tells it back to Sam. Sam is where it started, not a new believer "heard from Jordan ← Sam"."""
    simulation = start(user, dinner, max_turns=4, planted_beliefs=f"Sam: {CLAIM} [false]")
    say(simulation, 0, "Sam", f"*whispers to Jordan* Did you know? {CLAIM}")
    Memory.objects.in_bank(simulation.bank).filter(agent="Sam", category="belief").delete()
    claim = turns.turn_claim(simulation_id=simulation.pk, index=1, agent="Jordan")  # (say() would plant it again)
    told = turns.turn_finish(turn_id=claim.turn.pk, token=claim.token,
                             outcome=TurnOutcome(utterance=f"*whispers to Sam* Listen. {CLAIM}"))
    assert held(simulation, "Jordan")[0]["source_chain"] == ["Sam"]
    assert held(simulation, "Sam") == [] and "Sam now believes" not in (told.note or "")


def test_a_bad_planted_belief_is_named(user, dinner):
    with pytest.raises(beliefs.BeliefError, match=r"Line 2: Robin is not in this run's cast"):
        beliefs.parse(f"Sam: {CLAIM} [false]\nRobin: nothing", cast=["Alex", "Jordan", "Sam"])
    with pytest.raises(beliefs.BeliefError, match="Line 1: write"):
        beliefs.parse("just a sentence", cast=["Alex"])


def _similarity(a: str, b: str) -> float:
    return float(np.dot(embed_one(a), embed_one(b)))


@pytest.mark.parametrize("line, expected", [
    (f"Is it true that {CLAIM[:-1].lower()}?", "questions"),
    ("Is Bella's closing down at the end of the month?", "questions"),
    ("That's a lie, Bella's isn't closing at all.", "denies"),
    ("No, Bella's is fine, they just renewed the lease.", "denies"),
    ("I had it wrong: Bella's is not closing.", "denies"),
    ("It's only a rumour that Bella's trattoria is closing.", "denies"),
    (f"*whispers to Jordan* Did you know? {CLAIM}", "asserts"),
    ("Bella's trattoria is closing down, I heard it from Sam.", "asserts"),
    ("I heard Bella's trattoria is closing down, but I'm not sure it's true.", "doubts"),
    ("Apparently Bella's is closing down at the end of the month.", "doubts"),
    ("I doubt Bella's trattoria is closing, they were packed last night.", "doubts"),
    # Certainty is neither a doubt nor a "no".
    (f"No doubt about it: {CLAIM}", "asserts"),
    (f"{CLAIM[:-1]}, without a doubt.", "asserts"),
    ("I love Bella's trattoria, the pasta is great.", "none"),
    ("Shall we decide on dinner tonight?", "none"),
    # The negation denies the clause it is in, not the claim another clause passes on.
    ("We won't be eating there again… Sam says Bella's trattoria is closing down at the end of the month.",
     "asserts"),
    ("Nobody tells me anything; Bella's trattoria is closing down at the end of the month, Sam says.", "asserts"),
    ("Bella's trattoria isn't closing down, and nobody should say so.", "denies"),
])
def test_the_offline_rule_reads_a_lines_stance_on_a_claim(line, expected):
    assert beliefs.stance(line, CLAIM, similarity=_similarity(f"Alex said: {line}", CLAIM)) == expected


def test_the_lines_a_model_said_in_the_rumour_recording_are_read_as_it_meant_them():
    """The recorded model-in-the-loop run of examples/rumour.json: Oren passes the rumour on, Mira
    asks Tess whether it is true, Tess denies it, Oren takes it back."""
    from pathlib import Path
    import json

    script = json.loads((Path(__file__).resolve().parents[3] / "fixtures" / "recorded" / "rumour.json").read_text())["script"]
    claim = "The harbour master is selling the inn to a hotel chain."
    read = {number: beliefs.stance(item["text"], claim, similarity=_similarity(f"{item['speaker']} said: {item['text']}", claim))
            for number, item in enumerate(script, start=1)}
    assert (read[2], read[8], read[10], read[12]) == ("asserts", "questions", "denies", "denies")
    assert all(read[n] == "none" for n in (1, 5, 6, 7, 9, 13, 14))  # small talk, and lines about other things


def test_a_question_plants_nothing_and_a_denial_revises_every_listener(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=6, planted_beliefs=f"Sam: {CLAIM} [false]")
    say(simulation, 0, "Jordan", "Sam, is Bella's trattoria closing down at the end of the month?")
    assert held(simulation, "Jordan") == held(simulation, "Alex") == []  # a question is not a claim
    say(simulation, 1, "Sam", f"I'm afraid so. {CLAIM}")
    assert [b["confidence"] for b in held(simulation, "Jordan")] == [0.7]
    assert [b["confidence"] for b in held(simulation, "Alex")] == [0.7]
    denied = say(simulation, 2, "Alex", "No, Bella's isn't closing at all: they renewed the lease last week.")
    (jordan,) = held(simulation, "Jordan")
    assert jordan["confidence"] < 0.7 and jordan["disputed"] == {"turn": 3, "by": "Alex"}
    assert [(h["turn"], h["stance"]) for h in jordan["history"]] == [(2, "asserts"), (3, "denies")]
    (sam,) = held(simulation, "Sam")
    assert sam["confidence"] < 1.0 and sam["disputed"]["by"] == "Alex"
    (alex,) = held(simulation, "Alex")  # the one who said it is not so: it never believed it again
    assert alex["disputed"]["by"] == "Alex" and alex["confidence"] < 0.7
    assert "Jordan is less sure (0.70 →" in denied.note and "Alex said it is not so" in denied.note
    # What Jordan believes now says who denied it, and a search for it returns that first.
    answer = call_tool("query_memory", {"query": "What do I believe about Bella's closing down?"},
                       context=ToolContext(bank=simulation.bank, agent="Jordan", current_turn=4))
    first = answer.response["memories"][0]
    assert first["content"].startswith(f"Sam told me: {CLAIM}") and "then Alex said (turn 3) it is not so" in first["content"]
    assert first["belief_confidence"] == jordan["confidence"] and first["last_denied_by"] == "Alex at turn 3"
    facts = call_tool("recall_facts", {"topic": "Bella's closing"},
                      context=ToolContext(bank=simulation.bank, agent="Jordan", current_turn=4)).response["facts"]
    assert any(f.get("last_denied_by") == "Alex at turn 3" for f in facts)
    # Sam takes it back: almost nothing left of it, and Sam no longer passes it on as true.
    say(simulation, 3, "Sam", "I had it wrong, Bella's is not closing.")
    assert held(simulation, "Sam")[0]["confidence"] == beliefs.RETRACTED
    # The page shows each holder's belief over the turns; the run's JSON carries the same numbers.
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert 'data-holder="Jordan" data-disputed="true"' in page and "disputed by Alex" in page
    report = {b["holder"]: b for b in headless.run_report(simulation)["beliefs"]}
    assert report["Jordan"]["confidence"] == held(simulation, "Jordan")[0]["confidence"]
    assert report["Jordan"]["disputed"]["by"] == "Sam" and len(report["Jordan"]["history"]) == 3


def test_a_belief_heard_in_a_line_the_agent_still_reads_is_not_handed_back_unless_asked_for(user, dinner):
    """Alex heard the rumour in Jordan's line at turn 3: while Alex's window holds that line, a search
    leaves "Jordan told me: …" out (the line says it); asked what it believes, Alex gets it all the same;
    once the window has moved past turn 3, any search finds it."""
    simulation = start(user, dinner, max_turns=4, planted_beliefs=f"Jordan: {CLAIM} [false]")
    say(simulation, 0, "Alex", "Shall we decide on dinner tonight?")
    say(simulation, 1, "Sam", "I'm easy, as long as it's cheap.")
    say(simulation, 2, "Jordan", f"Everyone, listen: {CLAIM} We should go while we can!")
    told = f"Jordan told me: {CLAIM}"

    def found(question, window):
        answer = call_tool("query_memory", {"query": question},
                           context=ToolContext(bank=simulation.bank, agent="Alex", current_turn=4, window_turns=window))
        return [m["content"] for m in answer.response["memories"]]

    assert told not in found("What is happening to Bella's trattoria?", frozenset({1, 2, 3}))
    assert told in found("What do I believe about Bella's trattoria?", frozenset({1, 2, 3}))
    assert told in found("What is happening to Bella's trattoria?", frozenset())


def test_a_rumour_passed_on_with_doubt_leaves_its_listeners_unsure_and_they_do_not_spread_it(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=6, planted_beliefs=f"Sam: {CLAIM} [false]")
    doubted = say(simulation, 0, "Sam", f"I heard {CLAIM[0].lower()}{CLAIM[1:-1]}, but I'm not sure it's true.")
    (jordan,) = held(simulation, "Jordan")
    assert jordan["confidence"] <= beliefs.HEDGED < beliefs.SURE and jordan["source_chain"] == ["Sam"]
    assert jordan["history"][0]["stance"] == "doubts"
    (sam,) = held(simulation, "Sam")  # who said it was not sure is, by its own words, no surer than that
    assert sam["confidence"] <= beliefs.HEDGED and [h["stance"] for h in sam["history"]] == ["asserts", "doubts"]
    assert "Jordan heard Sam say it, unsure" in doubted.note and "Sam is less sure (1.00 →" in doubted.note
    # Unsure, Jordan passing it on plants nothing in whoever has not heard it.
    memory = Memory.objects.in_bank(simulation.bank).get(agent="Alex", category="belief")
    memory.delete()
    say(simulation, 1, "Jordan", f"Sam says {CLAIM[0].lower()}{CLAIM[1:]}")
    assert held(simulation, "Alex") == []
    say(simulation, 2, "Alex", "No, Bella's isn't closing at all.")
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "heard Sam say it, unsure (turn 1)" in page
    assert "turn 1: heard, unsure, from Sam · 0.40" in page and "turn 3: disputed by Alex" in page
    # A holder's belief says who doubted it, and when, in words that need no pronoun.
    say(simulation, 3, "Jordan", f"Maybe {CLAIM[0].lower()}{CLAIM[1:]}")
    sam = Memory.objects.in_bank(simulation.bank).get(agent="Sam", category="belief")
    assert sam.content.endswith("— then Jordan (turn 4) was not sure of it")
    assert "said it was not sure" in page

"""A claim about someone in the cast is, to that person, an accusation to face (never a belief about
itself in the third person); what its holders believe stays consistent with what they said; and a
denial by the one accused, a listener's defence of them and the accuser's taking it back revise
what each holds, offline, though they share few of the claim's words."""

from __future__ import annotations

import pytest

from chronicle.simulation.control.tasks import run_turn_task
from chronicle.simulation.story import accused, beliefs
from memory.models import Memory
from tests.chronicle.simulation.story.test_beliefs import held, say
from tests.factories import start

CLAIM = "Sam took the money from the tip jar."
CAST = ["Alex", "Jordan", "Sam"]


def accusations(simulation, agent):
    return list(Memory.objects.in_bank(simulation.bank).filter(agent=agent, category=accused.ACCUSATION)
                .order_by("id"))


@pytest.mark.django_db
def test_a_claim_heard_by_the_one_it_is_about_is_an_accusation_it_answers_not_a_belief(user, dinner):
    simulation = start(user, dinner, max_turns=6, retrieval_mode="prepopulate",
                       planted_beliefs=f"Jordan: {CLAIM} [false]")
    say(simulation, 0, "Jordan", f"I'll say it to everyone: {CLAIM}")
    assert [b["source_chain"] for b in held(simulation, "Alex")] == [["Jordan"]]
    assert held(simulation, "Sam") == []  # not "Jordan told me: Sam took the money…"
    (faced,) = accusations(simulation, "Sam")
    assert faced.content == "Jordan says you took the money from the tip jar"
    # Sam's next prompt puts it to Sam in the second person, under its own heading, not as a belief.
    say(simulation, 1, "Alex", "Is that so? Say something.")
    assert run_turn_task.apply(args=(simulation.pk, 2)).get() == "done"
    turn = simulation.turns.get(index=2)
    assert turn.agent == "Sam"
    prompt = "\n".join(m["content"] or "" for m in turn.prompt_messages)
    assert "## What others say of you (answer it from who you are)\n- (turn 1) Jordan says you took the money" in prompt
    assert "told me: Sam took" not in prompt and "## What you believe" not in prompt


@pytest.mark.django_db
def test_the_accused_denies_it_a_listener_defends_them_and_the_accuser_takes_it_back(user, dinner):
    simulation = start(user, dinner, max_turns=8, planted_beliefs=f"Jordan: {CLAIM} [false]")
    say(simulation, 0, "Jordan", f"I'll say it to everyone: {CLAIM}")
    (alex,) = held(simulation, "Alex")
    # The one accused denies it in its own words (none of "money", "tip" in it): Alex is less sure,
    # though less so than a bystander's denial would make it; Sam keeps no belief about itself.
    denied = say(simulation, 1, "Sam", "I never laid a finger on that jar, and you know it.")
    (after,) = held(simulation, "Alex")
    assert 0.7 * (1 - beliefs.DENIAL_WEIGHT) < after["confidence"] < alex["confidence"]
    assert after["disputed"] == {"turn": 2, "by": "Sam"} and after["stance"] == "denies"
    assert held(simulation, "Sam") == [] and "Alex is less sure" in denied.note
    (faced,) = accusations(simulation, "Sam")
    assert faced.content.endswith("— then I said (turn 2) it is not so")
    assert faced.metadata["accusation"]["answered"] == {"turn": 2}
    # Alex will not have it: "isn't like him" denies what Alex held.
    say(simulation, 2, "Alex", "Honestly, that isn't like him at all.")
    (alex,) = held(simulation, "Alex")
    assert alex["confidence"] <= beliefs.RETRACTED and alex["history"][-1]["stance"] == alex["stance"] == "denies"
    # Jordan takes it back: its own belief goes, and Sam hears it taken back.
    say(simulation, 3, "Jordan", "Fine. I may have been wrong about him.")
    (jordan,) = held(simulation, "Jordan")
    assert jordan["confidence"] == beliefs.RETRACTED and jordan["stance"] == "denies"
    assert jordan["history"][-1] == {"turn": 4, "confidence": beliefs.RETRACTED, "source_chain": ["Jordan"],
                                     "stance": "denies"}
    (faced,) = accusations(simulation, "Sam")
    assert faced.content.endswith("— then Jordan took it back (turn 4)")
    # Sam, whom it is about, holds no belief of it at the end either: nothing of Sam's is "disputed by Sam".
    assert held(simulation, "Sam") == []


@pytest.mark.django_db
def test_a_doubt_voiced_by_one_who_never_held_the_claim_is_not_a_belief(user, dinner):
    simulation = start(user, dinner, max_turns=6, planted_beliefs=f"Jordan: {CLAIM} [false]")
    say(simulation, 0, "Alex", "I'm not sure that Sam took the money from the tip jar.")
    # Jordan holds it: Jordan is less sure; Alex, who only doubted it aloud, believes nothing.
    assert held(simulation, "Alex") == []
    (jordan,) = held(simulation, "Jordan")
    assert jordan["confidence"] < 1.0 and jordan["stance"] == jordan["history"][-1]["stance"] == "doubts"
    (faced,) = accusations(simulation, "Sam")
    assert faced.content == "Alex says, not sure of it, that you took the money from the tip jar"


@pytest.mark.parametrize("claim, subject, said", [
    (CLAIM, "Sam", "you took the money from the tip jar"),
    ("Maeve signed off the inspection without reading it.", "Maeve", "you signed off the inspection without reading it"),
    ("Captain Maeve has been skimming the fares and keeps it from her crew.", "Maeve",
     "you have been skimming the fares and keep it from your crew"),
    ("Oren's boat was bought with stolen money.", "Oren", "your boat was bought with stolen money"),
    ("The harbour master pays Tess to keep quiet.", "Tess", "the harbour master pays you to keep quiet"),
    ("Ines takes the key and hides it in her cabin.", "Ines", "you take the key and hide it in your cabin"),
])
def test_a_claim_is_put_to_its_subject_in_the_second_person(claim, subject, said):
    assert accused.subject_of(claim, [subject, "Dara"]) == subject
    assert accused.said_to_you(claim, subject) == said


@pytest.mark.parametrize("speaker, line, holds, before, expected", [
    # The one accused, in the first person, in other words than the claim's.
    ("Sam", "I never laid a finger on that drawer.", False, True, "denies"),
    ("Sam", "I didn't touch a penny of it!", False, True, "denies"),
    ("Sam", "Not me. Ask Jordan where the jar went.", False, True, "denies"),
    ("Sam", "How dare you say that in front of everyone.", False, True, "denies"),
    ("Sam", "I never eat pudding after nine.", False, False, "none"),  # nothing said of it just before
    ("Sam", "I'm not sure what you mean.", False, True, "none"),
    # A listener defends the one it is about…
    ("Alex", "That isn't like him at all.", True, True, "denies"),
    ("Alex", "Sam? He'd never do a thing like that.", False, False, "denies"),
    ("Alex", "Nothing like Sam, that. I don't buy it.", True, True, "denies"),
    ("Alex", "I don't believe a word of it.", True, True, "denies"),
    ("Alex", "That isn't like Jordan at all.", True, True, "none"),  # someone else
    ("Alex", "I love his cooking, though.", True, True, "none"),
    # …and whoever said it takes it back.
    ("Jordan", "I may have been wrong about him.", True, False, "denies"),
    ("Jordan", "Forget what I said about the jar.", True, False, "denies"),
    ("Jordan", "I was too quick to blame Sam.", True, False, "denies"),
    ("Jordan", "I was wrong about the weather, it's pouring.", True, False, "none"),
    ("Alex", "I may have been wrong about him.", False, False, "none"),  # Alex never said it
])
def test_the_offline_rule_hears_an_answer_that_shares_few_of_the_claims_words(speaker, line, holds, before, expected):
    said = accused.answer(line, claim=CLAIM, speaker=speaker, subject="Sam", cast=CAST, holds=holds,
                          touched_before=before) or "none"
    assert said == expected


FERRY = "Maeve signed off the engine inspection without reading it."


@pytest.mark.parametrize("speaker, line, holds, before, present, expected", [
    ("Maeve", "I would never put my name to a report I hadn't read.", False, True, True, "denies"),
    ("Maeve", "That's a lie, and you know it, Dara.", False, True, True, "denies"),
    ("Maeve", "I didn't sleep last night.", False, False, True, "none"),
    ("Tomas", "The captain? She wouldn't cut corners like that.", True, True, True, "denies"),
    ("Tomas", "Doesn't sound like Maeve to me.", True, False, True, "denies"),
    ("Tomas", "She'd never let the bilge pumps go unchecked, not on her ship.", False, True, True, "denies"),
    ("Tomas", "Dara wouldn't lie to us, would she?", True, True, True, "none"),  # speaks for the accuser
    ("Dara", "Maybe I spoke too soon. The inspection's fine.", True, False, True, "denies"),
    ("Dara", "I got it wrong about her, all right?", True, False, True, "denies"),
    ("Dara", "I got it wrong about the tide, we'll dock late.", True, False, True, "none"),
    ("Dara", "I was wrong to bring the thermos, it's cold already.", True, False, True, "none"),
])
def test_the_answers_are_heard_on_another_scene_and_in_other_words(speaker, line, holds, before, present, expected):
    said = accused.answer(line, claim=FERRY, speaker=speaker, subject="Maeve", cast=["Maeve", "Dara", "Tomas"],
                          holds=holds, touched_before=before, present=present) or "none"
    assert said == expected

"""Relationships that change: what a listener hears moves its trust and affinity towards
the speaker, with the turn, the reason and the line's memory; the agent reads it back (pre-populated
context, recall_interactions); the run page charts it; a branch keeps what came before."""

from __future__ import annotations

import pytest

from chronicle.simulation.control import services, turns
from chronicle.simulation.turn import inputs as turn_inputs
from chronicle.simulation.turn.briefing import now_text
from chronicle.simulation.turn.engine import prepopulate
from chronicle.simulation.turn.types import TurnOutcome
from chronicle.writing import services as writing
from memory.forming.extraction import extract_after_turn
from memory.models import Memory, Relationship
from memory.living.relationships import describe, judge, standing
from memory.recalling.tools import ToolContext, call_tool
from tests.factories import start, say

pytestmark = pytest.mark.django_db


def test_the_heuristic_reads_warmth_trust_names_and_whispers():
    warm = judge("Thank you, that was a lovely idea.", listener="Jordan")
    assert (warm.trust, warm.affinity) == (0.0, 0.1) and warm.words == ["thank"]  # "lovely" is not "love"
    named = judge("Jordan, you lied to me, you idiot.", listener="Jordan")
    assert named.trust == pytest.approx(-0.3) and named.affinity == pytest.approx(-0.3)  # ×1.5, capped at 0.3
    assert "said to Jordan by name" in named.why
    confided = judge("Nothing special.", listener="Sam", whispered=True)
    assert (confided.trust, confided.affinity) == (0.1, 0.0) and confided.why == "confided in a whisper"
    assert not judge("The menu has pasta.", listener="Sam").changes


def test_what_is_heard_moves_the_standing_and_the_agent_reads_it(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=6, retrieval_mode="prepopulate")
    say(simulation, 0, "Alex", "Thank you both, that was a lovely evening.")
    say(simulation, 1, "Jordan", "Alex, you lied about the booking. That is so selfish.")
    say(simulation, 2, "Sam", "The menu has pasta.")  # no such word: no change
    rows = Relationship.objects.filter(bank=simulation.bank).order_by("turn", "agent")
    # Turn 2 is said to Alex by name: Sam, who only overheard it, is not moved by it.
    assert [(r.turn, r.agent, r.other) for r in rows] == [
        (1, "Jordan", "Alex"), (1, "Sam", "Alex"), (2, "Alex", "Jordan")]
    alex = standing(simulation.bank, "Alex")[("Alex", "Jordan")]
    # "lied" 0.25 ×1.5 (named) → −0.3 (capped); "selfish" 0.2 ×1.5 = −0.3
    assert (alex.trust, alex.affinity) == (-0.3, -0.3)
    assert alex.evidence.content.startswith("Jordan said: Alex, you lied")  # the line Alex keeps
    assert "lied" in alex.reason and "selfish" in alex.reason

    # Alex's next turn: who is here says how Alex stands with each, in words that carry their scale
    # (the line that moved it is in the transcript).
    turn = turns.turn_claim(simulation_id=simulation.pk, index=3, agent="Alex").turn
    given = turn_inputs.turn_input(turn=turn)
    assert "Here with you: Jordan (some distrust, some dislike), Sam\n" in now_text(given)
    assert not any("Jordan" in line for s in prepopulate(given, TurnOutcome()) if s.title == "The others present"
                   for line in s.lines if "trust" in line)  # said once, in the header
    # recall_interactions answers with it too.
    answer = call_tool("recall_interactions", {"character_name": "Jordan"},
                       context=ToolContext(bank=simulation.bank, agent="Alex", current_turn=4)).response
    assert answer["relationship"]["trust"] == -0.3 and answer["relationship"]["last_changed_turn"] == 2

    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert 'id="relationships"' in page and 'data-pair="Alex→Jordan"' in page and "<polyline" in page
    assert "affinity −0.30" in page or "affinity -0.30" in page


@pytest.mark.parametrize("trust, affinity, words", [
    (0.05, 0.0, "slight trust"), (-0.2, 0.45, "some distrust, some fondness"), (0.0, -0.5, "strong dislike"),
    (0.95, 0.8, "deep trust, deep fondness"), (0.004, 0.0, "neutral")])
def test_a_standing_reads_in_words_of_its_size(trust, affinity, words):
    assert describe(Relationship(trust=trust, affinity=affinity)) == words


def test_a_branch_keeps_the_standing_from_before_its_turn(user, dinner):
    simulation = start(user, dinner, max_turns=6)
    say(simulation, 0, "Alex", "Thank you, Jordan, I trust you.")
    say(simulation, 1, "Sam", "Jordan, you idiot.")
    simulation = services.simulation_pause(simulation=simulation)  # the instance the branch checks
    branch = writing.simulation_branch(parent=simulation, index=1, actor=user)  # regenerate from turn 2
    services.simulation_seed(simulation_id=branch.pk)
    branch.refresh_from_db()
    copied = standing(branch.bank)
    assert set(copied) == {("Jordan", "Alex")}  # turn 1's change (said to Jordan by name), not turn 2's
    kept = copied[("Jordan", "Alex")]
    assert kept.evidence is not None and kept.evidence.bank_id == branch.bank_id
    assert Memory.objects.get(pk=kept.evidence_id).content.startswith("Alex said: Thank you, Jordan")


def test_lines_leave_feelings_and_lessons_and_agents_form_their_own(user, dinner, django_capture_on_commit_callbacks):
    """Extended memory types formed in play (memory.forming.extraction, form_memory's valence and target)."""
    simulation = start(user, dinner, max_turns=6)
    first = "Jordan, thank you, that was so kind of you."
    second = "Alex, that is so selfish. Next time I will check the prices first."
    with django_capture_on_commit_callbacks() as queued:
        say(simulation, 0, "Alex", first)
        say(simulation, 1, "Sam", second)
    # Each line's feelings and lesson are made by a task after its commit (with the keys, the next turn).
    assert sum("_queue_extraction.<locals>" in repr(callback) for callback in queued) == 2
    # What extract_task does with them (a worker, in a run):
    extract_after_turn(bank_id=simulation.bank_id, turn=1, speaker="Alex", text=first)
    extract_after_turn(bank_id=simulation.bank_id, turn=2, speaker="Sam", text=second)
    assert extract_after_turn(bank_id=simulation.bank_id, turn=2, speaker="Sam", text=second) == []  # once
    felt = Memory.objects.in_bank(simulation.bank).filter(kind="emotional", category="reaction")
    warm = felt.get(agent="Jordan", turn=1)
    assert warm.about == "Alex" and warm.emotional_valence == pytest.approx(1.0)  # 0.2 × 1.5 = 0.3 (the cap) → 1
    assert warm.content.startswith("Jordan warmed to Alex at turn 1: “Jordan, thank you")
    assert list(warm.evidence.values_list("agent", "turn")) == [("Jordan", 1)]
    hurt = felt.get(agent="Alex", turn=2)
    assert hurt.about == "Sam" and hurt.emotional_valence == pytest.approx(-1.0) and "was hurt by Sam" in hurt.content
    lesson = Memory.objects.in_bank(simulation.bank).get(kind="procedural", category="lesson")
    assert lesson.agent == "Sam" and lesson.content == "Lesson Sam drew at turn 2: Next time I will check the prices first."
    # Feelings are found by what they are about.
    found = call_tool("query_memory", {"query": "how did Alex make me feel?"},
                      context=ToolContext(bank=simulation.bank, agent="Jordan", current_turn=3))
    assert warm.pk in [r.memory.pk for r in found.results]

    # An agent forms a feeling of its own, with its valence and target, when its turn ends.
    outcome = TurnOutcome(utterance="Fine.")
    ctx = ToolContext(bank=simulation.bank, agent="Sam", current_turn=3, deferred=outcome.writes)
    assert call_tool("form_memory", {"content": "I felt left out when they chose for me.", "importance": 7,
                                     "type": "emotional", "valence": -0.6, "about": "Alex"}, context=ctx).error == ""
    assert call_tool("form_memory", {"content": "x" * 20, "importance": 5, "valence": 3}, context=ctx).error \
        == "valence must be between -1 and 1."
    claim = turns.turn_claim(simulation_id=simulation.pk, index=2, agent="Sam")
    turns.turn_finish(turn_id=claim.turn.pk, token=claim.token, outcome=outcome)
    own = Memory.objects.in_bank(simulation.bank).get(kind="emotional", category="formed")
    assert (own.agent, own.about, own.emotional_valence, own.turn) == ("Sam", "Alex", -0.6, 3)


# Lines from runs a writer read, where a word list misread the tone (the offline judge reads who a
# clause is aimed at and whether it is negated or hypothetical).
@pytest.mark.parametrize("line, listener, others", [
    # A warm closing line that mentions a rumour: no distrust of the speaker.
    ("Enough about that rumour, Tess — finish that pint, it's on the house.", "Tess", ["Mira", "Tess"]),
    ("Forget the rumours. Finish that pint, it's on the house.", "Mira", ["Mira", "Tess"]),
    # Someone else's possible dislike of an idea is not coldness towards the one addressed.
    ("Alex, wait — we've been pitching risotto to an empty armchair, Sam stepped out ages ago! Okay, "
     "executive decision: I'll ring Bella's and hold a table for half seven, and if Sam comes back and hates "
     "the idea, we just cancel, no harm done!", "Alex", ["Alex", "Sam"]),
    # Liking a plan, or one's own "love language", says nothing of the listener.
    ("While Jordan's scrolling — for the record, I'm happy with the Thai place as plan B; their prices are "
     "actually on the website, which, as you know, is my love language. So, Jordan, what's the damage at Bella's?",
     "Jordan", ["Alex", "Jordan"]),
    ("I hate this weather.", "Sam", []),
    # Describing oneself, or someone unknown who talks behind one's back, accuses no listener.
    ("Oren, I'm precise, discreet, kind, reserved.", "Oren", ["Oren", "Tess"]),
    ("Tess, what I want is to keep the inn open, find out who is talking about the inn behind my back.",
     "Tess", ["Oren", "Tess"]),
    ("You need something veggie-friendly that won't break the bank.", "Sam", []),
])
def test_words_not_aimed_at_the_listener_move_nothing(line, listener, others):
    moved = judge(line, listener=listener, others=others)
    assert not moved.changes, moved.why


@pytest.mark.parametrize("line, trust, affinity", [
    ("I don't trust you anymore.", -1, 0),         # negated trust is distrust
    ("I never said you were stupid.", 0, +1),      # negated insult
    ("You lied to me about the inn.", -1, 0),
    ("Tess, you're spreading rumours about me.", -1, 0),
    ("If you hate me, just say it.", 0, 0),        # a hypothetical
    ("You're a good friend, Sam.", 0, +1),
    ("Tess, you went behind my back.", -1, 0),
])
def test_polarity_and_aim_decide_the_move(line, trust, affinity):
    moved = judge(line, listener="Sam" if "Sam" in line else "Tess")
    assert ((moved.trust > 0) - (moved.trust < 0), (moved.affinity > 0) - (moved.affinity < 0)) == (trust, affinity), \
        moved.why

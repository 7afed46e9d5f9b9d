"""The dry run's lines: short first-person sentences built from what the character recalled, never a
quote of the transcript it reads, a turn number or a marker meant for the model."""

from __future__ import annotations

import re

import pytest

from chronicle.simulation.providers.base import TurnHints
from chronicle.simulation.providers.reading import prepopulated
from chronicle.simulation.providers.scripted import ScriptedProvider, first_person


@pytest.mark.parametrize("fact, said", [
    ("My goals: get everyone fed before nine, pick a place all three can enjoy.",
     "what I want is to get everyone fed before nine, pick a place all three can enjoy."),
    ("My traits: warm, impulsive, generous.", "I'm warm, impulsive, generous."),
    ("I value honesty, good food.", "what matters to me is honesty, good food."),
    ("(turn 4) Oren told me: Bella's is closing. (weak match)", "Oren told me Bella's is closing."),
    ("Sam is vegetarian and careful with money. (weak match)",
     "I keep thinking about this: Sam is vegetarian and careful with money."),
])
def test_what_a_character_knows_is_said_as_itself_without_markers(fact, said):
    assert first_person(fact) == said


@pytest.mark.parametrize("fact, agent, said", [
    ("My secret: Sam got a small bonus this month and could afford Bella's.", "Sam",
     "between us: I got a small bonus this month and could afford Bella's"),
    ("My goals: warn his friends about what he heard, keep his seat by the fire.", "Oren",
     "what I want is to warn my friends about what I heard, keep my seat by the fire."),
    ("Location: Alex's apartment, living room: a comfortable sofa.", "Sam",
     "look where we are: Alex's apartment, living room: a comfortable sofa."),
])
def test_the_characters_own_sheet_and_the_scene_are_said_in_its_words_not_as_labels(fact, agent, said):
    assert first_person(fact, agent) == said


def test_a_later_line_answers_the_last_speaker_without_quoting_what_it_reads():
    transcript = [(1, "Sam", "Evening, all."), (2, "Alex", "Thai or Italian tonight?"),
                  (3, "Jordan", "Where should we go, Sam?")]
    hints = TurnHints(agent="Sam", others=["Alex", "Jordan"], index=4, first_turn_of_agent=False,
                      transcript=transcript, max_tool_calls=0)
    line = ScriptedProvider().compose(hints, {"recall_facts": [{"content": "I value a fair price. (weak match)"}]},
                                      {"you want": ["keep dinner under twenty-five each"]})
    # Jordan asked where: Sam answers with what Sam wants, in its own words, not a quote.
    assert any("keep dinner under twenty-five each" in sentence and not sentence.endswith("?")
               for sentence in re.split(r"(?<=[.!?])\s+", line)), line
    assert not any(text[:15] in line for _n, _s, text in transcript) and "turn" not in line


def test_a_fact_cut_short_does_not_end_on_a_dangling_word():
    said = first_person("Jordan is Sous-chef and food blogger. Jordan is a sous-chef with a food blog who loves "
                        "Italian food and always knows the newest place in town.")
    assert said.endswith("who loves Italian food and always knows the newest place.")  # not "…place in."


def test_a_first_line_in_the_default_mode_greets_those_present_where_it_is_and_says_what_it_wants():
    """Pre-populated, the sheet's core comes first (how the character speaks): the first line greets
    those present, says where they are by the place's name from the header every prompt carries, and
    what it wants, and asks the others."""
    system = ("You are an agent in a simulation.\n\n## Who you are\n- Short, dry sentences; asks pointed questions.\n"
              "- My traits: sharp, proud.\n- My goals: keep the inn open.\n\n## You\n"
              "You are Mira: Innkeeper — Mira keeps the Harbour Inn.\nWhere: The Harbour Inn\nWhen: Late evening")
    provider = ScriptedProvider()
    hints = TurnHints(agent="Mira", others=["Oren"], index=0, first_turn_of_agent=True, transcript=[], max_tool_calls=0)
    line = provider.compose(hints, {}, prepopulated([{"role": "system", "content": system},
                                                      {"role": "user", "content": "Conversation so far:"}]))
    assert line.split(",")[0] in ("Hello", "Evening", "Hi") and line.split(".")[0].endswith("Oren")
    assert "here we are: the Harbour Inn." in line and "I'd like us to keep the inn open." in line and line.endswith("?")

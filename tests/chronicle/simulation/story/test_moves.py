"""Exits and entrances read off a line's actions and words (chronicle.simulation.story.moves): no database."""

from __future__ import annotations

import pytest

from chronicle.simulation.story.moves import Move, moves_in

CAST = ["Alex", "Jordan", "Sam", "Captain Okafor"]
HERE = ["Alex", "Jordan"]  # Sam and Okafor are away


def moves(text: str, speaker: str = "Jordan", present=None) -> list[Move]:
    return moves_in(text, speaker=speaker, cast=CAST, present=HERE if present is None else present)


@pytest.mark.parametrize("line", [
    "*goes below to the engine room*",
    "*heads out to the yard*",
    "Right. *slips out*",
    "*excuses herself and leaves*",
    "*walks off toward the harbour*",
    "*heads out into the rain*",
    "*slips out the back*",
    "*finishes the coffee, then quietly leaves the room*",
    "*Jordan storms off*",
    "*grabs her coat and makes her way outside*",
    "I'll wait outside.",
    "I'm going to check the nets.",
    "I'll be back after I check the nets",
    "Fine. I'll be right back.",
    "I’ll leave you two to it.",
    "I'm heading home. Good night.",
    "I have to go.",
    "Let me go check on the boat.",
    "Back soon, I promise. I'll go and see what the noise is.",
])
def test_a_speaker_who_walks_out_or_says_it_leaves_now_leaves(line):
    assert moves(line) == [Move("Jordan", "leave")]


@pytest.mark.parametrize("line", [
    "I'll leave the key here.",
    "We should leave it.",
    "Leave me alone.",
    "She left him years ago.",
    "When I left Leeds, I was nineteen.",
    "Are you leaving?",
    "Are you going to wait outside?",
    "If you go, I'll go too.",
    "If you go, I'll wait outside.",
    "I'd never walk out on you.",
    "I won't leave.",
    "I'm leaving tomorrow.",
    "I'm going to tell you something.",
    "I'll go first.",
    "*leaves the key on the table*",
    "*nearly leaves, but sits back down*",
    "*heads out, then stops at the door and turns back*",
    "*steps out of the way*",
    "*goes out of her way to smile*",
    "*climbs out of her chair*",
    "*turns to leave*",
    "*looks away*",
    "*The wind leaves the shutters rattling*",
    "*watches Alex walk out*",
    "I'll be back to normal once this is over.",
    "I'm going out of my mind.",
    "I'll step out of line once, for you.",
    "I'm going off my head in here.",
    "*steps inside, shaking off the rain*",
])
def test_words_about_leaving_that_do_not_leave_now_move_nobody(line):
    assert moves(line) == []


def test_someone_elses_exit_in_the_speakers_action_does_not_move_the_speaker():
    assert moves("*Alex heads out*", speaker="Jordan") == []


@pytest.mark.parametrize("line, who", [
    ("*Sam comes back in, soaked*", "Sam"),
    ("*the door opens: Okafor is back*", "Captain Okafor"),
    ("Well. *Sam walks in with the groceries*", "Sam"),
    ("*Captain Okafor returns, shaking the rain off his coat*", "Captain Okafor"),
])
def test_an_absent_cast_member_coming_in_in_anyones_action_enters(line, who):
    assert moves(line, speaker="Alex") == [Move(who, "enter")]


@pytest.mark.parametrize("line", [
    "*goes to fetch Sam*",
    "*waits until Sam is back*",
    "*wonders if Sam comes back in tonight*",
    "Sam comes back in, I expect.",  # words, not a stage action: the writer or the model decides
    "*Okafor returns the glass to the shelf*",
    "*hopes Sam arrives soon*",
])
def test_naming_an_absent_character_does_not_bring_it_in(line):
    assert moves(line, speaker="Alex") == []


def test_one_already_in_the_room_does_not_enter_again():
    assert moves("*Jordan comes back in*", speaker="Alex", present=["Alex", "Jordan", "Sam"]) == []


def test_a_line_can_both_leave_and_bring_someone_in():
    assert moves("*lets Sam in* Sam comes back in? Good. *Sam comes back in* I'll wait outside.", speaker="Alex") == [
        Move("Alex", "leave"), Move("Sam", "enter")]


@pytest.mark.parametrize("line", ["*reaches for her coat* I'll go up and check on them.",
                                  "I'll go over and see what the noise is."])
def test_going_up_or_over_to_see_to_something_is_an_exit(line):
    assert moves_in(line, speaker="Nessa", cast=["Nessa", "Orla"], present=["Nessa", "Orla"]) == [Move("Nessa", "leave")]


def test_going_up_and_down_is_no_exit():
    assert moves_in("I'll go up and down the stairs all day if I have to.", speaker="Nessa", cast=["Nessa", "Orla"],
                    present=["Nessa", "Orla"]) == []

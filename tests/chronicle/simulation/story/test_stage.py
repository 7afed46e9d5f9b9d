"""Stage directions and how a line reaches the room (chronicle.simulation.story.stage): no database."""

from __future__ import annotations

import pytest

from chronicle.simulation.story.stage import Direction, StageError, deliver, events_at, parse, present_at

CAST = ["Alex", "Jordan", "Sam"]


def test_directions_parse_into_entrances_exits_and_world_events():
    directions = parse("8: Jordan leaves\n\n1: Sam is away\n5: Sam enters.\n6: The lights go out.", cast=CAST)
    assert directions == [Direction(1, "leave", "Sam", "Sam is away"), Direction(5, "enter", "Sam", "Sam enters."),
                          Direction(6, "event", "", "The lights go out."), Direction(8, "leave", "Jordan", "Jordan leaves")]
    assert present_at(directions, CAST, 1) == ["Alex", "Jordan"]
    assert present_at(directions, CAST, 4) == ["Alex", "Jordan"]
    assert present_at(directions, CAST, 5) == CAST
    assert present_at(directions, CAST, 8) == ["Alex", "Sam"]
    assert [d.text for d in events_at(directions, 6)] == ["The lights go out."] and events_at(directions, 5) == []
    assert Direction.from_dict(directions[0].as_dict()) == directions[0]


@pytest.mark.parametrize("text, message", [
    ("Sam enters", "Line 1: start with the turn"),
    ("0: Sam enters", "Line 1: turns count from 1"),
    ("3: Sam leaves\n40: Sam enters", "Line 2: turn 40 is past the run's 12 turns"),
    ("2: Robin enters", r"Line 1: Robin is not in this run's cast \(Alex, Jordan, Sam\)"),
])
def test_a_direction_the_form_cannot_take_names_its_line(text, message):
    with pytest.raises(StageError, match=message):
        parse(text, cast=CAST, max_turns=12)


def test_a_whisper_reaches_its_addressee_and_the_others_see_it_happen():
    line = deliver("*whispers to Sam* I already paid a deposit at the Thai place.", speaker="Alex", present=CAST)
    assert line.heard_by == ["Alex", "Sam"] and line.whisper_to == "Sam" and line.overheard == ["Jordan"]
    assert line.text == "I already paid a deposit at the Thai place." and line.actions == []
    assert deliver("(whispering to jordan): not now", speaker="Sam", present=CAST).whisper_to == "Jordan"
    # A whisper to someone not in the room is said aloud.
    aloud = deliver("*whispers to Robin* hello", speaker="Alex", present=CAST)
    assert aloud.heard_by == CAST and aloud.whisper_to == ""


def test_actions_are_seen_by_everyone_present_and_absent_people_hear_nothing():
    line = deliver("*pours the wine* Cheers, then. *raises a glass*", speaker="Jordan", present=["Alex", "Jordan"])
    assert line.heard_by == ["Jordan", "Alex"] and line.actions == ["pours the wine", "raises a glass"]


@pytest.mark.parametrize("action, seen", [
    ("pours the wine", "Jordan pours the wine."),
    ("her eyes widen", "Jordan's eyes widen."),
    ("You wake with a start, recalling the forest.", "You wake with a start, recalling the forest."),
    ("the door creaks open", "The door creaks open."),
    ("Jordan laughs.", "Jordan laughs."),
])
def test_what_a_witness_keeps_of_an_action_or_a_narration(action, seen):
    from chronicle.simulation.story.stage import seen_action

    assert seen_action("Jordan", action) == seen


def test_a_direction_the_run_added_keeps_where_it_came_from_apart_from_what_is_remembered():
    (added,) = parse("3: Sam leaves (from Sam's line at turn 2)", cast=CAST)
    assert (added.kind, added.who, added.text, added.source) == ("leave", "Sam", "Sam leaves", "from Sam's line at turn 2")
    assert added.line() == "3: Sam leaves (from Sam's line at turn 2)"
    assert Direction.from_dict(added.as_dict()) == added
    (event,) = parse("4: The lights go out (from the fuse box).", cast=CAST)  # the writer's own brackets stay
    assert event.text == "The lights go out (from the fuse box)." and event.source == ""


def test_a_branch_or_replay_drops_the_moves_its_lines_will_make_again():
    from chronicle.simulation.story.stage import without_added

    text = "1: Sam is away\n3: Sam enters (from Alex's line at turn 2)\n6: Jordan leaves (from Jordan's line at turn 5)"
    assert without_added(text, since=4) == "1: Sam is away\n3: Sam enters (from Alex's line at turn 2)"
    assert without_added(text) == "1: Sam is away"

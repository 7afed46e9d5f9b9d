"""People come and go by what they say and do: a line's exit or entrance becomes a stage direction
of the run (shown, and undoable), and presence, memory and the rotation follow it — through a run's
turns with the real database, memory and (for the model's judgement) the fake OpenAI-compatible server."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from chronicle.simulation.control import services
from devtools.fake_llm import ok
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import run_turn_task
from memory.models import Memory
from tests.factories import start, start_with_model
from tests.chronicle.simulation.story.test_presence import lines_of, say

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("memory_tasks_inline")]

SECRET = "Now that Sam's outside: Bella's, my treat, and not a word to Sam."


def test_a_replayed_character_who_goes_outside_misses_what_is_said_and_comes_back_when_brought_in(user, dinner,
                                                                                                    client_for):
    script = [{"speaker": "Alex", "text": "Shall we decide on dinner?"},
              {"speaker": "Sam", "text": "I'll wait outside. Call me when you've picked."},
              {"speaker": "Jordan", "text": SECRET},
              {"speaker": "Alex", "text": "Deal. *opens the door* *Sam comes back in, soaked*"},
              {"speaker": "Sam", "text": "It's pouring. What did I miss?"}]
    simulation = start(user, dinner, provider="replay", script=script, max_turns=len(script))
    for index in range(len(script)):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    simulation.refresh_from_db()
    assert simulation.stage_directions.splitlines() == ["3: Sam leaves (from Sam's line at turn 2)",
                                                        "5: Sam enters (from Alex's line at turn 4)"]
    heard = [set(h) for h in simulation.turns.order_by("index").values_list("heard_by", flat=True)]
    assert heard[2] == heard[3] == {"Alex", "Jordan"} and heard[4] == {"Alex", "Jordan", "Sam"}
    # Sam keeps nothing said while outside; the others keep every line.
    assert [turn for turn, _c in lines_of(simulation, "Sam")] == [1, 2, 5]
    assert not any("Bella's, my treat" in content for content in
                   Memory.objects.in_bank(simulation.bank).filter(agent="Sam").values_list("content", flat=True))
    assert [turn for turn, _c in lines_of(simulation, "Jordan")] == [1, 2, 3, 4, 5]
    # Sam saw itself go and come back, as the others did.
    stage = Memory.objects.in_bank(simulation.bank).filter(category="stage", agent="Sam").order_by("turn")
    assert [(m.turn, m.content) for m in stage] == [(3, "Sam leaves"), (5, "Sam enters")]
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Sam leaves</em> <span class=\"source\">· from Sam&#x27;s line at turn 2</span>" in page
    assert "heard by Alex, Jordan · Sam was away" in page


def test_a_character_who_walks_out_is_not_chosen_to_speak_until_someone_brings_it_back(user, dinner):
    simulation = start(user, dinner, max_turns=8)
    say(simulation, 0, "Alex", "Thai or Italian?")
    say(simulation, 1, "Jordan", "*heads out to the yard to call Bella's*")
    for index in (2, 3, 4):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    spoke = list(simulation.turns.filter(index__in=[2, 3, 4]).order_by("index").values_list("agent", flat=True))
    assert spoke == ["Sam", "Alex", "Sam"]  # the rotation goes on among those in the room
    say(simulation, 5, "Alex", "*Jordan walks back in, phone in hand*")
    assert run_turn_task.apply(args=(simulation.pk, 6)).get() == "done"
    assert simulation.turns.get(index=6).agent == "Jordan"  # next after Alex, back in the room


def test_the_writer_takes_back_an_exit_a_line_made_and_the_next_turns_follow(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=4)
    say(simulation, 0, "Sam", "I'm going to check the nets.")
    services.simulation_pause(simulation=simulation)
    client = client_for(user)
    page = client.get(simulation.get_absolute_url()).content.decode()
    added = "2: Sam leaves (from Sam's line at turn 1)"
    assert "before turn 2" in page and f'name="undo" value="{added}"'.replace("'", "&#x27;") in page
    response = client.post(reverse("simulation_stage", args=[simulation.pk]), {"undo": added}, follow=True)
    assert "Taken back" in response.content.decode()
    simulation.refresh_from_db()
    assert simulation.stage_directions == "" and simulation.present_at(2) == ["Alex", "Jordan", "Sam"]
    services.simulation_resume(simulation=simulation)
    assert set(say(simulation, 1, "Alex", "Sam? Still here?").heard_by) == {"Alex", "Jordan", "Sam"}


def test_the_writer_edits_what_comes_next_but_not_what_was_played(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=5, stage_directions="2: The lights go out.")
    say(simulation, 0, "Alex", "Thai or Italian?")
    say(simulation, 1, "Jordan", "*excuses herself and leaves*")
    services.simulation_pause(simulation=simulation)
    client, url = client_for(user), reverse("simulation_stage", args=[simulation.pk])
    refused = client.post(url, {"stage_directions": "3: Jordan leaves (from Jordan's line at turn 2)"}, follow=True)
    assert "Turns 1–2 have been played with their directions" in refused.content.decode()
    # Jordan only steps out for one turn: the writer brings Jordan back at turn 4.
    client.post(url, {"stage_directions": "2: The lights go out.\n3: Jordan leaves (from Jordan's line at turn 2)\n"
                                          "4: Jordan comes back"})
    simulation.refresh_from_db()
    assert simulation.present_at(3) == ["Alex", "Sam"] and simulation.present_at(4) == ["Alex", "Jordan", "Sam"]
    assert Simulation.objects.get(pk=simulation.pk).directions[-1].text == "Jordan comes back"


def test_the_models_judgement_says_who_left_and_who_came_in(user, dinner, server):
    server.script(ok("Right. I could do with some air, honestly."), ok("Bella's it is, then."),
                  ok("Good, you're here."))
    answer = {"listeners": {"Alex": {"importance": 3}, "Jordan": {"importance": 3}, "Sam": {"importance": 3}}}
    server.judgement = json.dumps(answer | {"left": ["Alex"], "came": []})
    simulation = start_with_model(user, dinner, server, max_turns=3)
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    simulation.refresh_from_db()
    # No rule reads "I could do with some air" as leaving; the model did.
    assert simulation.stage_directions == "2: Alex leaves (from Alex's line at turn 1)"
    assert '"left": who walks out in this line' in str(server.scored[0]["messages"][-1]["content"])
    server.judgement = json.dumps(answer | {"left": ["Alex"], "came": ["alex", "Robin"]})  # Alex is away: ignored as left
    assert run_turn_task.apply(args=(simulation.pk, 1)).get() == "done"
    turn = simulation.turns.get(index=1)
    assert turn.agent == "Jordan" and set(turn.heard_by) == {"Jordan", "Sam"}
    simulation.refresh_from_db()
    assert simulation.stage_directions.splitlines()[1:] == ["3: Alex enters (from Jordan's line at turn 2)"]
    assert simulation.present_at(3) == ["Alex", "Jordan", "Sam"]


def test_a_branch_keeps_the_moves_of_the_lines_it_keeps_and_not_of_those_it_says_anew(user, dinner):
    from chronicle.simulation.control.branching import simulation_branch

    simulation = start(user, dinner, max_turns=6)
    for index, (agent, line) in enumerate([("Alex", "Thai or Italian?"), ("Sam", "*slips out the back*"),
                                           ("Jordan", "Italian."), ("Jordan", "I'll wait outside.")]):
        say(simulation, index, agent, line)
    services.simulation_pause(simulation=simulation)
    simulation.refresh_from_db()
    assert simulation.stage_directions.splitlines() == ["3: Sam leaves (from Sam's line at turn 2)",
                                                        "5: Jordan leaves (from Jordan's line at turn 4)"]
    branch, _turns = simulation_branch(parent=simulation, index=3)  # turn 4 is said again
    assert branch.stage_directions == "3: Sam leaves (from Sam's line at turn 2)"


def test_a_replays_writer_cannot_take_out_of_the_room_one_its_script_says_speaks_next(user, dinner, client_for):
    script = [{"speaker": "Sam", "text": "*heads out to the yard*"},
              {"speaker": "Alex", "text": "*Sam comes back in with the firewood*"},
              {"speaker": "Sam", "text": "Cold out there."}]
    simulation = start(user, dinner, provider="replay", script=script, max_turns=3)
    for index in (0, 1):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    services.simulation_pause(simulation=simulation)
    entrance = "3: Sam enters (from Alex's line at turn 2)"
    response = client_for(user).post(reverse("simulation_stage", args=[simulation.pk]), {"undo": entrance}, follow=True)
    assert "Script line 3: Sam is not in the room at turn 3" in response.content.decode()
    simulation.refresh_from_db()
    assert entrance in simulation.stage_directions.splitlines()

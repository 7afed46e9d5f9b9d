"""Distortion filters (seeds 000 and 001): formation, retrieval and association, through a
run's turns with the real model and database; the writer sees before and after, and can replay
the run without them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from chronicle.simulation.control import services
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import run_turn_task
from chronicle.writing import services as writing
from memory.forming.distortion import DistortionError, parse, retrieval_filter
from memory.models import Memory
from memory.recalling.tools import ToolContext, call_tool
from tests.factories import start, say

pytestmark = pytest.mark.django_db

FILTERS = "Jordan: paranoia\nJordan: depression\nJordan: trauma (fire, smoke)\nSam: hears every compliment as mockery"


def copy_of(simulation, agent: str, turn: int) -> Memory:
    return Memory.objects.in_bank(simulation.bank).get(agent=agent, kind="episodic", turn=turn)


def test_filters_are_parsed_and_bad_ones_named():
    found = parse(FILTERS, cast=["Alex", "Jordan", "Sam"])
    assert [(f.agent, f.kind, f.stage) for f in found] == [
        ("Jordan", "paranoia", "formation"), ("Jordan", "depression", "retrieval"),
        ("Jordan", "trauma", "association"), ("Sam", "rewrite", "formation")]
    assert found[2].triggers == ("fire", "smoke")
    with pytest.raises(DistortionError, match="Line 1: Bob is not in this run's cast"):
        parse("Bob: paranoia", cast=["Alex"])
    with pytest.raises(DistortionError, match="name the trauma's triggers"):
        parse("Alex: trauma", cast=["Alex"])


def test_each_stage_distorts_and_the_writer_sees_what_was_really_said(user, dinner, client_for, monkeypatch):
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 1)  # turn 1 is a memory at turn 3, not in the transcript
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    simulation = start(user, dinner, max_turns=6, distortions=FILTERS, retrieval_mode="prepopulate")
    say(simulation, 0, "Alex", "The kitchen fire last year scared everyone.")
    done = say(simulation, 1, "Alex", "You look great tonight, Sam. I booked the table by the fire.")

    # Formation: Jordan's copy carries the threat it suspects; the original is kept; Alex's is as said.
    jordan = copy_of(simulation, "Jordan", 2)
    said = "Alex said: You look great tonight, Sam. I booked the table by the fire."
    assert jordan.content == f"{said} (Jordan suspects there is something threatening behind it.)"
    assert jordan.metadata["distortion"]["original"] == said and jordan.metadata["distortion"]["filter"] == "paranoia"
    assert copy_of(simulation, "Alex", 2).content == said
    # The writer's own filter, offline: Sam's copy says how Sam takes it.
    assert copy_of(simulation, "Sam", 2).content == f"{said} (as Sam takes it: hears every compliment as mockery)"
    # Association: the line touches Jordan's trauma (fire): linked to Jordan's earlier memory of the fire.
    earlier = copy_of(simulation, "Jordan", 1)
    assert set(jordan.evidence.values_list("pk", flat=True)) == {earlier.pk}
    assert jordan.metadata["distortion"]["association"]["triggers"] == ["fire"]
    # The note shows where the copy departs from what was said, however long the line.
    assert "Jordan remembers it as: “…" in done.note and "(Jordan suspects there is something threatening" in done.note

    # Retrieval: for Jordan, the warm line comes back at half its score, a negative component.
    ctx = ToolContext(bank=simulation.bank, agent="Jordan", current_turn=3,
                      distort=retrieval_filter("Jordan", simulation.distortion_filters))
    found = call_tool("query_memory", {"query": "you look great tonight"}, context=ctx)
    hit = next(r for r in found.results if r.memory.pk == jordan.pk)
    assert hit.components["distortion"] < 0
    plain = call_tool("query_memory", {"query": "you look great tonight"},
                      context=ToolContext(bank=simulation.bank, agent="Jordan", current_turn=3))
    assert next(r for r in plain.results if r.memory.pk == jordan.pk).score == pytest.approx(hit.score * 2, rel=1e-6)

    # The bank page and the turn inspector show before and after.
    bank = client_for(user).get(reverse("chronicle_memories", args=[simulation.pk]) + "?agent=Jordan").content.decode()
    assert "distorted: paranoia" in bank and "really said:" in bank
    assert "trauma (fire, smoke)" in bank
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "Jordan: paranoia (formation)" in page
    # The next turn's agent recalls a distorted copy of its own: the inspector shows both texts.
    assert run_turn_task.apply(args=(simulation.pk, 2)).get() == "done"
    turn = simulation.turns.get(index=2)
    recalled = [res for r in turn.retrievals.all() for res in r.results if (res.get("distortion") or {}).get("original")]
    assert recalled and turn.agent == "Sam"
    inspector = client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 2])).content.decode()
    assert "really said:" in inspector and recalled[0]["distortion"]["original"] in inspector


def test_a_run_replays_without_its_distortions(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=4, distortions="Jordan: paranoia")
    say(simulation, 0, "Alex", "Shall we go?")
    services.simulation_pause(simulation=simulation)
    response = client_for(user).post(reverse("replay_undistorted", args=[simulation.pk]))
    branch = Simulation.objects.get(parent=simulation)
    assert response.status_code == 302 and response["Location"] == branch.get_absolute_url()
    assert branch.distortions == "" and branch.branch_turn == 0 and "without distortions" in branch.title
    assert branch.max_turns == simulation.max_turns and branch.scoring == simulation.scoring
    with pytest.raises(writing.WritingError, match="no distortion filters"):
        writing.simulation_replay_undistorted(parent=branch, actor=user)


def test_the_form_names_a_bad_filter(user, dinner, client_for):
    response = client_for(user).post(reverse("simulation_create"), {
        "scenario": dinner.pk, "max_turns": 4, "speaking_order": "round_robin", "retrieval_mode": "tools",
        "scoring": "similarity", "provider": "scripted", "distortions": "Bob: paranoia"})
    assert response.status_code == 200
    assert "Bob is not in this run" in response.content.decode()


def test_a_trauma_links_to_earlier_lines_of_the_run_not_only_to_the_sheet(user, dinner):
    """Memories of the sheet holding a trigger (no turn) come after the run's own earlier lines."""
    from memory.forming.distortion import TRAUMA_LINKS
    from memory.services import memory_create

    simulation = start(user, dinner, max_turns=4, distortions="Jordan: trauma (fire, smoke)")
    for n in range(TRAUMA_LINKS + 1):
        memory_create(bank=simulation.bank, content=f"Jordan remembers fire number {n} from the old kitchen.",
                      agent="Jordan", kind="character", source="gifted")
    say(simulation, 0, "Alex", "Did you hear about the fire on Baker Street?")
    say(simulation, 1, "Alex", "They say the smoke reached the third floor.")
    linked = set(copy_of(simulation, "Jordan", 2).metadata["distortion"]["association"]["linked"])
    assert copy_of(simulation, "Jordan", 1).pk in linked and len(linked) == TRAUMA_LINKS
    # The turn's note says so in words, quoting what it links to, not by ids.
    note = simulation.turns.get(index=1).note
    assert f"Jordan connects it with {TRAUMA_LINKS} earlier memories that touch Jordan's trauma" in note
    assert "such as “" in note and "#" not in note.split("connects it with", 1)[1].split("\n", 1)[0]


def test_depression_shows_in_the_score_bars_of_what_it_dampened(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=4, distortions="Jordan: depression", retrieval_mode="prepopulate")
    say(simulation, 0, "Alex", "I love this place, it is wonderful, thank you all for coming.")
    assert run_turn_task.apply(args=(simulation.pk, 1)).get() == "done"
    turn = simulation.turns.get(index=1)
    dampened = [res for r in turn.retrievals.all() for res in r.results if (res.get("components") or {}).get("distortion")]
    assert turn.agent == "Jordan" and dampened
    page = client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 1])).content.decode()
    assert "dampened (depression)" in page
    assert "no longer add up" not in page  # the bars, dampening included, add up to each score


@pytest.mark.parametrize("mode", ["tools", "prepopulate"])
def test_a_paranoid_listener_is_told_how_it_took_each_line_once_while_the_line_is_still_on_screen(user, dinner, mode,
                                                                                                   client_for):
    """The transcript shows what was said; a formation filter bends what the listener heard, and the
    listener is told so before its next turn, not only once the line has left its window."""
    simulation = start(user, dinner, max_turns=6, distortions="Jordan: paranoia", retrieval_mode=mode)
    say(simulation, 0, "Alex", "I booked us a table at Bella's for eight.")
    assert run_turn_task.apply(args=(simulation.pk, 1)).get() == "done"  # Jordan, turn 2
    took = ("## How you took it\n- (turn 1) Alex said: I booked us a table at Bella's for eight. "
            "(Jordan suspects there is something threatening behind it.)")
    second = simulation.turns.get(index=1).prompt_messages
    assert sum(took in (m.get("content") or "") for m in second) == 1
    assert "[turn 1] Alex: I booked us a table at Bella's for eight." in second[1]["content"]  # as said
    # The writer sees it among what the turn was given, and where it came from.
    page = client_for(user).get(reverse("turn_inspect", args=[simulation.pk, 1])).content.decode()
    assert "section=How you took it" in page and "Searched Jordan&#x27;s own memories of what was said at turn 1." in page
    say(simulation, 2, "Sam", "Sounds good to me.")
    say(simulation, 3, "Alex", "Then it's settled.")
    # The writer archived Jordan's copy of Alex's line at turn 4: never given again, not even here.
    Memory.objects.in_bank(simulation.bank).filter(agent="Jordan", kind="episodic", turn=4).update(status="archived")
    assert run_turn_task.apply(args=(simulation.pk, 4)).get() == "done"  # Jordan, turn 5
    fifth = "\n".join(m.get("content") or "" for m in simulation.turns.get(index=4).prompt_messages)
    assert fifth.count("(turn 1) Alex said: I booked") == 1  # in the note kept from turn 2, not again
    assert "- (turn 3) Sam said: Sounds good to me. (Jordan suspects" in fifth
    assert "Then it's settled. (Jordan suspects" not in fifth
    # Sam, without the filter, hears it as said: no such section.
    assert run_turn_task.apply(args=(simulation.pk, 5)).get() == "done"  # Sam, turn 6
    assert "How you took it" not in "\n".join(m.get("content") or "" for m in
                                                simulation.turns.get(index=5).prompt_messages)

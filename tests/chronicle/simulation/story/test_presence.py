"""Who is in the room: stage directions, whispers, actions and world events, through a
run's turns with the real model and database."""

from __future__ import annotations

import math

import pytest
from django.test import TestCase
from django.urls import reverse

from chronicle.simulation.turn import inputs as turn_inputs
from chronicle.simulation.control import turns
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.tasks import run_turn_task
from memory.models import Memory
from tests.factories import start, say
from tests.prompting import sent_text

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("memory_tasks_inline")]


def lines_of(simulation, agent):
    return list(Memory.objects.in_bank(simulation.bank).filter(agent=agent, kind="episodic")
                .order_by("turn").values_list("turn", "content"))


def test_an_absent_character_hears_nothing_and_does_not_speak_until_it_enters(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=5, stage_directions="1: Sam is away\n4: Sam enters\n3: The lights go out.")
    for index in range(5):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    done = list(simulation.turns.order_by("index"))
    assert [t.agent for t in done[:3]] == ["Alex", "Jordan", "Alex"]  # only those in the room speak
    assert "Sam" in {t.agent for t in done[3:]}
    assert done[0].heard_by == ["Alex", "Jordan"] and set(done[3].heard_by) == {"Alex", "Jordan", "Sam"}
    # Sam remembers nothing said before turn 4; Alex and Jordan remember every line.
    assert [turn for turn, _c in lines_of(simulation, "Sam")] == [4, 5]
    assert [turn for turn, _c in lines_of(simulation, "Alex")] == [1, 2, 3, 4, 5]
    # What happened before turn 3 was seen by those present; Sam's entrance by everyone, Sam too.
    stage = Memory.objects.in_bank(simulation.bank).filter(category="stage")
    assert set(stage.filter(content="The lights go out.").values_list("agent", flat=True)) == {"Alex", "Jordan"}
    assert set(stage.filter(content="Sam enters").values_list("agent", flat=True)) == {"Alex", "Jordan", "Sam"}
    # Sam's first line: its agent was not shown the lines it missed.
    sam_turn = next(t for t in done if t.agent == "Sam")
    seen = " ".join(m["content"] or "" for m in sam_turn.prompt_messages if isinstance(m.get("content"), str))
    assert done[0].utterance not in seen
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "heard by Alex, Jordan · Sam was away" in page and "The lights go out." in page


def test_a_whisper_reaches_only_its_addressee_and_the_others_see_it_happen(user, dinner, client_for):
    simulation = start(user, dinner, max_turns=3)
    say(simulation, 0, "Alex", "Shall we decide on dinner?")
    whisper = say(simulation, 1, "Alex", "*whispers to Sam* I already paid a deposit at the Thai place.")
    assert whisper.heard_by == ["Alex", "Sam"] and whisper.whisper_to == "Sam"
    assert lines_of(simulation, "Sam")[-1] == (2, "Alex whispered to Sam: I already paid a deposit at the Thai place.")
    assert [turn for turn, _c in lines_of(simulation, "Jordan")] == [1]  # Jordan did not hear the words
    (seen,) = Memory.objects.in_bank(simulation.bank).filter(agent="Jordan", kind="observation", category="witnessed")
    assert seen.content == "Alex whispered something to Sam." and seen.turn == 2
    # Jordan's next turn is told that a whisper happened, not what it said.
    assert turn_inputs.transcript_for(simulation, 2, "Jordan") == [
        (1, "Alex", "Shall we decide on dinner?"), (2, "Alex", "(whispers something to Sam)")]
    assert "deposit" in turn_inputs.transcript_for(simulation, 2, "Sam")[1][2]
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "whispered to Sam: only Sam heard the words" in page


def test_actions_are_remembered_with_the_line_and_seen_by_those_who_only_saw_a_whisper(user, dinner):
    simulation = start(user, dinner, max_turns=3)
    say(simulation, 0, "Jordan", "*pours the wine* To Bella's!")
    # Everyone heard the line, so everyone's memory of it holds the action: no second, shorter memory.
    for name in ("Alex", "Jordan", "Sam"):
        assert "*pours the wine*" in lines_of(simulation, name)[-1][1]
    assert not Memory.objects.in_bank(simulation.bank).filter(kind__in=["observation", "action"],
                                                               category__in=["witnessed", "done"]).exists()
    say(simulation, 1, "Alex", "*whispers to Sam* *slides the bill over* You owe me.")
    seen = Memory.objects.in_bank(simulation.bank).filter(kind="observation", category="witnessed")
    assert sorted(seen.values_list("agent", "content")) == [
        ("Jordan", "Alex slides the bill over."), ("Jordan", "Alex whispered something to Sam.")]
    # Jordan's transcript says as much: the words were not heard, what Alex did was seen.
    assert turn_inputs.transcript_for(simulation, 2, "Jordan")[-1] == (
        2, "Alex", "(whispers something to Sam, too low to hear. Seen: Alex slides the bill over.)")


def test_the_form_names_a_bad_direction_and_keeps_the_rest(user, dinner, client_for):
    data = {"scenario": dinner.pk, "max_turns": 6, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "scripted", "temperature": "0.7", "max_tokens": 300,
            "max_tool_calls": 4, "timeout_s": 30, "pace_s": 0, "stage_directions": "2: Sam leaves\n4: Robin enters"}
    response = client_for(user).post(reverse("simulation_create"), data)
    page = response.content.decode()
    assert response.status_code == 200 and "Line 2: Robin is not in this run&#x27;s cast" in page
    assert "2: Sam leaves" in page and not Simulation.objects.exists()


def test_a_character_who_walks_out_is_away_from_the_next_turn(user, dinner):
    simulation = start(user, dinner, max_turns=4)
    say(simulation, 0, "Sam", "*leaves the room* Back in a minute.")
    simulation.refresh_from_db()
    # Where the writer sees it, with the line it came from, and can change it.
    assert simulation.stage_directions == "2: Sam leaves (from Sam's line at turn 1)"
    assert simulation.present_at(2) == ["Alex", "Jordan"]
    line = say(simulation, 1, "Alex", "Now that Sam is out: the Thai place?")
    assert line.heard_by == ["Alex", "Jordan"]


def test_a_clocked_run_ages_what_came_before_a_time_skip(user, dinner, client_for, monkeypatch):
    """Minutes per turn and "Three hours later" (age in simulated time): the lines said
    before the skip reach the agent with the recency of three hours' worth of turns more."""
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 2)  # turn 1 is before the transcript turn 4 reads
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    simulation = start(user, dinner, max_turns=4, retrieval_mode="prepopulate", scoring="decayed",
                              minutes_per_turn=2, stage_directions="3: Three hours later")
    assert simulation.clock == [0, 0, 0, 90, 90]
    for index in range(3):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    # A line that touches a goal never fades below half (decay's goal floor): here, no line does.
    Memory.objects.in_bank(simulation.bank).update(related_goals=[])
    assert run_turn_task.apply(args=(simulation.pk, 3)).get() == "done"
    last = simulation.turns.get(index=3)
    recent = next(r for r in last.retrievals.all() if (r.arguments or {}).get("section") == "Recent events")
    first_line = next(res for res in recent.results if res["turn"] == 1)
    memory = Memory.objects.get(pk=first_line["memory_id"])
    # Turn 4 recalls the line of turn 1: 3 turns + 90 turns' worth skipped, at the memory's own rate.
    rate = memory.decay_rate * (1 - 0.5 * abs(memory.emotional_valence))
    assert first_line["components"]["recency"] == pytest.approx(math.exp(-rate * 93), rel=1e-6)
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "clock: 2 min a turn" in page and "Three hours later" in page


def test_where_someone_is_now_ends_where_they_were_and_a_branch_from_before_does_not_know_it(user, dinner):
    """"Sam steps out" at turn 2, "Sam comes back" at turn 4: from then on Alex's searches show Sam out
    only until the return (still there for "when did Sam leave?"); a copy of the bank as it stood
    before the return has Sam simply out."""
    from memory.services import bank_copy, bank_create
    from memory.recalling.tools import ToolContext, call_tool

    simulation = start(user, dinner, max_turns=5, stage_directions="2: Sam steps out\n4: Sam comes back")
    for index, (agent, line) in enumerate([("Alex", "Thai or Italian?"), ("Jordan", "Italian, obviously."),
                                           ("Alex", "Let's wait for Sam."), ("Sam", "I'm back. Thai.")]):
        say(simulation, index, agent, line)
    away, back = Memory.objects.in_bank(simulation.bank).filter(agent="Alex", category="stage").order_by("turn")
    assert (away.turn, back.turn) == (2, 4)  # dated as the transcript shows them
    assert (away.content, away.metadata["superseded_turn"]) == ("Sam steps out", 4)
    assert away.metadata["stage"]["who"] == "Sam"  # the mark is added to what the metadata held
    assert back.content == "Sam comes back" and "superseded_turn" not in back.metadata
    answer = call_tool("query_memory", {"query": "when did Sam step out?"},
                       context=ToolContext(bank=simulation.bank, agent="Alex", current_turn=5))
    found = {m["content"]: m for m in answer.response["memories"]}
    assert found["Sam steps out"]["until_turn"] == "4" and "until_turn" not in found["Sam comes back"]

    before = bank_create(name="before the return", owner=user)
    bank_copy(source=simulation.bank, target=before, as_of_turn=3)
    copied = Memory.objects.in_bank(before).get(agent="Alex", category="stage")
    assert copied.content == "Sam steps out" and "superseded_turn" not in copied.metadata


def test_recent_events_are_what_came_before_the_transcript_in_time_order(user, dinner, monkeypatch):
    """Pre-population's "Recent events" never repeats the transcript the agent reads: with a window of
    two lines, turn 6 is told of turns before 4, oldest first."""
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 2)
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    simulation = start(user, dinner, max_turns=6, retrieval_mode="prepopulate")
    for index in range(6):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    last = simulation.turns.get(index=5)
    recent = last.retrievals.get(arguments__section="Recent events")
    assert recent.results and all(1 <= r["turn"] <= 3 for r in recent.results)
    section = sent_text(last).split("## Recent events", 1)[1].split("##", 1)[0]
    turns_listed = [int(n) for n in __import__("re").findall(r"\(turn (\d+)\)", section)]
    assert turns_listed and turns_listed == sorted(turns_listed) and max(turns_listed) <= 3
    for earlier in simulation.turns.filter(index__in=[3, 4]):  # the window's lines are not in it
        assert earlier.utterance not in section
    first = simulation.turns.get(index=1)  # turn 2's window holds turn 1: no "Recent events" at all
    assert "## Recent events" not in sent_text(first)


def test_a_direction_is_found_by_its_moment_and_by_what_was_said_just_before(user, dinner):
    """The writer's words are short ("The lights go out."); the agents ask by the moment ("while Sam
    was out") or by what was going on. Each stage memory is keyed by both, and "Sam comes back" is
    about Sam: a question naming Sam finds it."""
    from memory.models import MemoryKey
    from memory.recalling.tools import ToolContext, call_tool

    simulation = start(user, dinner, max_turns=6,
                              stage_directions="2: Sam steps out\n3: The lights go out.\n4: Sam comes back")
    for index, (agent, line) in enumerate([("Alex", "Thai or Italian?"), ("Jordan", "Italian, obviously."),
                                           ("Alex", "I'll light the candles on the mantelpiece."),
                                           ("Sam", "I'm back. Thai."), ("Jordan", "Two against one, then.")]):
        say(simulation, index, agent, line)
    lights = Memory.objects.in_bank(simulation.bank).get(agent="Jordan", category="stage", turn=3)
    keys = list(MemoryKey.objects.filter(memory=lights).values_list("query", flat=True))
    assert any("while Sam was away" in key and "Alex's apartment" in key for key in keys), keys
    assert "The lights go out, just after — Jordan said: Italian, obviously." in keys
    assert Memory.objects.in_bank(simulation.bank).get(agent="Jordan", turn=4, category="stage").about == "Sam"
    # Every memory the run forms says where it happened (the scene's place, not its whole description).
    place = simulation.scenario_snapshot["location"].split(":")[0].strip()
    assert place and set(Memory.objects.in_bank(simulation.bank).filter(source="earned", kind__in=["episodic", "observation"])
                         .values_list("location", flat=True)) == {place}

    def ask(question):
        answer = call_tool("query_memory", {"query": question},
                           context=ToolContext(bank=simulation.bank, agent="Jordan", current_turn=6))
        return [m["content"] for m in answer.response["memories"]]

    assert "The lights go out." in ask("What happened while Sam was out?")  # one answer: five memories
    assert "Sam comes back" in ask("When did Sam get back?")[:3]


def test_a_direction_everyone_sees_is_embedded_without_a_model_call_on_the_turns_path(user, dinner, monkeypatch):
    """A direction is a memory and keys for each witness: its words and moment were embedded when
    the run started, so the turn's path calls the model for none of them (not one call a witness);
    what each heard just before comes from one call, by a worker after the commit."""
    from memory import embedding
    from memory.embedding import cache
    from memory.models import MemoryKey

    simulation = start(user, dinner, max_turns=4, stage_directions="2: A fox screams in the garden.")
    say(simulation, 0, "Alex", "Shall we order in tonight?")
    cache.clear_local()
    calls = []
    encode = embedding.encode
    monkeypatch.setattr(embedding, "encode", lambda texts, **kw: calls.append(list(texts)) or encode(texts, **kw))
    just_after = "A fox screams in the garden, just after — Alex said: Shall we order in tonight?"
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert turns.stage_apply(simulation=simulation, number=2) == 3
        assert calls == []  # every witness's copy and its moment: embedded when the run started
        assert not MemoryKey.objects.filter(query=just_after).exists()
    seen = Memory.objects.in_bank(simulation.bank).filter(category="stage", turn=2)
    assert sorted(seen.values_list("agent", flat=True)) == ["Alex", "Jordan", "Sam"]
    assert {m.content for m in seen} == {"A fox screams in the garden."}
    # What each witness heard just before: one more call, by a worker after the commit.
    assert calls == [[just_after]]
    assert MemoryKey.objects.filter(memory__in=seen, query=just_after).count() == 3


def test_the_writers_directions_are_embedded_when_the_run_starts_not_before_their_lines(user, dinner):
    from chronicle.simulation.aftermath import formation
    from memory.embedding import cache
    from memory.models import EmbeddingCache

    simulation = start(user, dinner, max_turns=5, stage_directions="1: Sam is away\n4: Sam enters\n3: The lights go out.")
    texts = [text for number in (1, 3, 4) for _d, content, moment in formation.direction_texts(
        simulation, number, [d for d in simulation.directions if d.turn == number]) for text in (content, moment)]
    assert "Sam enters" in texts and any(t.startswith("Sam enters — ") for t in texts)
    assert EmbeddingCache.objects.filter(sha256__in=[cache.text_sha(t) for t in texts]).count() == len(set(texts))
    cache.clear_local()  # another worker process: only the table holds them
    calls = cache.stats["model_calls"]
    assert formation.stage_apply(simulation=simulation, number=4) == 3  # Sam sees his own entrance too
    assert cache.stats["model_calls"] == calls  # nothing encoded before the line
    made = Memory.objects.in_bank(simulation.bank).get(category="stage", turn=4, agent="Sam")
    assert made.content == "Sam enters" and not made.embedding_stale

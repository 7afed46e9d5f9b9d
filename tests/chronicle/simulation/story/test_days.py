"""A story day kept as one memory (memory.living.days): when the calendar moves to a new day, each
of the cast keeps the day before, and an agent reads it before its turns once that day has left
its transcript."""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pytest

from chronicle.simulation.control import tasks
from memory.api import ToolContext, call_tool
from memory.models import Memory
from tests.factories import start

pytestmark = pytest.mark.django_db


def test_a_new_story_day_leaves_each_of_the_cast_the_day_before_as_one_memory(user, dinner, monkeypatch):
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 2)  # so that the evening has begun to leave the transcript
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    simulation = start(user, dinner, story_start=datetime(2025, 1, 13, 18, 0, tzinfo=timezone.utc),
                              minutes_per_turn=5, stage_directions="4: The next morning", retrieval_mode="prepopulate")
    for index in range(3):
        assert tasks.run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    assert not Memory.objects.filter(bank=simulation.bank, category="day").exists()
    # Turn 4 opens the next morning: before it runs, each of the cast keeps the evening before, once.
    assert tasks.run_turn_task.apply(args=(simulation.pk, 3)).get() == "done"
    cast = sorted(simulation.cast_names)
    assert tasks.keep_the_day_before(simulation, 4) == (0, 0)  # a redone turn makes nothing more, asks nothing
    days = {m.agent: m for m in Memory.objects.filter(bank=simulation.bank, category="day")}
    assert sorted(days) == cast
    # The first to speak that morning read it already, under "Earlier days".
    fourth = simulation.turns.get(index=3)
    sent = "\n".join(str(m.get("content") or "") for m in fourth.prompt_messages)
    assert "## Earlier days\n- (turn 3) What happened on Monday 13 January 2025: " in sent
    assert days[fourth.agent].content in sent
    lines = {m.turn: m.content for m in Memory.objects.filter(bank=simulation.bank, kind="episodic", agent=cast[0])
             .exclude(category="day")}
    for agent, memory in days.items():
        assert memory.content.startswith("What happened on Monday 13 January 2025: ")
        assert memory.story_time.date().isoformat() == "2025-01-13" and memory.turn == 3
        # It rests on that agent's own lines of the evening, none of the morning's.
        evidence = list(memory.evidence.all())
        assert evidence and {m.agent for m in evidence} == {agent} and {m.turn for m in evidence} <= {1, 2, 3}
        # In the lines' own words: who said it, and a sentence of what they said.
        said = [text.split(": ", 1) for turn, text in lines.items() if turn in (1, 2, 3)]
        assert any(f"{who.removesuffix(' said')} said “{sentence.strip()}" in memory.content
                   for who, text in said for sentence in re.split(r"(?<=[.!?])\s", text) if len(sentence.split()) >= 5)
        assert "{" not in memory.content and "said said" not in memory.content

    # Asked what happened that evening, an agent finds the day.
    context = ToolContext(bank=simulation.bank, agent=cast[0], current_turn=60,
                          story_now=datetime(2025, 1, 16, 9, 0))
    answer = call_tool("recall_episodes", {"query": "what happened that evening", "time_range": "on 13 January 2025"},
                       context=context)
    assert any(r.memory.category == "day" for r in answer.results)


def test_the_model_writes_the_day_when_there_is_one_and_a_failing_model_leaves_the_offline_one(user, dinner):
    from memory.living.days import day_summarise
    from memory.services import memory_create

    simulation = start(user, dinner)
    evening = datetime(2025, 1, 13, 19, 0, tzinfo=timezone.utc)
    for turn, line in enumerate(["Jordan said: Bella's has a table at eight. We should go.",
                                 "Sam said: I cannot spend more than fifteen euros tonight.",
                                 "Alex said: Then we split the bill three ways and nobody orders wine."], start=1):
        memory_create(bank=simulation.bank, agent="Alex", kind="episodic", source="earned", turn=turn, importance=5,
                      content=line, story_time=evening)
    asked = []

    def model(prompt):
        asked.append(prompt)
        return "Jordan booked Bella's for eight; Sam could spend fifteen euros, so Alex had them split the bill."

    day_start = datetime(2025, 1, 13, tzinfo=timezone.utc)
    made = day_summarise(bank=simulation.bank, agent="Alex", start=day_start, end=day_start.replace(day=14), summarize=model)
    assert made.content == ("On Monday 13 January 2025: Jordan booked Bella's for eight; Sam could spend fifteen "
                            "euros, so Alex had them split the bill.")
    assert "Sam said: I cannot spend more than fifteen euros tonight." in asked[0]
    made.delete()

    def down(prompt):
        raise RuntimeError("cannot reach the LLM server")

    offline = day_summarise(bank=simulation.bank, agent="Alex", start=day_start, end=day_start.replace(day=14), summarize=down)
    assert offline.content == ("What happened on Monday 13 January 2025: Jordan said “Bella's has a table at eight.” "
                               "Sam said “I cannot spend more than fifteen euros tonight.” Alex said “Then we split "
                               "the bill three ways and nobody orders wine.”")


def test_the_offline_day_quotes_what_each_line_says_most_not_a_fragment(user, dinner):
    """A model found a day summed up as "That's the island." "Candles from the island.": the
    sentence of a line that says most is quoted, and a line of a few words is left out."""
    from memory.living.days import day_summarise
    from memory.services import memory_create

    simulation = start(user, dinner)
    evening = datetime(2025, 1, 14, 20, 0, tzinfo=timezone.utc)
    for turn, line in enumerate([
            "Declan said: Grand. Wet.",
            "Nessa said: That's the island. The cable at the old creamery is down again, same as last year.",
            "Orla said: Candles. There's soup on the stove for anyone who wants it until the lights come back."],
            start=1):
        memory_create(bank=simulation.bank, agent="Alex", kind="episodic", source="earned", turn=turn, importance=5,
                      content=line, story_time=evening)
    day_start = datetime(2025, 1, 14, tzinfo=timezone.utc)
    made = day_summarise(bank=simulation.bank, agent="Alex", start=day_start, end=day_start.replace(day=15))
    assert made.content == ("What happened on Tuesday 14 January 2025: Nessa said “The cable at the old creamery is "
                            "down again, same as last year.” Orla said “There's soup on the stove for anyone who "
                            "wants it until the lights come back.”")


def test_with_a_calendar_the_scene_says_the_time_now_not_the_time_it_began(user, dinner):
    """A model read "A wet Monday morning" from query_scene on the Friday: with a story date the
    time of day the writer set is when the scene began, and time_now says the time."""
    from chronicle.simulation.turn.engine import tool_context
    from chronicle.simulation.run.models import Turn
    from chronicle.simulation.turn.inputs import turn_input

    dated = start(user, dinner, story_start=datetime(2025, 1, 13, 18, 0, tzinfo=timezone.utc),
                         minutes_per_turn=5, stage_directions="3: Two days later")
    undated = start(user, dinner)
    answers = {}
    for name, simulation in (("dated", dated), ("undated", undated)):
        given = turn_input(turn=Turn(simulation=simulation, index=3, agent="Alex"))
        answers[name] = call_tool("query_scene", {}, context=tool_context(given, deferred=[])).response
    time_of_day = [m["content"] for m in answers["undated"]["memories"] if "early evening" in m["content"].lower()]
    assert time_of_day  # the scene's own time, where nothing else says it
    assert not any(m["content"] in time_of_day for m in answers["dated"]["memories"])
    assert answers["dated"]["memories"] and "15 January 2025" in answers["dated"]["time_now"]


def test_a_day_still_all_in_the_transcript_is_not_told_again(user, dinner):
    simulation = start(user, dinner, story_start=datetime(2025, 1, 13, 18, 0, tzinfo=timezone.utc),
                              minutes_per_turn=5, stage_directions="4: The next morning", retrieval_mode="prepopulate")
    for index in range(4):
        assert tasks.run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    assert Memory.objects.filter(bank=simulation.bank, category="day").exists()
    fourth = simulation.turns.get(index=3)
    assert "## Earlier days" not in "\n".join(str(m.get("content") or "") for m in fourth.prompt_messages)

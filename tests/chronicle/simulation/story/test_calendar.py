"""The story calendar (chronicle.simulation.story.calendar): where the writer's time skips move the story's
date, and what each turn's date is."""

from __future__ import annotations

from datetime import datetime

import pytest

from chronicle.simulation.story.calendar import moved, skips_from, story_time_at, story_times, story_times_at
from chronicle.simulation.story.stage import parse

MONDAY = datetime(2023, 5, 8, 13, 56)


@pytest.mark.parametrize("text, expected", [
    ("A new day: it is 1:14 pm on 25 May 2023", datetime(2023, 5, 25, 13, 14)),
    ("May 30, 2023", datetime(2023, 5, 30, 9, 0)),
    ("Tuesday 30 May 2023, at dawn", datetime(2023, 5, 30, 9, 0)),
    ("2023-06-01 18:00", datetime(2023, 6, 1, 18, 0)),
    ("Three hours later", datetime(2023, 5, 8, 16, 56)),
    ("Twenty minutes pass", datetime(2023, 5, 8, 14, 16)),
    ("The next day", datetime(2023, 5, 9, 13, 56)),
    ("The next morning, the fog has lifted.", datetime(2023, 5, 9, 9, 0)),
    ("Two weeks later", datetime(2023, 5, 22, 13, 56)),
    ("That evening", datetime(2023, 5, 8, 19, 0)),
    ("Later that night", datetime(2023, 5, 8, 22, 0)),
    ("Tuesday morning", datetime(2023, 5, 9, 9, 0)),
    ("A new day", datetime(2023, 5, 9, 9, 0)),
    ("It is 3 pm", datetime(2023, 5, 8, 15, 0)),
])
def test_a_skip_moves_the_story_to_its_date(text, expected):
    assert moved(text, MONDAY) == expected


@pytest.mark.parametrize("text", ["The lights go out.", "Dad died on Tuesday, the doctor says.",
                                  "The ferry leaves at 3 pm", "Sam enters", "A letter dated 3 March 2025 arrives.",
                                  "The ferry is due on 8 May"])
def test_an_event_that_only_mentions_a_time_moves_nothing(text):
    assert moved(text, MONDAY) is None


def test_each_turn_has_its_date_the_clock_moving_between_skips_and_decay_reads_the_time_that_passed():
    directions = parse("1: It begins: it is 1:56 pm on 8 May 2023\n4: The next day\n6: Three hours later",
                       cast=["Ann", "Bo"])
    times = story_times(directions, start=None, minutes_per_turn=2, turns=6)
    assert times[0] is None and times[1] == MONDAY
    assert times[3] == datetime(2023, 5, 8, 14, 0)  # two minutes a line
    assert times[4] == datetime(2023, 5, 9, 14, 2)  # the skip, after that line's two minutes
    assert times[6] == datetime(2023, 5, 9, 17, 6)
    skips = skips_from(times, 2)
    assert skips[3] == 0 and skips[4] == pytest.approx(24 * 60 / 2)  # a day's worth of turns skipped


def test_a_start_date_dates_every_turn_and_no_date_leaves_turns_undated():
    assert story_times([], start=MONDAY, minutes_per_turn=0, turns=3) == [MONDAY] * 4
    assert story_times(parse("2: Three hours later", cast=["Ann"]), start=None, minutes_per_turn=5, turns=3) == [None] * 4


def test_a_page_of_lines_is_dated_as_each_line_alone_would_be():
    """The run page dates its hundred lines in one walk over the skips, with the dates each line gets alone."""
    directions = parse("1: It begins: it is 1:56 pm on 8 May 2023\n4: The next day\n6: Three hours later\n"
                       "6: That evening\n9: The lights go out.\n12: A new day: it is 9:00 am on 1 June 2023",
                       cast=["Ann", "Bo"])
    for start, minutes in ((None, 2), (MONDAY, 0), (MONDAY, 7.5), (None, 0)):
        numbers = [14, 1, 2, 3, 4, 5, 6, 7, 12, 13, 6]
        assert story_times_at(directions, start=start, minutes_per_turn=minutes, numbers=numbers) == {
            n: story_time_at(directions, start=start, minutes_per_turn=minutes, number=n) for n in numbers}


@pytest.mark.django_db
def test_the_writers_start_date_reaches_the_agent_its_memories_and_its_time_words(user, dinner, client_for,
                                                                                  django_capture_on_commit_callbacks):
    from django.urls import reverse

    from chronicle.simulation.control import services
    from chronicle.simulation.run.models import Simulation
    from chronicle.simulation.control.tasks import run_turn_task
    from memory.api import ToolContext, call_tool
    from memory.models import Memory

    client = client_for(user)
    page = client.get(reverse("simulation_create")).content.decode()
    assert 'name="story_start"' in page and 'type="datetime-local"' in page
    data = {"scenario": dinner.pk, "max_turns": 4, "speaking_order": "round_robin", "retrieval_mode": "prepopulate",
            "scoring": "similarity", "provider": "scripted", "temperature": "0.7", "max_tokens": 300,
            "max_tool_calls": 4, "timeout_s": 30, "pace_s": 0, "importance_scorer": "llm",
            "capture_duplicate_threshold": "1.0", "minutes_per_turn": "5", "story_start": "2025-01-13T18:30",
            "stage_directions": "3: The next morning"}
    with django_capture_on_commit_callbacks(execute=False):
        assert client.post(reverse("simulation_create"), data).status_code == 302
    simulation = Simulation.objects.get()
    services.simulation_seed(simulation_id=simulation.pk)  # the run's first task, in-process
    simulation.refresh_from_db()
    assert "story starts Monday 13 January 2025, 6:30 pm" in simulation.option_labels
    for index in range(3):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    third = simulation.turns.get(index=2)
    sent = "\n".join(str(m.get("content") or "") for m in third.prompt_messages)
    assert "Time: Tuesday 14 January 2025, 9:00 am (turn 3)" in sent
    first_line = Memory.objects.in_bank(simulation.bank).filter(kind="episodic", turn=1).first()
    assert first_line.story_time.replace(tzinfo=None) == datetime(2025, 1, 13, 18, 30)
    # On the next morning, "yesterday" is the first evening: its lines, and nothing said since.
    context = ToolContext(bank=simulation.bank, agent="Sam", current_turn=4, story_now=datetime(2025, 1, 14, 9, 5))
    result = call_tool("recall_episodes", {"query": "what was said", "time_range": "yesterday"}, context=context)
    assert not result.error and result.results
    assert {r.memory.turn for r in result.results} <= {1, 2}
    assert all(m["when"] == "13 January 2025, evening" for m in result.response["memories"])
    result = call_tool("recall_episodes", {"query": "what was said", "time_range": "in March"}, context=context)
    assert "You remember nothing dated in March (1 March 2024 to 31 March 2024)" in result.error
    # The writer sees each line's date on the run page, and each memory's on the bank page.
    page = client.get(reverse("simulation_detail", args=[simulation.pk])).content.decode()
    assert "turn 1 · <span class=\"story-when\">Mon 13 Jan 2025, 6:30 pm</span>" in page
    assert "Tue 14 Jan 2025, 9:00 am" in page
    bank = client.get(reverse("chronicle_memories", args=[simulation.pk]) + "?kind=episodic").content.decode()
    assert "13 January 2025, 6:30 PM" in bank


@pytest.mark.django_db
def test_an_agent_reflects_at_most_three_times_a_story_day(user, dinner, settings):
    from datetime import timezone

    from chronicle.simulation.aftermath.formation import due_to_reflect
    from memory.services import memory_create
    from tests.factories import start

    simulation = start(user, dinner, story_start=datetime(2025, 1, 13, 18, 0, tzinfo=timezone.utc),
                              minutes_per_turn=5, reflection_threshold=5, stage_directions="4: The next morning")
    evening = datetime(2025, 1, 13, 18, 5, tzinfo=timezone.utc)
    for _ in range(3):
        memory_create(bank=simulation.bank, agent="Sam", kind="reflection", category="reflection", source="reflection",
                      content="Alex decides quickly when money is involved.", turn=1, importance=8, story_time=evening)
    settings.REFLECTION_SPACING = 0  # the day's limit alone, however close the reflections
    for name in ("Sam", "Alex"):
        for number in range(5):  # seed 003's five memories since the last reflection
            memory_create(bank=simulation.bank, agent=name, kind="episodic", source="earned", turn=2, importance=9,
                          content=f"Jordan said: Bella's has a table at eight, table {number}.")
    # That evening Sam has made the day's three; Alex has made none.
    assert set(due_to_reflect(simulation, 3)) == {"Alex"}
    # The next morning is a new story day: Sam may reflect again.
    assert set(due_to_reflect(simulation, 4)) == {"Alex", "Sam"}


@pytest.mark.django_db
def test_a_run_with_a_story_start_exports_to_json_and_imports_back_with_it(user, dinner):
    import json
    from datetime import timezone

    from chronicle.writing.exports import simulation_import, to_json
    from tests.factories import start

    simulation = start(user, dinner, story_start=datetime(2025, 1, 13, 18, 30, tzinfo=timezone.utc))
    exported = json.loads(json.dumps(to_json(simulation)))  # what the download holds
    assert exported["simulation"]["story_start"] == "2025-01-13T18:30:00+00:00"
    copy = simulation_import(owner=user, data=exported)
    assert copy.story_start == simulation.story_start and copy.story_time_at(1) == datetime(2025, 1, 13, 18, 30)


def test_a_note_that_only_says_the_date_is_not_recalled_before_a_turn_but_one_that_says_what_happened_is():
    """Long past the window, "A new day: it is 8:56 pm on 20 July 2023" came back under "What you
    know" as if it were knowledge (the header says today's date and every memory its own), and a
    model found "Ibrahim is away (turn 56, until turn 62)" there, "mostly noise"."""
    from types import SimpleNamespace

    from chronicle.simulation.turn.briefing import Section, _fill

    def note(memory_id, content):
        return {"memory_id": memory_id, "content": content, "kind": "observation", "category": "stage", "turn": 12}

    section = Section("What you know")
    # Nor a coming or going whose state is over: "Here with you" says who is here now.
    over = note(3, "Ibrahim is away") | {"until_turn": 62}
    _fill(section, [note(1, "A new day: it is 8:56 pm on 20 July 2023"), over,
                    note(2, "Two days later. The ferry is back.")],
          SimpleNamespace(others=[], confidence_gating=False), shown=set())
    assert section.lines == ["(turn 12) Two days later. The ferry is back."]

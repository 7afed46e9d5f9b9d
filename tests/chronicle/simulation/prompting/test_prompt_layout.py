"""What an agent is sent, call after call: each call begins with the one before it (what prefix
caches reuse), and what came back to the agent before an earlier turn stays where it was, once."""

from __future__ import annotations

import json

import pytest

from chronicle.simulation.prompting import prompts
from chronicle.simulation.prompting.prompts import conversation, window
from chronicle.simulation.control.tasks import run_turn_task
from memory.models import Memory
from memory.services.memories import memory_revise
from tests.factories import start


def entries(n: int) -> list[tuple[int, str, str]]:
    return [(i, "Sam" if i % 3 == 0 else "Alex", f"line {i}") for i in range(1, n + 1)]


def test_the_window_start_moves_in_steps_and_never_holds_less_than_the_minimum():
    starts = [window(entries(n))[0][0] for n in range(1, 60)]
    lengths = [len(window(entries(n))) for n in range(1, 60)]
    assert all(length >= min(n, prompts.TRANSCRIPT_LINES) for n, length in zip(range(1, 60), lengths))
    assert max(lengths) < prompts.TRANSCRIPT_LINES + prompts.WINDOW_STEP
    moves = sum(1 for a, b in zip(starts, starts[1:]) if a != b)
    assert moves == (59 - prompts.TRANSCRIPT_LINES) // prompts.WINDOW_STEP  # once per step, not once per line
    assert window(entries(59))[-1] == (59, "Alex", "line 59")


def test_a_story_of_long_lines_keeps_its_window_short_and_still_moves_in_steps():
    """Letters of a few hundred words a line: the window stays near its size limit however long the
    story, keeps the latest lines, and its start still stays put for several calls (prefix caches)."""
    long = [(i, "Ana" if i % 2 else "Ben", f"letter {i}: " + "and then we walked on by the river " * 5)
            for i in range(1, 301)]
    windows = [window(long[:n]) for n in range(1, 301)]
    sizes = [sum(len(text) for _n, _s, text in shown) for shown in windows]
    assert max(sizes) <= prompts.WINDOW_CHARS
    assert all(len(shown) >= min(n, prompts.TRANSCRIPT_LINES) for n, shown in enumerate(windows, start=1))
    assert all(shown[-1][0] == n for n, shown in enumerate(windows, start=1))
    starts = [shown[0][0] for shown in windows]
    assert starts == sorted(starts)  # it only moves forward
    moves = sum(1 for a, b in zip(starts, starts[1:]) if a != b)
    assert moves <= 300 // 4  # not once per line
    short = [(i, "Ana", f"line {i}") for i in range(1, 60)]
    assert window(short) == window(short, ())  # short lines: the step rule alone decides
    assert len(window(short)) == len(window(entries(59)))


def test_the_window_never_cuts_a_turn_from_its_stage_directions():
    """A direction and the line after it share a turn number: a window holding the line holds the
    direction (the tools leave out what the window shows, by turn)."""
    stage = [(n, f"event {n}") for n in range(1, 40, 2)]
    for n in range(1, 40):
        shown = window(entries(n), stage)
        numbers = {number for number, _speaker, _text in shown}
        assert all((number, "", f"*event {number}*") in shown for number, _text in stage if number in numbers)


def test_a_direction_reads_where_it_happened_and_turns_missed_are_said():
    """A direction has no number of its own (numbered, it read to models as one moment with the
    line after it); turns an agent was away for are said, whether it left or was away from the start."""
    text = prompts.transcript_text([(3, "Sam", "Shall we?"), (4, "Alex", "Bella's, then."), (12, "Jordan", "Welcome back.")],
                                   [(5, "Sam steps out"), (12, "Sam comes back.")])
    assert text == ("[turn 3] Sam: Shall we?\n[turn 4] Alex: Bella's, then.\n*Sam steps out*\n"
                    "(turns 5–11 went on without you)\n*Sam comes back*\n[turn 12] Jordan: Welcome back.")
    late = prompts.transcript_text([(2, "Ruth", "Late again.")], [(1, "Okafor is away"), (2, "Okafor arrives")])
    assert late == "*Okafor is away*\n(turn 1 went on without you)\n*Okafor arrives*\n[turn 2] Ruth: Late again."
    # Present throughout: a direction between two lines, and nothing said of turns.
    here = prompts.transcript_text(entries(6), [(5, "The lights go out")])
    assert "[turn 4] Alex: line 4\n*The lights go out*\n[turn 5] Alex: line 5" in here and "without you" not in here


def test_an_earlier_note_stays_before_the_line_it_came_before():
    kept, last = conversation("Sam", entries(7), notes={3: "Before your turn 3, you recall: the plane"},
                              note="Before your turn 8, you recall: the will", now="## Now\nTime: turn 8")
    text, spans = kept.joined()
    assert text.startswith("Conversation so far:\n[turn 1] Alex: line 1\n[turn 2] Alex: line 2\n\n"
                           "Before your turn 3, you recall: the plane\n\n[turn 3] Sam: line 3\n")
    assert text.endswith("[turn 7] Alex: line 7\n\nBefore your turn 8, you recall: the will")
    assert [s["kind"] for s in spans] == ["transcript", "prepopulated", "transcript", "prepopulated"]
    assert text[slice(*spans[1]["span"])] == "Before your turn 3, you recall: the plane"
    said = last.joined()[0]
    assert said.startswith("## Now") and said.endswith("It is your turn (Sam). " + prompts.SPEAK)


def test_notes_are_kept_from_where_the_window_last_moved(monkeypatch):
    """What came back before each turn stays in the conversation only since the window's start last
    moved: a move rewrites the beginning anyway, and a long story's calls stop carrying every note."""
    monkeypatch.setattr(prompts, "WINDOW_STEP", 8)
    assert prompts.window_since(entries(15)) == 0  # never moved: every note in the window stays
    starts = {n: window(entries(n))[0][0] for n in range(16, 24)}
    assert set(starts.values()) == {9}  # from 16 lines to 23 the window starts at turn 9
    assert {prompts.window_since(entries(n)) for n in range(16, 24)} == {16}  # the line that moved it
    assert prompts.window_since(entries(24)) == 24


def test_a_first_speaker_begins_as_its_next_turn_will():
    first = [m.joined()[0] for m in conversation("Alex", [], note="Before your turn 1, you recall: x")]
    later = [m.joined()[0] for m in conversation("Alex", [(1, "Alex", "hi"), (2, "Sam", "hello")],
                                                 notes={1: "Before your turn 1, you recall: x"})]
    assert first[0] == "Conversation so far:\n\nBefore your turn 1, you recall: x"
    assert later[0].startswith(first[0] + "\n\n[turn 1] Alex: hi")
    assert "Nobody has spoken yet." in first[-1]


def kept_text(turn) -> str:
    """The start of the turn's call that the agent's next call must repeat: the system message and
    the conversation message, as sent (left open: it goes on)."""
    system, conversation_message = turn.prompt_messages[:2]
    return json.dumps(system) + json.dumps(conversation_message)[:-2]


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["prepopulate", "both"])
def test_each_call_begins_with_the_agents_last_call_and_no_memory_comes_back_twice(user, dinner, mode):
    simulation = start(user, dinner, max_turns=10, retrieval_mode=mode)
    for index in range(10):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    alex = list(simulation.turns.filter(agent="Alex").order_by("index"))  # turns 1, 4, 7, 10
    assert len(alex) == 4
    for earlier, later in zip(alex, alex[1:]):
        assert "".join(json.dumps(m) for m in later.prompt_messages).startswith(kept_text(earlier))
    # The first turn's whole sheet was sent once, not kept: later calls carry only the notes.
    assert any("## All about you" in (m.get("content") or "") for m in alex[0].prompt_messages)
    assert not any("## All about you" in (m.get("content") or "") for m in alex[-1].prompt_messages)
    # The whole sheet does not say again who Alex is in the header's words: the archetype and the rest do.
    whole = next(m["content"] for m in alex[0].prompt_messages if "## All about you" in (m.get("content") or ""))
    whole = whole[whole.index("## All about you"):]
    assert "You are Alex" not in whole and "Archetype: " in whole
    assert "\nYou are Alex: " in alex[0].prompt_messages[0]["content"]  # the header says it
    # A memory in a note is not sent again in a later one while the earlier note is in the conversation.
    noted = [i for turn in alex for i in (turn.context.get("note") or {}).get("ids", [])]
    assert noted and len(noted) == len(set(noted))
    # Who the others are came with the first note and is still in the conversation: not searched for again.
    sections = [[(r.arguments or {}).get("section") for r in turn.retrievals.filter(tool="prepopulate")] for turn in alex]
    assert "The others present" in sections[0] and "- Jordan: " in alex[-1].prompt_messages[1]["content"]
    assert all("The others present" not in later for later in sections[1:])


@pytest.mark.django_db
def test_a_memory_revised_since_a_note_showed_it_comes_back_as_it_now_reads(user, dinner):
    """A note stays in the conversation as it was sent; when what it showed changes (a belief that
    heard itself denied, a writer's edit), the next note brings the memory again, as it now reads."""
    simulation = start(user, dinner, max_turns=4, retrieval_mode="prepopulate")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    first = simulation.turns.get(index=0)
    assert first.agent == "Alex"
    known = Memory.objects.get(pk__in=first.context["note"]["ids"], kind="character_knowledge", about="Jordan")
    memory_revise(memory=known, content=f"{known.content} Jordan has just owned up to knowing Bella's owner.",
                  metadata=known.metadata)
    for index in range(1, 4):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done"
    later = simulation.turns.get(index=3)
    assert later.agent == "Alex" and known.pk in later.context["note"]["ids"]
    conversation_text = later.prompt_messages[1]["content"]
    assert conversation_text.count("Jordan has just owned up to knowing Bella's owner.") == 1
    assert conversation_text.count(known.content.split(" Jordan has just")[0]) == 2  # the old note, and the new one


def test_who_the_agent_is_comes_once_without_what_the_header_says():
    """The identity memory in the first turn's whole sheet, less the header's name, role (a role may
    hold a full stop) and first sentence of the description; nothing left, nothing sent."""
    from types import SimpleNamespace

    from chronicle.simulation.turn.briefing import _beyond_header
    from memory.api import CharacterSheet

    turn = SimpleNamespace(agent="Ann", cast=[CharacterSheet(name="Ann", role="Dr. Smith's assistant",
                                                             description="Ann keeps the books. She never sleeps.")])
    assert _beyond_header("You are Ann, Dr. Smith's assistant. Archetype: The ledger. Ann keeps the books. "
                          "She never sleeps.", turn) == "Archetype: The ledger. She never sleeps."
    assert _beyond_header("How others see me: Ann is always at her desk.", turn) == \
        "How others see me: Ann is always at her desk."
    turn.cast = [CharacterSheet(name="Ann", description="Ann keeps the books.")]
    assert _beyond_header("You are Ann. Ann keeps the books.", turn) == ""


def test_the_sheet_is_said_in_one_person_and_the_scene_labelled(user, dinner):
    """Writers write a sheet about the character ("off her back", "She has been …"); its labels speak
    as the character ("My goals:"), so the prompt says the rest in that person too: never "My goals:
    … off her back". Where and when are each labelled."""
    dinner.cast.filter(name="Alex").update(goals=["keep the inspectors off her back", "make the crossing on time"],
                                          secrets=["She has been skimming the fares and hides it from her crew."])
    simulation = start(user, dinner, max_turns=1, retrieval_mode="prepopulate")
    assert run_turn_task.apply(args=(simulation.pk, 0)).get() == "done"
    turn = simulation.turns.get(index=0)
    system = turn.prompt_messages[0]["content"]
    assert turn.agent == "Alex"
    assert "My goals: keep the inspectors off my back, make the crossing on time." in system
    assert "My secret: I have been skimming the fares and hide it from my crew." in system
    assert "her back" not in system and "She has been" not in system
    assert "\nWhere: " in system and "\nWhen: " in system and "\nScene: " not in system
    # The memory keeps the writer's words; only the prompt says them as the character.
    assert Memory.objects.in_bank(simulation.bank).filter(agent="Alex", content__contains="off her back").exists()

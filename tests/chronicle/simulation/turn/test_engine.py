"""A scripted turn in-process: seed 000's behaviour pattern, Retrieval rows, episodic capture, tokens."""

from __future__ import annotations

import json

import pytest

from chronicle.simulation.run.models import Retrieval, Turn
from memory.models import Memory
from tests.prompting import sent_text
from tests.factories import start, run


@pytest.mark.django_db
def test_scripted_turns_discover_then_recall(user, dinner):
    simulation = start(user, dinner)
    assert simulation.status == "running" and simulation.bank.seed_status == "done"
    for index in range(6):
        assert run(simulation, index) == "done"
    simulation.refresh_from_db()
    turns = list(simulation.turns.order_by("index"))
    assert [t.agent for t in turns] == ["Alex", "Jordan", "Sam"] * 2
    first = turns[0]
    tools = list(first.retrievals.values_list("tool", flat=True))
    assert tools[:2] == ["query_self", "query_scene"]
    assert set(tools[2:]) == {"query_character"}
    # It greets those present, says where they are and what it wants (the place and its goals: what
    # it reads at the top of every call).
    assert first.utterance.startswith(("Hello, Jordan and Sam.", "Evening, Jordan and Sam.", "Hi, Jordan and Sam."))
    assert "living room" in first.utterance and "I'd like us to get everyone fed by eight" in first.utterance
    # Later turns: query_memory brings back earlier lines with their turn numbers.
    fourth = turns[3]
    retrieval, facts = fourth.retrievals.all()
    assert retrieval.tool == "query_memory" and retrieval.query == "what did Sam say?"
    # And what Alex knows that bears on Sam's line (card lore, the writer's facts): recall_facts.
    assert facts.tool == "recall_facts" and facts.query[:40] == turns[2].utterance[:40]
    # Turns 1-3 are in Alex's transcript: the tool does not hand those lines back again.
    assert retrieval.results and not any(r["kind"] == "episodic" and r["turn"] in (1, 2, 3) for r in retrieval.results)
    assert "Sam" in fourth.utterance  # it answers turn 3's speaker, whose line it reads
    for r in retrieval.results:
        assert set(r) >= {"rank", "score", "components", "matched_key", "content"}
    # The agent read the memories with their ids, and neither its own question echoed back nor how
    # the search was widened (the record keeps both).
    tool_message = next(m for m in fourth.prompt_messages if m["role"] == "tool")
    body = json.loads(tool_message["content"])
    # What Alex looked up at turn 1 stays in its conversation: found again, it is pointed to, not re-sent.
    assert set(body) <= {"memories", "already_given", "note"} and all(m["memory_id"] for m in body["memories"])
    assert retrieval.response["query"] == "what did Sam say?" and "query_expansion_used" in retrieval.response
    # Best first, and no relevance figure for the model to take as a confidence; the record keeps the scores.
    assert [m["memory_id"] for m in body["memories"]] == [r["memory_id"] for r in retrieval.results
                                                          if not r.get("excluded") and not r.get("repeated")]
    assert not any("relevance" in m for m in body["memories"])
    assert all(r["score"] > 0 for r in retrieval.results)
    # Every tool call the model made has its Retrieval row.
    for turn in turns:
        calls = [c for m in turn.prompt_messages for c in m.get("tool_calls") or []]
        assert len(calls) == turn.retrievals.count()
    # Episodic memory: every agent heard every line, once.
    episodic = Memory.objects.in_bank(simulation.bank).filter(kind="episodic")
    assert episodic.count() == 6 * 3
    assert simulation.status == "completed"
    assert first.full_definition_tokens > 0 and first.prompt_tokens > 0


@pytest.mark.django_db
def test_tools_mode_prompt_gives_a_one_line_identity_and_leaves_the_rest_to_discover(user, dinner):
    simulation = start(user, dinner, max_turns=1)
    run(simulation, 0)
    system = Turn.objects.get(simulation=simulation).prompt_messages[0]["content"]
    assert system.startswith("Your memory tools")
    assert "## You\nYou are Alex: a pragmatic project manager" in system  # no tool call to learn its own name
    assert "organising family outings" not in system and "fairness" not in system  # the sheet: through query_self


@pytest.mark.django_db
def test_seed_000s_minimal_prompt_declares_no_identity(user, dinner):
    simulation = start(user, dinner, max_turns=1, tool_prompt="seed000")
    run(simulation, 0)
    turn = Turn.objects.get(simulation=simulation)
    system = turn.prompt_messages[0]["content"]
    assert system.startswith("You are an agent in a simulation. You have access to memory tools")
    assert "project manager" not in system  # it must discover that through query_self
    assert set(turn.context["tool_names"]) <= {"query_self", "query_background", "query_communication_style",
                                               "query_scene", "query_character", "query_memory"}


@pytest.mark.django_db
def test_prepopulate_mode_injects_memories_and_records_them(user, dinner, monkeypatch):
    from chronicle.simulation.prompting import prompts

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 2)  # so that turn 4 has events before its transcript
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    simulation = start(user, dinner, retrieval_mode="prepopulate", max_turns=4)
    for index in range(4):
        run(simulation, index)
    turn = simulation.turns.get(index=3)
    system = turn.prompt_messages[0]["content"]
    assert "## Who you are" in system and "## Where you are" in system and "## Recent events" in sent_text(turn)
    # Every section searched is recorded, one it filled or not (the rest of the sheet comes when the
    # talk touches it: here Sam's line touches nothing Alex does not already see).
    searched = {(r.arguments or {}).get("section") for r in turn.retrievals.all()}
    assert {"Who you are", "More about you", "Recent events", "What you know"} <= searched
    assert set(turn.retrievals.values_list("tool", flat=True)) == {"prepopulate"}
    assert not any(m.get("tool_calls") for m in turn.prompt_messages)
    # The dry-run line answers Sam from a memory it was given just above (what Alex wants or what
    # matters to Alex, its sheet's).
    alex = next(c for c in dinner.cast.all() if c.name == "Alex")
    goals = alex.goals
    said = next(said for said in [*goals, *alex.values] if said.lower() in turn.utterance.lower())
    assert "Sam" in turn.utterance and f"My goals: {', '.join(goals)}" in sent_text(turn) and said


@pytest.mark.django_db
def test_model_picks_never_repeats_the_last_speaker(user, dinner):
    simulation = start(user, dinner, speaking_order="model_picks", max_turns=5)
    for index in range(5):
        run(simulation, index)
    agents = list(simulation.turns.order_by("index").values_list("agent", flat=True))
    assert all(a != b for a, b in zip(agents, agents[1:]))


@pytest.mark.django_db
def test_a_duplicate_task_does_not_duplicate_a_turn(user, dinner):
    simulation = start(user, dinner, max_turns=3)
    assert run(simulation, 0) == "done"
    assert run(simulation, 0) == "nothing to do"
    assert simulation.turns.count() == 1
    assert Retrieval.objects.filter(turn__simulation=simulation).count() == 4


@pytest.mark.django_db
def test_a_paced_line_waits_after_its_memories_are_fetched_and_before_the_model_answers(user, dinner, monkeypatch):
    """The run's pace stands where a model takes its time: the turn's searches come first, right after
    the previous turn, as in a live run; the line comes after the pause."""
    import time

    from chronicle.simulation.turn import engine
    from chronicle.simulation.providers.scripted import ScriptedProvider

    moments: dict[str, float] = {}
    briefed, chat = engine._briefed, ScriptedProvider.chat

    def timed_briefed(*args, **kwargs):
        result = briefed(*args, **kwargs)
        moments.setdefault("briefed", time.monotonic())
        return result

    def timed_chat(self, *args, **kwargs):
        moments.setdefault("answered", time.monotonic())
        return chat(self, *args, **kwargs)

    monkeypatch.setattr(engine, "_briefed", timed_briefed)
    monkeypatch.setattr(ScriptedProvider, "chat", timed_chat)
    simulation = start(user, dinner, retrieval_mode="prepopulate", pace_s=0.4)
    assert run(simulation, 0) == "done"
    assert moments["answered"] - moments["briefed"] >= 0.4
    turn = simulation.turns.get(index=0)
    assert turn.retrievals.filter(tool="prepopulate").exists() and turn.utterance


@pytest.mark.django_db
def test_a_line_long_gone_from_the_window_comes_back_when_the_talk_returns_to_it(user, dinner, monkeypatch):
    """Pre-populated: asked about a line said far before its window (and before its recent events),
    the agent is handed that line with that call; a line that calls nothing to mind brings nothing back."""
    from chronicle.simulation.prompting import prompts
    from tests.factories import say

    monkeypatch.setattr(prompts, "TRANSCRIPT_LINES", 4)
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)
    simulation = start(user, dinner, retrieval_mode="prepopulate", max_turns=18)
    say(simulation, 0, "Sam", "I paid the deposit for the boat hire this morning: two hundred and ten pounds, to Maggie at the quay.")
    small_talk = ["Is there more bread?", "The wine is lovely.", "Did anyone see the match?", "My feet are cold.",
                  "Who wants tea?", "That lamp flickers.", "The cat is on the table again.", "Pass the salt, please.",
                  "I like this song.", "The neighbours are loud tonight.", "Shall we open a window?"]
    for index, line in enumerate(small_talk, start=1):
        say(simulation, index, ["Alex", "Jordan", "Sam"][index % 3], line)
    say(simulation, 12, "Alex", "Jordan, how much was the deposit for the boat hire, and who did Sam pay it to?")
    run(simulation, 13)
    asked = simulation.turns.get(index=13)
    brought = sent_text(asked).split("## What this brings back", 1)[1].split("##", 1)[0]
    assert "two hundred and ten pounds" in brought and "(turn 1)" in brought
    # Far into the story, the writer's starting notes on the others say when they were true.
    others = sent_text(asked).split("## The others present", 1)[1].split("##", 1)[0]
    assert all(line.startswith("- (when the story began) ") for line in others.strip().splitlines())
    # Sent with that call alone, after the conversation: Jordan's next turns do not carry it on.
    users = [m["content"] for m in asked.prompt_messages if m["role"] == "user"]
    assert "What this brings back" in users[-1] and "What this brings back" not in users[0]
    say(simulation, 14, "Sam", "Back in a minute, I left something in the car.")
    say(simulation, 15, "Alex", "Mind the step on your way out.")
    run(simulation, 16)
    later = simulation.turns.get(index=16)
    assert "two hundred and ten" not in later.prompt_messages[1]["content"]  # not carried on in the conversation
    # Small talk calls nothing old to mind well enough: nothing is brought back, and nothing was kept.
    assert "What this brings back" not in sent_text(later)

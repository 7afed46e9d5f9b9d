"""Exclude, pin, change a memory, regenerate from a turn: what the agent gets and what the branch says."""

from __future__ import annotations

import re

import json

import pytest

from chronicle.simulation.prompting import prompts
from chronicle.simulation.run.models import Turn
from chronicle.writing import services
from memory.models import Memory
from tests.chronicle.writing.conftest import prepare_and_run
from tests.factories import run_all, start
from tests.prompting import sent_text

pytestmark = pytest.mark.django_db


def tool_text(turn: Turn) -> str:
    """Everything the agent read on its turn: system prompt and tool answers."""
    return "\n".join(m.get("content") or "" for m in turn.prompt_messages if m["role"] in ("system", "tool"))


def said_in(content: str, line: str) -> bool:
    """Whether a dry run's line says this memory: its words after their label ("My goals: …"), up to
    the first item of a list."""
    return re.split(r"[,;]", re.sub(r"^[A-Z][\w ']{0,30}: ", "", content))[0][:30].lower() in line.lower()


def quoted_memory(turn: Turn) -> dict:
    retrieval = turn.retrievals.get(tool="query_memory")
    return retrieval.results[0]


def _rests_on(finished, turn: Turn) -> dict | None:
    """The memory a line rests on: what the agent read (this turn's tools, or what its lookups at its
    earlier turns kept in its conversation) and says in its own words; not what its header says too
    (what it wants), which excluding the memory leaves in front of it."""
    header = turn.prompt_messages[0]["content"].partition("## You")[2]
    read = [r for earlier in finished.turns.filter(agent=turn.agent, index__lte=turn.index).order_by("-index")
            for retrieval in earlier.retrievals.all() for r in retrieval.results]
    return next((r for r in read if said_in(r["content"], turn.utterance)
                 and re.sub(r"^[A-Z][\w ']{0,30}: ", "", r["content"])[:20] not in header), None)


def test_excluded_memory_stays_out_of_the_regenerated_turn(user, dinner):
    # Pre-populated: what the agent wants comes from its sheet's memory (in tools mode the header says it too).
    finished = run_all(start(user, dinner, retrieval_mode="prepopulate"))
    turn, top = next((t, found) for t in finished.turns.filter(index__gte=1).order_by("index")
                     if (found := _rests_on(finished, t)) is not None)
    assert top["content"] in everything_read(turn)  # the original run read it
    services.override_toggle(turn=turn, kind="exclude", memory_id=top["memory_id"], actor=user, on=True)

    branch = prepare_and_run(services.simulation_branch(parent=finished, index=turn.index, actor=user))
    regenerated = branch.turns.get(index=turn.index)
    assert top["content"] not in everything_read(regenerated)  # nor in a note kept from an earlier turn
    # Where a search found it again, the record shows it, marked excluded (on the branch's copy).
    for row in (r for retrieval in regenerated.retrievals.all() for r in retrieval.results):
        if row["content"] == top["content"]:
            assert row.get("excluded") and Memory.objects.get(pk=row["memory_id"]).bank_id == branch.bank_id
    assert regenerated.utterance != turn.utterance


def everything_read(turn: Turn) -> str:
    return "\n".join(m.get("content") or "" for m in turn.prompt_messages if m["role"] != "assistant")


def test_pinned_memory_reaches_the_agent_on_that_turn(user, finished):
    turn = finished.turns.get(index=3)
    # One of Alex's memories that turn 4 did not read (recall_facts may have brought back the background).
    unread = next(m for m in Memory.objects.in_bank(finished.bank).filter(agent="Alex", kind="character").order_by("pk")
                  if m.content not in tool_text(turn))
    services.override_toggle(turn=turn, kind="pin", memory_id=unread.pk, actor=user, on=True)

    branch = prepare_and_run(services.simulation_branch(parent=finished, index=3, actor=user))
    regenerated = branch.turns.get(index=3)
    assert unread.content in sent_text(regenerated)
    assert regenerated.retrievals.filter(tool="pinned").exists()
    assert f"I keep thinking: {unread.content[:30]}" in regenerated.utterance


def test_regenerating_from_n_keeps_earlier_turns_and_changes_later_ones(user, dinner, monkeypatch):
    # Turn 11 (Jordan) recalls Alex's turn-1 line, from before its transcript window (turns 3-10).
    monkeypatch.setattr(prompts, "WINDOW_STEP", 1)  # the window slides a line a turn: 8 lines
    finished = run_all(start(user, dinner, max_turns=12))
    turn = finished.turns.get(index=10)
    quoted = next(Memory.objects.get(pk=r["memory_id"]) for r in turn.retrievals.get(tool="query_memory").results
                  if r["kind"] == "episodic" and r["turn"] == 1)
    # It brings back a sentence of that line that says something (not the greeting).
    quote = re.search(r"I remember Alex saying “([^”]+)”", turn.utterance)
    assert quote and quote.group(1)[:20] in quoted.content, turn.utterance
    services.memory_edit(simulation=finished, memory=quoted, actor=user,
                         content="Alex said: Let us just order a pizza and stay in.")

    branch = prepare_and_run(services.simulation_branch(parent=finished, index=10, actor=user))
    assert branch.parent_id == finished.pk and branch.branch_turn == 10 and branch.status == "completed"
    before = list(finished.turns.order_by("index").values_list("agent", "utterance"))
    after = list(branch.turns.order_by("index").values_list("agent", "utterance"))
    assert len(after) == len(before) == 12
    assert after[:10] == before[:10]  # shared turns, word for word
    assert [a for a, _ in after] == [a for a, _ in before]
    assert after[10][1] != before[10][1]  # the changed memory made turn 11 different…
    assert "pizza" in after[10][1]
    # …and it was heard: the next speakers remember the new line, not the old one.
    assert Memory.objects.in_bank(branch.bank).filter(turn=11, content=f"Jordan said: {after[10][1]}").count() == 3
    assert not Memory.objects.in_bank(branch.bank).filter(content=f"Jordan said: {before[10][1]}").exists()
    # The branch's bank is the parent's as of turn 11: nothing from the parent's later turns.
    assert not Memory.objects.in_bank(branch.bank).filter(turn__gt=12).exists()
    later = Memory.objects.in_bank(branch.bank).filter(turn__gte=11)
    assert later.exists() and not later.filter(metadata__has_key="copied_from").exists()
    copied = Memory.objects.in_bank(branch.bank).filter(metadata__has_key="copied_from")
    assert copied.filter(content__contains="pizza").exists()  # the writer's edit came along


def test_a_hand_written_line_replaces_the_turn_on_regeneration(user, finished):
    turn = finished.turns.get(index=3)
    services.line_override_set(turn=turn, text="Enough talk. I booked Bella's for eight.", actor=user)
    branch = prepare_and_run(services.simulation_branch(parent=finished, index=3, actor=user))
    assert branch.turns.get(index=3).utterance == "Enough talk. I booked Bella's for eight."
    heard = Memory.objects.in_bank(branch.bank).filter(agent="Jordan", turn=4, kind="episodic").get()
    assert heard.content == "Alex said: Enough talk. I booked Bella's for eight."


def test_a_running_run_cannot_be_branched(user, finished):
    finished.status = "running"
    finished.save()
    with pytest.raises(services.WritingError):
        services.simulation_branch(parent=finished, index=2, actor=user)


def test_tool_answer_still_is_json_after_exclusion(user, finished):
    turn = finished.turns.get(index=3)
    top = quoted_memory(turn)
    services.override_toggle(turn=turn, kind="exclude", memory_id=top["memory_id"], actor=user, on=True)
    branch = prepare_and_run(services.simulation_branch(parent=finished, index=3, actor=user))
    message = next(m for m in branch.turns.get(index=3).prompt_messages if m["role"] == "tool")
    body = json.loads(message["content"])
    assert len(body["memories"]) == len(turn.retrievals.get(tool="query_memory").results) - 1

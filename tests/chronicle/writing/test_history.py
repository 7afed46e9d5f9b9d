"""Every edit is kept (who, when, before, after) and undo puts the previous text back exactly."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from chronicle.writing import selectors, services
from chronicle.writing.models import Edit
from chronicle.simulation.run.models import TurnOverride
from memory.models import Memory

pytestmark = pytest.mark.django_db


def test_line_edits_are_recorded_and_undo_restores_the_text_exactly(user, finished):
    turn = finished.turns.get(index=0)
    generated = turn.utterance
    services.entry_update(turn=turn, actor=user, text="Right. Food first, feelings later.")
    services.entry_update(turn=turn, actor=user, annotation="Too curt? try warmer")
    services.entry_update(turn=turn, actor=user, starred=True, struck=False)
    turn.refresh_from_db()
    assert selectors.entry_text(turn) == "Right. Food first, feelings later."
    assert turn.utterance == generated  # the generated text is never lost

    edits = list(selectors.history(finished).order_by("id"))
    assert [(e.field, e.before, e.after) for e in edits] == [
        ("text", generated, "Right. Food first, feelings later."),
        ("annotation", "", "Too curt? try warmer"),
        ("starred", False, True),
    ]
    assert all(e.actor == user and e.created and e.label == "Turn 1 (Alex)" for e in edits)

    undo = services.edit_undo(edit=edits[0], actor=user)
    turn.refresh_from_db()
    assert turn.entry.text == generated and selectors.entry_text(turn) == generated
    assert undo.undoes == edits[0] and undo.after == generated and undo.before == "Right. Food first, feelings later."
    services.edit_undo(edit=undo, actor=user)  # undo the undo
    turn.refresh_from_db()
    assert turn.entry.text == "Right. Food first, feelings later."
    assert Edit.objects.for_simulation(finished).count() == 5


def test_empty_line_is_refused(user, finished):
    with pytest.raises(ValidationError):
        services.entry_update(turn=finished.turns.get(index=0), actor=user, text="   ")


def test_memory_edits_keep_the_old_version_and_undo(user, finished, django_capture_on_commit_callbacks):
    memory = Memory.objects.in_bank(finished.bank).filter(agent="Sam", kind="character").first()
    old = memory.content, memory.importance, list(memory.tags)
    with django_capture_on_commit_callbacks() as callbacks:
        services.memory_edit(simulation=finished, memory=memory, actor=user, content="You are Sam, a retired pirate.",
                             importance=2.5, tags=["pirate", " sea "])
    assert len(callbacks) == 1  # re-embedding is queued for a worker
    memory.refresh_from_db()
    assert (memory.content, memory.importance, memory.tags) == ("You are Sam, a retired pirate.", 2.5, ["pirate", "sea"])
    history = list(selectors.history(finished, target_type="memory", target_id=memory.pk).order_by("id"))
    assert [(e.field, e.before) for e in history] == [("content", old[0]), ("importance", old[1]), ("tags", old[2])]
    for edit in reversed(history):
        services.edit_undo(edit=edit, actor=user)
    memory.refresh_from_db()
    assert (memory.content, memory.importance, list(memory.tags)) == old


def test_archive_and_its_undo(user, finished):
    memory = Memory.objects.in_bank(finished.bank).filter(agent="Sam").first()
    services.memory_archive_edit(simulation=finished, memory=memory, actor=user)
    memory.refresh_from_db()
    assert memory.status == "archived"
    services.edit_undo(edit=selectors.history(finished).first(), actor=user)
    memory.refresh_from_db()
    assert memory.status == "active"


def test_writer_memory_is_formed_in_the_bank_and_recorded(user, finished):
    memory = services.writer_memory_form(simulation=finished, actor=user, content="Sam secretly loves truffle pasta.",
                                         agent="Sam", kind="semantic", importance=8, tags=["secret"], turn=3)
    assert memory.bank_id == finished.bank_id and memory.source == "writer" and memory.turn == 3
    assert selectors.history(finished).first().field == "created"
    with pytest.raises(ValidationError):
        services.writer_memory_form(simulation=finished, actor=user, content="x", agent="Nobody")


def test_exclusion_and_pin_are_recorded_and_undone(user, finished):
    turn = finished.turns.get(index=3)
    memory_id = turn.retrievals.get(tool="query_memory").results[0]["memory_id"]
    services.override_toggle(turn=turn, kind="exclude", memory_id=memory_id, actor=user, on=True)
    edit = selectors.history(finished).first()
    assert (edit.target_type, edit.field, edit.before, edit.after) == ("retrieval", "exclude", [], [memory_id])
    services.edit_undo(edit=edit, actor=user)
    assert not TurnOverride.objects.at(finished, 3).exists()
    services.line_override_set(turn=turn, text="My own line.", actor=user)
    services.edit_undo(edit=selectors.history(finished).first(), actor=user)
    assert not TurnOverride.objects.at(finished, 3).exists()

"""Seed 003's dynamic similarity threshold: each listener's near-duplicate threshold comes from how
alike its own recent memories are, so the same retold line is a repeat to one listener and news
to another."""

from __future__ import annotations

import pytest

from memory.forming.adaptive import ADAPTIVE_FLOOR
from memory.forming.capture import remember_utterance
from memory.forming.importance import CaptureFilters
from memory.models import Memory
from memory.services import bank_create

pytestmark = pytest.mark.django_db

# Cy has heard about nothing but the bridge; Ann about the bridge once, among other news.
ONE_SUBJECT = ["The bridge washed away in the storm last night.", "The storm took the bridge, the whole span is gone.",
               "Without the bridge nobody crosses the river.", "The river is too high to cross now the bridge is gone.",
               "We must rebuild the bridge before the market.", "Rebuilding the bridge will take the whole village."]
VARIED = ["The bridge washed away in the storm last night.", "My sister bakes the best rye bread in town.",
          "The mayor owes the blacksmith three silver coins.", "A fox got into the henhouse again.",
          "Tomorrow the choir sings at the chapel.", "My boots leak since the winter."]
RETOLD = "Last night the storm carried off the bridge."  # ~0.91 like the first line, for both of them


def _heard(bank, listener, lines, first_turn, filters=None):
    for turn, text in enumerate(lines, first_turn):
        remember_utterance(bank=bank, speaker="Bo", text=text, turn=turn, listeners=[listener], filters=filters)


@pytest.mark.parametrize("adaptive", [True, False])
def test_a_retold_line_is_a_repeat_to_a_listener_whose_memories_are_varied(user, adaptive):
    bank = bank_create(name="Village", owner=user)
    _heard(bank, "Cy", ONE_SUBJECT, 1)
    _heard(bank, "Ann", VARIED, 1)
    filters = CaptureFilters(duplicate_threshold=0.97, adaptive_duplicates=adaptive)
    captured = remember_utterance(bank=bank, speaker="Bo", text=RETOLD, turn=10, listeners=["Ann", "Cy"], filters=filters)
    kept = {m.agent for m in captured}
    if not adaptive:  # one threshold for both: 0.91 is under 0.97, both keep it
        assert kept == {"Ann", "Cy"} and not captured.skipped
        return
    # Ann's memories are far apart (her threshold falls to the floor): 0.91 like one of them is a
    # repeat. Cy's are all close (~0.92 usual): 0.91 is the same subject going on, and he keeps it.
    assert kept == {"Cy"}
    [skipped] = captured.skipped
    first = Memory.objects.get(agent="Ann", turn=1)
    assert skipped.agent == "Ann" and skipped.reason == "duplicate" and skipped.duplicate_of == first.pk
    assert skipped.threshold == ADAPTIVE_FLOOR and skipped.similarity >= ADAPTIVE_FLOOR
    assert skipped.describe().endswith(f"(duplicate of #{first.pk}, {skipped.similarity:.2f} ≥ 0.80, its usual closeness)")


def test_the_writers_threshold_stays_the_most_a_kept_line_may_resemble_one(user):
    """The dynamic threshold never rises above the writer's: Cy's usual ~0.92 is capped at 0.9."""
    bank = bank_create(name="Village", owner=user)
    _heard(bank, "Cy", ONE_SUBJECT, 1)
    captured = remember_utterance(bank=bank, speaker="Bo", text=RETOLD, turn=10, listeners=["Cy"],
                                  filters=CaptureFilters(duplicate_threshold=0.9, adaptive_duplicates=True))
    assert not list(captured) and captured.skipped[0].threshold == 0.9


def test_a_listener_with_few_memories_keeps_the_writers_threshold(user):
    bank = bank_create(name="Village", owner=user)
    _heard(bank, "Ann", VARIED[:2], 1)
    captured = remember_utterance(bank=bank, speaker="Bo", text=RETOLD, turn=10, listeners=["Ann"],
                                  filters=CaptureFilters(duplicate_threshold=0.97, adaptive_duplicates=True))
    assert [m.agent for m in captured] == ["Ann"]  # two memories say nothing of what is usual for her

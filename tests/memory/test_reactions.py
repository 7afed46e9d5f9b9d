"""A feeling is kept only for a move of warmth big enough to be one (memory.forming.extraction)."""

from __future__ import annotations

import pytest

from memory.forming.extraction import reactions_create
from memory.models import Memory, Relationship

pytestmark = pytest.mark.django_db


def test_a_small_move_of_warmth_leaves_no_feeling_and_a_real_one_does(bank):
    rows = [Relationship.objects.create(bank=bank, agent=agent, other="Alex", turn=4, trust=0.0, affinity=change,
                                        affinity_change=change, reason=f"Alex: “{line}”")
            for agent, change, line in (("Jordan", -0.05, "You've got five minutes."),
                                        ("Sam", -0.2, "Your budget is your problem, Sam."))]
    made = reactions_create(bank=bank, rows=rows, turn=4)
    assert [m.content for m in made] == ["Sam was hurt by Alex at turn 4: “Your budget is your problem, Sam.”"]
    assert not Memory.objects.in_bank(bank).filter(agent="Jordan", kind="emotional").exists()

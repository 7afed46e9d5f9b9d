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


def test_a_feeling_quotes_the_sentence_that_caused_it_not_the_lines_opening(bank):
    """A model's run kept "was hurt by … '*stops on the ladder, quiet for a moment* Port engine, eight
    hundred, aye. I'll…'": the accusation itself was cut off."""
    from memory.living.relationships import Judgement, relationships_update

    line = ("*stops on the ladder, quiet for a moment* Port engine, eight hundred, aye. I'll log it. "
            "And you signed that inspection without reading a page of it, Maeve.")
    judged = {"Maeve": Judgement(trust=-0.2, affinity=-0.2, words=["signed that inspection without reading"],
                                 why="“signed that inspection without reading”")}
    rows = relationships_update(bank=bank, speaker="Ruairi", text=line, listeners=["Maeve"], turn=13, judged=judged)
    made = reactions_create(bank=bank, rows=rows, turn=13)
    assert [m.content for m in made] == [
        "Maeve was hurt by Ruairi at turn 13: “And you signed that inspection without reading a page of it, Maeve.”"]
    # Without evidence to go by, the line's opening, its stage business left out.
    offline = relationships_update(bank=bank, speaker="Ruairi", text="*sighs* Fine. Thank you, Maeve.",
                                   listeners=["Tom"], turn=14,
                                   judged={"Tom": Judgement(trust=0.0, affinity=0.2, words=[], why="")})
    assert offline[0].reason == "Ruairi: “Fine. Thank you, Maeve.”"

"""Who believes what counts only those who hold the claim now (sure enough to pass it on), not
everyone who has a belief memory about it: someone who only heard it denied, or whose confidence
fell to a few hundredths, is listed as having heard it, not as holding it; someone who never held it
is not "disputed … 0.00"."""

from __future__ import annotations

import pytest

from chronicle.simulation.pages import run_panels
from tests.factories import start as start_seeded
from tests.chronicle.simulation.story.test_beliefs import CLAIM, held, say

pytestmark = pytest.mark.django_db


def test_held_by_counts_only_those_who_hold_it_now(user, dinner, client_for):
    simulation = start_seeded(user, dinner, max_turns=4, planted_beliefs=f"Sam: {CLAIM} [false]")
    say(simulation, 0, "Alex", "That's a lie, Bella's isn't closing at all.")
    say(simulation, 1, "Alex", "Honestly: it's only a rumour that Bella's trattoria is closing.")
    # Jordan never believed it and heard it denied twice; Sam, who was told it, is now unsure.
    (jordan,) = held(simulation, "Jordan")
    assert [s["stance"] for s in jordan["history"]] == ["denies", "denies"] and jordan["confidence"] == 0
    (sam,) = held(simulation, "Sam")
    assert sam["confidence"] < 0.5

    (claim,) = run_panels.beliefs_as_shown(run_panels.who_believes(simulation, shown=run_panels.HISTORY_SHOWN))
    assert claim["held_by"] == []
    assert sorted(claim["not_held_by"]) == ["Alex", "Jordan", "Sam"]
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "held by nobody now" in page and "held by 3" not in page
    assert "heard, not held, by" in page
    assert "· 0.00" not in page  # no "disputed by Alex · 0.00" for someone who never held it
    assert "heard Alex say it is not so" in page
    jordan_row = page.split('data-holder="Jordan"', 1)[1].split("</li>", 1)[0]
    assert 'data-disputed' not in jordan_row.split(">", 1)[0] and "does not believe it" in jordan_row


def test_a_holder_sure_of_it_is_counted(user, dinner, client_for):
    simulation = start_seeded(user, dinner, max_turns=4, planted_beliefs=f"Sam: {CLAIM} [false]")
    say(simulation, 0, "Sam", f"Listen, everyone: {CLAIM}")
    (claim,) = run_panels.beliefs_as_shown(run_panels.who_believes(simulation))
    assert sorted(claim["held_by"]) == ["Alex", "Jordan", "Sam"]  # told by Sam: 0.7, and Sam at 1.0
    page = client_for(user).get(simulation.get_absolute_url()).content.decode()
    assert "held by 3 (" in page

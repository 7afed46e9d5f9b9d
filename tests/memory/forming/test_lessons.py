"""Which lines leave a lesson (a procedural memory) without a model: one that says what to do
differently, not a plan or an exclamation that shares its words."""

from __future__ import annotations

import pytest

from memory.forming.extraction import lesson_of


@pytest.mark.parametrize("line", ["I'll come next time.", "See you next time!", "Maybe next time we go Thai.",
                                  "You should have seen it!"])
def test_a_plan_or_an_exclamation_is_no_lesson(line):
    assert lesson_of(line) == ""


@pytest.mark.parametrize("line, lesson", [
    ("Fine. Next time I will check the prices first.", "Next time I will check the prices first."),
    ("*sighs* Next time, book ahead.", "*sighs* Next time, book ahead."),
    ("We should have booked. Too late now.", "We should have booked."),
    ("I've learned my lesson: never trust a menu online.", "I've learned my lesson: never trust a menu online."),
])
def test_a_lesson_drawn_aloud_is_kept_in_its_sentence(line, lesson):
    assert lesson_of(line) == lesson

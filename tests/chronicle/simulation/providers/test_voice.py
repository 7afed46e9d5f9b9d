"""A character's sheet in its own voice: the name and pronouns become "I", and every verb of that
"I" agrees ("I notice everything and say little"), while a plural noun after "and" stays one."""

from __future__ import annotations

import pytest

from chronicle.simulation.providers.voice import named_voice, own_sheet_voice


@pytest.mark.parametrize("text, said", [
    ("Tess notices everything and says little.", "I notice everything and say little."),
    ("Tess bakes bread and cakes for the inn.", "I bake bread and cakes for the inn."),
    ("Tess likes dogs and cats.", "I like dogs and cats."),
    ("Tess's father kept the light.", "my father kept the light."),
    ("Tess got a small bonus this month but is saving it.", "I got a small bonus this month but am saving it."),
])
def test_the_name_becomes_i_and_its_verbs_agree(text, said):
    assert named_voice(text, "Tess") == said


def test_a_sheet_written_about_her_agrees_too():
    assert own_sheet_voice("She listens closely and speaks softly.") == "I listen closely and speak softly."

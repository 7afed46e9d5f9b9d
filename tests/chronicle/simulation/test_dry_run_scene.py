"""The dry run as the scene partner a newcomer meets first: sixty turns of examples/demo.json, run
offline, read as a scene: no line said twice, no sheet label ("My goals:") quoted, every line in the
first person (no character speaking of itself by name), a secret whispered at most once."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from chronicle import headless
from chronicle.simulation.control.tasks import run_turn_task
from tests.factories import start as start_seeded

pytestmark = pytest.mark.django_db

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo.json"
LABELS = re.compile(r"\b(?:My (?:goals|traits|skills|secret|situation|personality|values|background)|Location|"
                    r"Atmosphere|Situation|Archetype|Communication style|Decision style|Public face):", re.IGNORECASE)


def test_sixty_dry_run_turns_of_the_demo_read_as_a_scene(user):
    imported = headless.scenario_import(raw=DEMO.read_bytes(), username=user.username)
    simulation = start_seeded(user, imported.scenario, max_turns=60, provider="scripted", pace_s=0)
    for index in range(60):
        assert run_turn_task.apply(args=(simulation.pk, index)).get() == "done", index
    lines = list(simulation.turns.order_by("index").values_list("agent", "utterance"))
    assert len(lines) == 60
    said = [" ".join(re.sub(r"\*[^*]*\*", " ", text).lower().split()).strip(" .!?") for _agent, text in lines]
    repeated = {line for line in said if said.count(line) > 1}
    assert not repeated, f"said more than once: {sorted(repeated)[:3]}"
    cast = {agent for agent, _text in lines}
    headed = re.compile(rf"\b(?:{'|'.join(cast)}|How others see me): ")  # a sheet line headed by whose it is
    labelled = [text for _agent, text in lines if LABELS.search(text) or headed.search(text)]
    assert not labelled, labelled[:3]
    # First person: a character never speaks of itself by its own name (outside a quoted line).
    own_name = [text for agent, text in lines
                if re.search(rf"\b{agent}\b", re.sub(rf"“[^”]*”|\bI(?:'m| am) {agent}\b", "", text))]
    assert not own_name, own_name[:6]
    for agent in {agent for agent, _text in lines}:
        whispered = [text for a, text in lines if a == agent and "between us" in text.lower()]
        assert len(whispered) <= 1, whispered

"""A run's settings are listed once (run_settings.RUN_SETTINGS): each is a field of the run, with the
run's default, and each the turn takes is a field of the turn's input with the same default; a bad
setting is refused by one check, with one message, wherever it comes from."""

from __future__ import annotations

import dataclasses
import html
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.urls import reverse

from chronicle.models import Scenario
from chronicle.simulation.pages.forms import SimulationForm
from chronicle.simulation.turn.types import TurnInput
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.run.run_settings import FILE_SETTINGS, RUN_SETTINGS, SECRET_SETTINGS, turn_values


def test_each_setting_is_a_field_of_the_run():
    fields = {f.name for f in Simulation._meta.get_fields()}
    assert [s.name for s in RUN_SETTINGS if s.name not in fields] == []


def test_each_setting_a_turn_takes_is_a_field_of_its_input():
    inputs = {f.name for f in dataclasses.fields(TurnInput)}
    assert [s.turn for s in RUN_SETTINGS if s.turn and s.turn not in inputs] == []


def test_a_turn_takes_the_runs_defaults():
    run, turn = Simulation(), TurnInput(bank=None, agent="Alex", index=0, cast=[], scenario=None, transcript=[], mode="tools")
    taken = turn_values(run)
    assert taken and {attribute: getattr(turn, attribute) for attribute in taken} == taken


def test_a_file_never_carries_a_secret():
    assert SECRET_SETTINGS and not set(SECRET_SETTINGS) & set(FILE_SETTINGS)


# --- one check, one message: the new-run form, a file's import and the command line --------------

DEMO = Path(__file__).resolve().parents[4] / "examples" / "demo.json"

BAD_SETTINGS = [
    ({"stage_directions": "2: Quentin leaves"}, "stage_directions"),  # someone outside the cast
    ({"retrieval_mode": "tools", "tool_set": []}, "tool_set"),
    ({"provider": "openai", "base_url": "", "model": ""}, "base_url"),
    ({"temperature": 5}, "temperature"),
]


def form_data(scenario, values: dict) -> dict:
    """The new-run form as a writer posts it, the demo's cast ticked, with `values` typed over it."""
    data = {"scenario": scenario.pk, "cast": [c.pk for c in scenario.cast.all()], "max_turns": 6,
            "speaking_order": "round_robin", "retrieval_mode": "prepopulate", "scoring": "hybrid",
            "provider": "scripted", "temperature": 0.7, "max_tokens": 300, "timeout_s": 60, "max_tool_calls": 6,
            "pace_s": 0, "tool_set": ["query_self"], **values}
    return {name: value for name, value in data.items() if value != []}


def command_says(path: Path) -> str:
    with pytest.raises(CommandError) as failure:
        call_command("run_simulation", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    return str(failure.value)


@pytest.mark.django_db
@pytest.mark.parametrize("values, field", BAD_SETTINGS, ids=[field for _v, field in BAD_SETTINGS])
def test_a_bad_setting_gets_the_same_message_from_the_form_the_import_and_the_command(
        values, field, user, client_for, tmp_path):
    client = client_for(user)
    client.post(reverse("import"), {"file": SimpleUploadedFile("demo.json", DEMO.read_bytes(), "application/json")})
    scenario = Scenario.objects.owned_by(user).get()

    form = SimulationForm(owner=user, data=form_data(scenario, values))
    assert not form.is_valid() and form.errors[field], form.errors
    message = form.errors[field][0]

    data = json.loads(DEMO.read_text())
    data["settings"] = {**data.get("settings", {}), **values}
    data["scenario"]["title"] = "Another evening"  # not the scene imported above: nothing to reuse
    response = client.post(reverse("import"), {"file": SimpleUploadedFile(
        "bad.json", json.dumps(data).encode(), "application/json")}, follow=True)
    assert f"settings.{field}: {message}" in html.unescape(response.content.decode())
    assert Scenario.objects.owned_by(user).count() == 1  # nothing imported

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    assert f"{field}: {message.rstrip('.')}" in command_says(bad)
    assert Simulation.objects.count() == 0

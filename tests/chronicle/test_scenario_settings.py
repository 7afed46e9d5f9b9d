"""A scenario file's run settings come with it: the import keeps them, the scenario page shows them,
"Run this scenario" starts from them, and a sequel starts from its parent's settings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from chronicle.models import Scenario
from chronicle.simulation.pages.forms import NOT_INHERITED
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.services import SETTING_FIELDS

pytestmark = pytest.mark.django_db

RUMOUR = Path(__file__).resolve().parents[2] / "examples" / "rumour.json"


def submit_as_shown(client, url: str):
    """GET the new-run form and POST it back as a browser would, changing nothing."""
    form = client.get(url).context["form"]
    data = {}
    for name, field in form.fields.items():
        value = form[name].value()
        if value in (None, "", []) or value is False:
            continue
        data[name] = "on" if value is True else [str(v) for v in value] if isinstance(value, (list, tuple)) else str(value)
    return client.post(reverse("simulation_create"), data)


def test_an_imported_scenario_keeps_its_settings_and_runs_with_every_one_of_them(user, client_for):
    client = client_for(user)
    settings = json.loads(RUMOUR.read_text())["settings"]
    client.post(reverse("import"), {"file": SimpleUploadedFile("rumour.json", RUMOUR.read_bytes(), "application/json")})
    scenario = Scenario.objects.owned_by(user).get()
    assert scenario.run_settings == settings

    exported = json.loads(client.get(reverse("scenario_export", args=[scenario.pk])).content)
    assert exported["settings"] == settings  # and out again with the scenario
    page = client.get(reverse("scenario_detail", args=[scenario.pk])).content.decode()
    assert "How it runs" in page and 'id="run-scenario"' in page
    assert settings["retrieval_mode"] == "both" and "<dt>Retrieval mode</dt><dd>Both</dd>" in page  # as the form says it
    assert f"{reverse('simulation_create')}?scenario={scenario.pk}" in page

    response = submit_as_shown(client, f"{reverse('simulation_create')}?scenario={scenario.pk}")
    assert response.status_code == 302, response.context["form"].errors
    run = Simulation.objects.owned_by(user).get()
    for name, value in settings.items():
        assert getattr(run, name) == value, name


def test_a_bad_setting_in_a_file_is_named_and_nothing_is_imported(user, client_for):
    data = json.loads(RUMOUR.read_text())
    data["settings"] = {**data["settings"], "max_turns": 0, "volume": 11}
    response = client_for(user).post(reverse("import"), {"file": SimpleUploadedFile(
        "rumour.json", json.dumps(data).encode(), "application/json")}, follow=True)
    assert "settings.volume is not a run setting" in response.content.decode()
    assert not Scenario.objects.owned_by(user).exists()


def test_a_sequel_starts_from_its_parents_settings(user, client_for):
    client = client_for(user)
    client.post(reverse("import"), {"file": SimpleUploadedFile("rumour.json", RUMOUR.read_bytes(), "application/json")})
    scenario = Scenario.objects.owned_by(user).get()
    assert submit_as_shown(client, f"{reverse('simulation_create')}?scenario={scenario.pk}").status_code == 302
    parent = Simulation.objects.owned_by(user).get()
    Simulation.objects.filter(pk=parent.pk).update(status="completed", max_turns=24, reflection_threshold=42)
    parent.refresh_from_db()
    assert 'id="start-sequel"' in client.get(parent.get_absolute_url()).content.decode()

    response = submit_as_shown(client, f"{reverse('simulation_create')}?sequel_of={parent.pk}")
    assert response.status_code == 302, response.context["form"].errors
    sequel = Simulation.objects.owned_by(user).exclude(pk=parent.pk).get()
    assert sequel.sequel_of_id == parent.pk and (sequel.max_turns, sequel.reflection_threshold) == (24, 42)
    for name in SETTING_FIELDS:
        if name not in NOT_INHERITED:
            assert getattr(sequel, name) == getattr(parent, name), name


def test_the_new_run_form_starts_from_the_scenario_it_shows_and_offers_another_ones_settings(
        user, client_for, make_scenario, make_character):
    client = client_for(user)
    client.post(reverse("import"), {"file": SimpleUploadedFile("rumour.json", RUMOUR.read_bytes(), "application/json")})
    rumour = Scenario.objects.owned_by(user).get()
    settings = json.loads(RUMOUR.read_text())["settings"]
    # The plain "New simulation" form opens on the only scenario: a run started as shown has its settings.
    response = submit_as_shown(client, reverse("simulation_create"))
    assert response.status_code == 302
    run = Simulation.objects.owned_by(user).get()
    assert run.stage_directions == settings["stage_directions"] and run.planted_beliefs == settings["planted_beliefs"]

    # Another scenario first in the list: choosing the rumour swaps its cast in and offers its settings,
    # without putting them over what was typed.
    make_scenario(user, title="A quiet dinner", cast=[make_character(user, name="Ada")])
    page = client.get(reverse("simulation_create")).content.decode()
    assert "settings-offer" not in page and 'name="stage_directions"' in page
    swap = client.get(reverse("simulation_create"), {"scenario": rumour.pk}, HTTP_HX_REQUEST="true").content.decode()
    offer = swap[swap.index('id="settings-offer"'):]
    assert "A rumour at the Harbour Inn" in offer[:200] and f"?scenario={rumour.pk}" in offer

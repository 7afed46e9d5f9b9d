"""Starting relationships: the writer sets how each of the cast stands with each other (trust,
affinity, −1..1) on the scenario form; a run starts from them (turn-0 standings the agents read),
and a renamed or deleted character takes its standings along."""

from __future__ import annotations

from html import unescape

import pytest
from django.urls import reverse

from chronicle.models import Scenario
from chronicle.services.characters import character_delete, character_update
from memory.forming.seeding import bank_seed
from memory.living.relationships import STARTING
from memory.models import MemoryBank, Relationship
from memory.living.relationships import describe, standing

pytestmark = pytest.mark.django_db


def test_the_form_saves_starting_standings_and_refuses_a_bad_one(client_for, user, make_character):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    client = client_for(user)
    base = {"title": "Dinner", "location": "Living room", "atmosphere": "relaxed", "time_of_day": "evening",
            "description": "Where to eat?", "cast": [alex.pk, jordan.pk]}
    bad = client.post(reverse("scenario_create"), {**base, f"trust-{alex.pk}-{jordan.pk}": "2"})
    page = unescape(bad.content.decode())
    assert bad.status_code == 400 and not Scenario.objects.exists()
    assert "Alex's starting trust towards Jordan must be a number from −1 to 1." in page
    assert f'name="trust-{alex.pk}-{jordan.pk}" value="2"' in page  # what was typed is shown again
    ok = client.post(reverse("scenario_create"), {**base, f"trust-{alex.pk}-{jordan.pk}": "0.6",
                                                  f"affinity-{alex.pk}-{jordan.pk}": "-0.3",
                                                  f"trust-{jordan.pk}-{alex.pk}": ""})
    assert ok.status_code == 302
    scenario = Scenario.objects.get(owner=user)
    assert scenario.pair_standing == {"Alex": {"Jordan": {"trust": 0.6, "affinity": -0.3}}}
    edit = client.get(reverse("scenario_edit", args=[scenario.pk])).content.decode()
    assert f'name="trust-{alex.pk}-{jordan.pk}" value="0.6"' in edit


def test_a_run_starts_from_the_writers_standings(user, make_character, make_scenario):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    scenario = make_scenario(user, cast=[alex, jordan],
                             pair_standing={"Alex": {"Jordan": {"trust": 0.6, "affinity": -0.3}},
                                            "Jordan": {"Zed": {"trust": 1}}})  # not in the cast: dropped
    sheet = scenario.to_sheet()
    assert sheet.relationships == [{"agent": "Alex", "other": "Jordan", "trust": 0.6, "affinity": -0.3}]
    bank = MemoryBank.objects.create(name="run", owner=user)
    payload = {"characters": [s.to_dict() for s in scenario.cast_sheets()], "scenario": sheet.to_dict()}
    bank_seed(bank_id=bank.pk, payload=payload)
    bank_seed(bank_id=bank.pk, payload=payload)  # a redone seeding writes them once
    rows = list(Relationship.objects.filter(bank=bank))
    assert len(rows) == 1 and rows[0].turn == 0 and rows[0].reason == STARTING
    start = standing(bank, "Alex", before_turn=1)[("Alex", "Jordan")]
    assert (start.trust, start.affinity) == (0.6, -0.3) and describe(start) == "strong trust, some dislike"


def test_a_renamed_or_deleted_character_takes_its_standings_along(user, make_character, make_scenario):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    scenario = make_scenario(user, cast=[alex, jordan], pair_standing={"Alex": {"Jordan": {"trust": 0.5, "affinity": 0}}})
    character_update(character=jordan, data={"name": "Jo"})
    scenario.refresh_from_db()
    assert scenario.pair_standing == {"Alex": {"Jo": {"trust": 0.5, "affinity": 0.0}}}
    jordan.refresh_from_db()
    character_delete(character=jordan)
    scenario.refresh_from_db()
    assert scenario.pair_standing == {}


def test_standings_travel_in_the_scenarios_json_and_a_bad_one_is_refused(client_for, user, other_user, make_character,
                                                                        make_scenario):
    import json

    from chronicle.services.cards import CardImportError, card_import

    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    scenario = make_scenario(user, cast=[alex, jordan], pair_standing={"Jordan": {"Alex": {"trust": -0.4, "affinity": 0.2}}})
    raw = client_for(user).get(reverse("scenario_export", args=[scenario.pk])).content
    assert json.loads(raw)["scenario"]["pair_standing"] == {"Jordan": {"Alex": {"trust": -0.4, "affinity": 0.2}}}
    copy = card_import(owner=other_user, raw=raw).scenario
    assert copy.pair_standing == scenario.pair_standing
    data = json.loads(raw)
    data["scenario"]["pair_standing"] = {"Jordan": {"Alex": {"trust": 3}}}
    with pytest.raises(CardImportError) as refused:
        card_import(owner=other_user, raw=json.dumps(data).encode(), as_copy=True)
    assert "scenario.pair_standing.Jordan.Alex" in str(refused.value.errors)

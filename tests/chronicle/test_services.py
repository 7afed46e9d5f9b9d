"""Seeding is dispatched when the save commits, never before; the demo loads once."""

from __future__ import annotations

import pytest

from chronicle.demo import load_demo
from chronicle.models import Character, Scenario
from chronicle.services.characters import character_update

pytestmark = pytest.mark.django_db


@pytest.fixture
def dispatched(monkeypatch):
    from memory.tasks import seed_bank_task

    calls = []
    monkeypatch.setattr(seed_bank_task, "delay", lambda *args, **kwargs: calls.append(args))
    return calls


def test_character_seeding_is_dispatched_on_commit(user, make_character, dispatched, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        alex = make_character(user)
        assert dispatched == []  # nothing queued inside the transaction
    assert callbacks
    for callback in callbacks:
        callback()
    (bank_id, payload), = dispatched
    assert bank_id == alex.preview_bank_id
    assert [c["name"] for c in payload["characters"]] == ["Alex"] and payload["scenario"] is None


def test_update_reseeds_the_same_bank(user, make_character, dispatched, django_capture_on_commit_callbacks):
    alex = make_character(user)
    with django_capture_on_commit_callbacks(execute=True):
        character_update(character=alex, data={"role": "Team lead"})
    (bank_id, payload), = dispatched
    assert bank_id == alex.preview_bank_id and payload["characters"][0]["role"] == "Team lead"


def test_scenario_seeding_carries_scene_cast_and_pair_notes(user, make_character, make_scenario, dispatched,
                                                            django_capture_on_commit_callbacks):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    with django_capture_on_commit_callbacks(execute=True):
        scenario = make_scenario(user, cast=[alex, jordan], pair_notes={"Jordan": {"Alex": "Alex books tables."}})
    bank_id, payload = dispatched[-1]
    assert bank_id == scenario.preview_bank_id
    assert payload["scenario"]["title"] == "Dinner"
    sheets = {c["name"]: c for c in payload["characters"]}
    assert sheets["Jordan"]["knowledge"] == {"Alex": "Alex books tables."}


def test_failed_save_dispatches_nothing(user, make_character, dispatched, django_capture_on_commit_callbacks):
    from django.core.exceptions import ValidationError

    make_character(user)
    with django_capture_on_commit_callbacks(execute=True):
        with pytest.raises(ValidationError):
            make_character(user)  # same name
    assert dispatched == [] and Character.objects.count() == 1  # the refused save queued nothing


def test_demo_loads_once_with_every_field_filled(user, dispatched, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert load_demo(owner=user) is True
    assert load_demo(owner=user) is False
    scenario = Scenario.objects.get(owner=user)
    assert scenario.title == "Friends deciding where to eat tonight"
    assert "Alex's apartment" in scenario.location and "early evening" in scenario.time_of_day.lower()
    cast = {c.name: c for c in scenario.cast.all()}
    assert set(cast) == {"Alex", "Jordan", "Sam"}
    assert "pragmatic project manager" in cast["Alex"].description
    assert "Italian" in cast["Jordan"].description and "vegetarian" in cast["Sam"].description
    for character in cast.values():
        for field in ("role", "archetype", "description", "background", "communication_style", "decision_style",
                      "traits", "skills", "values", "goals"):
            assert getattr(character, field), f"{character.name}.{field} is empty"
        assert set(character.knowledge) == set(cast) - {character.name}
    assert len(dispatched) == 4  # three characters and the scenario
    assert Character.objects.filter(owner=user).count() == 3


def test_a_renamed_character_is_renamed_everywhere_it_was_named(user, other_user, make_character, make_scenario,
                                                                  dispatched):
    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={"Alex": "Alex books tables."})
    theirs = make_character(other_user, name="Jordan", knowledge={"Alex": "Another writer's Alex."})
    scenario = make_scenario(user, cast=[alex, jordan], pair_notes={"Jordan": {"Alex": "Alex owes Jordan."},
                                                                     "Alex": {"Jordan": "Jordan is late."}})
    character_update(character=alex, data={"name": "Alexa"})
    alex.preview_bank.refresh_from_db()
    jordan.refresh_from_db()
    scenario.refresh_from_db()
    assert alex.preview_bank.name == "Preview: Alexa"
    assert scenario.pair_notes == {"Jordan": {"Alexa": "Alex owes Jordan."}, "Alexa": {"Jordan": "Jordan is late."}}
    assert jordan.knowledge == {"Alexa": "Alex books tables."}
    # What the scenario's cast is seeded with follows (Jordan's note about the renamed one).
    assert {s.name: s.knowledge for s in scenario.cast_sheets()}["Jordan"]["Alexa"].endswith("Alex owes Jordan.")
    theirs.refresh_from_db()
    assert theirs.knowledge == {"Alex": "Another writer's Alex."}  # another writer's characters are theirs


def test_a_deleted_character_leaves_no_pair_notes(user, make_character, make_scenario, dispatched):
    from chronicle.services.characters import character_delete

    alex = make_character(user)
    jordan = make_character(user, name="Jordan", knowledge={})
    sam = make_character(user, name="Sam", knowledge={})
    scenario = make_scenario(user, cast=[alex, jordan, sam], pair_notes={
        "Jordan": {"Alex": "Alex owes Jordan.", "Sam": "Sam is kind."}, "Alex": {"Jordan": "Jordan is late."}})
    character_delete(character=alex)
    scenario.refresh_from_db()
    assert scenario.pair_notes == {"Jordan": {"Sam": "Sam is kind."}}

"""Scenario writes. Saving seeds the scenario's preview bank with the scene and its whole cast."""

from __future__ import annotations

from typing import Any, Iterable

from django.core.exceptions import ValidationError
from django.db import transaction

from chronicle.models import Character, Scenario
from memory.api import banks

FIELDS = ("title", "location", "atmosphere", "time_of_day", "description", "user_name", "pair_notes", "pair_standing",
          "run_settings")


def clean_pair_notes(notes: dict, names: set[str]) -> dict[str, dict[str, str]]:
    # Only notes between two cast members mean anything; blank notes are dropped.
    clean: dict[str, dict[str, str]] = {}
    for knower, about in (notes or {}).items():
        if knower not in names or not isinstance(about, dict):
            continue
        row = {other: str(text).strip() for other, text in about.items()
               if other in names and other != knower and str(text or "").strip()}
        if row:
            clean[knower] = row
    return clean


def clean_pair_standing(standing: dict, names: set[str]) -> dict[str, dict[str, dict[str, float]]]:
    # Between two cast members only, each measure within −1..1; a pair left at 0 and 0 is no start at all.
    clean: dict[str, dict[str, dict[str, float]]] = {}
    for agent, row in (standing or {}).items():
        if agent not in names or not isinstance(row, dict):
            continue
        for other, values in row.items():
            if other not in names or other == agent or not isinstance(values, dict):
                continue
            pair = {k: round(max(-1.0, min(1.0, float(values.get(k) or 0.0))), 3) for k in ("trust", "affinity")}
            if any(pair.values()):
                clean.setdefault(agent, {})[other] = pair
    return clean


def scenario_request_preview(*, scenario: Scenario) -> Scenario:
    if scenario.preview_bank_id is None:
        scenario.preview_bank = banks.bank_create(name=f"Preview: {scenario.title}", owner=scenario.owner)
        scenario.save(update_fields=["preview_bank", "updated"])
    banks.bank_request_seed(bank=scenario.preview_bank, characters=scenario.cast_sheets(), scenario=scenario.to_sheet())
    return scenario


def _save(scenario: Scenario, data: dict[str, Any], cast: Iterable[Character] | None) -> Scenario:
    for field in FIELDS:
        if field in data:
            setattr(scenario, field, data[field])
    cast_list = list(cast) if cast is not None else (list(scenario.cast.all()) if scenario.pk else [])
    if any(c.owner_id != scenario.owner_id for c in cast_list):
        raise ValidationError({"cast": "The cast can only include your own characters."})
    scenario.pair_notes = clean_pair_notes(scenario.pair_notes, {c.name for c in cast_list})
    scenario.pair_standing = clean_pair_standing(scenario.pair_standing, {c.name for c in cast_list})
    scenario.full_clean()
    scenario.save()
    if cast is not None:
        scenario.cast.set(cast_list)
    return scenario


@transaction.atomic
def scenario_create(*, owner, data: dict[str, Any], cast: Iterable[Character] = (), seed: bool = True) -> Scenario:
    scenario = _save(Scenario(owner=owner), data, cast)
    if seed:
        scenario_request_preview(scenario=scenario)
    return scenario


@transaction.atomic
def scenario_update(*, scenario: Scenario, data: dict[str, Any], cast: Iterable[Character] | None = None) -> Scenario:
    return scenario_request_preview(scenario=_save(scenario, data, cast))


@transaction.atomic
def scenario_delete(*, scenario: Scenario) -> None:
    bank = scenario.preview_bank
    scenario.delete()
    if bank is not None:
        banks.bank_delete(bank=bank)

"""Character writes. Saving a character re-seeds its preview bank in a worker once the save commits."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from chronicle.models import Character, Scenario
from memory.api import banks, sheet_fields

FIELDS = (*sheet_fields.CHARACTER_FIELDS, "extra_memories", "card_extras")
# SillyTavern card fields the character form edits, by form field → card_extras key (they stay in
# card_extras so an export gives them back where a card keeps them).
CARD_FIELDS = {"first_mes": "first_mes", "alternate_greetings": "alternate_greetings",
               "card_scenario": "scenario", "mes_example": "mes_example", "creator_notes": "creator_notes",
               "card_tags": "tags", "creator": "creator", "character_version": "character_version"}


def _apply(character: Character, data: dict[str, Any]) -> None:
    for field in FIELDS:
        if field in data:
            setattr(character, field, data[field])
    if any(field in data for field in CARD_FIELDS):
        extras = dict(character.card_extras or {})
        for field, key in CARD_FIELDS.items():
            if field not in data:
                continue
            if data[field]:
                extras[key] = data[field]
            else:
                extras.pop(key, None)  # blank: an export writes the card field blank anyway
        character.card_extras = extras


def character_request_preview(*, character: Character) -> Character:
    """Seed (or re-seed) the character's own preview bank with just this character."""
    if character.preview_bank_id is None:
        character.preview_bank = banks.bank_create(name=f"Preview: {character.name}", owner=character.owner)
        character.save(update_fields=["preview_bank", "updated"])
    # bank_request_seed dispatches with delay_on_commit: the worker starts after our transaction commits.
    banks.bank_request_seed(bank=character.preview_bank, characters=[character.to_sheet()], scenario=None)
    return character


@transaction.atomic
def character_create(*, owner, data: dict[str, Any], seed: bool = True) -> Character:
    character = Character(owner=owner)
    _apply(character, data)
    character.full_clean()
    character.save()
    if seed:
        character_request_preview(character=character)
    return character


@transaction.atomic
def character_update(*, character: Character, data: dict[str, Any]) -> Character:
    old_name = Character.objects.values_list("name", flat=True).get(pk=character.pk)
    _apply(character, data)
    character.full_clean()
    character.save()
    if character.name != old_name:
        _renamed(character, old_name)
    return character_request_preview(character=character)


@transaction.atomic
def character_delete(*, character: Character) -> None:
    bank = character.preview_bank
    # Pair notes in the writer's scenarios by or about it would name someone no longer there.
    for scenario in Scenario.objects.owned_by(character.owner).select_for_update():
        notes = _without(scenario.pair_notes or {}, character.name)
        standing = _without(scenario.pair_standing or {}, character.name)
        if notes != (scenario.pair_notes or {}) or standing != (scenario.pair_standing or {}):
            scenario.pair_notes, scenario.pair_standing = notes, standing
            scenario.save(update_fields=["pair_notes", "pair_standing", "updated"])
    character.delete()
    if bank is not None:
        banks.bank_delete(bank=bank)  # the preview bank is the character's alone


def _renamed(character: Character, old: str) -> None:
    """A new name reaches everything that named the character: its preview bank, the pair notes of
    the writer's scenarios, and what the writer's other characters know about it."""
    if character.preview_bank_id is not None:
        banks.bank_rename(bank_id=character.preview_bank_id, name=f"Preview: {character.name}")
    new = character.name
    for scenario in Scenario.objects.owned_by(character.owner).select_for_update():
        changed = []
        for field in ("pair_notes", "pair_standing"):  # both name the cast by name
            pairs = getattr(scenario, field) or {}
            renamed = {new if who == old else who: {new if other == old else other: value for other, value in about.items()}
                       for who, about in pairs.items() if isinstance(about, dict)}
            if renamed != pairs:
                setattr(scenario, field, renamed)
                changed.append(field)
        if changed:
            scenario.save(update_fields=[*changed, "updated"])
    for other in Character.objects.owned_by(character.owner).exclude(pk=character.pk).select_for_update():
        knowledge = other.knowledge or {}
        if old in knowledge and new not in knowledge:
            other.knowledge = {new if name == old else name: text for name, text in knowledge.items()}
            other.save(update_fields=["knowledge", "updated"])


def _without(notes: dict, name: str) -> dict:
    kept = {who: {other: note for other, note in about.items() if other != name}
            for who, about in notes.items() if who != name and isinstance(about, dict)}
    return {who: about for who, about in kept.items() if about}

"""Card V2: a SillyTavern character card (its JSON object) as a Wonda character's values, and the
conventions cards write inside their free text (a personality as a list; W++, PList and Ali:Chat in a
description: split_description)."""

from __future__ import annotations

import re
from typing import Any

from chronicle.models import ITEM_LIMIT, TEXT_LIMIT
from chronicle.services.card_checks import SHORT_LIMITS, Checker
from chronicle.services.card_text import split_description
from chronicle.services.card_export import (
    CARD_EXTRA_LISTS, CARD_EXTRA_TEXT, CARD_SPEC, LIST_FIELDS, LONG_LIST_FIELDS, TEXT_FIELDS,
)


def split_personality(text: str) -> list[str] | None:
    """A comma/semicolon list of short traits, or None when the personality is prose."""
    parts = [p.strip() for p in re.split(r"[,;\n]", text) if p.strip()]
    if not parts or len(parts) > 40 or any(len(p) > 60 or p.endswith(".") and len(p) > 30 for p in parts):
        return None
    return parts


def character_from_card(card: Any, check: Checker) -> dict | None:
    """A Card V2 object as a character's values (chronicle.services.cards imports it); problems go to `check`."""
    if not isinstance(card, dict):
        check.errors.append("the card must be a JSON object")
        return None
    if card.get("spec") != CARD_SPEC:
        check.errors.append(f"spec must be {CARD_SPEC}" + (f" (it is {card.get('spec')!r})" if card.get("spec") else ""))
        return None
    data = card.get("data")
    if not isinstance(data, dict):
        check.errors.append("data is missing" if data is None else "data must be an object")
        return None
    values: dict[str, Any] = {
        "name": check.text(data, "name", "data.", required=True, limit=100).strip(),
        "description": check.text(data, "description", "data."),
    }
    extras: dict[str, Any] = {}
    # Blank fields are not kept: export writes every V2 field anyway, blank when unset.
    for key in CARD_EXTRA_TEXT:
        if value := check.text(data, key, "data.", limit=TEXT_LIMIT * 5):
            extras[key] = value
    for key in CARD_EXTRA_LISTS:
        if value := check.items(data, key, "data.", limit=TEXT_LIMIT):
            extras[key] = value
    extensions = data.get("extensions") or {}
    if not isinstance(extensions, dict):
        check.errors.append("data.extensions must be an object")
        extensions = {}
    wonda = extensions.get("wonda") if isinstance(extensions.get("wonda"), dict) else None
    other_extensions = {k: v for k, v in extensions.items() if k != "wonda"}
    if other_extensions:
        extras["extensions"] = other_extensions

    personality = check.text(data, "personality", "data.", limit=TEXT_LIMIT)
    if wonda is not None:
        values |= _wonda_fields(wonda, check)
    else:  # a card from elsewhere: what its description writes in W++, PList or Ali:Chat goes to its place
        _read_conventions(values, extras)
    if not values.get("traits") and personality:
        values["traits"] = split_personality(personality) or []
    values.setdefault("traits", [])
    if personality and personality != ", ".join(values["traits"]):
        extras["personality"] = personality  # prose, or formatted its own way: give it back as written

    _read_book(data.get("character_book"), values, extras, check)
    values["card_extras"] = extras
    return values


def _wonda_fields(wonda: dict, check: Checker) -> dict:
    """The fields a card has no place for, from the card's `extensions.wonda` (Wonda's own export)."""
    return sheet_fields(wonda, "data.extensions.wonda.", check, description=False)


def sheet_fields(data: dict, path: str, check: Checker, *, description: bool = True) -> dict:
    """A character sheet's text, list and knowledge fields as Wonda writes them (its JSON, a card's
    `extensions.wonda`), each checked under `path`."""
    values = {}
    for key in TEXT_FIELDS:
        if description or key != "description":
            values[key] = check.text(data, key, path, limit=SHORT_LIMITS.get(key, TEXT_LIMIT))
    for key in LIST_FIELDS:
        values[key] = check.items(data, key, path)
    for key in LONG_LIST_FIELDS:
        values[key] = check.items(data, key, path, limit=TEXT_LIMIT)
    values["knowledge"] = check.mapping(data, "knowledge", path)
    return values


def _read_book(book: Any, values: dict, extras: dict, check: Checker) -> None:
    """The card's lore book: its entries become extra memories, its own settings stay in card_extras."""
    if book is None:
        return
    if not isinstance(book, dict):
        check.errors.append("data.character_book must be an object")
        return
    memories = check.memories(book.get("entries"), "data.character_book.entries")
    for i, memory in enumerate(memories):  # defaults that export adds back are not worth keeping
        card = memory["card"]
        for key, default in (("extensions", {}), ("enabled", True), ("insertion_order", i)):
            if key in card and card[key] == default:
                del card[key]
    values["extra_memories"] = memories
    settings = {k: v for k, v in book.items() if k != "entries" and not (k == "extensions" and v == {})}
    if settings:
        extras["character_book"] = settings


def _read_conventions(values: dict, extras: dict) -> None:
    """The description's W++ / PList lists into the sheet, its Ali:Chat examples into the example
    dialogue (how the character talks), its genre block into the card's scenario (card_text)."""
    parsed = split_description(values["description"], values["name"])
    if not parsed.found:
        return
    values["description"] = parsed.description
    for key, items in parsed.lists.items():
        values[key] = [item[:ITEM_LIMIT] for item in items]
    for key, text in parsed.texts.items():
        values[key] = text[:SHORT_LIMITS.get(key, TEXT_LIMIT)]
    if parsed.examples:
        extras["mes_example"] = "\n".join(filter(None, [extras.get("mes_example", ""), parsed.examples]))
    if parsed.scenario and not extras.get("scenario"):
        extras["scenario"] = parsed.scenario

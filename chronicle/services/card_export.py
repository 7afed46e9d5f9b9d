"""Export: a character as a SillyTavern Character Card V2 (JSON, or PNG with a `chara` chunk) and
as Wonda's own JSON, a scenario with its cast; what import (chronicle.services.cards) reads back."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

from PIL import Image, ImageDraw, ImageFont
from PIL.PngImagePlugin import PngInfo

from chronicle.models import Character, Scenario
from chronicle.services.portraits import portrait_image
from memory.api import sheet_fields

CARD_SPEC = "chara_card_v2"
WONDA_FORMAT = "wonda"
# A character's fields as memory's sheet lists them (a secret's items may be paragraphs, a trait's not).
TEXT_FIELDS = sheet_fields.CHARACTER_TEXT_FIELDS
LIST_FIELDS = sheet_fields.CHARACTER_LIST_FIELDS
LONG_LIST_FIELDS = sheet_fields.CHARACTER_LONG_LIST_FIELDS
# Card V2 string fields kept verbatim in card_extras (Wonda has no field of its own for them).
CARD_EXTRA_TEXT = ("first_mes", "mes_example", "scenario", "creator_notes", "system_prompt",
                   "post_history_instructions", "creator", "character_version")
CARD_EXTRA_LISTS = ("alternate_greetings", "tags")


def character_to_card(character: Character) -> dict:
    extras = dict(character.card_extras or {})
    data: dict[str, Any] = {
        "name": character.name,
        "description": character.description,
        "personality": extras.get("personality") or ", ".join(character.traits),
    }
    for key in CARD_EXTRA_TEXT:
        data[key] = extras.get(key, "")
    for key in CARD_EXTRA_LISTS:
        data[key] = list(extras.get(key, []))
    if character.extra_memories or "character_book" in extras:
        entries = []
        for i, memory in enumerate(character.extra_memories or []):
            entry = {"extensions": {}, "enabled": True, "insertion_order": i, **(memory.get("card") or {})}
            entry.update(keys=list(memory.get("keys") or []), content=memory["content"])
            entries.append(entry)
        data["character_book"] = {"extensions": {}, **extras.get("character_book", {}), "entries": entries}
    data["extensions"] = {
        **extras.get("extensions", {}),
        "wonda": {
            **{key: getattr(character, key) for key in TEXT_FIELDS if key != "description"},
            **{key: list(getattr(character, key)) for key in (*LIST_FIELDS, *LONG_LIST_FIELDS)},
            "knowledge": dict(character.knowledge or {}),
        },
    }
    return {"spec": CARD_SPEC, "spec_version": "2.0", "data": data}


def character_to_card_png(character: Character) -> bytes:
    """The card as SillyTavern keeps it: its picture (the character's portrait, else a plain one with
    its name) carrying the card in a `chara` text chunk."""
    image = portrait_image(character)
    if image is None:
        image = Image.new("RGB", (400, 600), (91, 75, 196))
        draw = ImageDraw.Draw(image)
        draw.text((200, 280), character.name[:24], fill="white", anchor="mm", font=ImageFont.load_default(size=36))
        draw.text((200, 330), (character.role or "Wonda character")[:40], fill=(236, 233, 251), anchor="mm",
                  font=ImageFont.load_default(size=18))
    info = PngInfo()
    payload = json.dumps(character_to_card(character), ensure_ascii=False).encode("utf-8")
    info.add_text("chara", base64.b64encode(payload).decode("ascii"))
    out = io.BytesIO()
    image.save(out, format="PNG", pnginfo=info)
    return out.getvalue()


def character_to_wonda(character: Character) -> dict:
    return {
        "name": character.name,
        **{key: getattr(character, key) for key in TEXT_FIELDS},
        **{key: list(getattr(character, key)) for key in (*LIST_FIELDS, *LONG_LIST_FIELDS)},
        "knowledge": dict(character.knowledge or {}),
        "extra_memories": list(character.extra_memories or []),
        "card_extras": dict(character.card_extras or {}),
    }


def character_export(character: Character) -> dict:
    return {"format": WONDA_FORMAT, "version": 1, "character": character_to_wonda(character)}


def scenario_export(scenario: Scenario) -> dict:
    cast = list(scenario.cast.all())
    return {
        "format": WONDA_FORMAT, "version": 1,
        "scenario": {
            "title": scenario.title, "location": scenario.location, "atmosphere": scenario.atmosphere,
            "time_of_day": scenario.time_of_day, "description": scenario.description,
            "user_name": scenario.user_name,
            "cast": [c.name for c in cast], "pair_notes": scenario.pair_notes or {},
            **({"pair_standing": scenario.pair_standing} if scenario.pair_standing else {}),
        },
        "characters": [character_to_wonda(c) for c in cast],
    } | ({"settings": scenario.run_settings} if scenario.run_settings else {})  # how it runs, as it came in

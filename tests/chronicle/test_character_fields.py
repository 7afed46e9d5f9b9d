"""A character's fields are listed once (memory's sheet): each is a field of a Character and of its sheet."""

from __future__ import annotations

import dataclasses

from chronicle.models import Character
from memory.api import CharacterSheet
from memory.forming.sheets import CHARACTER_FIELDS


def test_each_character_field_is_on_the_model_and_the_sheet():
    on_model = {f.name for f in Character._meta.get_fields()}
    on_sheet = {f.name for f in dataclasses.fields(CharacterSheet)}
    assert [name for name in CHARACTER_FIELDS if name not in on_model or name not in on_sheet] == []

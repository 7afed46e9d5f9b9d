"""A card that writes its character in W++, PList or Ali:Chat inside its description (SillyTavern's
default Seraphina does) is read into the sheet: lists to traits and values, example dialogue to how it
talks, the genre block to its scenario; what is left is the description, without any <START>."""

from __future__ import annotations

import json

import pytest

from chronicle.services.card_text import split_description
from chronicle.services.cards import card_import

SERAPHINA = """[Seraphina's Personality= "caring", "protective", "compassionate", "healing", "gentle", "warm"]
[Seraphina's body= "pink hair", "long hair", "amber eyes", "black sundress"]
<START>
{{user}}: "Describe your traits?"
{{char}}: *Seraphina's gentle smile widens.* "Traits, you say? I am a guardian of this enchanted forest, and a healer."
{{user}}: "Describe your body and features."
{{char}}: *Seraphina giggles softly.* "My hair is pink, as you can see, and my eyes are amber."
[Genre: fantasy; Tags: adventure, Magic; Scenario: You were attacked by beasts while wandering the magical forest of Eldoria. Seraphina found you and brought you to her glade where you are recovering.]"""

ARIA = """Aria keeps the lighthouse on the northern cape.
[character("Aria")
{
Species("Human")
Mind("curious" + "stubborn")
Personality("curious" + "kind")
Likes("old maps" + "strong tea")
Goal("find her brother")
Occupation("lighthouse keeper")
}]"""


def card(description: str, name: str, **data) -> bytes:
    return json.dumps({"spec": "chara_card_v2", "spec_version": "2.0",
                       "data": {"name": name, "description": description, **data}}).encode()


@pytest.mark.django_db
def test_seraphinas_plist_and_ali_chat_go_to_their_places(user):
    (seraphina,) = card_import(owner=user, raw=card(SERAPHINA, "Seraphina", personality="")).characters
    assert seraphina.traits == ["caring", "protective", "compassionate", "healing", "gentle", "warm"]
    assert seraphina.description == "Body: pink hair, long hair, amber eyes, black sundress."
    extras = seraphina.card_extras
    assert extras["mes_example"].startswith("<START>\n{{user}}: \"Describe your traits?\"")
    assert "giggles softly" in extras["mes_example"] and "[Genre" not in extras["mes_example"]
    assert extras["scenario"].startswith("Genre: fantasy; Tags: adventure, Magic; Scenario: You were attacked")
    sheet = seraphina.to_sheet()
    assert "<START>" not in sheet.description and "Describe your traits" not in sheet.description


@pytest.mark.django_db
def test_a_w_plus_plus_card_and_its_prose(user):
    (aria,) = card_import(owner=user, raw=card(ARIA, "Aria")).characters
    assert aria.description == "Aria keeps the lighthouse on the northern cape.\nSpecies: Human."
    assert aria.traits == ["curious", "stubborn", "kind"] and aria.values == ["old maps", "strong tea"]
    assert aria.goals == ["find her brother"] and aria.role == "lighthouse keeper"


@pytest.mark.django_db
def test_plain_prose_and_a_wonda_card_are_left_as_written(user):
    prose = "A guardian of the forest glade [she rarely leaves it]. Kind: to a fault."
    assert not split_description(prose, "Seraphina").found
    (plain,) = card_import(owner=user, raw=card(prose, "Seraphina")).characters
    assert plain.description == prose and plain.traits == []


def test_brackets_that_are_not_lists_stay_in_the_description():
    parsed = split_description("She hums old songs [as a lullaby: softly]. \n[OOC: keep her gentle, always]\n"
                               "[Mind: calm]", "Mira")
    assert parsed.lists == {"traits": ["calm"]}
    assert parsed.description == "She hums old songs [as a lullaby: softly]. \n[OOC: keep her gentle, always]"

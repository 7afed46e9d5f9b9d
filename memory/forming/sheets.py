"""Plain-data inputs for seeding (so `memory` never imports `chronicle`): JSON-serialisable dataclasses."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields


def _known(cls, data: dict) -> dict:
    names = {f.name for f in fields(cls)}
    return {key: value for key, value in (data or {}).items() if key in names}


@dataclass
class ExtraMemory:
    """A free memory (e.g. a SillyTavern character_book entry); its keys become canonical queries."""

    content: str
    keys: list[str] = field(default_factory=list)
    category: str = "lore"

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ExtraMemory":
        return cls(**_known(cls, data))


# A character's own fields, by shape, listed once: the sheet's, and those of the apps that build
# one (chronicle's Character, its forms and cards read them through memory.api).
CHARACTER_TEXT_FIELDS = ("role", "archetype", "description", "public_face", "background", "communication_style",
                         "decision_style")
CHARACTER_LIST_FIELDS = ("traits", "skills", "values", "goals")  # short items, one word or a few
CHARACTER_LONG_LIST_FIELDS = ("secrets",)  # items that may be paragraphs
CHARACTER_FIELDS = ("name", *CHARACTER_TEXT_FIELDS, *CHARACTER_LIST_FIELDS, *CHARACTER_LONG_LIST_FIELDS, "knowledge")


@dataclass
class CharacterSheet:
    name: str
    role: str = ""
    archetype: str = ""
    description: str = ""
    background: str = ""
    communication_style: str = ""
    decision_style: str = ""
    traits: list[str] = field(default_factory=list)
    skills: list[str] = field(default_factory=list)
    values: list[str] = field(default_factory=list)
    goals: list[str] = field(default_factory=list)
    knowledge: dict[str, str] = field(default_factory=dict)  # other's name -> what THIS character knows of them
    extra_memories: list[ExtraMemory] = field(default_factory=list)
    # What others know of this character by default; blank: its name and role only.
    public_face: str = ""
    # Seeded into this character's own memories only.
    secrets: list[str] = field(default_factory=list)
    # The card's greeting (SillyTavern first_mes), macros resolved: a simulation may open with it.
    first_mes: str = ""
    # Card text with no Wonda field of its own, macros resolved (seeding says where each goes):
    # the card's scenario, its example dialogue (mes_example) and a prose personality.
    card_scenario: str = ""
    mes_example: str = ""
    personality: str = ""

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "CharacterSheet":
        values = _known(cls, data)
        values["extra_memories"] = [
            item if isinstance(item, ExtraMemory) else ExtraMemory.from_dict(item)
            for item in values.get("extra_memories") or []
        ]
        for name in (*CHARACTER_LIST_FIELDS, *CHARACTER_LONG_LIST_FIELDS):
            values[name] = list(values.get(name) or [])
        values["knowledge"] = dict(values.get("knowledge") or {})
        return cls(**values)


@dataclass
class ScenarioSheet:
    title: str
    location: str = ""
    atmosphere: str = ""
    time_of_day: str = ""
    description: str = ""
    # How the cast stand with each other when the story starts, as the writer set it:
    # [{"agent": "Alex", "other": "Jordan", "trust": 0.5, "affinity": -0.2}] (−1..1; seeding writes them).
    relationships: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ScenarioSheet":
        return cls(**_known(cls, data))

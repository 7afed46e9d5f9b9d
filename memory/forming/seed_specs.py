"""Seed 000's gifted-memory tables, as plain specs (what to store, under which canonical queries)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.forming.chunking import chunk_text
from memory.forming.sheets import CharacterSheet, ScenarioSheet

BACKGROUND_CHUNK_CHARS = 300
SECRET_LABEL = "My secret: "  # how each of a sheet's secrets opens as its owner's memory

# Seed 000, "Character Memory Seeding" (goals added: the sheet has them and agents pursue them).
CHARACTER_QUERIES: dict[str, list[str]] = {
    # Seed 000's three, and the identity's role and archetype asked for in so many words.
    "identity": ["who am I?", "what is my identity?", "describe myself", "what is my role here?", "what part do I play?"],
    "background": ["what is my background?", "what is my history?"],
    "communication": ["how do I communicate?", "how do I speak?", "what is my communication style?"],
    "decision_style": ["how do I make decisions?", "what is my decision style?"],
    "traits": ["what are my traits?", "describe my personality"],
    "skills": ["what am I good at?", "what are my skills?"],
    "values": ["what do I value?", "what are my principles?"],
    "goals": ["what are my goals?", "what do I want?"],
    # Seeded into the owner's memories only: query_self(aspect="secrets") and "Who you are" reach
    # them; no tool reads another agent's "character" memories.
    "secrets": ["what are my secrets?", "what am I hiding?", "what must nobody find out?"],
}
# Seed 000, "Scenario Context Seeding".
SCENE_QUERIES: dict[str, list[str]] = {
    "location": ["where am I?", "what is the location?", "describe the scene"],
    "atmosphere": ["what's the atmosphere?", "what's the mood?", "describe the atmosphere"],
    "time": ["what time is it?", "when is this happening?"],
    "context": ["what is happening?", "what's the situation?"],
}
# How many memories "the whole sheet" is at most (query_self(), pre-populated "Who you are"): every
# category, secrets and card fields of a full sheet, plus a long background's chunks.
WHOLE_SHEET_K = 24
KNOWLEDGE_QUERIES = ["who is {name}?", "what do I know about {name}?", "describe {name}"]


@dataclass
class MemorySpec:
    agent: str
    kind: str
    category: str
    content: str
    keys: list[str] = field(default_factory=list)
    about: str = ""
    importance: float = 7.0
    related_goals: list[str] = field(default_factory=list)

    @property
    def identity(self) -> tuple:
        """What makes two gifted memories the same one (re-seeding keeps it untouched)."""
        return (self.agent, self.kind, self.category, self.about, self.content, tuple(self.keys))


def _sentence(text: str) -> str:
    text = " ".join((text or "").split())
    if text and text[-1] not in ".!?":
        text += "."
    return text


def _listing(label: str, items: list[str]) -> str:
    items = [" ".join(str(i).split()) for i in items if str(i).strip()]
    return f"{label}: {', '.join(items)}." if items else ""


def _long(text: str, limit: int = 9_000) -> list[str]:
    """One memory for a text that fits the store's limit (10,000 characters, less room for a
    prefix), else chunks of ~2,000 characters."""
    text = (text or "").strip()
    if not text:
        return []
    return chunk_text(text, 2000) if len(text) > limit else [text]


def _dialogue(example: str) -> str:
    """mes_example without SillyTavern's <START> separators (they mean nothing to the agent)."""
    lines = [line for line in (example or "").splitlines() if line.strip().upper() != "<START>"]
    return "\n".join(lines).strip()


def identity_text(sheet: CharacterSheet, *, person: str = "You are") -> str:
    """Archetype + description (seed 000), led by the name so "who am I?" answers with it."""
    head = f"{person} {sheet.name}"
    if sheet.role.strip():
        head += f", {' '.join(sheet.role.split())}"
    parts = [_sentence(head)]
    if sheet.archetype.strip():
        parts.append(_sentence(f"Archetype: {sheet.archetype.strip()}"))
    if sheet.description.strip():
        parts.append(_sentence(sheet.description))
    return " ".join(parts)


def other_text(other: CharacterSheet) -> str:
    """What anyone could tell about another character: its name, role and public face, nothing else.

    The description, background and secrets are the character's own. So is the archetype: it is
    the writer's label for the inner type ("the manipulator", "the traitor"), which the others
    could not see; a writer who wants it known writes it into the public face.
    """
    # "Sam: Junior accountant." as the header says one's own ("You are Sam: Junior accountant"): a role
    # is written as a title, and "Sam is Junior accountant." reads as broken.
    head = f"{other.name}: {' '.join(other.role.split())}" if other.role.strip() else other.name
    return " ".join(p for p in [_sentence(head), _sentence(other.public_face)] if p)


def character_specs(sheet: CharacterSheet, cast: list[CharacterSheet]) -> list[MemorySpec]:
    """All gifted memories of one character: its seven (+goals) categories, its secrets, the card's
    scenario and example dialogue, lore, and what it knows of others (their public face + notes)."""
    name = sheet.name
    specs: list[MemorySpec] = [
        MemorySpec(name, "character", "identity", identity_text(sheet), CHARACTER_QUERIES["identity"], importance=9.0)
    ]
    # The public face is what the others know of me; I know my own reputation too.
    if sheet.public_face.strip():
        specs.append(MemorySpec(name, "character", "identity", f"How others see me: {_sentence(sheet.public_face)}",
                                ["how do others see me?", "what do people say about me?"], importance=7.0))
    for chunk in chunk_text(sheet.background, BACKGROUND_CHUNK_CHARS):
        specs.append(MemorySpec(name, "character", "background", chunk, CHARACTER_QUERIES["background"]))
    # A card's scenario is where the character's story stands (SillyTavern sends it every turn):
    # filed with the background, so query_background, query_self and "Who you are" reach it.
    for chunk in _long(sheet.card_scenario):
        specs.append(MemorySpec(name, "character", "background", f"My situation: {chunk}",
                                CHARACTER_QUERIES["background"] + ["what is my situation?"], importance=8.0))
    # A card's example dialogue (mes_example) shows how the character talks: a communication memory.
    for chunk in _long(_dialogue(sheet.mes_example)):
        specs.append(MemorySpec(name, "character", "communication", f"How I speak, for example:\n{chunk}",
                                CHARACTER_QUERIES["communication"]))
    simple = [
        ("communication", _sentence(sheet.communication_style)),
        ("decision_style", _sentence(sheet.decision_style)),
        ("traits", " ".join(p for p in [_listing("My traits", sheet.traits),
                                        _sentence(f"My personality: {sheet.personality.strip()}")
                                        if sheet.personality.strip() else ""] if p)),
        ("skills", _listing("My skills", sheet.skills)),
        ("values", _listing("I value", sheet.values)),
        ("goals", _listing("My goals", sheet.goals)),
    ]
    for category, content in simple:
        if content:
            spec = MemorySpec(name, "character", category, content, CHARACTER_QUERIES[category])
            if category == "goals":
                spec.related_goals = [g.strip() for g in sheet.goals if g.strip()][:20]
            specs.append(spec)
    for secret in sheet.secrets:
        for chunk in _long(secret):
            specs.append(MemorySpec(name, "character", "secrets", f"{SECRET_LABEL}{chunk}", CHARACTER_QUERIES["secrets"],
                                    importance=8.0))
    for extra in sheet.extra_memories:
        for chunk in _long(extra.content, 10_000):
            if chunk:
                keys = list(dict.fromkeys(k.strip()[:300] for k in extra.keys if k.strip()))
                specs.append(MemorySpec(name, "semantic", (extra.category or "lore")[:50], chunk, keys, importance=6.0))
    # Knowledge of every other character in the cast, plus what the sheet says of anyone else.
    others = {other.name: other for other in cast if other.name != name}
    for other_name in list(others) + [n for n in sheet.knowledge if n not in others and n != name]:
        other = others.get(other_name)
        parts = [other_text(other)] if other else []
        known = sheet.knowledge.get(other_name, "").strip()
        if known:
            parts.append(_sentence(known))
        content = " ".join(p for p in parts if p) or f"{other_name} is someone I know."
        keys = [q.format(name=other_name) for q in KNOWLEDGE_QUERIES]
        specs.append(MemorySpec(name, "character_knowledge", "knowledge", content, keys, about=other_name, importance=6.0))
    return specs


def sheet_aspects(sheet: CharacterSheet) -> list[str]:
    """query_self's aspects this sheet gives its character memories in, in query_self's order: what
    there is to find out about oneself."""
    held = {spec.category for spec in character_specs(sheet, []) if spec.kind == "character"}
    return [aspect for aspect in CHARACTER_QUERIES if aspect in held]


def scenario_specs(scenario: ScenarioSheet) -> list[MemorySpec]:
    """Shared scene memories (agent blank): location, atmosphere, time, context."""
    fields = [
        ("location", "Location", scenario.location),
        ("atmosphere", "Atmosphere", scenario.atmosphere),
        ("time", "Time", scenario.time_of_day),
    ]
    specs = [
        MemorySpec("", "scene", category, _sentence(f"{label}: {value.strip()}"), SCENE_QUERIES[category])
        for category, label, value in fields
        if value.strip()
    ]
    context = " ".join(p for p in [_sentence(scenario.title) if scenario.title.strip() else "", _sentence(scenario.description)] if p)
    if scenario.description.strip():
        for chunk in chunk_text(context, 1000):
            specs.append(MemorySpec("", "scene", "context", f"Situation: {chunk}", SCENE_QUERIES["context"]))
    return specs

"""Seed 000's gifted-memory tables, as plain specs (what to store, under which canonical queries)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memory.chunking import chunk_text
from memory.sheets import CharacterSheet, ScenarioSheet

BACKGROUND_CHUNK_CHARS = 300

# Seed 000, "Character Memory Seeding" (goals added: the sheet has them and agents pursue them).
CHARACTER_QUERIES: dict[str, list[str]] = {
    "identity": ["who am I?", "what is my identity?", "describe myself"],
    "background": ["what is my background?", "what is my history?"],
    "communication": ["how do I communicate?", "how do I speak?", "what is my communication style?"],
    "decision_style": ["how do I make decisions?", "what is my decision style?"],
    "traits": ["what are my traits?", "describe my personality"],
    "skills": ["what am I good at?", "what are my skills?"],
    "values": ["what do I value?", "what are my principles?"],
    "goals": ["what are my goals?", "what do I want?"],
}
# Seed 000, "Scenario Context Seeding".
SCENE_QUERIES: dict[str, list[str]] = {
    "location": ["where am I?", "what is the location?", "describe the scene"],
    "atmosphere": ["what's the atmosphere?", "what's the mood?", "describe the atmosphere"],
    "time": ["what time is it?", "when is this happening?"],
    "context": ["what is happening?", "what's the situation?"],
}
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
    """What anyone could tell about another character: identity (archetype + description)."""
    head = f"{other.name} is {' '.join(other.role.split())}" if other.role.strip() else other.name
    parts = [_sentence(head)]
    if other.archetype.strip():
        parts.append(_sentence(f"Archetype: {other.archetype.strip()}"))
    if other.description.strip():
        parts.append(_sentence(other.description))
    return " ".join(parts)


def character_specs(sheet: CharacterSheet, cast: list[CharacterSheet]) -> list[MemorySpec]:
    """All gifted memories of one character: its seven (+goals) categories, lore, and knowledge of others."""
    name = sheet.name
    specs: list[MemorySpec] = [
        MemorySpec(name, "character", "identity", identity_text(sheet), CHARACTER_QUERIES["identity"], importance=9.0)
    ]
    for chunk in chunk_text(sheet.background, BACKGROUND_CHUNK_CHARS):
        specs.append(MemorySpec(name, "character", "background", chunk, CHARACTER_QUERIES["background"]))
    simple = [
        ("communication", _sentence(sheet.communication_style)),
        ("decision_style", _sentence(sheet.decision_style)),
        ("traits", _listing("My traits", sheet.traits)),
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
    for extra in sheet.extra_memories:
        for chunk in chunk_text(extra.content, 2000) if len(extra.content) > 10_000 else [extra.content.strip()]:
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

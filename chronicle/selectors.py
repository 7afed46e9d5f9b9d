"""Reads that span models: the home page summary and a preview bank's gifted memories, grouped."""

from __future__ import annotations

from dataclasses import dataclass, field

from django.core.exceptions import FieldDoesNotExist

from chronicle.models import Character, Scenario
from chronicle.simulation.run.models import Simulation
from memory.models import Memory

# Categories in the order a writer reads a character: who, history, manner, then the scene and others.
CATEGORY_ORDER = ["identity", "background", "communication", "decision style", "traits", "skills", "values",
                  "goals", "location", "atmosphere", "time", "context", "lore"]


@dataclass
class MemoryGroup:
    category: str
    memories: list = field(default_factory=list)


def _category_key(category: str) -> tuple[int, str]:
    return (CATEGORY_ORDER.index(category) if category in CATEGORY_ORDER else len(CATEGORY_ORDER), category)


def preview_groups(*, bank, agent: str | None = None) -> list[MemoryGroup]:
    """Active memories of a bank grouped by category (knowledge of others last), keys prefetched."""
    if bank is None:
        return []
    memories = Memory.objects.in_bank(bank).active().prefetch_related("keys").order_by("agent", "id")
    if agent is not None:
        memories = memories.for_agent(agent)
    groups: dict[str, MemoryGroup] = {}
    for memory in memories:
        label = f"knowledge of {memory.about}" if memory.about else (memory.category or memory.kind).replace("_", " ")
        groups.setdefault(label, MemoryGroup(category=label)).memories.append(memory)
    return sorted(groups.values(), key=lambda g: (g.category.startswith("knowledge of"), _category_key(g.category)))


def scenario_preview_sections(*, scenario: Scenario) -> list[tuple[str, list[MemoryGroup]]]:
    """One section for the scene (shared memories), then one per cast member."""
    bank = scenario.preview_bank
    if bank is None:
        return []
    sections = [("The scene", preview_groups(bank=bank, agent=""))]
    sections += [(c.name, preview_groups(bank=bank, agent=c.name)) for c in scenario.cast.all()]
    return sections


def home_summary(*, user) -> dict:
    characters = Character.objects.owned_by(user).select_related("preview_bank").order_by("-updated")
    scenarios = Scenario.objects.owned_by(user).select_related("preview_bank").prefetch_related("cast").order_by("-updated")
    return {"characters": list(characters[:12]), "scenarios": list(scenarios[:12]),
            "character_count": characters.count(), "scenario_count": scenarios.count(),
            "simulations": recent_simulations(user=user)}


def recent_simulations(*, user) -> list:
    return list(Simulation.objects.owned_by(user).order_by("-pk")[:5])


def run_settings_rows(*, settings: dict) -> list[tuple[str, str]]:
    """A scenario's run settings in words, as the run form names them: [(label, value)]."""
    rows = []
    for name, value in settings.items():
        try:
            field = Simulation._meta.get_field(name)
        except FieldDoesNotExist:  # a key the import refused is never stored; an old row may hold one
            continue
        label = str(field.verbose_name)
        if field.choices and not isinstance(value, (list, dict)):
            value = dict(field.flatchoices).get(value, value)  # "both" → "Both", as the run form says it
        if isinstance(value, bool):
            value = "yes" if value else "no"
        elif isinstance(value, (list, tuple)):
            value = ", ".join(map(str, value))
        elif isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        rows.append((label[:1].upper() + label[1:], str(value)))
    return rows

"""Characters and scenarios written by a writer; each has a preview memory bank (see services)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxLengthValidator
from django.db import models

from memory.sheets import CharacterSheet, ExtraMemory, ScenarioSheet
from wonda_site.querysets import OwnedQuerySet

TEXT_LIMIT = 10_000  # the memory store's content limit; longer text could not become one memory
ITEM_LIMIT = 200  # one trait / skill / value / goal


def _text(**kwargs) -> models.TextField:
    # TextField.max_length only reaches the form widget; the validator makes full_clean() enforce it.
    return models.TextField(blank=True, max_length=TEXT_LIMIT, validators=[MaxLengthValidator(TEXT_LIMIT)], **kwargs)


def _items() -> ArrayField:
    return ArrayField(models.CharField(max_length=ITEM_LIMIT), default=list, blank=True)


class Character(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="characters")
    name = models.CharField(max_length=100)
    role = models.CharField(max_length=200, blank=True)
    archetype = models.CharField(max_length=200, blank=True)
    description = _text()
    # What the rest of the cast knows of this character by default ("who is X?"); the description,
    # background and secrets stay its own. Blank: others know only its name and role.
    public_face = _text()
    background = _text()
    communication_style = _text()
    decision_style = _text()
    traits = _items()
    skills = _items()
    values = _items()
    goals = _items()
    # Seeded only into this character's own memories: nobody else can retrieve them (issue 13).
    secrets = ArrayField(models.TextField(max_length=TEXT_LIMIT), default=list, blank=True)
    # {other character's name: what this character knows about them}
    knowledge = models.JSONField(default=dict, blank=True)
    # SillyTavern character_book entries as [{"content": str, "keys": [str], "card": {...}}]
    extra_memories = models.JSONField(default=list, blank=True)
    # Card fields Wonda has no place for (first_mes, creator_notes, extensions...), given back on export
    card_extras = models.JSONField(default=dict, blank=True)
    preview_bank = models.ForeignKey("memory.MemoryBank", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="character_unique_name_per_owner",
                                    violation_error_message="You already have a character with this name."),
        ]

    def __str__(self) -> str:
        return self.name

    def to_sheet(self, *, extra_knowledge: dict[str, str] | None = None):
        """The memory app's plain-data view of this character (knowledge merged with scenario notes)."""
        knowledge = {k: v for k, v in (self.knowledge or {}).items() if v}
        for other, note in (extra_knowledge or {}).items():
            if not note:
                continue
            knowledge[other] = f"{knowledge[other]}\n{note}" if knowledge.get(other) else note
        return CharacterSheet(
            name=self.name, role=self.role, archetype=self.archetype, description=self.description,
            background=self.background, communication_style=self.communication_style,
            decision_style=self.decision_style, traits=list(self.traits), skills=list(self.skills),
            values=list(self.values), goals=list(self.goals), knowledge=knowledge,
            extra_memories=[ExtraMemory(content=e["content"], keys=list(e.get("keys") or []))
                            for e in (self.extra_memories or [])
                            if e.get("content") and (e.get("card") or {}).get("enabled", True) is not False],
        )


class Scenario(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="scenarios")
    title = models.CharField(max_length=200)
    location = _text()
    atmosphere = _text()
    time_of_day = models.CharField(max_length=200, blank=True)
    description = _text()
    # Who `{{user}}` means in imported card text when no character is being addressed.
    user_name = models.CharField("Name for {{user}}", max_length=100, blank=True)
    cast = models.ManyToManyField(Character, related_name="scenarios", blank=True)
    # {"Alex": {"Jordan": "what Alex knows about Jordan"}}
    pair_notes = models.JSONField(default=dict, blank=True)
    preview_bank = models.ForeignKey("memory.MemoryBank", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["title"]

    def __str__(self) -> str:
        return self.title

    def to_sheet(self):
        return ScenarioSheet(title=self.title, location=self.location, atmosphere=self.atmosphere,
                             time_of_day=self.time_of_day, description=self.description)

    def cast_sheets(self) -> list:
        return [c.to_sheet(extra_knowledge=(self.pair_notes or {}).get(c.name)) for c in self.cast.all()]


from chronicle.simulation.models import *  # noqa: E402,F401,F403  (simulation models live in their own module)
from chronicle.writing.models import *  # noqa: E402,F401,F403  (the writer's layer: entries, overrides, edits)

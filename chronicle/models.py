"""Characters and scenarios written by a writer; each has a preview memory bank (see services)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.core.validators import MaxLengthValidator
from django.db import models

from chronicle import macros
from memory.api import CharacterSheet, ExtraMemory, ScenarioSheet, sheet_fields
from core.querysets import OwnedQuerySet

TEXT_LIMIT = 10_000  # the memory store's content limit; longer text could not become one memory
ITEM_LIMIT = 200  # one trait / skill / value / goal


def _text(**kwargs) -> models.TextField:
    # TextField.max_length only reaches the form widget; the validator makes full_clean() enforce it.
    return models.TextField(blank=True, max_length=TEXT_LIMIT, validators=[MaxLengthValidator(TEXT_LIMIT)], **kwargs)


def _items() -> ArrayField:
    return ArrayField(models.CharField(max_length=ITEM_LIMIT), default=list, blank=True)


class CharacterQuerySet(OwnedQuerySet):
    def with_portrait_flag(self):
        """Each with `has_portrait`, without reading any picture."""
        return self.annotate(has_portrait=models.Exists(Portrait.objects.filter(character=models.OuterRef("pk"))))


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
    # Seeded only into this character's own memories: nobody else can retrieve them.
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

    objects = CharacterQuerySet.as_manager()

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="character_unique_name_per_owner",
                                    violation_error_message="You already have a character with this name."),
        ]

    def __str__(self) -> str:
        return self.name

    def to_sheet(self, *, extra_knowledge: dict[str, str] | None = None, user_name: str = macros.USER_ALONE):
        """The memory app's plain-data view of this character (knowledge merged with scenario notes).

        Card macros are resolved here, the one seam where card text becomes memories or a prompt:
        {{char}} is this character's name, {{user}} is `user_name` (see chronicle.macros); the model
        keeps the raw text for export.
        """
        def text(value: str) -> str:
            return macros.resolve(value or "", char=self.name, user=user_name)

        knowledge = {k: text(v) for k, v in (self.knowledge or {}).items() if v}
        for other, note in (extra_knowledge or {}).items():
            if not note:
                continue
            note = text(note)
            knowledge[other] = f"{knowledge[other]}\n{note}" if knowledge.get(other) else note
        extras = self.card_extras or {}
        return CharacterSheet(
            name=self.name, **{name: text(getattr(self, name)) for name in sheet_fields.CHARACTER_TEXT_FIELDS},
            **{name: [text(item) for item in getattr(self, name)] for name in sheet_fields.CHARACTER_LIST_FIELDS},
            secrets=[text(s) for s in self.secrets if s.strip()], knowledge=knowledge,
            extra_memories=[ExtraMemory(content=text(e["content"]), keys=[text(k) for k in e.get("keys") or []])
                            for e in self.lore_entries() if e["enabled"]],
            first_mes=text(extras.get("first_mes", "")), card_scenario=text(extras.get("scenario", "")),
            mes_example=text(extras.get("mes_example", "")),
            # A prose personality (kept in card_extras when it did not split into traits) is the
            # character's own too: seeding files it with the traits.
            personality=text(extras.get("personality", "")) if not self.traits else "",
        )

    def lore_entries(self) -> list[dict]:
        """extra_memories as rows to show and edit: content, keys, enabled (a card entry's own flag)."""
        return [{"index": i, "content": e.get("content") or "", "keys": list(e.get("keys") or []),
                 "enabled": (e.get("card") or {}).get("enabled", True) is not False}
                for i, e in enumerate(self.extra_memories or []) if e.get("content")]


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
    # How each stands with each other at the start: {"Alex": {"Jordan": {"trust": 0.5, "affinity": -0.2}}}.
    pair_standing = models.JSONField(default=dict, blank=True)
    # The run settings its file came with (a Wonda scenario's "settings"): what "Run this scenario" starts from.
    run_settings = models.JSONField(default=dict, blank=True)
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
                             time_of_day=self.time_of_day, description=self.description,
                             relationships=[{"agent": agent, "other": other, **values}
                                            for agent, row in (self.pair_standing or {}).items()
                                            for other, values in row.items()])

    def cast_sheets(self, cast: list[Character] | None = None) -> list:
        """The cast's sheets (this scenario's cast unless another list is given, e.g. a run's), each
        with its pair notes, and {{user}} resolved for each character (chronicle.macros)."""
        cast = list(self.cast.all()) if cast is None else list(cast)
        names = [c.name for c in cast]
        notes = self.pair_notes or {}
        return [c.to_sheet(extra_knowledge=notes.get(c.name),
                           user_name=macros.user_name_for(c.name, cast_names=names, user_name=self.user_name))
                for c in cast]


class Portrait(models.Model):
    """A character's picture (a PNG card's image) as a small PNG (chronicle.services.portraits): shown on
    its pages and the run page, given back as the picture of its exported card. Its own table, so that
    reading characters never reads their pictures."""

    character = models.OneToOneField(Character, on_delete=models.CASCADE, primary_key=True, related_name="portrait")
    png = models.BinaryField()
    updated = models.DateTimeField(auto_now=True)


from chronicle.simulation.run.models import *  # noqa: E402,F401,F403  (simulation models live in their own module)
from chronicle.writing.models import *  # noqa: E402,F401,F403  (the writer's layer: entries, overrides, edits)


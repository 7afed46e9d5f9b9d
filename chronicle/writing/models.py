"""The writer's layer over a run (issue 6): refined lines, per-turn retrieval overrides, edit history."""

from __future__ import annotations

from django.conf import settings
from django.db import models

__all__ = ["ChronicleEntry", "TurnOverride", "Edit"]


class ChronicleEntry(models.Model):
    """The writer's text of one turn's line; the generated `turn.utterance` is never overwritten."""

    turn = models.OneToOneField("chronicle.Turn", on_delete=models.CASCADE, related_name="entry")
    text = models.TextField(blank=True)
    annotation = models.TextField(blank=True)
    struck = models.BooleanField(default=False)
    starred = models.BooleanField(default=False)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "chronicle entries"

    def __str__(self) -> str:
        return f"Entry for {self.turn}"


class TurnOverrideQuerySet(models.QuerySet):
    def at(self, simulation, index: int):
        return self.filter(simulation=simulation, turn_index=index)


class TurnOverride(models.Model):
    """What the writer changed about one turn's retrieval, applied when that turn is (re)generated.

    Keyed by (simulation, turn index) rather than a Turn row: a branch carries the override of its
    first turn before that turn exists.
    """

    class Kind(models.TextChoices):
        EXCLUDE = "exclude", "Excluded memory"
        PIN = "pin", "Pinned memory"
        LINE = "line", "Line written by hand"

    simulation = models.ForeignKey("chronicle.Simulation", on_delete=models.CASCADE, related_name="overrides")
    turn_index = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    # A memory of the simulation's bank (kept as an id: memories are never deleted, only archived).
    memory_id = models.IntegerField(null=True, blank=True)
    content = models.TextField(blank=True)  # the memory's content when pinned/excluded, or the hand-written line
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                                   related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    objects = TurnOverrideQuerySet.as_manager()

    class Meta:
        ordering = ["simulation", "turn_index", "id"]
        constraints = [
            models.UniqueConstraint(fields=["simulation", "turn_index", "kind", "memory_id"],
                                    name="turnoverride_unique_memory",
                                    condition=models.Q(memory_id__isnull=False)),
            models.UniqueConstraint(fields=["simulation", "turn_index"], name="turnoverride_one_line",
                                    condition=models.Q(kind="line")),
        ]

    def __str__(self) -> str:
        return f"{self.kind} on turn {self.turn_index + 1}"


class EditQuerySet(models.QuerySet):
    def for_simulation(self, simulation):
        return self.filter(simulation=simulation)


class Edit(models.Model):
    """One change by a writer: enough to show it (who, when, before, after) and to undo it exactly."""

    class Target(models.TextChoices):
        MEMORY = "memory"
        LINE = "line"
        RETRIEVAL = "retrieval"

    simulation = models.ForeignKey("chronicle.Simulation", on_delete=models.CASCADE, related_name="edits")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                              related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    target_type = models.CharField(max_length=10, choices=Target.choices)
    target_id = models.IntegerField()  # memory id, turn id, or turn override id
    field = models.CharField(max_length=40)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    label = models.CharField(max_length=300, blank=True)  # "Turn 3 (Alex)", "Alex's memory #41"
    undoes = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="undone_by")

    objects = EditQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"{self.target_type} {self.target_id}.{self.field}"

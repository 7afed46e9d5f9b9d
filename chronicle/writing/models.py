"""The writer's layer over a run: refined lines and the edit history (a turn's overrides are an input
of the turn, so they live with simulations: chronicle.simulation.run.models.TurnOverride)."""

from __future__ import annotations

from django.conf import settings
from django.db import models

__all__ = ["ChronicleEntry", "Edit"]


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
    target_id = models.BigIntegerField()  # memory id, turn id, or turn override id
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

    @property
    def what(self) -> str:
        """The change in words: "struck out", "memories kept out of the turn", "importance"."""
        return WHAT.get((self.target_type, self.field), f"{self.field.replace('_', ' ')} changed")

    @property
    def before_shown(self):
        return _shown(self.field, self.before)

    @property
    def after_shown(self):
        return _shown(self.field, self.after)


WHAT = {
    ("line", "text"): "line edited", ("line", "annotation"): "note", ("line", "struck"): "struck out",
    ("line", "starred"): "starred", ("line", "line"): "line written by hand", ("line", "regenerate"): "regenerated",
    ("retrieval", "exclude"): "memories kept out of the turn", ("retrieval", "pin"): "memories pinned to the turn",
    ("memory", "content"): "memory text", ("memory", "importance"): "importance", ("memory", "tags"): "tags",
    ("memory", "status"): "status", ("memory", "created"): "memory formed",
    ("memory", "consolidation"): "memories consolidated into a summary",
    ("retrieval", "regenerate"): "regenerated into a new branch",
    ("retrieval", "line"): "line to say instead, at the next regeneration",
}
_FLAGS = {"struck": ("struck out", "not struck out"), "starred": ("starred", "not starred")}


def _shown(field: str, value):
    """A value as the history page shows it, in words: yes/no flags, memory ids as #12, a
    consolidation's {memory id: status} map as "active: #12, #13 · archived: #20"."""
    if value is None or value == "":
        return None
    if field in _FLAGS and isinstance(value, bool):
        return _FLAGS[field][0 if value else 1]
    if field in ("exclude", "pin") and isinstance(value, list):
        return ", ".join(f"#{pk}" for pk in value) if value else "none"
    if field == "tags" and isinstance(value, list):
        return ", ".join(str(tag) for tag in value) if value else "no tags"
    if field == "regenerate":
        return f"branch #{value}"
    if isinstance(value, dict) and value and all(isinstance(v, str) and str(k).isdigit() for k, v in value.items()):
        by_status: dict[str, list[str]] = {}
        for pk, status in value.items():
            by_status.setdefault(status, []).append(f"#{pk}")
        return " · ".join(f"{status}: {', '.join(ids)}" for status, ids in by_status.items())
    if isinstance(value, bool):
        return "yes" if value else "no"
    return value

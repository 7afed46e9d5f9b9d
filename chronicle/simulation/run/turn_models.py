"""A run's turns, every retrieval an agent made in one, and the writer's overrides of a turn
(imported by chronicle.simulation.run.models, which chronicle/models.py loads: code imports them from there)."""

from __future__ import annotations

from django.conf import settings
from django.db import models


# The note of a line the writer wrote (by hand in the inspector, or from a character's seat).
WRITER_LINE_NOTE = "Line written by the writer (no model call)."


class TurnQuerySet(models.QuerySet):
    def done(self):
        return self.filter(status=Turn.Status.DONE)


class Turn(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        SEAT = "seat", "Waiting for your line"  # a character the writer plays: no worker, no time-out

    simulation = models.ForeignKey("chronicle.Simulation", on_delete=models.CASCADE, related_name="turns")
    index = models.PositiveIntegerField()
    agent = models.CharField(max_length=100)
    utterance = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.RUNNING)
    error = models.TextField(blank=True)
    prompt_messages = models.JSONField(default=list, blank=True)  # exactly what was sent, tool rounds included
    usage = models.JSONField(default=dict, blank=True)  # {"prompt_tokens", "completion_tokens", "calls", "estimated"}
    full_definition_tokens = models.PositiveIntegerField(default=0)
    # The context window as the inspector shows it: per model call, its sections with token counts
    # and the provider's reported usage (turn_types.TurnOutcome.context).
    context = models.JSONField(default=dict, blank=True)
    # Who heard the words (the speaker included); [] on turns from before presence existed: everyone.
    heard_by = models.JSONField(default=list, blank=True)
    whisper_to = models.CharField(max_length=100, blank=True)
    note = models.TextField(blank=True)
    # Which attempt owns the turn: a redone turn gets a new token, so a slow old attempt cannot write it.
    claim = models.CharField(max_length=64, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)  # the Celery worker that ran (or runs) it
    heartbeat = models.DateTimeField(null=True, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)

    objects = TurnQuerySet.as_manager()

    class Meta:
        ordering = ["simulation", "index"]
        constraints = [
            models.UniqueConstraint(fields=["simulation", "index"], name="turn_unique_index_per_simulation"),
        ]

    def __str__(self) -> str:
        return f"Turn {self.number}: {self.agent}"

    @property
    def number(self) -> int:
        """Turn numbers as people (and episodic memories) count them: 1-based."""
        return self.index + 1

    @property
    def by_writer(self) -> bool:
        """The line is the writer's own, not a model's."""
        return WRITER_LINE_NOTE in (self.note or "")

    @property
    def prompt_tokens(self) -> int:
        return int((self.usage or {}).get("prompt_tokens") or 0)

    @property
    def completion_tokens(self) -> int:
        return int((self.usage or {}).get("completion_tokens") or 0)

    @property
    def duration_s(self) -> float | None:
        if self.started and self.finished:
            return (self.finished - self.started).total_seconds()
        return None


class Retrieval(models.Model):
    """One tool call or pre-population query: what the agent asked, what came back and why."""

    turn = models.ForeignKey(Turn, on_delete=models.CASCADE, related_name="retrievals")
    agent = models.CharField(max_length=100)
    tool = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict, blank=True)
    query = models.TextField(blank=True)
    filter = models.JSONField(default=dict, blank=True)
    results = models.JSONField(default=list, blank=True)  # RecallResult.snapshot() dicts
    # The tool's answer; the model reads it less its scores and echoes (tool_calls.for_model).
    response = models.JSONField(default=dict, blank=True)
    latency_ms = models.FloatField(default=0)
    # How the search found them: "exact" (a scan), "index" (the bank's vector index) or "cache" (kept
    # between turns); blank for a call that searched nothing (metrics: retrieval latency by path).
    path = models.CharField(max_length=10, blank=True)
    error = models.TextField(blank=True)
    order = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["turn", "order", "id"]

    def __str__(self) -> str:
        return f"{self.agent}: {self.tool}"


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
    memory_id = models.BigIntegerField(null=True, blank=True)
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

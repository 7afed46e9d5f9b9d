"""Simulations, their turns and every retrieval an agent made.

Simulation is here; which settings a run has is in run_settings.py, what they mean in run_checks.py;
Turn, Retrieval and TurnOverride are in turn_models.py."""

from __future__ import annotations

from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.utils.functional import cached_property

from chronicle.simulation.run import run_settings
from chronicle.simulation.run.run_checks import RunSettingsMixin
from chronicle.simulation.run.run_settings import DEFAULTS, MAX_TIMEOUT_S, MAX_TURNS
from memory.api import banks
from core.crypto import EncryptedTextField, decryption_error
from core.querysets import OwnedQuerySet

REFLECTING_STALE = timedelta(minutes=10)

__all__ = ["Simulation", "Turn", "Retrieval", "TurnOverride"]


# The fields' defaults are run_settings.RUN_SETTINGS'; these names stay because migrations call them.

def default_tool_set() -> list[str]:
    return run_settings.default("tool_set")


def default_reflection_threshold() -> float:
    return run_settings.default("reflection_threshold")


def default_consolidation_budget() -> int:
    return run_settings.default("consolidation_budget")


def default_association_weight() -> float:
    return run_settings.default("association_weight")


def parse_carry(text: str, *, cast: list[str]) -> dict[str, str]:
    """A sequel's "Alex: all / Jordan: reflections / Sam: none", one per line, as {name: mode} for the
    whole cast (all unless told); a bad line raises ValidationError naming it."""
    plan = {name: "all" for name in cast}
    for number, raw in enumerate((text or "").splitlines(), start=1):
        name, _, mode = raw.partition(":")
        name, mode = name.strip(), mode.strip().lower()
        if not raw.strip():
            continue
        if name not in plan or mode not in banks.CARRY_MODES:
            raise ValidationError(f"Line {number}: write “Name: all”, “Name: reflections” or “Name: none” "
                                  f"for someone in the cast ({', '.join(cast)}).")
        plan[name] = mode
    return plan

READING_PACE_S = 2.0  # a dry run's pace when it runs until the writer pauses it


def _key_hint(key: str) -> str:
    """A stored key as pages show it: its ends only."""
    if decryption_error(key):
        return "cannot be decrypted: enter it again"
    if not key:
        return ""
    return f"{key[:3]}…{key[-4:]}" if len(key) > 8 else "…"


class SimulationQuerySet(OwnedQuerySet):
    def active(self):
        return self.filter(status__in=Simulation.ACTIVE_STATUSES)



class StoryTimeField(models.DateTimeField):
    """A date and time in the story: in no time zone, so one given without a zone ("2025-01-13T09:00",
    from a file or the form's picker) is taken as it is written (stored as UTC), not as the server's."""

    def to_python(self, value):
        value = super().to_python(value)
        return value.replace(tzinfo=dt_timezone.utc) if isinstance(value, datetime) and value.tzinfo is None else value

class Simulation(RunSettingsMixin, models.Model):
    class Status(models.TextChoices):
        QUEUED = "queued"
        SEEDING = "seeding"
        RUNNING = "running"
        PAUSED = "paused"
        COMPLETED = "completed"
        FAILED = "failed"
        CANCELLED = "cancelled"

    class SpeakingOrder(models.TextChoices):
        ROUND_ROBIN = "round_robin", "Round-robin"
        MODEL_PICKS = "model_picks", "The model picks who speaks next"

    class RetrievalMode(models.TextChoices):
        TOOLS = "tools", "Tools"  # what each means: the run form's help (RETRIEVAL_MODE_HELP)
        PREPOPULATE = "prepopulate", "Pre-populate"
        BOTH = "both", "Both"

    class ImportanceScorer(models.TextChoices):
        HEURISTIC = "heuristic", "Heuristic (offline: goals · emotion · novelty)"
        LLM = "llm", "The run's model (one judgement after each line; dry runs use the heuristic)"

    class Provider(models.TextChoices):
        SCRIPTED = "scripted", "Scripted (dry run, offline)"
        OPENAI = "openai", "OpenAI-compatible server"
        REPLAY = "replay", "Replay (lines given in advance: a script or a recorded run)"

    ACTIVE_STATUSES = (Status.QUEUED, Status.SEEDING, Status.RUNNING)
    FINISHED_STATUSES = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="simulations")
    title = models.CharField(max_length=200, blank=True)
    scenario = models.ForeignKey("chronicle.Scenario", null=True, blank=True, on_delete=models.SET_NULL,
                                 related_name="simulations")
    # Taken at start so later edits to the scenario or its characters do not change a past run.
    scenario_snapshot = models.JSONField(default=dict, blank=True)
    cast_snapshot = models.JSONField(default=list, blank=True)
    bank = models.ForeignKey("memory.MemoryBank", null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="simulations")

    max_turns = models.PositiveIntegerField(
        default=DEFAULTS["max_turns"], validators=[MinValueValidator(1), MaxValueValidator(
            MAX_TURNS, message=f"A run has at most {MAX_TURNS:,} turns; to go on past that, start a sequel.")])
    speaking_order = models.CharField(max_length=16, choices=SpeakingOrder.choices, default=DEFAULTS["speaking_order"])
    retrieval_mode = models.CharField(max_length=16, choices=RetrievalMode.choices, default=DEFAULTS["retrieval_mode"])
    scoring = models.CharField(max_length=16, default=DEFAULTS["scoring"])
    weights = models.JSONField(default=DEFAULTS["weights"], blank=True)
    provider = models.CharField(max_length=16, choices=Provider.choices, default=DEFAULTS["provider"])
    base_url = models.URLField(max_length=500, blank=True)
    model = models.CharField(max_length=200, blank=True)
    # Stored (encrypted: core/crypto.py) so workers can call the server; pages only ever show
    # `api_key_hint`, exports and logs never carry it.
    api_key = EncryptedTextField("API key", max_length=500, blank=True)
    # A second, smaller model for the bookkeeping after each line (the judgement, with the reflections
    # and retellings that ride it), kept like the speakers' model; blank: the run's own model does it.
    bookkeeping_base_url = models.URLField("Bookkeeping model: base URL", max_length=500, blank=True)
    bookkeeping_model = models.CharField(
        "Bookkeeping model", max_length=200, blank=True,
        help_text="A smaller model for the judgement after each line (importance, feelings, facts, reflections), "
                  "on its own server. Blank: the run's model judges too.")
    bookkeeping_api_key = EncryptedTextField("Bookkeeping model: API key", max_length=500, blank=True)
    temperature = models.FloatField(default=DEFAULTS["temperature"], validators=[MinValueValidator(0), MaxValueValidator(2)])
    max_tokens = models.PositiveIntegerField(default=DEFAULTS["max_tokens"], validators=[MinValueValidator(16), MaxValueValidator(8000)])
    seed = models.IntegerField(null=True, blank=True)
    timeout_s = models.FloatField(default=DEFAULTS["timeout_s"], validators=[MinValueValidator(1), MaxValueValidator(MAX_TIMEOUT_S)])
    max_tool_calls = models.PositiveIntegerField(default=DEFAULTS["max_tool_calls"], validators=[MaxValueValidator(20)])
    # Seconds to wait before each line: lets a watcher follow a (fast) dry run as it unfolds.
    pace_s = models.FloatField(default=DEFAULTS["pace_s"], validators=[MinValueValidator(0), MaxValueValidator(30)])
    # The tools offered to agents (memory.recalling.tools.DEFAULT_SIMULATION_TOOLS unless the writer ticks more).
    tool_set = models.JSONField(default=default_tool_set, blank=True)
    # Query enhancement (seed 000 "Retrieval Enhancements"): each is measured in docs/memory.md.
    query_context = models.BooleanField("Add the scene and the last line to queries", default=DEFAULTS["query_context"])
    query_temporal = models.BooleanField("Boost memories of the turns a query names", default=DEFAULTS["query_temporal"])
    query_synonyms = models.BooleanField("Expand queries with synonyms", default=DEFAULTS["query_synonyms"])
    # Associations (seed 001's associate_memories, a reflection's evidence) followed one hop in the
    # agents' searches: a memory linked to a top result gains this × its score ("association").
    association_weight = models.FloatField(
        "Follow links between memories (weight)", default=default_association_weight,
        validators=[MinValueValidator(0), MaxValueValidator(1)],
        help_text="0–1; 0: off. A memory linked to one a search found (associate_memories, an insight's "
                  "evidence) joins the ranking with this share of that one's score.")
    # Prompt integration (seed 000): ask the agent to consult its memories before deciding, and to
    # say it is unsure when what came back is weak.
    consult_memories = models.BooleanField("Consult memories before deciding", default=DEFAULTS["consult_memories"])
    # How the tools are described to a model: exactly as offered (names, real parameters, the budget),
    # or seed 000's minimal prompt with the six tools it names (for writers who study discovery).
    tool_prompt = models.CharField(
        "How the tools are described", max_length=16, default=DEFAULTS["tool_prompt"],
        choices=[("exact", "Exactly as offered, with their parameters and the call budget"),
                 ("seed000", "A minimal prompt (six tools only): agents discover who they are")])
    confidence_gating = models.BooleanField("Say so when memories are weak", default=DEFAULTS["confidence_gating"])
    # Memory formation (seeds 000/002/003): how each heard line is scored, and which lines
    # a listener does not keep. The LLM scorer (the default) asks the run's model; the scripted provider
    # has no opinion, so its runs use the offline heuristic.
    # The duplicate filter is off by default: the scripted dry run says near-identical lines, which 0.97
    # drops (a 9-turn dry run kept 18 of 27 copies), changing what every dry run remembers.
    importance_scorer = models.CharField(
        "Importance scorer", max_length=16, choices=ImportanceScorer.choices, default=DEFAULTS["importance_scorer"],
        help_text="The model is asked once per listener per line, before the line is stored (at most 10 s a "
                  "line; past that, and when an answer has no number, the heuristic scores it).")
    capture_importance_floor = models.FloatField(
        "Forget lines below this importance", default=DEFAULTS["capture_importance_floor"], validators=[MinValueValidator(0), MaxValueValidator(10)],
        help_text="0–10; 0 keeps every line.")
    capture_duplicate_threshold = models.FloatField(
        "Near-duplicate threshold (cosine)", default=DEFAULTS["capture_duplicate_threshold"], validators=[MinValueValidator(0.5), MaxValueValidator(1)],
        help_text="A line this similar (0.5–1) to one the listener heard in its last 50 turns is not kept again; 1: off. Try 0.97.")
    capture_adaptive_duplicates = models.BooleanField(
        "Each listener's own duplicate threshold", default=False,
        help_text="Seed 003's dynamic threshold: a listener whose recent memories are varied drops a near-repeat "
                  "sooner (at most the threshold above; 0.97 when that is off, at least 0.8).")
    capture_only_concerning = models.BooleanField(
        "Remember only what concerns me", default=DEFAULTS["capture_only_concerning"],
        help_text="Listeners keep a line only if it is near their goals or identity; speakers keep their own lines.")
    # Reflection (seed 003): an agent reflects when the importance of its memories since its last
    # reflection reaches this (WONDA_REFLECTION_THRESHOLD sets the default for new runs).
    reflection_threshold = models.FloatField(
        "Reflect after this much importance", default=default_reflection_threshold,
        validators=[MinValueValidator(1), MaxValueValidator(100_000)],
        help_text="Summed importance of an agent's new memories (0–10 each) that makes it reflect; Generative Agents use 150.")
    # Consolidation (seeds 003, 004): past this many active lines of its own, an agent's old,
    # unimportant, similar lines are folded into summaries by a worker (undo in History). 0: never.
    consolidation_budget = models.PositiveIntegerField(
        "Consolidate beyond this many lines per agent", default=default_consolidation_budget,
        validators=[MaxValueValidator(1_000_000)],
        help_text="Memories kept per character: past this, old similar lines of little importance become "
                  "one summary each (the writer can undo it). 0: only when the writer asks, on the bank page.")
    # Who is in the room and what happens in it (chronicle.simulation.story.stage): "5: Sam enters",
    # "6: The lights go out.", one per line, each before a turn. Blank: everyone, all along.
    stage_directions = models.TextField(
        "Stage directions", blank=True,
        help_text="One per line, before a turn: “1: Sam is away”, “5: Sam enters”, “8: Jordan leaves”, "
                  "“6: The lights go out.” (seen by everyone present). Only those present hear a line.")
    # The scenario's clock: simulated minutes a turn takes. With one, a direction such as "9: Three
    # hours later" moves time on, and memories age by the time that passed (memory's decay and
    # recency), not only by turns. 0: no clock.
    minutes_per_turn = models.FloatField(
        "Minutes per turn (clock)", default=DEFAULTS["minutes_per_turn"], validators=[MinValueValidator(0), MaxValueValidator(24 * 60)],
        help_text="Simulated minutes one line takes; 0: no clock, memories age by turns. With a clock, a stage "
                  "direction like “9: Three hours later” ages every memory by those hours’ worth of turns.")
    # The story calendar (chronicle.simulation.story.calendar): when the story starts. Time then moves by the
    # clock and by the writer's skips ("The next day", "A new day: it is 1:56 pm on 8 May 2023").
    story_start = StoryTimeField(
        "Story starts at", null=True, blank=True,
        help_text="The date and time in the story at the first line (optional). Memories are dated by it, the "
                  "characters know the date, and they can ask for what happened “yesterday” or “in May”. "
                  "Without it, the first stage direction that names a date starts the calendar.")
    # Beliefs the writer plants, "Sam: Bella's is closing down. [false]" one per line
    # (chronicle.simulation.story.beliefs): they spread when their holder retells them.
    planted_beliefs = models.TextField(
        "Planted beliefs", blank=True,
        help_text="One per line: “Sam: Bella's is closing down next month. [false]” (no mark: true). Whoever "
                  "hears its holder retell it comes to believe it, with whom they heard it from.")
    # How characters twist what they hear, recall and link (memory.forming.distortion): "Jordan: paranoia",
    # "Jordan: depression", "Jordan: trauma (fire, smoke)", or the writer's own words, one per line.
    distortions = models.TextField(
        "Distortion filters", blank=True,
        help_text="One per line: “Jordan: paranoia” (hears threats), “Jordan: depression” (good memories come back "
                  "faint), “Jordan: trauma (fire, smoke)” (links what touches it), or your own: “Sam: hears every "
                  "compliment as mockery”. Each distorted memory keeps what was really said.")
    # A sequel (seed 000 "Persistence"): the run whose earned memories its characters carry in, and
    # what each carries ("all", "reflections", "none"; not listed: all). Blank: a fresh start.
    sequel_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="sequels",
                                  verbose_name="Sequel of")
    sequel_carry = models.TextField(
        "What each character carries over", blank=True,
        help_text="For a sequel, one per line: “Alex: all” (every memory earned in the first run), “Jordan: "
                  "reflections” (only its insights), “Sam: none”. A character not listed carries all.")
    # Who is reflecting now: {agent: ISO time its reflection was queued}; set and cleared by the
    # reflection tasks with single UPDATEs (chronicle.simulation.control.tasks), read by the live page, which
    # keeps polling after the last turn until the insights are in. Older than REFLECTING_STALE: lost.
    reflecting = models.JSONField(default=dict, blank=True, editable=False)
    # A character whose card greeting (first_mes) is turn 1, said without a model call; blank: none.
    greeting_by = models.CharField("Opening greeting by", max_length=100, blank=True)
    # The replay provider's lines, one per turn (chronicle.simulation.run.replay): who speaks, the model's
    # replies (tool calls, then the line). Blank for every other provider.
    script = models.JSONField(default=DEFAULTS["script"], blank=True)
    # Stop after this turn (paused, with the reason said): a writer running a scene up to a point,
    # evaluate_agents asking its probes there. Blank: run to the end.
    pause_after = models.PositiveIntegerField("Pause after turn", null=True, blank=True)
    # The characters the writer plays (chronicle.simulation.control.seats): at their turns the run waits for
    # the writer's line instead of calling a model.
    seats = models.JSONField(
        "Played by you", default=DEFAULTS["seats"], blank=True,
        help_text="Characters whose lines you write yourself: at their turns the run waits for you, showing what "
                  "they would remember. You can leave a seat at any time and the agent takes over.")
    # Set when the model refused tool calling: later turns go straight to pre-populated memories.
    tools_unsupported = models.BooleanField(default=False)

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED)
    step_once = models.BooleanField(default=False)  # "one more turn" on a paused run: pause again after it
    pause_reason = models.TextField(blank=True)
    error = models.TextField(blank=True)
    # Branches: a run that continues another from one of its turns.
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="branches")
    branch_turn = models.IntegerField(null=True, blank=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = SimulationQuerySet.as_manager()

    class Meta:
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return self.title or f"Simulation #{self.pk}"

    def get_absolute_url(self) -> str:
        return reverse("simulation_detail", args=[self.pk])

    def carry_plan(self) -> dict[str, str]:
        """What each cast member carries from the run this one is a sequel of (all unless told)."""
        return parse_carry(self.sequel_carry, cast=self.cast_names)

    @property
    def is_recorded(self) -> bool:
        """A replay of a model's own lines (a recorded run), not a writer's script."""
        return self.provider == self.Provider.REPLAY and any(line.get("recorded") for line in self.script or [])

    @property
    def provider_label(self) -> str:
        """Who writes the lines, in a writer's words (the run page's header)."""
        if self.provider == self.Provider.REPLAY:
            what = "Recorded: lines written by a model, replayed" if self.is_recorded else "Replay of a script"
            return f"{what} ({len(self.script or [])} lines)"
        if self.is_dry_run:
            return "scripted provider"
        return f"{self.model} at {self.base_url}"

    @property
    def runs_until_paused(self) -> bool:
        """Set to run until the writer pauses it ("Run until I pause" sets the ceiling as its end)."""
        return self.max_turns >= MAX_TURNS

    @property
    def turn_pace(self) -> float:
        """Seconds before each line: the run's pace; a dry run going on until the writer pauses it
        waits long enough for a line to be read (offline lines take milliseconds: twenty would pass
        before Pause could be pressed)."""
        if self.runs_until_paused and self.is_dry_run:
            return max(self.pace_s, READING_PACE_S)
        return self.pace_s

    @property
    def is_dry_run(self) -> bool:
        return self.provider == self.Provider.SCRIPTED

    @property
    def is_finished(self) -> bool:
        return self.status in self.FINISHED_STATUSES

    @property
    def is_live(self) -> bool:
        """Still changing on its own: the page keeps polling."""
        return self.status in self.ACTIVE_STATUSES

    @property
    def reflecting_now(self) -> list[str]:
        """The cast members whose queued reflection has not finished (a lost task counts for 10 minutes)."""
        now = timezone.now()
        names = []
        for name, queued in (self.reflecting or {}).items():
            when = parse_datetime(str(queued))
            if when is not None and now - when < REFLECTING_STALE:
                names.append(name)
        return sorted(names)

    @cached_property
    def seat_turn(self):
        """The turn waiting for the writer's line (a seated character's), or None."""
        if not self.seats or self.pk is None:
            return None
        return self.turns.filter(status=Turn.Status.SEAT).order_by("index").first()

    @property
    def polls(self) -> bool:
        """The run page keeps polling: the run is live, or insights are still coming after its last turn;
        not while it waits for the writer's line (the poll would swap away what is being typed)."""
        if self.status == self.Status.RUNNING and self.seat_turn is not None:
            return False
        return self.is_live or bool(self.reflecting_now)

    @property
    def api_key_hint(self) -> str:
        return _key_hint(self.api_key)

    @property
    def has_bookkeeping_model(self) -> bool:
        """The judgement after each line goes to a model of its own (a model run with one named)."""
        return self.provider == self.Provider.OPENAI and bool(self.bookkeeping_model and self.bookkeeping_base_url)

    @property
    def bookkeeping_api_key_hint(self) -> str:
        return _key_hint(self.bookkeeping_api_key)

    @property
    def cast_names(self) -> list[str]:
        return [c["name"] for c in self.cast_snapshot or []]


# Turns, retrievals and overrides live in their own module; imported here, after Simulation, so that
# `from chronicle.simulation.run.models import Turn` and chronicle/models.py's `import *` keep working.
from chronicle.simulation.run.turn_models import Retrieval, Turn, TurnOverride  # noqa: E402

"""Memory banks, memories, their canonical-query keys and the embedding cache."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.fields import ArrayField
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.core.exceptions import ValidationError
from django.core.validators import MaxLengthValidator, MaxValueValidator, MinLengthValidator, MinValueValidator
from django.db import models
from django.db.models.functions import Length
from core.querysets import OwnedQuerySet
from memory.fields import DeploymentVectorField

EMBEDDING_DIM = settings.EMBEDDING_DIM  # at import; code that may meet another size reads the setting
MAX_CONTENT_CHARS = 10_000
# Tags are labels for filtering, not content: 20 of up to 50 characters each is more than any
# writer's form, import or admin edit needs, and keeps a GIN-indexed array from becoming a text blob.
MAX_TAGS = 20
MAX_TAG_CHARS = 50


def validate_tags(value) -> None:
    """The count of tags (each tag's length is checked by the array's CharField)."""
    if value is not None and len(value) > MAX_TAGS:
        raise ValidationError(
            f"A memory has at most {MAX_TAGS} tags; this one has {len(value)}.", code="too_many_tags"
        )


class MemoryBank(models.Model):
    """One isolated space of memories; every query is scoped to one bank."""

    class SeedStatus(models.TextChoices):
        IDLE = "idle"
        PENDING = "pending"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    name = models.CharField(max_length=200)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="memory_banks"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    seed_status = models.CharField(max_length=10, choices=SeedStatus.choices, default=SeedStatus.IDLE)
    seed_done = models.PositiveIntegerField(default=0)
    seed_total = models.PositiveIntegerField(default=0)
    seed_error = models.TextField(blank=True)

    objects = OwnedQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.name} (#{self.pk})"

    @property
    def seed_percent(self) -> int:
        if self.seed_status == self.SeedStatus.DONE:
            return 100
        if not self.seed_total:
            return 0
        return max(0, min(100, int(100 * self.seed_done / self.seed_total)))


class MemoryQuerySet(models.QuerySet):
    def in_bank(self, bank):
        return self.filter(bank=bank)

    def for_agent(self, name: str):
        return self.filter(agent=name)

    def active(self):
        return self.filter(status=Memory.Status.ACTIVE)

    def gifted(self):
        return self.filter(source=Memory.Source.GIFTED)

    def before_turn(self, n: int):
        """Memories that existed before turn n: gifted ones (no turn) and those of earlier turns."""
        return self.filter(models.Q(turn__isnull=True) | models.Q(turn__lt=n))

    def about(self, name: str):
        return self.filter(about__iexact=name)


class Memory(models.Model):
    class Kind(models.TextChoices):
        CHARACTER = "character"
        SCENE = "scene"
        CHARACTER_KNOWLEDGE = "character_knowledge"
        EPISODIC = "episodic"
        SEMANTIC = "semantic"
        PROCEDURAL = "procedural"
        EMOTIONAL = "emotional"
        OBSERVATION = "observation"
        ACTION = "action"
        REFLECTION = "reflection"
        PLAN = "plan"
        # An agent's inner life (memory.living.plans): how its goals are going.
        GOAL_PROGRESS = "goal_progress"
        METACOGNITION = "metacognition"  # made beside a reflection: how its approach is working
        OPINION = "opinion"  # what it thinks of a person, with a confidence (memory.living.opinions)

    class Source(models.TextChoices):
        GIFTED = "gifted"
        EARNED = "earned"
        REFLECTION = "reflection"
        CONSOLIDATION = "consolidation"
        WRITER = "writer"

    class Status(models.TextChoices):
        ACTIVE = "active"
        ARCHIVED = "archived"
        CONSOLIDATED = "consolidated"

    bank = models.ForeignKey(MemoryBank, on_delete=models.CASCADE, related_name="memories")
    agent = models.CharField(max_length=100, blank=True, help_text="Blank: shared (scene) memory.")
    kind = models.CharField(max_length=32, choices=Kind.choices, default=Kind.SEMANTIC)
    category = models.CharField(max_length=50, blank=True)
    about = models.CharField(max_length=100, blank=True, help_text="The other character this memory is about.")
    turn = models.IntegerField(null=True, blank=True, help_text="Simulation turn; blank for gifted memories.")
    # The story's date and time when it was formed (a run with a story calendar), beside its turn.
    story_time = models.DateTimeField(null=True, blank=True, help_text="Story date and time; blank: none known.")
    speaker = models.CharField(max_length=100, blank=True)
    content = models.TextField(
        validators=[MinLengthValidator(1), MaxLengthValidator(MAX_CONTENT_CHARS)],
        help_text=f"1 to {MAX_CONTENT_CHARS:,} characters.",
    )
    embedding = DeploymentVectorField()
    importance = models.FloatField(default=5.0, validators=[MinValueValidator(0), MaxValueValidator(10)])
    emotional_valence = models.FloatField(default=0.0, validators=[MinValueValidator(-1), MaxValueValidator(1)])
    participants = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    location = models.CharField(max_length=200, blank=True)
    tags = ArrayField(models.CharField(max_length=MAX_TAG_CHARS), default=list, blank=True, validators=[validate_tags],
                      help_text=f"At most {MAX_TAGS} tags of up to {MAX_TAG_CHARS} characters each.")
    related_goals = ArrayField(models.CharField(max_length=300), default=list, blank=True)
    # Kept by services.accesses_record from MemoryAccess rows, for the ranking SQL to read in place.
    access_count = models.PositiveIntegerField(default=0)
    last_accessed_turn = models.IntegerField(null=True, blank=True)
    # The content changed and its vector has not been recomputed yet (a worker does it in about a
    # second): recall leaves it out meanwhile rather than find it by its old meaning.
    embedding_stale = models.BooleanField(default=False, db_default=False)  # db_default: SQL-filled bench banks
    decay_rate = models.FloatField(default=0.01, validators=[MinValueValidator(0)])
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.WRITER)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    evidence = models.ManyToManyField("self", symmetrical=False, blank=True, related_name="derived")
    metadata = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    # Lexical search (memory.recalling.lexical's BM25 stage): kept by PostgreSQL itself, so every write path
    # (bulk seeding, SQL-filled bench banks, edits) has it without a service remembering to.
    search = models.GeneratedField(
        expression=SearchVector("content", config="english"), output_field=SearchVectorField(), db_persist=True
    )

    objects = MemoryQuerySet.as_manager()

    class Meta:
        ordering = ["bank", "turn", "id"]
        verbose_name_plural = "memories"
        # Vector indexes are per bank, built for big banks only (memory.recalling.indexing): a table-wide HNSW
        # index served one bank among many slowly and incompletely, and cost every insert ~80 ms at
        # 400,000 rows (seeding 11 memories/s against 93 without it).
        indexes = [
            models.Index(fields=["bank", "agent", "kind", "category"], name="memory_bank_agent_kind_cat"),
            models.Index(fields=["bank", "kind", "category"], name="memory_bank_kind_cat"),
            models.Index(fields=["bank", "turn"], name="memory_bank_turn"),
            models.Index(fields=["bank", "about"], name="memory_bank_about"),
            models.Index(fields=["bank", "source", "status"], name="memory_bank_source_status"),
            GinIndex(fields=["tags"], name="memory_tags_gin"),
            GinIndex(fields=["search"], name="memory_search_gin"),
        ]
        constraints = [
            # Refused by the database too, not only by full_clean(): no path stores an empty or huge memory.
            models.CheckConstraint(
                condition=models.lookups.GreaterThanOrEqual(Length("content"), 1)
                & models.lookups.LessThanOrEqual(Length("content"), MAX_CONTENT_CHARS),
                name="memory_content_length",
            ),
            models.CheckConstraint(condition=models.Q(importance__gte=0, importance__lte=10), name="memory_importance_0_10"),
            models.CheckConstraint(
                condition=models.Q(emotional_valence__gte=-1, emotional_valence__lte=1), name="memory_valence_range"
            ),
        ]

    def __str__(self) -> str:
        who = self.agent or "scene"
        return f"[{who}/{self.kind}/{self.category or '-'}] {self.content[:60]}"

    def snapshot(self) -> dict:
        """What a record of this memory keeps (a retrieval, a pin), so it reads the same after edits."""
        return {"memory_id": self.pk, "content": self.content, "agent": self.agent, "kind": self.kind,
                "category": self.category, "turn": self.turn, "speaker": self.speaker,
                "importance_parts": (self.metadata or {}).get("importance"),  # memory.forming.importance's components
                "distortion": (self.metadata or {}).get("distortion"),  # memory.forming.distortion: what was really said
                "until_turn": (self.metadata or {}).get("superseded_turn"),  # a fact that stopped being true then
                "told": (self.metadata or {}).get("told")}  # a secret: whom its owner has told it, at which turn


class MemoryKey(models.Model):
    """A canonical query ("who am I?") that also leads to its memory: stored once, found many ways."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="keys")
    query = models.CharField(max_length=300)
    embedding = DeploymentVectorField()

    class Meta:
        ordering = ["memory", "id"]
        constraints = [models.UniqueConstraint(fields=["memory", "query"], name="memorykey_unique_query")]

    def __str__(self) -> str:
        return self.query


class Relationship(models.Model):
    """How one agent stands with another after a turn (memory.living.relationships): trust and affinity,
    −1..1, this row's change and why, and the memory of the line it rests on. The latest row per
    (agent, other) is the standing; the rows are its history (the run page charts them)."""

    bank = models.ForeignKey(MemoryBank, on_delete=models.CASCADE, related_name="relationships")
    agent = models.CharField(max_length=100)
    other = models.CharField(max_length=100)
    turn = models.IntegerField()
    trust = models.FloatField(validators=[MinValueValidator(-1), MaxValueValidator(1)])
    affinity = models.FloatField(validators=[MinValueValidator(-1), MaxValueValidator(1)])
    trust_change = models.FloatField(default=0.0)
    affinity_change = models.FloatField(default=0.0)
    reason = models.CharField(max_length=300, blank=True)
    evidence = models.ForeignKey(Memory, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["bank", "agent", "other", "turn", "id"]
        indexes = [models.Index(fields=["bank", "agent", "other", "turn"], name="relationship_pair_turn")]

    def __str__(self) -> str:
        return f"{self.agent} → {self.other} at turn {self.turn}: trust {self.trust:+.2f}, affinity {self.affinity:+.2f}"


class MemoryAccess(models.Model):
    """One recall of a memory at a turn (count: how many times in that turn). The log lets a branch
    from turn N start with the access counts the parent had at turn N, not those of its later turns."""

    memory = models.ForeignKey(Memory, on_delete=models.CASCADE, related_name="accesses")
    turn = models.IntegerField(null=True, blank=True)
    count = models.PositiveIntegerField(default=1)

    class Meta:
        indexes = [models.Index(fields=["memory", "turn"], name="memoryaccess_memory_turn")]

    def __str__(self) -> str:
        return f"memory #{self.memory_id} ×{self.count} at turn {self.turn}"


class TermStat(models.Model):
    """BM25 collection statistics of a bank's active memories per (agent, kind), kept by triggers
    (migration 0005) on every write, so a search needs no per-term counting: df per lexeme, and on
    the row whose term is "" the number of memories (df) and the sum of their lengths (length).

    bank_id is a plain column, not a foreign key: deleting a bank deletes its memories, whose
    triggers bring every count to 0 and remove the rows; no collector needs to know this table.
    """

    bank_id = models.BigIntegerField()
    agent = models.CharField(max_length=100)
    kind = models.CharField(max_length=32)
    term = models.TextField()
    df = models.BigIntegerField(default=0)
    length = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["bank_id", "agent", "kind", "term"], name="termstat_unique")]

    def __str__(self) -> str:
        return f"{self.bank_id}/{self.agent or 'scene'}/{self.kind}: {self.term or '(documents)'} {self.df}"


class EmbeddingCache(models.Model):
    """(model, sha256(text)) → vector: re-seeding and canonical queries cost no model call."""

    model = models.CharField(max_length=200)
    sha256 = models.CharField(max_length=64)
    vector = DeploymentVectorField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["model", "sha256"], name="embeddingcache_unique_model_sha")]

    def __str__(self) -> str:
        return f"{self.model}:{self.sha256[:12]}"


class BankMap(models.Model):
    """A bank's memory map (memory.measuring.projection): each active memory's place on the first two
    principal components of its vectors, kept until the memories change (`version`)."""

    bank = models.OneToOneField(MemoryBank, on_delete=models.CASCADE, related_name="map")
    version = models.CharField(max_length=100)
    points = models.JSONField(default=list)  # [[memory id, x, y], …], x and y in 0..1
    explained = models.JSONField(default=list)  # the two components' shares of the variance
    requested_at = models.DateTimeField(null=True, blank=True)  # a worker was asked to (re)compute it
    computed_at = models.DateTimeField(null=True, blank=True)
    seconds = models.FloatField(default=0.0)

    def __str__(self) -> str:
        return f"map of bank {self.bank_id} ({len(self.points)} points)"

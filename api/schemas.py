"""The HTTP API's input and output schemas (pydantic, through django-ninja): they validate every
request and are what /api/openapi.json shows.

Each field is checked by memory's own input rules (memory.services.validation), the ones the MCP
tools, the forms and the imports use: a NUL byte, a lone surrogate, a control character, a name
with nothing visible, a number PostgreSQL cannot hold or an unknown kind is a 400 naming the
field, before anything is written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from django.core.exceptions import ValidationError
from ninja import Schema
from pydantic import AfterValidator, Field, model_validator

from memory.api import DEFAULT_SCORING, SIMILARITY, limits, store_verbs
from memory.models import Memory

METADATA_KEYS_MAX = 50
METADATA_VALUE_LIMIT = 2_000


def _text(limit: int, required: bool = True, name: bool = False):
    def check(value: str) -> str:
        try:
            return limits.clean_text(value, "value", limit=limit, required=required, name=name)
        except ValidationError as exc:
            raise ValueError(" ".join(exc.message_dict["value"])) from None
    return AfterValidator(check)


def _kinds(value: list[str] | None) -> list[str] | None:
    try:
        return limits.clean_kinds(value) if value is not None else None
    except ValidationError as exc:
        raise ValueError(" ".join(exc.message_dict["kinds"])) from None


def _tag_mode(value: str) -> str:
    try:
        return store_verbs.tag_mode(value)
    except ValidationError as exc:
        raise ValueError(" ".join(exc.message_dict["tag_mode"])) from None


def _metadata(value: dict) -> dict:
    """Key-value pairs as seed 004 has them: text keys, plain values (text, numbers, true/false)."""
    if len(value) > METADATA_KEYS_MAX:
        raise ValueError(f"at most {METADATA_KEYS_MAX} keys; this has {len(value)}.")
    for key, item in value.items():
        try:
            limits.clean_text(key, "metadata", limit=limits.NAME_LIMIT, name=True)
            if isinstance(item, str):
                limits.clean_text(item, "metadata", limit=METADATA_VALUE_LIMIT, required=False)
        except ValidationError as exc:
            raise ValueError(f"{key[:40]!r}: {' '.join(exc.message_dict['metadata'])}") from None
        if not isinstance(item, str) and isinstance(item, (int, float)) and abs(item) > limits.INT_MAX:
            raise ValueError(f"{key}: a number between {-limits.INT_MAX:,} and {limits.INT_MAX:,}.")
    return value


def _status(value: str) -> str:
    if value not in Memory.Status.values:
        raise ValueError(f"use one of {', '.join(Memory.Status.values)}.")
    return value


Name = Annotated[str, _text(limits.NAME_LIMIT, name=True)]
OptionalName = Annotated[str, _text(limits.NAME_LIMIT, required=False, name=True)]
Text = Annotated[str, _text(limits.TEXT_LIMIT)]
OptionalText = Annotated[str, _text(limits.TEXT_LIMIT, required=False)]
Content = Annotated[str, _text(10**6)]  # memory.models.MAX_CONTENT_CHARS has the last word
Turn = Annotated[int, Field(ge=-limits.INT_MAX - 1, le=limits.INT_MAX)]
Importance = Annotated[float, Field(ge=0, le=10)]
Valence = Annotated[float, Field(ge=-1, le=1)]
Tags = Annotated[list[Annotated[str, _text(100, name=True)]], Field(max_length=50)]
Kinds = Annotated[list[str] | None, AfterValidator(_kinds)]
Kind = Annotated[str, AfterValidator(lambda v: _kinds([v])[0])]
TagMode = Annotated[str, AfterValidator(_tag_mode), Field(
    description="Any: a memory with one of the tags, or untagged; All: with every tag, or untagged; "
                "AnyStrict and AllStrict: the same, untagged memories left out. any, any_strict… read the same.")]
Metadata = Annotated[dict[str, str | int | float | bool], AfterValidator(_metadata), Field(
    description="Your key-value pairs; kept in the memory's metadata under \"given\".")]
Threshold = Annotated[float, Field(ge=-1, le=1, description="Cosine similarity to the query, at least this.")]
MaxResults = Annotated[int, Field(ge=1, le=limits.RECALL_K_MAX)]


class BankIn(Schema):
    name: Name


class BankOut(Schema):
    id: int
    name: str
    seed_status: str
    memories: int


class EntityIn(Schema):
    name: Name
    role: Annotated[str, _text(100, required=False, name=True)] = ""


class MemoryIn(Schema):
    content: Content
    agent: OptionalName = ""
    kind: Kind = "semantic"
    category: Annotated[str, _text(50, required=False, name=True)] = ""
    importance: Importance = 5.0
    turn: Turn | None = None
    about: OptionalName = ""
    emotional_valence: Valence = 0.0
    tags: Tags = []


class MemoryPatch(Schema):
    content: Content | None = None
    importance: Importance | None = None
    tags: Tags | None = None


class MemoryOut(Schema):
    id: int
    agent: str
    kind: str
    category: str
    content: str
    importance: float
    turn: int | None
    story_time: datetime | None  # the story's date and time (a run with a story calendar)
    speaker: str
    about: str
    emotional_valence: float
    source: str
    status: str
    tags: list[str]
    context: str = ""
    entities: list[dict] = []
    metadata: dict

    @staticmethod
    def resolve_context(memory) -> str:
        return (memory.metadata or {}).get("context", "")

    @staticmethod
    def resolve_entities(memory) -> list[dict]:
        return (memory.metadata or {}).get("entities", [])


class RetainIn(Schema):
    """Seed 004's retain (agent and content), or a line heard (speaker, text, listeners and turn)."""
    agent: Name | None = None
    content: Content | None = None
    kind: Kind = "episodic"
    importance: Importance = 5.0
    context: OptionalText = ""
    metadata: Metadata = {}
    entities: Annotated[list[EntityIn], Field(max_length=50)] = []
    tags: Tags = []
    speaker: Name | None = None
    text: Text | None = None
    listeners: Annotated[list[Name], Field(min_length=1, max_length=limits.RETAIN_LISTENERS_MAX)] | None = None
    turn: Turn | None = None
    scorer: str | None = "heuristic"
    # Seed 003's capture filters, for a line heard (as a run's settings name them).
    duplicate_threshold: Annotated[float, Field(gt=0, le=1)] | None = Field(
        None, description="A listener whose recent memories hold one at least this similar does not keep the line.")
    adaptive_duplicates: bool = Field(
        False, description="Each listener's own near-duplicate threshold: how close its recent memories usually "
                           "come to one another, at most duplicate_threshold (0.97 when not given), at least 0.8.")
    importance_floor: Importance = Field(0.0, description="A listener for whom the line scores below this does not keep it.")
    only_concerning: bool = Field(False, description="A listener the line does not concern does not keep it.")

    @model_validator(mode="after")
    def one_form(self):
        memory = self.agent is not None or self.content is not None
        line = self.speaker is not None or self.text is not None or self.listeners is not None
        if memory and line:
            raise ValueError("send either agent and content (one memory) or speaker, text, listeners and turn "
                             "(a line heard), not both.")
        if memory and (self.duplicate_threshold is not None or self.adaptive_duplicates or self.importance_floor
                       or self.only_concerning):
            raise ValueError("the capture filters (duplicate_threshold, adaptive_duplicates, importance_floor, "
                             "only_concerning) apply to a line heard, not to one memory.")
        if memory and (self.agent is None or self.content is None):
            raise ValueError("a memory needs both agent and content.")
        if not memory and (self.speaker is None or self.text is None or self.listeners is None or self.turn is None):
            raise ValueError("send agent and content (one memory), or speaker, text, listeners and turn (a line heard).")
        return self


class RecallIn(Schema):
    query: Text
    agent: Name | None = None
    kinds: Kinds = None
    tags: Tags = []
    tag_mode: TagMode = "any"
    min_importance: Importance | None = None
    similarity_threshold: Threshold = store_verbs.SIMILARITY_THRESHOLD
    max_results: MaxResults = store_verbs.MAX_RESULTS
    k: MaxResults | None = Field(None, description="Older name of max_results; wins when given.")
    scoring: str = DEFAULT_SCORING
    current_turn: Turn | None = None
    shared: bool = False
    associations: Annotated[float, Field(ge=0, le=1)] = 0.0
    fallback: Literal["none", "recent"] = Field(
        "none", description="recent: when nothing passes the similarity threshold, the agent's latest memories "
                            "under the same filter (kinds, tags, min_importance) instead, each found_by \"recent\".")


class ResultOut(Schema):
    rank: int
    score: float
    components: dict[str, float]
    matched_key: str | None
    found_by: str = Field("search", description="search, or recent: a stand-in when the search found nothing (fallback).")
    memory: MemoryOut


class ReflectIn(Schema):
    """With a query: seed 004's reflect (an answer in the agent's voice from its memories). Without:
    the agent reflects on what it lived lately and stores insights (seed 003)."""
    agent: Name
    turn: Turn | None = None
    query: Text | None = None
    context: OptionalText = ""
    tags: Tags = []
    tag_mode: TagMode = "any"
    similarity_threshold: Threshold = store_verbs.SIMILARITY_THRESHOLD
    max_results: MaxResults = store_verbs.MAX_RESULTS

    @model_validator(mode="after")
    def something_to_do(self):
        if self.query is None and self.turn is None:
            raise ValueError("send a query (an answer from the agent's memories) or a turn (insights stored at it).")
        return self


class ReflectOut(Schema):
    answer: str
    memories: list[ResultOut]
    insights: list[MemoryOut]


class ConsolidateIn(Schema):
    agent: Name
    query: Text | None = None
    context: OptionalText = ""
    tags: Tags = []
    tag_mode: TagMode = "any"
    threshold: Annotated[float, Field(ge=0, le=1)] = store_verbs.SIMILARITY_THRESHOLD
    before_turn: Turn | None = None
    by: Literal[SIMILARITY, "session"] = Field(
        SIMILARITY, description="similarity: groups of similar memories (seed 004). session: the agent's "
                                  "conversation sessions by story time (seed 003), each summarised as one memory.")
    session_minutes: Annotated[float, Field(gt=0, le=10_080)] = Field(
        60, description="by session: a session is every line within this many story minutes of its first.")
    min_lines: Annotated[int, Field(ge=2, le=1000)] = Field(3, description="by session: the fewest lines summarised.")
    before: datetime | None = Field(None, description="by session: only sessions ended by this story time.")


class ToolIn(Schema):
    agent: Name
    arguments: dict = {}
    current_turn: Turn | None = None


class MemoriesQuery(Schema):
    agent: OptionalName | None = None
    kind: Annotated[str | None, AfterValidator(lambda v: _kinds([v])[0] if v else v)] = None
    status: Annotated[str, AfterValidator(_status)] = "active"
    limit: Annotated[int, Field(ge=1, le=1000)] = 100
    offset: Annotated[int, Field(ge=0, le=limits.OFFSET_MAX)] = 0


class StatsOut(Schema):
    """Seed 002's MemoryStats of one agent, over its latest `sampled` active memories."""
    agent: str
    total: int
    sampled: int
    kinds: dict[str, int]
    average_importance: float
    distribution: dict[str, int] = Field(description="By seed 002's bands: routine ≤ 2, moderate ≤ 4, notable ≤ 6, "
                                                     "important ≤ 8, life-changing above.")
    high_importance_count: int
    importance_balance: float = Field(description="Entropy over the five bands, normalised: 0 all in one, 1 even.")
    diversity: float | None = Field(description="1 − the mean cosine similarity of every pair; null under two.")
    themes: list[str]
    themes_by: str = Field(description="model (the run's) or keywords (offline)")
    recent: list[MemoryOut]
    high_importance: list[MemoryOut]
    reflections: int = Field(description="Reflections the agent holds (all of them, not the sample).")
    reflections_per_day: float | None = Field(
        description="Seed 003's reflection frequency: reflections per story day its memories span (a day at least); "
                    "null when they carry no story time.")
    reflections_per_100_turns: float | None = Field(description="Reflections per 100 turns its memories span.")

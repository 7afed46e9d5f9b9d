"""What a search may return (MemoryFilter, as SQL over alias m) and what it returns (RecallResult)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields

from memory.models import Memory

# Seed 004's tag modes. any: a memory with one of the tags, or with no tag at all; all: with every
# one of the tags, or with no tag at all; the strict modes leave the untagged out. An untagged
# memory (most of a run's) is nobody's topic in particular, so the plain modes keep it in view.
TAG_MODES = ("any", "all", "any_strict", "all_strict")

@dataclass
class MemoryFilter:
    agent: str | None = None
    kinds: list[str] | None = None
    categories: list[str] | None = None
    about: str | None = None
    min_turn: int | None = None
    max_turn: int | None = None
    min_importance: float | None = None
    tags: list[str] | None = None
    tags_mode: str = "any"  # TAG_MODES: "any" | "all" | "any_strict" | "all_strict"
    participant: str | None = None
    sources: list[str] | None = None
    statuses: list[str] = field(default_factory=lambda: ["active"])
    # With an agent: also the shared memories (agent "": the scene, the writer's "for everyone").
    shared: bool = False
    ids: list[int] | None = None  # only these memories (association following re-ranks a few neighbours)

    def _values(self) -> dict:
        # Shallow (lists copied): dataclasses.asdict deep-copies, ~0.1 ms a call on every search.
        return {f.name: list(v) if isinstance(v := getattr(self, f.name), list) else v for f in fields(self)}

    def to_dict(self) -> dict:
        return {k: v for k, v in self._values().items() if v is not None and not (k == "shared" and not v)}

    @classmethod
    def from_dict(cls, data: dict) -> "MemoryFilter":
        return cls(**{k: v for k, v in (data or {}).items() if k in cls.__dataclass_fields__})

    def narrower_than_bank(self) -> bool:
        """True when anything beyond the bank and the status restricts the candidates."""
        return any(v not in (None, [], "", False) for k, v in self._values().items() if k not in {"statuses", "tags_mode"})

    def counted_by_termstat(self) -> bool:
        """True when memory_termstat holds this filter's BM25 statistics: active memories of a
        bank, by agent and kind, nothing else."""
        others = {k: v for k, v in self._values().items() if k not in {"agent", "kinds", "statuses", "tags_mode", "shared"}}
        return self.statuses == ["active"] and all(v in (None, [], "") for v in others.values())

    def agents(self) -> list[str] | None:
        """Whose memories: None for everyone's, else the agent's (and the shared ones)."""
        if self.agent is None:
            return None
        return [self.agent, ""] if self.shared and self.agent else [self.agent]

    def where(self, bank_id: int) -> tuple[str, list]:
        """SQL over alias m, and its parameters. A max_turn keeps gifted memories (they have no turn)."""
        clauses, params = ["m.bank_id = %s"], [bank_id]
        if self.agent is not None:
            if self.shared and self.agent:
                clauses.append("m.agent = ANY(%s)"); params.append([self.agent, ""])
            else:
                clauses.append("m.agent = %s"); params.append(self.agent)
        if self.kinds:
            clauses.append("m.kind = ANY(%s)"); params.append(list(self.kinds))
        if self.categories:
            clauses.append("m.category = ANY(%s)"); params.append(list(self.categories))
        if self.about:
            clauses.append("lower(m.about) = lower(%s)"); params.append(self.about)
        if self.min_turn is not None:
            clauses.append("m.turn >= %s"); params.append(int(self.min_turn))
        if self.max_turn is not None:
            clauses.append("(m.turn IS NULL OR m.turn <= %s)"); params.append(int(self.max_turn))
        if self.min_importance is not None:
            clauses.append("m.importance >= %s"); params.append(float(self.min_importance))
        if self.tags:
            op = "@>" if self.tags_mode.startswith("all") else "&&"
            tagged = f"m.tags {op} %s::varchar(50)[]"
            clauses.append(tagged if self.tags_mode.endswith("strict") else f"({tagged} OR m.tags = '{{}}')")
            params.append(list(self.tags))
        if self.participant:
            clauses.append("(%s = ANY(m.participants) OR m.speaker = %s)"); params += [self.participant, self.participant]
        if self.sources:
            clauses.append("m.source = ANY(%s)"); params.append(list(self.sources))
        if self.statuses:
            clauses.append("m.status = ANY(%s)"); params.append(list(self.statuses))
        if self.ids is not None:
            clauses.append("m.id = ANY(%s)"); params.append([int(i) for i in self.ids])
        clauses.append("NOT m.embedding_stale")  # edited, vector not yet recomputed: not found by its old meaning
        return " AND ".join(clauses), params


class Recalled(list):
    """recall()'s answer: its results, and `path`, how they were found ("exact", "index", or
    "cache" for a search over what only the writer makes, kept between turns). `in_front`: how many
    it found that were left out as already in front of the caller (its window, its prompt)."""

    def __init__(self, results=(), path: str = "exact", in_front: int = 0):
        super().__init__(results)
        self.path = path
        self.in_front = in_front


@dataclass
class RecallResult:
    memory: Memory
    rank: int
    score: float
    components: dict[str, float]
    matched_key: str | None
    reply: Memory | None = None  # a line that asks, with the next line, that answered it (memory.recalling.replies)
    found_by: str = "search"  # or "recent": nothing answered the query, the latest memories stand in (seed 002)

    def snapshot(self) -> dict:
        answered = {"reply": {"memory_id": self.reply.pk, "content": self.reply.content, "turn": self.reply.turn}} \
            if self.reply is not None else {}
        return self.memory.snapshot() | {
            "rank": self.rank, "score": round(self.score, 6),
            "components": {k: round(v, 6) for k, v in self.components.items()}, "matched_key": self.matched_key,
        } | answered | ({"found_by": self.found_by} if self.found_by != "search" else {})


def episode_context_text(previous: str, content: str) -> str:
    """The text of an episodic memory's in-reply-to key: the line before it, then the line."""
    return f"{previous} {content}"


EPISODE_WINDOW = 3  # a window key: a listener's three consecutive lines, a key of each of them


def episode_keys(content: str, earlier: list[tuple[int, str]]) -> list[tuple[str, list[int]]]:
    """A listener's new line's reply keys from its lines before it (id, content; the latest first):
    the pair (the line before, then this one), also a key of that line; and the window of the last
    EPISODE_WINDOW lines, also a key of the two before. Each as (text, the earlier lines it keys)."""
    keys = []
    if earlier:
        keys.append((episode_context_text(earlier[0][1], content), [earlier[0][0]]))
    if len(earlier) >= EPISODE_WINDOW - 1:
        window = earlier[:EPISODE_WINDOW - 1][::-1]
        keys.append((" ".join([*(text for _pk, text in window), content]), [pk for pk, _text in window]))
    return keys


def reranked(results, k: int | None = None) -> list[RecallResult]:
    """Results whose scores a step moved (a mood, a distortion, associations) in order again, best
    first (ties: the later turn, then the older row), the first k of them ranked 1…n."""
    ordered = sorted(results, key=lambda r: (-r.score, -(r.memory.turn or 0), r.memory.pk))[:k]
    for i, r in enumerate(ordered, start=1):
        r.rank = i
    return ordered

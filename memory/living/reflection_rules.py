"""When an agent reflects, on what, and which insights it keeps (seed 003's rules).

- Due: the importance of what it lived since its last reflection reaches the run's threshold
  (150 in Generative Agents) *and* it lived at least MIN_MEMORIES memories since (one shocking line
  is not a pattern), and at least SPACING turns passed since its last reflection. The story day's
  limit (three a day) needs the story calendar, so the caller applies it.
- Told who it is: its sheet (identity, traits, values, goals) is in every reflection prompt, so an
  insight is the character's own reading of what happened.
- Kept: an insight that cites at least MIN_CITED memories and is not a restatement of one of them
  (near in meaning to it, or its words inside it). A pattern rests on more than one line.

Settings (WONDA_REFLECTION_MIN_MEMORIES, WONDA_REFLECTION_SPACING, WONDA_REFLECTION_MIN_CITED) turn
each rule down: 1, 0 and 1 give the old behaviour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.db import connection

from memory.embedding.cache import embed_texts
from memory.embedding.errors import EmbeddingError
from memory.models import Memory, MemoryBank

# Near in meaning to one cited memory (all-MiniLM cosine): the same thing said again, a word or two changed.
RESTATEMENT_SIMILARITY = 0.9
# The sheet's parts a reflection is told, in this order: who it is, how it is, what it holds to, what it wants.
SHEET_CATEGORIES = ("identity", "traits", "values", "goals", "decision_style")
SHEET_CHARS = 900
# What an agent makes of its lines (a plan, a goal's progress: memory.living.plans): not lived again.
INNER_KINDS = ("plan", "goal_progress", "metacognition", "opinion")
_WORD = re.compile(r"[a-z0-9']+")


def min_memories() -> int:
    return int(getattr(settings, "REFLECTION_MIN_MEMORIES", 5))


def spacing() -> int:
    return int(getattr(settings, "REFLECTION_SPACING", 3))


def min_cited() -> int:
    return int(getattr(settings, "REFLECTION_MIN_CITED", 2))


@dataclass(frozen=True)
class Lived:
    """What an agent lived since its last reflection, as the checks after each turn read it."""

    importance: float = 0.0   # summed importance of its earned memories since (not what was drawn from a line)
    memories: int = 0         # how many those are
    earned: int = 0           # its active earned memories, all told (the consolidation budget's measure)
    last_turn: int | None = None  # the turn of its latest reflection

    def due(self, *, threshold: float, turn: int) -> bool:
        """Seed 003: enough importance, enough memories, far enough from the last reflection."""
        return (self.importance >= threshold and self.memories >= min_memories()
                and (self.last_turn is None or turn - self.last_turn >= spacing()))


def lived_since(bank: MemoryBank | int, agents: list[str]) -> dict[str, Lived]:
    """Per agent, in one statement (checked after every turn): see Lived."""
    if not agents:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            WITH last AS (
                SELECT agent, max(turn) AS turn FROM memory_memory
                 WHERE bank_id = %(bank)s AND agent = ANY(%(agents)s) AND kind = 'reflection' GROUP BY agent
            )
            SELECT m.agent,
                   coalesce(sum(m.importance) FILTER (WHERE (last.turn IS NULL OR m.turn > last.turn)
                                                      AND NOT m.metadata ? 'extracted' AND m.kind <> ALL(%(inner)s)), 0),
                   count(*) FILTER (WHERE (last.turn IS NULL OR m.turn > last.turn) AND NOT m.metadata ? 'extracted'
                                    AND m.kind <> ALL(%(inner)s)),
                   count(*) FILTER (WHERE m.status = 'active'),
                   max(last.turn)
              FROM memory_memory m LEFT JOIN last ON last.agent = m.agent
             WHERE m.bank_id = %(bank)s AND m.agent = ANY(%(agents)s) AND m.source = 'earned'
             GROUP BY m.agent
            """,
            {"bank": bank.pk if hasattr(bank, "pk") else int(bank), "agents": list(agents), "inner": list(INNER_KINDS)},
        )
        return {agent: Lived(float(since), int(count), int(earned), last)
                for agent, since, count, earned, last in cursor.fetchall()}


def reflections_due(bank: MemoryBank | int, agents: list[str], *, threshold: float, turn: int,
                    lived: dict[str, Lived] | None = None) -> list[str]:
    """Who of `agents` is due to reflect at `turn` (before the story day's limit), in their order."""
    lived = lived_since(bank, agents) if lived is None else lived
    return [name for name in agents if lived.get(name, Lived()).due(threshold=threshold, turn=turn)]


def sheets(bank: MemoryBank | int, agents: list[str]) -> dict[str, str]:
    """Each agent's sheet as a reflection is told it: its identity, traits, values and goals, one
    line each, the writer's words."""
    if not agents:
        return {}
    rows = (Memory.objects.filter(bank=bank, agent__in=agents, kind=Memory.Kind.CHARACTER,
                                  category__in=SHEET_CATEGORIES, status=Memory.Status.ACTIVE)
            .values_list("agent", "category", "content").order_by("id"))
    parts: dict[str, list[tuple[int, str]]] = {}
    for agent, category, content in rows:
        parts.setdefault(agent, []).append((SHEET_CATEGORIES.index(category), " ".join(content.split())))
    out = {}
    for agent, lines in parts.items():
        text = "\n".join(f"- {line}" for _order, line in sorted(lines, key=lambda item: item[0]))
        out[agent] = text if len(text) <= SHEET_CHARS else text[:SHEET_CHARS].rsplit(" ", 1)[0] + "…"
    return out


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def restates(insight: str, statement: str) -> bool:
    """The insight says no more than the statement: all its words are the statement's."""
    words = _words(insight)
    return bool(words) and words <= _words(statement)


def worthy(insights: list[tuple[str, list[int]]], pool: list[Memory], *,
           earlier: list[Memory] = ()) -> tuple[list[tuple[str, list[int]]], list[dict]]:
    """The insights worth keeping, and the others with why not ({"insight", "why"}): fewer than
    MIN_CITED statements cited, a restatement of one cited (its words within it, or near it in
    meaning), or an insight the agent already drew (`earlier`: its reflections so far; the same
    pattern found again on the same lines tells it nothing, and a recall would hand back both).
    Without the embedding model the words alone decide."""
    kept, dropped = [], []
    candidates = []
    for text, numbers in insights:
        cited = [n for n in dict.fromkeys(numbers) if 1 <= n <= len(pool)]
        if len(cited) < min_cited():
            dropped.append({"insight": text, "why": f"cites {len(cited)} of what it remembers; a pattern needs {min_cited()}"})
        elif any(restates(text, pool[n - 1].content) for n in cited):
            dropped.append({"insight": text, "why": "says again what one memory says"})
        elif any(restates(text, old.content) and restates(old.content, text) for old in earlier):
            dropped.append({"insight": text, "why": "already drawn from the same lines"})
        else:
            candidates.append((text, cited))
    if not candidates:
        return kept, dropped
    near, again = _nearest(candidates, pool, earlier)
    for (text, cited), similarity, repeat in zip(candidates, near, again):
        if similarity is not None and similarity >= RESTATEMENT_SIMILARITY:
            dropped.append({"insight": text, "why": f"says again what one memory says ({similarity:.2f} alike)"})
        elif repeat is not None and repeat >= RESTATEMENT_SIMILARITY:
            dropped.append({"insight": text, "why": f"already drawn ({repeat:.2f} alike to an earlier insight)"})
        else:
            kept.append((text, cited))
            if any(restates(text, other) and restates(other, text) for other, _c in kept[:-1]):
                kept.pop()
                dropped.append({"insight": text, "why": "already drawn from the same lines"})
    return kept, dropped


def _nearest(candidates: list[tuple[str, list[int]]], pool: list[Memory],
             earlier: list[Memory]) -> tuple[list[float | None], list[float | None]]:
    """Per insight, its cosine with the nearest memory it cites, and with the nearest earlier insight
    (None: no vectors to compare)."""
    ids = list({pool[n - 1].pk for _text, cited in candidates for n in cited} | {m.pk for m in earlier})
    stored = dict(Memory.objects.filter(pk__in=ids, embedding__isnull=False).values_list("pk", "embedding"))
    try:
        vectors = embed_texts([text for text, _cited in candidates])
    except EmbeddingError:
        return [None] * len(candidates), [None] * len(candidates)
    near: list[float | None] = []
    again: list[float | None] = []
    for vector, (_text, cited) in zip(vectors, candidates):
        sims = [_cosine(vector, stored[pool[n - 1].pk]) for n in cited if pool[n - 1].pk in stored]
        near.append(max(sims) if sims else None)
        olds = [_cosine(vector, stored[m.pk]) for m in earlier if m.pk in stored]
        again.append(max(olds) if olds else None)
    return near, again


def _cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32)
    norm = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / norm if norm else 0.0

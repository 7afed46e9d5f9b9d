"""How an agent feels (seeds 000/001: "emotional priming based on agent state", every memory's
`emotional_valence` and `related_goals`).

- A line's feeling: each listener's memory of it carries how the line made that listener feel
  (valence −1..1: the model's judgement of the line says it; without one, the offline judge's move of
  warmth and trust towards the speaker) and which of the listener's goals it touches (the line near a
  goal in meaning). So decay's emotion slow-down and the goal floor apply to lived lines too.
- A mood: what those feelings add up to, each fading by FADE a turn, through tanh, so it stays in
  −1..1 and drifts back to calm when nothing moves the agent. Its word is the model's for the latest
  feeling when the two agree, else the band's ("uneasy", "elated").
- Priming: a search for an agent in a mood raises the memories that match it (a low agent recalls
  the low moments more readily), by MOOD_WEIGHT × mood × valence, shown as the "mood" score part.

A run turns all of it off with its mood switch (the caller passes mood 0 and records no feelings).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from django.db import connection

from memory.embedding.cache import embed_texts
from memory.embedding.errors import EmbeddingError
from memory.living.reflection_rules import INNER_KINDS
from memory.living.relationships import MAX_STEP
from memory.models import Memory, MemoryBank, Relationship
from memory.recalling.filters import reranked

FADE = 0.75          # a feeling's weight a turn later: after ~8 turns a strong one is nearly spent
WINDOW = 12          # turns of feelings a mood reads
MOOD_WEIGHT = 0.15   # priming: the most a perfectly matching memory gains (mood ±1, valence ±1)
CALM = 0.08          # below this a mood is no mood
GOAL_TOUCH = 0.35    # cosine of a line to one of the listener's goals at which it touches that goal
FEELING_FLOOR = 0.05  # a line that moved a listener less than this left it as it was
BANDS = [(0.6, "elated"), (0.25, "glad"), (CALM, "at ease"), (-CALM, "calm"), (-0.25, "uneasy"),
         (-0.6, "upset")]


@dataclass(frozen=True)
class Mood:
    valence: float = 0.0
    word: str = "calm"

    @property
    def described(self) -> str:
        """"uneasy (−0.34)" as the inspector and the header show it."""
        return f"{self.word} ({self.valence:+.2f})"


def word_for(valence: float) -> str:
    for floor, word in BANDS:
        if valence >= floor:
            return word
    return "distraught"


def offline_feeling(affinity: float, trust: float, step: float = MAX_STEP) -> float:
    """The offline judge's reading of a line, as a feeling: its move of warmth, and half its move of
    trust, towards the speaker, as a share of the largest move (a line that hurts is felt)."""
    return round(max(-1.0, min(1.0, (affinity + 0.5 * trust) / step)), 3) if step else 0.0


def feel_line(*, bank: MemoryBank | int, memories: list[Memory], moved: list[Relationship],
              judged: dict[str, float] | None = None, words: dict[str, str] | None = None, vector=None) -> dict[str, float]:
    """What a line leaves in each listener's memory of it: its feeling (the model's `judged` where
    it gave one, else the offline judge's move towards the speaker, `moved`) and the goals it
    touches. Returns the feelings recorded."""
    feelings = {row.agent: offline_feeling(row.affinity_change, row.trust_change) for row in moved}
    feelings.update(judged or {})
    goals = goals_touched(bank, [m.agent for m in memories], vector)
    feelings_record(memories=memories, valences=feelings, words=words, goals=goals)
    return {name: value for name, value in feelings.items() if abs(value) >= FEELING_FLOOR}


def goals_touched(bank: MemoryBank | int, agents: list[str], vector) -> dict[str, list[str]]:
    """Per listener, its goals (from its sheet) that a line with this vector comes near in meaning."""
    if vector is None or not agents:
        return {}
    rows = Memory.objects.filter(bank=bank, agent__in=agents, kind=Memory.Kind.CHARACTER, category="goals",
                                 status=Memory.Status.ACTIVE).values_list("agent", "related_goals")
    goals = {agent: [g for g in listed if g.strip()] for agent, listed in rows if listed}
    texts = list(dict.fromkeys(g for listed in goals.values() for g in listed))
    if not texts:
        return {}
    try:
        vectors = dict(zip(texts, embed_texts(texts)))  # cached by text: a sheet's goals cost one encode a run
    except EmbeddingError:
        return {}
    line = np.asarray(vector, dtype=np.float32)
    line = line / (np.linalg.norm(line) or 1.0)
    out = {}
    for agent, listed in goals.items():
        near = [g for g in listed if float(line @ (vectors[g] / (np.linalg.norm(vectors[g]) or 1.0))) >= GOAL_TOUCH]
        if near:
            out[agent] = near
    return out


def feelings_record(*, memories: list[Memory], valences: dict[str, float], words: dict[str, str] | None = None,
                    goals: dict[str, list[str]] | None = None) -> int:
    """Each listener's memory of the line gets its feeling and the goals it touches (one UPDATE a
    memory that changes). Returns how many changed."""
    changed = 0
    for memory in memories:
        valence = valences.get(memory.agent, 0.0)
        touched = (goals or {}).get(memory.agent, [])
        word = (words or {}).get(memory.agent, "")
        if abs(valence) < FEELING_FLOOR and not touched:
            continue
        fields = {}
        if abs(valence) >= FEELING_FLOOR:
            memory.emotional_valence = round(max(-1.0, min(1.0, valence)), 3)
            fields["emotional_valence"] = memory.emotional_valence
            if word:
                memory.metadata = {**(memory.metadata or {}), "feeling": word}
                fields["metadata"] = memory.metadata
        if touched:
            memory.related_goals = list(dict.fromkeys([*memory.related_goals, *touched]))[:20]
            fields["related_goals"] = memory.related_goals
        Memory.objects.filter(pk=memory.pk).update(**fields)
        changed += 1
    return changed


def moods(bank: MemoryBank | int, agents: list[str], turn: int) -> dict[str, Mood]:
    """Each agent's mood at `turn` (after its lines up to it), in one statement; calm where nothing moved it."""
    if not agents:
        return {}
    with connection.cursor() as cursor:
        cursor.execute(
            """
            SELECT agent, sum(emotional_valence * power(%(fade)s, %(turn)s - turn)),
                   (array_agg(metadata ->> 'feeling' ORDER BY turn DESC, id DESC)
                        FILTER (WHERE metadata ? 'feeling'))[1],
                   (array_agg(emotional_valence ORDER BY turn DESC, id DESC) FILTER (WHERE metadata ? 'feeling'))[1]
              FROM memory_memory
             WHERE bank_id = %(bank)s AND agent = ANY(%(agents)s) AND source = 'earned' AND emotional_valence <> 0
               AND NOT metadata ? 'extracted' AND kind <> ALL(%(inner)s)
               AND turn > %(turn)s - %(window)s AND turn <= %(turn)s
             GROUP BY agent
            """,
            {"bank": bank.pk if hasattr(bank, "pk") else int(bank), "agents": list(agents), "fade": FADE,
             "turn": int(turn), "window": WINDOW, "inner": list(INNER_KINDS)})
        out = {}
        for agent, total, said, said_valence in cursor.fetchall():
            valence = round(math.tanh(float(total or 0.0)), 3)
            agree = said and said_valence is not None and abs(valence) >= CALM and (valence > 0) == (said_valence > 0)
            out[agent] = Mood(valence, said if agree else word_for(valence))
    return {agent: out.get(agent, Mood()) for agent in agents}


def prime(results: list, mood: float) -> list:
    """A search's results, those whose feeling matches the mood raised ("mood" score part), re-ranked."""
    if abs(mood) < CALM:
        return results
    changed = False
    for r in results:
        valence = r.memory.emotional_valence or 0.0
        if valence * mood > 0:
            gain = MOOD_WEIGHT * valence * mood
            r.score += gain
            r.components = {**r.components, "mood": round(gain, 6)}
            changed = True
    return reranked(results) if changed else results

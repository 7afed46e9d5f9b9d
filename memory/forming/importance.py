"""How much a heard line matters to each listener (seeds 000, 002) and whether it is kept (seed 003).

Two scorers, chosen per simulation:
- heuristic (offline, seed 000): 10 × (goal_relevance·0.4 + emotional_impact·0.3 + novelty·0.3),
  each component 0..1 — similarity to the listener's goals, a small shipped emotion lexicon, and
  how far the line is from the best match in what the listener already remembers (rescaled);
- llm (seed 002's 0–10 poignancy prompt) through a callable the caller passes in (memory does not
  know chronicle's providers); an answer that is not a clean number falls back to the first number
  in it, clamped, else to the heuristic; the raw answer is kept.

The line's vector comes from capture (embedded once); every listener's similarities come from one
SQL query (`nearest`), so scoring costs no model call and one round trip per line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from memory.embedding.cache import vector_cursor
from memory.models import MemoryBank

WEIGHTS = {"goal_relevance": 0.4, "emotional_impact": 0.3, "novelty": 0.3}  # seed 000
# MiniLM cosines between a line and a goal list sit in ~0.0–0.6: rescaled so an unrelated line
# reads ~0 and a line about the goal ~1 (raw cosine would squeeze every score into 2–4).
GOAL_SIM_LOW, GOAL_SIM_HIGH = 0.0, 0.45
# Novelty from the best similarity to what the listener remembers: lines of one conversation sit
# at ~0.4–0.8 with each other, so 1 − similarity would call nearly every line stale. At or above
# NOVEL_SIM_HIGH the line is old news (0); at or below NOVEL_SIM_LOW it is wholly new (1).
NOVEL_SIM_LOW, NOVEL_SIM_HIGH = 0.35, 0.95
# Episodic lines of the last this-many turns are what "near-duplicate" and novelty are checked
# against (seed 003: "recent" memories): the scan stays the same size however long the run.
DUPLICATE_WINDOW_TURNS = 50
# "Remember only what concerns me": raw cosine to the listener's goals or identity below this → not kept.
CONCERN_FLOOR = 0.15

# A small emotion lexicon (stems, weight 0..1): intense words count more. Shipped as code so the
# heuristic runs offline; matched on word starts, so "terrif" covers terrified / terrifying.
EMOTION_LEXICON: dict[str, float] = {
    # fear / threat
    "afraid": 0.8, "terrif": 1.0, "scared": 0.8, "fear": 0.8, "panic": 0.9, "danger": 0.8, "threat": 0.8,
    "worr": 0.6, "anxious": 0.6, "nervous": 0.5, "dread": 0.8, "horrif": 1.0,
    # anger
    "angry": 0.8, "furious": 1.0, "hate": 0.9, "rage": 1.0, "betray": 1.0, "lie": 0.5, "lied": 0.8,
    "liar": 0.9, "cheat": 0.8, "annoy": 0.4, "resent": 0.7, "outrage": 0.9,
    # sadness / loss
    "sad": 0.6, "cry": 0.7, "cried": 0.7, "tears": 0.7, "grief": 1.0, "griev": 1.0, "lonely": 0.7,
    "miss you": 0.7, "heartbr": 1.0, "died": 1.0, "dead": 0.9, "death": 1.0, "funeral": 1.0, "lost": 0.5,
    "sorry": 0.4, "regret": 0.7, "hurt": 0.7, "pain": 0.7,
    # joy / love
    "love": 0.8, "happy": 0.5, "joy": 0.7, "thrill": 0.7, "excit": 0.6, "delight": 0.6, "wonderful": 0.5,
    "proud": 0.6, "grateful": 0.6, "thank": 0.3, "adore": 0.8, "kiss": 0.8, "marr": 0.9, "engaged": 0.8,
    "pregnan": 1.0, "promise": 0.6, "forgive": 0.7,
    # surprise / shock
    "shock": 0.8, "surpris": 0.5, "unbeliev": 0.6, "secret": 0.7, "confess": 0.8, "never told": 0.8,
    "emergenc": 1.0, "help me": 0.8, "urgent": 0.7, "fired": 0.8, "quit": 0.6, "pregnant": 1.0,
}
_WORD_START = {stem: re.compile(r"\b" + re.escape(stem), re.IGNORECASE) for stem in EMOTION_LEXICON}

LLM_PROMPT = """Rate the importance of this memory for {name}:

Agent Profile:
{profile}

Memory to evaluate: {content}

Rate importance on a scale of 0-10:
• 0-2: Routine, mundane activity (walking, waiting, basic observations)
• 3-4: Moderate significance (regular social interactions, normal work)
• 5-6: Notable events (meaningful conversations, accomplishments, plans)
• 7-8: Important experiences (emotional moments, relationship changes, insights)
• 9-10: Life-changing events (major decisions, profound realizations, pivotal moments)

Consider:
- Emotional impact on the agent
- Relevance to agent's goals and personality
- Social significance and relationship impact
- Uniqueness or novelty of the experience
- Potential influence on future decisions

Return only the numeric score (0-10)."""  # seed 002, word for word

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_CLEAN_NUMBER = re.compile(r"^\s*-?\d+(?:\.\d+)?\s*(?:/\s*10)?\s*\.?\s*$")


@dataclass
class Nearest:
    """What one listener already holds, as seen from the new line (cosine similarities, -1..1)."""

    goals: float | None = None  # the gifted "goals" memory
    identity: float | None = None  # the gifted "identity" memory
    episodic: float | None = None  # the closest episodic memory of the window (novelty)
    recent: float | None = None  # the closest within DUPLICATE_WINDOW_TURNS
    recent_id: int | None = None
    profile: str = ""  # identity + goals text, for the LLM prompt


@dataclass
class Importance:
    score: float
    scorer: str
    goal_relevance: float
    emotional_impact: float
    novelty: float
    raw: str | None = None

    def as_metadata(self) -> dict:
        data = {"score": self.score, "scorer": self.scorer, "goal_relevance": self.goal_relevance,
                "emotional_impact": self.emotional_impact, "novelty": self.novelty}
        if self.raw is not None:
            data["raw"] = self.raw
        return data


@dataclass
class CaptureFilters:
    """Seed 003's capture filters; 0 / None / False: that filter is off."""

    importance_floor: float = 0.0
    duplicate_threshold: float | None = None
    only_concerning: bool = False
    # Seed 003's dynamic threshold (memory.forming.adaptive): each listener's own, at most duplicate_threshold.
    adaptive_duplicates: bool = False


@dataclass
class Skipped:
    """A listener that did not keep a line, and why (shown in the turn's note)."""

    agent: str
    reason: str  # "duplicate" | "importance" | "unconcerned"
    content: str
    similarity: float | None = None
    duplicate_of: int | None = None
    importance: float | None = None
    threshold: float | None = None  # the listener's own near-duplicate threshold (adaptive), when it had one

    def describe(self) -> str:
        line = self.content if len(self.content) <= 80 else self.content[:79] + "…"
        if self.reason == "duplicate":
            why = f"duplicate of #{self.duplicate_of}, {self.similarity:.2f}"
            if self.threshold is not None:
                why += f" ≥ {self.threshold:.2f}, its usual closeness"
        elif self.reason == "importance":
            why = f"importance {self.importance:.1f} below the floor"
        else:
            why = f"does not concern them, {self.similarity:.2f}"
        return f"“{line}” ({why})"


class Captured(list):
    """remember_utterance's answer: the kept memories (a list, as every caller expects) and, in
    `skipped`, what was not kept."""

    def __init__(self, memories=(), skipped=None):
        super().__init__(memories)
        self.skipped = list(skipped or [])


def _clamp(value: float, low: float = 0.0, high: float = 1.0) -> float:
    return max(low, min(high, value))


@lru_cache(maxsize=256)  # every listener scores the same line: 71 searches once, not once each
def emotional_impact(text: str) -> float:
    """Sum of the lexicon's weights for the stems the line contains (each once), plus a little for
    exclamation marks, capped at 1."""
    total = sum(weight for stem, weight in EMOTION_LEXICON.items() if _WORD_START[stem].search(text))
    total += 0.1 * min(text.count("!"), 3)
    return round(_clamp(total), 3)


def nearest(*, bank: MemoryBank, agents: Sequence[str], vector, turn: int) -> dict[str, Nearest]:
    """Per listener, the line's best similarity to its goals, its identity and its episodic memories:
    one aggregate statement for all listeners (exact scan of one bank's rows for these agents), each
    distance computed once and the vector bound in binary (the ORM inlined it as text and computed
    the distance once per aggregate: 8 ms a line against ~2)."""
    if not agents:
        return {}
    with vector_cursor() as cursor:
        cursor.execute(
            """
            WITH d AS (
                SELECT m.agent, m.id, m.kind, m.category, m.content, m.embedding <=> %(vec)s::vector AS distance,
                       (m.kind = 'character' AND m.category = 'goals') AS is_goal,
                       (m.kind = 'character' AND m.category = 'identity') AS is_identity,
                       (m.kind = 'episodic' AND m.turn < %(turn)s AND m.turn >= %(since)s) AS is_recent
                  FROM memory_memory m
                 WHERE m.bank_id = %(bank)s AND m.status = 'active' AND m.agent = ANY(%(agents)s)
                   AND ((m.kind = 'character' AND m.category IN ('goals', 'identity'))
                        OR (m.kind = 'episodic' AND m.turn < %(turn)s AND m.turn >= %(since)s))
            )
            SELECT agent,
                   min(distance) FILTER (WHERE is_goal),
                   min(distance) FILTER (WHERE is_identity),
                   min(distance) FILTER (WHERE is_recent),
                   (array_agg(id ORDER BY distance) FILTER (WHERE is_recent))[1],
                   coalesce(array_agg(content ORDER BY category) FILTER (WHERE is_goal OR is_identity), '{}')
              FROM d GROUP BY agent
            """,
            {"vec": np.asarray(vector, dtype=np.float32), "turn": turn, "since": turn - DUPLICATE_WINDOW_TURNS,
             "bank": bank.pk if isinstance(bank, MemoryBank) else int(bank), "agents": list(agents)},
            prepare=False,
        )
        rows = cursor.fetchall()

    def sim(distance):
        return None if distance is None else 1.0 - float(distance)

    return {
        agent: Nearest(goals=sim(goals), identity=sim(identity), episodic=sim(recent), recent=sim(recent),
                       recent_id=recent_id, profile="\n".join(profile or []))
        for agent, goals, identity, recent, recent_id, profile in rows
    }


def profiles(*, bank: MemoryBank | int, agents: Sequence[str]) -> dict[str, str]:
    """Per listener, its identity and goals (what nearest() gives as `profile`), read without the
    line's vector: a model can judge the line while its vector is still being made."""
    if not agents:
        return {}
    with vector_cursor() as cursor:
        cursor.execute(
            "SELECT agent, array_agg(content ORDER BY category, id) FROM memory_memory "
            "WHERE bank_id = %s AND status = 'active' AND agent = ANY(%s) AND kind = 'character' "
            "AND category IN ('goals', 'identity') GROUP BY agent",
            [bank.pk if isinstance(bank, MemoryBank) else int(bank), list(agents)])
        return {agent: "\n".join(lines) for agent, lines in cursor.fetchall()}


def heuristic_importance(*, text: str, near: Nearest) -> Importance:
    """Seed 000's formula; goal relevance falls back on the identity when the sheet has no goals."""
    goal_sim = near.goals if near.goals is not None else near.identity
    goal_relevance = 0.0 if goal_sim is None else _clamp((goal_sim - GOAL_SIM_LOW) / (GOAL_SIM_HIGH - GOAL_SIM_LOW))
    emotion = emotional_impact(text)
    novelty = 1.0 if near.episodic is None else _clamp((NOVEL_SIM_HIGH - near.episodic) / (NOVEL_SIM_HIGH - NOVEL_SIM_LOW))
    parts = {"goal_relevance": round(goal_relevance, 3), "emotional_impact": emotion, "novelty": round(novelty, 3)}
    score = 10 * sum(WEIGHTS[name] * value for name, value in parts.items())
    return Importance(score=round(_clamp(score, 0, 10), 2), scorer="heuristic", **parts)


def parse_llm_score(answer: str) -> float | None:
    """The first number in the answer, clamped to 0..10; None when there is none."""
    match = _NUMBER.search(answer or "")
    return None if match is None else _clamp(float(match.group()), 0, 10)


def llm_importance(*, name: str, text: str, near: Nearest, ask: Callable[[str], str]) -> Importance:
    """Seed 002's poignancy prompt; components are the heuristic's, so the writer sees both views.

    scorer reads "llm" for a clean number, "llm-parsed" when it was dug out of prose or clamped, and
    "heuristic-fallback" when there was none or the call failed; `raw` keeps what the model said.
    """
    base = heuristic_importance(text=text, near=near)
    prompt = LLM_PROMPT.format(name=name, profile=near.profile or f"- Name: {name}", content=text)
    try:
        answer = str(ask(prompt) or "")
    except Exception as exc:  # a failed call must not lose the line: the heuristic scores it
        base.scorer, base.raw = "heuristic-fallback", f"error: {exc}"[:500]
        return base
    score = parse_llm_score(answer)
    base.raw = answer[:500]
    if score is None:
        base.scorer = "heuristic-fallback"
    else:
        base.score = round(score, 2)
        clean = _CLEAN_NUMBER.match(answer) and float(_NUMBER.search(answer).group()) == score
        base.scorer = "llm" if clean else "llm-parsed"  # "llm-parsed": dug out of prose, or clamped
    return base


def concerns(near: Nearest) -> float | None:
    """How much the line concerns the listener: best raw similarity to its goals or identity."""
    sims = [s for s in (near.goals, near.identity) if s is not None]
    return max(sims) if sims else None

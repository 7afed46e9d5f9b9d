"""Seed 002's memory statistics of one agent (MemoryStats): how many it holds and of which kinds, its
importance by seed 002's five bands with their balance, how varied its memories are, what they keep
coming back to, and its latest and most important ones. The analytics page and the API's
`/stats/<agent>` show them.

Read over the agent's latest SAMPLE active memories (seed 002 analyses a recent window, not a whole
life): bounded, so a 5,000-turn run's page costs what a 300-line one does.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from django.db.models import Count, F, Max, Min, Q

from memory.models import Memory, MemoryBank

SAMPLE = 300           # the latest active memories the figures read
LISTED = 10            # recent and high-importance memories listed
HIGH_IMPORTANCE = 7.0  # seed 002's high_importance_count: importance ≥ 7
THEME_SAMPLE = 20      # seed 002: themes from up to 20 memories of importance ≥ 6
THEMES = 5
# Seed 002's importance bands (its scoring prompt's), upper bounds inclusive.
BANDS = (("routine", 2.0), ("moderate", 4.0), ("notable", 6.0), ("important", 8.0), ("life-changing", 10.0))

THEMES_PROMPT = ("Analyze these memory excerpts and identify 5 main themes or patterns:\n\nMemories:\n{memories}\n\n"
                 "Identify the top 5 recurring themes, topics, or patterns. Return as a simple list:\n"
                 "1. Theme name\n2. Theme name\n...etc")

# Words any memory has: no theme of their own (the offline keyword fallback leaves them out).
COMMON = set("""
about above after again against also always another anything around asked away back been before being
below between both came cannot come comes could didn does doing done down during each even ever every
everything first from gets give goes going gone good have having hear heard here herself himself into
just know last left like little long look made make many maybe might more most much must myself need
never next nothing once only other over really right said same says should since some something still
such sure take tell than that their them then there these they thing things think this those though
told took very want well went were what when where which while will with without would your yours
today tonight yesterday tomorrow morning evening night time times said asked replied thought felt feel
""".split())
SPEAKER = re.compile(r"^[^:]{1,60}?\b(?:said|asked|replied|whispered|shouted)\b[^:]{0,40}:\s*")
WORD = re.compile(r"[A-Za-z][a-z'’-]{3,}")


@dataclass
class MemoryStats:
    agent: str
    total: int = 0                      # active memories the agent holds
    sampled: int = 0                    # of which the figures read the latest
    kinds: dict[str, int] = field(default_factory=dict)
    average_importance: float = 0.0
    distribution: dict[str, int] = field(default_factory=dict)  # seed 002's five bands
    high_importance_count: int = 0
    importance_balance: float = 0.0     # entropy over the bands, 0 (all in one) … 1 (even)
    diversity: float | None = None      # 1 − mean pairwise cosine; None under two memories
    themes: list[str] = field(default_factory=list)
    themes_by: str = "keywords"         # "model" or "keywords"
    recent: list[Memory] = field(default_factory=list)
    high_importance: list[Memory] = field(default_factory=list)
    # Seed 003's reflection frequency, over everything the agent holds (not the sample): per story
    # day when its memories carry story time (seed 003: 1–3 a day), and per 100 turns.
    reflections: int = 0
    reflections_per_day: float | None = None
    reflections_per_100_turns: float | None = None


def reflection_frequency(stats: MemoryStats, rows) -> None:
    """stats' reflection figures from the agent's active memories (`rows`): how many reflections,
    over the story days and the turns its memories span (a span under a day counts as one day,
    under 100 turns as 100: a first evening's two reflections are two a day, not forty)."""
    span = rows.aggregate(reflections=Count("id", filter=Q(kind=Memory.Kind.REFLECTION)), first=Min("story_time"),
                          last=Max("story_time"), low=Min("turn"), high=Max("turn"))
    stats.reflections = span["reflections"]
    if span["first"] is not None:
        days = max((span["last"] - span["first"]).total_seconds() / 86_400, 1.0)
        stats.reflections_per_day = round(stats.reflections / days, 3)
    if span["low"] is not None:
        stats.reflections_per_100_turns = round(100 * stats.reflections / max(span["high"] - span["low"] + 1, 100), 3)


def band(importance: float) -> str:
    return next((name for name, top in BANDS if importance <= top), BANDS[-1][0])


def importance_balance(importances: list[float]) -> float:
    """Seed 002's balance: the Shannon entropy of the band counts over log2(bands)."""
    counts = Counter(band(i) for i in importances)
    total = sum(counts.values())
    if not total:
        return 0.0
    entropy = -sum(n / total * math.log2(n / total) for n in counts.values() if n)
    return round(entropy / math.log2(len(BANDS)), 4)


def diversity(vectors: np.ndarray) -> float | None:
    """1 − the mean cosine over every pair: |Σu|² = n + Σ over ordered pairs, so O(n·d), not n²."""
    n = len(vectors)
    if n < 2:
        return None
    units = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    summed = units.sum(axis=0)
    mean = (float(summed @ summed) - n) / (n * (n - 1))
    return round(1.0 - mean, 4)


def keyword_themes(texts: list[str], *, leave_out: set[str] = frozenset(), n: int = THEMES) -> list[str]:
    """Offline themes: the words most memories share (each counted once a memory, in two at least),
    after who said it, the words any memory has and the names given in `leave_out`."""
    counts: Counter = Counter()
    for text in texts:
        words = {w.lower().strip("'’-") for w in WORD.findall(SPEAKER.sub("", text))}
        counts.update(w for w in words if w not in COMMON and w not in leave_out and not w.endswith(("'s", "’s")))
    return [word for word, seen in counts.most_common() if seen >= 2][:n]


def parse_themes(answer: str, n: int = THEMES) -> list[str]:
    """A model's numbered (or dashed) list, each item's name only."""
    found = []
    for line in (answer or "").splitlines():
        item = re.sub(r"^\s*(?:\d+[.)]|[-*•])\s*", "", line).split(":")[0].strip(" *\"'")
        if item and len(item) <= 80 and item.lower() not in {t.lower() for t in found}:
            found.append(item)
    return found[:n]


def memory_stats(bank: MemoryBank, agent: str, *, ask: Callable[[str], str] | None = None) -> MemoryStats:
    """The agent's MemoryStats; themes by the model (`ask`, prompt → answer) when given and it
    answers, else by keywords."""
    rows = Memory.objects.in_bank(bank).for_agent(agent).active()
    stats = MemoryStats(agent=agent, total=rows.count())
    reflection_frequency(stats, rows)
    latest = list(rows.order_by(F("turn").desc(nulls_last=True), "-id").only("id", "kind", "importance", "content", "turn", "embedding",
                                                    "speaker", "category", "agent", "story_time")[:SAMPLE])
    if not latest:
        return stats
    importances = [m.importance for m in latest]
    stats.sampled = len(latest)
    stats.kinds = dict(Counter(m.kind for m in latest).most_common())
    stats.average_importance = round(sum(importances) / len(importances), 3)
    stats.distribution = {name: 0 for name, _top in BANDS} | dict(Counter(band(i) for i in importances))
    stats.high_importance_count = sum(1 for i in importances if i >= HIGH_IMPORTANCE)
    stats.importance_balance = importance_balance(importances)
    stats.diversity = diversity(np.array([np.asarray(m.embedding, dtype=np.float32) for m in latest]))
    stats.recent = latest[:LISTED]
    stats.high_importance = sorted(latest, key=lambda m: (-m.importance, -(m.turn or 0), -m.pk))[:LISTED]
    sample = [m.content for m in latest if m.importance >= 6.0][:THEME_SAMPLE] or [m.content for m in latest[:50]]
    if ask is not None:
        try:
            stats.themes = parse_themes(ask(THEMES_PROMPT.format(memories="\n".join(f"- {t}" for t in sample))))
            stats.themes_by = "model"
        except Exception:  # a model that fails leaves the offline themes
            stats.themes = []
    if not stats.themes:
        names = {word.lower() for m in latest for who in (m.speaker, agent) for word in who.split()}
        stats.themes, stats.themes_by = keyword_themes(sample, leave_out=names), "keywords"
    return stats

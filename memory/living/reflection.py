"""Reflection (seed 003, Generative Agents §4.2): an agent's recent memories → salient questions →
retrieval for each → insights written as `reflection` memories with evidence links to what they rest on.

The model is any `ask(prompt) -> answer` callable, so this module knows no provider (nor chronicle).
A malformed answer yields fewer insights, never an exception: an insight is kept only when it cites
numbered statements that exist, at least two, and says more than any one of them
(memory.living.reflection_rules, with when an agent is due and the sheet it is told).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timezone as dt_timezone

from django.conf import settings
from django.db import transaction
from django.db.models import Count

from core import tracing
from memory.living.after_turn import REFLECT_POOL, REFLECT_STATEMENTS
from memory.models import Memory, MemoryBank
from memory.recalling.filters import MemoryFilter
from memory.living.metacognition import assess
from memory.living.reflection_rules import lived_since, sheets, worthy
from memory.recalling.search import recall
from memory.services.memories import memory_create

QUESTIONS = 3               # Generative Agents: "3 most salient high-level questions"
INSIGHTS = 5                # "5 high-level insights"
PER_QUESTION = 5            # memories retrieved for each question
REFLECTION_IMPORTANCE = 8.0  # seed 003: reflections are stored at high importance (typically 8-9)
MAX_INSIGHT_CHARS = 1000

# Seed 003: the agent's sheet in the prompt, so the questions and insights are its own ("What
# does this mean for keeping the orchard?"), not a stranger's summary. Not numbered: not citable.
SHEET_HEAD = "Who {agent} is (for context; not statements to cite):\n{sheet}\n\n"
QUESTIONS_PROMPT = (
    "{who}Statements about {agent}:\n{statements}\n\n"
    "Given only the information above, what are the {n} most salient high-level questions we can answer "
    "about the subjects in the statements? Answer with one question per line."
)
INSIGHTS_PROMPT = (
    "{who}Statements about {agent}:\n{statements}\n\n"
    "What {n} high-level insights can {agent} draw from the above statements, as {agent} would see it? "
    "Each must rest on at least two statements and say more than any one of them. "
    "Answer with one insight per line, citing the statements it rests on (example format: insight (because of 1, 5, 3))."
)

_BULLET = re.compile(r"^\s*(?:\d+\s*[.):]|[-*•])\s*")
_CITED = re.compile(r"\(\s*(?:because of|because|based on|from|statements?)?\s*:?\s*([\d,;\s&and#]+)\)\s*[.!]?\s*$",
                    re.IGNORECASE)


def _numbered(memories: list[Memory]) -> str:
    return "\n".join(f"{i}. {' '.join(m.content.split())}" for i, m in enumerate(memories, start=1))


def parse_questions(answer: str, limit: int = QUESTIONS) -> list[str]:
    questions = []
    for line in (answer or "").splitlines():
        text = _BULLET.sub("", line).strip().strip('"')
        if len(text) >= 5 and text not in questions:
            questions.append(text[:300])
    return questions[:limit]


def parse_insights(answer: str, count: int, limit: int = INSIGHTS) -> list[tuple[str, list[int]]]:
    """(insight, cited statement numbers within 1..count) per well-formed line, at most `limit`."""
    insights: list[tuple[str, list[int]]] = []
    for line in (answer or "").splitlines():
        match = _CITED.search(line)
        if not match:
            continue
        numbers = []
        for n in re.findall(r"\d+", match.group(1)):
            if 1 <= int(n) <= count and int(n) not in numbers:
                numbers.append(int(n))
        text = _BULLET.sub("", line[:match.start()]).strip().strip('"').strip()
        if numbers and text and all(text != seen for seen, _ in insights):
            insights.append((text[:MAX_INSIGHT_CHARS], numbers))
    return insights[:limit]


def statements_to_reflect(bank: MemoryBank, agent: str) -> list[Memory]:
    """What the judgement after a line gives an agent due to reflect, to reflect on in the same call:
    the most important of its latest lived memories (seed 003 reflects on what stood out, and an
    arrival or "an hour later" is no pattern), in the order lived, few enough that the call stays short."""
    latest = recent_memories(bank, agent, REFLECT_POOL)
    if len(latest) <= REFLECT_STATEMENTS:
        return latest
    order = {m.pk: place for place, m in enumerate(latest)}
    ranked = sorted(latest, key=lambda m: (-(m.importance or 0.0), -order[m.pk]))[:REFLECT_STATEMENTS]
    chosen = {m.pk for m in ranked}
    return [m for m in latest if m.pk in chosen]


def recent_memories(bank: MemoryBank, agent: str, recent: int = 100) -> list[Memory]:
    """What the agent lived (not what the writer gave it): its latest earned memories and reflections.
    Read as statements to reflect on (their text, cited by id), and read each turn a model judges
    the line while the agent is due: a hundred whole rows, vectors parsed, cost that turn ~10 ms."""
    rows = (Memory.objects.in_bank(bank).for_agent(agent).active().exclude(source=Memory.Source.GIFTED)
            .only("id", "agent", "content", "turn", "importance").order_by("-turn", "-id")[:recent])
    return list(reversed(rows))


def importance_since_last_reflection(bank: MemoryBank, agent: str) -> float:
    """Sum of the importance of the agent's earned memories formed after the turn of its latest reflection."""
    return importance_since_last_reflections(bank, [agent]).get(agent, 0.0)


def reflections_between(bank: MemoryBank, agents: list[str], start, end) -> dict[str, int]:
    """How many reflections each agent made in [start, end) of story time (a calendar's day)."""
    start, end = (t if t.tzinfo else t.replace(tzinfo=dt_timezone.utc) for t in (start, end))
    rows = (Memory.objects.filter(bank=bank, agent__in=agents, kind=Memory.Kind.REFLECTION, story_time__gte=start,
                                  story_time__lt=end).values("agent").annotate(n=Count("id")))
    return {row["agent"]: row["n"] for row in rows}


def importance_since_last_reflections(bank: MemoryBank, agents: list[str]) -> dict[str, float]:
    """importance_since_last_reflection for several agents in one query (checked after every turn)."""
    return {agent: since for agent, (since, _earned) in lifecycle_totals(bank, agents).items()}


def lifecycle_totals(bank: MemoryBank, agents: list[str]) -> dict[str, tuple[float, int]]:
    """Per agent, what the checks after each turn need, in one statement: the importance of its
    earned memories since its latest reflection (the reflection threshold's measure) and how many
    earned memories it has active (the consolidation budget's, memory.living.consolidation). A feeling or
    lesson drawn from a line (memory.forming.extraction) adds nothing to the first: the line it comes from
    was scored already, its emotion included. memory.living.reflection_rules.lived_since has the rest."""
    return {agent: (lived.importance, lived.earned) for agent, lived in lived_since(bank, agents).items()}


@tracing.traced("memory.reflect", **{"memory.source": "run"})
def reflect(bank: MemoryBank, agent: str, *, turn: int, ask: Callable[[str], str], recent: int = 100,
            metadata: dict | None = None) -> list[Memory]:
    """Ask `ask` for questions over the agent's recent memories, then for insights over what each
    question retrieves; store each insight as a reflection citing its evidence. Returns them."""
    memories = recent_memories(bank, agent, recent)
    if not memories:
        return []
    sheet = sheets(bank, [agent]).get(agent, "")
    who = SHEET_HEAD.format(agent=agent, sheet=sheet) if sheet else ""
    questions = parse_questions(ask(QUESTIONS_PROMPT.format(who=who, agent=agent, statements=_numbered(memories),
                                                            n=QUESTIONS)))
    if not questions:
        return []
    # The evidence pool: each question's best memories of this agent, once each, in retrieval order;
    # what it lived, as the statements were: an insight quoting its own sheet tells it nothing new.
    pool: list[Memory] = []
    lived = MemoryFilter(agent=agent, sources=[s for s in Memory.Source.values if s != Memory.Source.GIFTED])
    for question in questions:
        for result in recall(bank, question, filter=lived, k=PER_QUESTION, current_turn=turn):
            if all(result.memory.pk != m.pk for m in pool):
                pool.append(result.memory)
    if not pool:
        return []
    insights = parse_insights(ask(INSIGHTS_PROMPT.format(who=who, agent=agent, statements=_numbered(pool), n=INSIGHTS)),
                              len(pool))
    return insights_store(bank=bank, agent=agent, turn=turn, insights=insights, pool=pool,
                          metadata={**(metadata or {}), "questions": questions})


def insights_store(*, bank: MemoryBank, agent: str, turn: int, insights: list[tuple[str, list[int]]],
                   pool: list[Memory], metadata: dict | None = None, approach: str = "") -> list[Memory]:
    """Each insight worth keeping (reflection_rules.worthy: it cites two statements or more and says
    more than any one) as a reflection whose evidence is the statements it cites (1-based into
    `pool`). The metadata of the first says what was left out and why. Beside insights kept, the
    agent's metacognition (`approach`: the model's, else the rule's; memory.living.metacognition)."""
    earlier = list(Memory.objects.in_bank(bank).filter(agent=agent, kind=Memory.Kind.REFLECTION).only("pk", "content"))
    insights, dropped = worthy(insights, pool, earlier=earlier)
    created = []
    with transaction.atomic():
        for index, (text, numbers) in enumerate(insights):
            created.append(memory_create(
                bank=bank, agent=agent, content=text[:MAX_INSIGHT_CHARS], kind=Memory.Kind.REFLECTION,
                category="reflection", source=Memory.Source.REFLECTION, turn=turn, importance=REFLECTION_IMPORTANCE,
                evidence=[pool[n - 1].pk for n in numbers],
                metadata={**(metadata or {}), "cited": numbers, **({"not_kept": dropped} if dropped and not index else {})}))
        if created and getattr(settings, "METACOGNITION_ENABLED", True):
            assess(bank=bank, agent=agent, turn=turn, said=approach, reflections=created)
    return created

"""Memories formed in play besides the lines themselves (seed 000's extended types):

- an **emotional** reaction: a listener whose affinity towards the speaker a line moved by 0.1 or more
  (memory.living.relationships) keeps how it felt — valence from the move (±0.3 → ±1), its target the
  speaker (`about`), the line's memory as evidence;
- a **procedural** lesson: a speaker who draws one aloud ("next time…", "I've learned…", "never
  again…") keeps the sentence as a lesson;
- a **semantic** fact a listener learned, when the model's judgement after the line
  (memory.living.after_turn) names one: kept with the line's memory as evidence and whom it was heard from.

Agents form semantic facts, emotions (with valence and target) and lessons themselves with the
`form_memory` tool; these rules make the same kinds when the model does not. They run in a task
after the turn's commit (`extract_after_turn`, memory.tasks): the feelings are embedded off the
turn's path, as the in-reply-to keys are.
"""

from __future__ import annotations

import re

from django.db import transaction

from memory.embedding.cache import embed_texts
from memory.models import Memory, MemoryBank, Relationship
from memory.living.relationships import MAX_STEP
from memory.services.banks import bank_hold
from memory.services.memories import memory_create

# A lesson says what to do differently: "next time" leading into it ("Next time I'll check"), not a
# plan that ends on it ("I'll come next time"); "should have" of oneself, not "you should have seen it".
LESSON = re.compile(r"\b(?:next time(?=[ ,:;—-]+\w)|lesson|i(?:'ve| have)? learn(?:ed|t)|never again|from now on|"
                    r"(?:i|we) should(?:n't| not)? have|always check|note to self)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?]*[.!?]?")
_CLAUSE_START = re.compile(r"(?:^|[,;:—*-]|\b(?:so|and|but|then))\s*$", re.IGNORECASE)


# A move of warmth smaller than this is no feeling worth a memory ("was hurt by" for −0.05 overstates it).
REACTION_FLOOR = 0.1


def reactions_create(*, bank: MemoryBank, rows: list[Relationship], turn: int) -> list[Memory]:
    """An emotional memory for each listener whose affinity the line moved."""
    moved = [row for row in rows if abs(row.affinity_change) >= REACTION_FLOOR]
    texts = []
    for row in moved:
        feeling = "warmed to" if row.affinity_change > 0 else "was hurt by"
        quote = row.reason.split(": ", 1)[1].rsplit(" (", 1)[0] if ": " in row.reason else ""
        texts.append(f"{row.agent} {feeling} {row.other} at turn {turn}: {quote}".strip())
    vectors = embed_texts(texts) if texts else []  # one model call for every listener's reaction
    made = []
    for row, text, vector in zip(moved, texts, vectors):
        valence = max(-1.0, min(1.0, row.affinity_change / MAX_STEP))
        made.append(memory_create(
            bank=bank, agent=row.agent, kind="emotional", category="reaction", about=row.other, turn=turn,
            content=text, emotional_valence=round(valence, 3), importance=round(3 + 4 * abs(valence), 2),
            source="earned", speaker=row.other, evidence=[row.evidence_id] if row.evidence_id else [],
            embedding=vector, metadata={"extracted": "reaction"}))
    return made


def lesson_of(line: str) -> str:
    """The sentence of a line that draws a lesson, or ""."""
    for match in LESSON.finditer(line or ""):
        # The sentence holding the marker (a plain scan: a leading [^.!?]* in the pattern backtracked).
        start = max(line.rfind(c, 0, match.start()) for c in ".!?") + 1
        if match.group().lower() == "next time" and not _CLAUSE_START.search(line[start:match.start()]):
            continue  # "maybe next time we go Thai": a plan; a lesson opens with it ("Next time, …")
        return " ".join(_SENTENCE.match(line, start).group().split())
    return ""


def lesson_create(*, bank: MemoryBank, agent: str, line: str, turn: int, evidence: Memory | None) -> Memory | None:
    lesson = lesson_of(line)
    if not lesson:
        return None
    return memory_create(bank=bank, agent=agent, kind="procedural", category="lesson", turn=turn, importance=6.0,
                         content=f"Lesson {agent} drew at turn {turn}: {lesson}", source="earned",
                         evidence=[evidence] if evidence is not None else [], metadata={"extracted": "lesson"})


def facts_create(*, bank: MemoryBank, facts: dict[str, list[str]], speaker: str, turn: int) -> list[Memory]:
    """Each listener's learned facts, embedded in one model call, its copy of the line as evidence."""
    pairs = [(agent, fact) for agent, listed in facts.items() for fact in listed]
    if not pairs:
        return []
    heard = {m.agent: m for m in Memory.objects.in_bank(bank).filter(kind="episodic", turn=turn, speaker=speaker,
                                                                     agent__in=list(facts))}
    vectors = embed_texts([fact for _agent, fact in pairs])
    return [memory_create(bank=bank, agent=agent, kind="semantic", category="learned", turn=turn, importance=5.0,
                          content=fact, source="earned", speaker=speaker, embedding=vector,
                          evidence=[heard[agent]] if agent in heard else [],
                          metadata={"extracted": "fact", "heard_from": speaker})
            for (agent, fact), vector in zip(pairs, vectors)]


def extract_after_turn(*, bank_id: int, turn: int, speaker: str, text: str,
                       facts: dict[str, list[str]] | None = None) -> list[Memory]:
    """What a stored line leaves besides itself: the listeners' feelings (from the relationship
    changes it made) and its speaker's lesson. Once per line: a redelivered task finds them made."""
    with transaction.atomic():
        if not bank_hold(bank_id):
            return []  # the run was deleted meanwhile
        return _extract(MemoryBank.objects.get(pk=bank_id), turn=turn, speaker=speaker, text=text, facts=facts or {})


def _extract(bank: MemoryBank, *, turn: int, speaker: str, text: str, facts: dict[str, list[str]]) -> list[Memory]:
    done = Memory.objects.in_bank(bank).filter(turn=turn, metadata__extracted__isnull=False, speaker__in=[speaker, ""])
    if done.exists() or Memory.objects.in_bank(bank).filter(turn=turn, agent=speaker, category="lesson").exists():
        return []
    rows = list(Relationship.objects.filter(bank=bank, turn=turn, other=speaker))
    made = reactions_create(bank=bank, rows=rows, turn=turn)
    own = Memory.objects.in_bank(bank).filter(kind="episodic", turn=turn, agent=speaker, speaker=speaker).first()
    lesson = lesson_create(bank=bank, agent=speaker, line=text, turn=turn, evidence=own)
    learned = facts_create(bank=bank, facts=facts, speaker=speaker, turn=turn)
    return made + ([lesson] if lesson else []) + learned

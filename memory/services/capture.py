"""Episodic capture: what an agent heard becomes its memory."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from django.conf import settings
from django.db import transaction

from memory.cache import embed_texts
from memory.importance import (
    CONCERN_FLOOR,
    CaptureFilters,
    Captured,
    Importance,
    Nearest,
    Skipped,
    concerns,
    heuristic_importance,
    llm_importance,
    nearest,
)
from memory.indexing import bank_index_wanted
from memory.models import Memory, MemoryBank, MemoryKey
from memory.retrieval import episode_context_text
from memory.services.validation import validate_content


# The LLM scorer's time for one line, all listeners together: past it, the rest get the heuristic
# (the turn's transaction is open while it runs).
LLM_BUDGET_S = 10.0


@transaction.atomic
def remember_utterance(*, bank: MemoryBank, speaker: str, text: str, turn: int, listeners: Iterable[str],
                       metadata: dict | None = None, scorer: str | None = None,
                       ask: Callable[[str], str] | None = None, filters: CaptureFilters | None = None) -> Captured:
    """Seed 000's episodic capture: "{speaker} said: {text}", once per listener, with turn and speaker.

    scorer "heuristic" or "llm" (with `ask`, a prompt → answer callable) scores each copy
    (memory.importance; stored in importance and metadata["importance"]); None keeps the flat 5.0
    (evaluation and benchmarks compare retrieval, not scoring). `filters` (seed 003) may leave a
    listener without the line: the answer lists the kept memories and, in `.skipped`, who did not
    keep it and why.

    With RETRIEVAL_CONTEXT_KEYS each new copy also gets a key: the listener's previous line and this
    one, embedded together, so a line that only makes sense as a reply ("Yes, last Sunday!") is
    found by what it answers (evaluate_retrieval: R@10 +0.02 to +0.03).
    """
    content = validate_content(f"{speaker} said: {text.strip()}" if text and text.strip() else "")
    listeners = list(dict.fromkeys(name for name in listeners if name))
    participants = list(dict.fromkeys([speaker, *listeners]))
    existing = {
        m.agent: m
        for m in Memory.objects.in_bank(bank).filter(
            kind=Memory.Kind.EPISODIC, turn=turn, speaker=speaker, content=content, agent__in=listeners
        )
    }
    fresh = [name for name in listeners if name not in existing]  # a retried turn stores nothing twice
    contexts: dict[str, str] = {}
    if fresh and settings.RETRIEVAL_CONTEXT_KEYS:
        previous = (
            Memory.objects.in_bank(bank).filter(kind=Memory.Kind.EPISODIC, agent__in=fresh, turn__lt=turn)
            .order_by("agent", "-turn", "-id").distinct("agent").values_list("agent", "content")
        )
        contexts = {agent: episode_context_text(prev, content) for agent, prev in previous}
    texts = list(dict.fromkeys([content, *contexts.values()]))
    vectors = dict(zip(texts, embed_texts(texts)))  # one model call for the line and its keys
    scores, skipped = _judge(bank=bank, speaker=speaker, content=content, vector=vectors[content], turn=turn,
                             names=fresh, scorer=scorer, ask=ask, filters=filters or CaptureFilters())
    kept = [name for name in fresh if name not in {s.agent for s in skipped}]
    new = []
    for name in kept:
        data = dict(metadata or {})
        if name in scores:
            data["importance"] = scores[name].as_metadata()
        new.append(Memory(
            bank=bank, agent=name, kind=Memory.Kind.EPISODIC, category="dialogue", speaker=speaker, turn=turn,
            content=content, embedding=vectors[content], participants=participants, source=Memory.Source.EARNED,
            importance=scores[name].score if name in scores else 5.0, metadata=data,
        ))
    Memory.objects.bulk_create(new)
    MemoryKey.objects.bulk_create(
        [MemoryKey(memory=m, query=contexts[m.agent][:300].strip(), embedding=vectors[contexts[m.agent]])
         for m in new if m.agent in contexts],
        ignore_conflicts=True,
    )
    by_agent = existing | {m.agent: m for m in new}
    if new:
        bank_index_wanted(bank.pk)
    return Captured([by_agent[name] for name in listeners if name in by_agent], skipped)


def _judge(*, bank: MemoryBank, speaker: str, content: str, vector, turn: int, names: list[str],
           scorer: str | None, ask, filters: CaptureFilters) -> tuple[dict[str, Importance], list[Skipped]]:
    """Each listener's importance and the filters' verdicts; the cheap filters run before any LLM call."""
    if not names or (scorer is None and not filters.importance_floor and filters.duplicate_threshold is None
                     and not filters.only_concerning):
        return {}, []
    near = nearest(bank=bank, agents=names, vector=vector, turn=turn)
    scores: dict[str, Importance] = {}
    skipped: list[Skipped] = []
    started = time.monotonic()
    for name in names:
        mine = near.get(name) or Nearest()
        if filters.duplicate_threshold is not None and mine.recent is not None \
                and mine.recent >= filters.duplicate_threshold:
            skipped.append(Skipped(agent=name, reason="duplicate", content=content, similarity=round(mine.recent, 3),
                                   duplicate_of=mine.recent_id))
            continue
        concern = concerns(mine)
        # The speaker always keeps its own line: what it said is its business, whatever the topic.
        if filters.only_concerning and name != speaker and concern is not None and concern < CONCERN_FLOOR:
            skipped.append(Skipped(agent=name, reason="unconcerned", content=content, similarity=round(concern, 3)))
            continue
        if scorer == "llm" and ask is not None and time.monotonic() - started < LLM_BUDGET_S:
            score = llm_importance(name=name, text=content, near=mine, ask=ask)
        else:
            score = heuristic_importance(text=content, near=mine)
            if scorer == "llm":
                score.scorer = "heuristic-budget" if ask is not None else "heuristic"
        if filters.importance_floor and score.score < filters.importance_floor:
            skipped.append(Skipped(agent=name, reason="importance", content=content, importance=score.score))
            continue
        scores[name] = score
    return scores, skipped

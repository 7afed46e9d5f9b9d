"""Consolidation (seeds 003, 004): clusters of similar, old, low-importance earned memories of one agent
become one summary memory; the originals are kept with status "consolidated", linked from the summary
as its evidence, and `unconsolidate` brings them back exactly (their vectors are never touched).

Clustering is greedy over the stored vectors, in numpy: the oldest unassigned memory leads a cluster
and every unassigned one at cosine ≥ `similarity` to it joins. A leader-based cluster cannot chain
(single-link would merge "ramen" into "pizza" through a line about both), and a bank's old
low-importance memories are a few hundred, so the n×n product costs milliseconds.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from core import tracing
from memory.models import MAX_CONTENT_CHARS, MAX_TAGS, Memory, MemoryBank
from memory.measuring import operations
from memory.recalling.filters import MemoryFilter
from memory.recalling.scoring import CONSOLIDATED_RATE_FACTOR
from memory.recalling.search import recall
from memory.services.memories import memory_archive, memory_create

log = logging.getLogger(__name__)

RECENT_TURNS = 10        # the writer's button keeps the last 10 turns as they are: "old" is before that
MAX_CANDIDATES = 2000    # the oldest first; bounds the n×n similarity matrix (2000² floats: 16 MB)

Summarize = Callable[[list[str]], str]
SUMMARY_TEMPERATURE = 0.3  # seed 004: low, for factual accuracy
SUMMARY_MAX_TOKENS = 300
QUERY_CANDIDATES = 50      # consolidate(query=…): the memories most similar to it are the ones grouped
IMPORTANCE_BOOST = 1.1     # seed 004: a summary asked for over the API is 10 % more important than its best original

# Seed 004's consolidation prompt, with the memories after it (it sends them as the user message).
SUMMARY_PROMPT = ("You are consolidating {n} similar memories into a single, concise memory. "
                  "Preserve all important details and facts while removing redundancy. "
                  "The consolidated memory should be clear, factual, and comprehensive.\n\n"
                  "Memories:\n{memories}\n\nAnswer with the consolidated memory only.")


def summarizer(ask: Callable[..., str], context: str = "", prompt: str = SUMMARY_PROMPT) -> Summarize:
    """A Summarize that asks a model (prompt → answer) with seed 004's prompt (or `prompt`, with
    {n} and {memories}), at temperature 0.3 and at most 300 tokens where `ask` takes them (a
    provider's complete); `context`: what the memories are about, said before them."""
    options = _options_taken(ask)
    template = prompt

    def summarize(contents: list[str]) -> str:
        listed = "\n".join(f"- {' '.join(c.split())}" for c in contents)
        prompt = template.format(n=len(contents), memories=listed)
        if context.strip():
            prompt = f"Context: {' '.join(context.split())}\n\n{prompt}"
        return ask(prompt, **options)
    return summarize


def _options_taken(ask: Callable[..., str]) -> dict:
    try:
        parameters = inspect.signature(ask).parameters
    except (TypeError, ValueError):
        return {}
    wanted = {"temperature": SUMMARY_TEMPERATURE, "max_tokens": SUMMARY_MAX_TOKENS}
    return {k: v for k, v in wanted.items() if k in parameters}


@dataclass
class ConsolidationResult:
    summary: Memory
    originals: list[Memory]
    summarizer: str  # "llm" or "extractive"


def candidates(bank: MemoryBank, agent: str, *, before_turn: int, max_importance: float) -> list[Memory]:
    """What may be consolidated: the agent's active earned memories of turns before `before_turn`, not important."""
    return list(Memory.objects.in_bank(bank).for_agent(agent).active()
                .filter(source=Memory.Source.EARNED, turn__lt=before_turn, importance__lte=max_importance,
                        embedding_stale=False)
                .order_by("turn", "id")[:MAX_CANDIDATES])


def _unit(memories: list[Memory]) -> np.ndarray:
    vectors = np.array([np.asarray(m.embedding, dtype=np.float32) for m in memories])
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)


def clusters(memories: list[Memory], *, similarity: float, min_cluster: int) -> list[list[Memory]]:
    """Greedy leader clustering (oldest first); clusters smaller than `min_cluster` are left alone."""
    if len(memories) < min_cluster:
        return []
    sims = _unit(memories) @ _unit(memories).T
    free = np.ones(len(memories), dtype=bool)
    found = []
    for leader in range(len(memories)):
        if not free[leader]:
            continue
        members = np.flatnonzero(free & (sims[leader] >= similarity))
        if len(members) >= min_cluster:
            free[members] = False
            found.append([memories[i] for i in members])
    return found


def extractive_summary(memories: list[Memory]) -> str:
    """Offline: the cluster's most central line, and how many similar lines it stands for, over which turns."""
    vectors = _unit(memories)
    central = memories[int(np.argmax((vectors @ vectors.T).mean(axis=1)))]
    turns = sorted(m.turn for m in memories if m.turn is not None)
    span = f"turns {turns[0]}–{turns[-1]}" if turns and turns[0] != turns[-1] else f"turn {turns[0]}" if turns else "earlier"
    return f"{central.content} (and {len(memories) - 1} similar lines from {span})"


def _summary_text(memories: list[Memory], summarize: Summarize | None) -> tuple[str, str]:
    if summarize is not None:
        try:
            text = (summarize([m.content for m in memories]) or "").strip()
        except Exception:  # a model that fails must not lose the consolidation: the offline summary stands in
            log.warning("consolidation: summarize failed, using the extractive summary", exc_info=True)
            text = ""
        if text:
            return text, "llm"
    return extractive_summary(memories), "extractive"


def _common(values: list[str]) -> str:
    """The one value they share, else ""."""
    return values[0] if values and len(set(values)) == 1 else ""


@tracing.traced("memory.consolidate", **{"memory.source": "run"})
def consolidate(bank: MemoryBank, agent: str, *, before_turn: int, summarize: Summarize | None = None,
                max_importance: float = 4.0, similarity: float = 0.8, min_cluster: int = 3) -> list[ConsolidationResult]:
    """Consolidate each cluster of the agent's old low-importance memories into one summary memory."""
    groups = clusters(candidates(bank, agent, before_turn=before_turn, max_importance=max_importance),
                      similarity=similarity, min_cluster=min_cluster)
    return [_summarise(bank, agent, members, summarize) for members in groups]


def consolidate_matching(bank: MemoryBank, agent: str, *, query: str | None = None, tags: list[str] | None = None,
                         mode: str = "any", threshold: float = 0.7, before_turn: int | None = None,
                         summarize: Summarize | None = None) -> list[ConsolidationResult]:
    """Seed 004's consolidate, as a program asks for it: the agent's active episodic and observation
    memories (with the tags, in the tag mode; of turns before `before_turn`; the QUERY_CANDIDATES
    most similar to `query` when one is given) grouped at cosine ≥ `threshold`; each group of two or
    more becomes one summary, 10 % more important than its most important original."""
    started = time.perf_counter()
    flt = MemoryFilter(agent=agent, kinds=["episodic", "observation"], tags=tags or None, tags_mode=mode,
                       max_turn=before_turn - 1 if before_turn is not None else None)
    if query:
        pool = [r.memory for r in recall(bank, query, filter=flt, k=QUERY_CANDIDATES)]
    else:  # the filter's own SQL: the tag modes read the same here as in a search
        where, params = flt.where(bank.pk)
        pool = list(Memory.objects.raw(f"SELECT m.* FROM memory_memory m WHERE {where} ORDER BY m.turn, m.id LIMIT %s",
                                       [*params, MAX_CANDIDATES]))
    pool.sort(key=lambda m: (m.turn is None, m.turn or 0, m.pk))  # the oldest leads its group
    groups = clusters(pool, similarity=threshold, min_cluster=2)
    results = [_summarise(bank, agent, members, summarize, boost=IMPORTANCE_BOOST) for members in groups]
    operations.consolidated(len(results), sum(len(r.originals) for r in results), seconds=time.perf_counter() - started)
    return results


def _summarise(bank: MemoryBank, agent: str, members: list[Memory], summarize: Summarize | None,
               boost: float = 1.0) -> ConsolidationResult:
    """One group's summary: its text (the model's, else the extractive one), the originals' tags
    merged, decaying 20 % slower (memory_consolidate)."""
    content, summarizer = _summary_text(members, summarize)
    turns = [m.turn for m in members if m.turn is not None]
    kind = Counter(m.kind for m in members).most_common(1)[0][0]
    summary = memory_consolidate(
        bank=bank, originals=members, content=content, agent=agent, kind=kind,
        turn=max(turns) if turns else None, importance=min(10.0, round(max(m.importance for m in members) * boost, 4)),
        category=_common([m.category for m in members]), speaker=_common([m.speaker for m in members]),
        participants=sorted({p for m in members for p in m.participants}),
        tags=list(dict.fromkeys(t for m in members for t in m.tags))[:MAX_TAGS],
        metadata={"consolidation": {"count": len(members), "summarizer": summarizer,
                                    "turns": [min(turns), max(turns)] if turns else None}},
    )
    return ConsolidationResult(summary=summary, originals=members, summarizer=summarizer)


def unconsolidate(summary: Memory) -> list[Memory]:
    """Undo one consolidation: its originals active again, the summary archived."""
    return memory_unconsolidate(summary=summary)


def consolidation_due(bank: MemoryBank, agent: str, budget: int | None = None) -> bool:
    """Seed 004's per-entity cap: the agent holds more active earned memories than the budget
    (the run's, else CONSOLIDATION_BUDGET); a budget of 0 never asks for it."""
    return agent in consolidations_due(bank, [agent], budget)


def consolidations_due(bank: MemoryBank, agents: list[str], budget: int | None = None) -> list[str]:
    """Which of these agents are over the cap (consolidation_due for several, in one query)."""
    budget = settings.CONSOLIDATION_BUDGET if budget is None else budget
    if budget <= 0:
        return []
    over = set(Memory.objects.in_bank(bank).filter(agent__in=list(agents), source=Memory.Source.EARNED).active()
               .order_by().values("agent").annotate(n=Count("id")).filter(n__gt=budget)
               .values_list("agent", flat=True))
    return [agent for agent in agents if agent in over]


# Consolidation's writes: a summary over its originals, and the way back. The originals' rows and
# vectors are never touched, only their status.
@transaction.atomic
def memory_consolidate(*, bank: MemoryBank, originals: list[Memory], content: str, agent: str, kind: str,
                       turn: int | None, importance: float, metadata: dict | None = None, **extra) -> Memory:
    """One summary memory (source "consolidation", embedded) linked to its originals, which become "consolidated"."""
    if not originals:
        raise ValidationError("Nothing to consolidate.")
    if any(m.bank_id != bank.pk for m in originals):
        raise ValidationError("Memories from different banks cannot be consolidated together.")
    # Seed 004: the summary decays 20 % slower than its originals did.
    extra.setdefault("decay_rate", round(sum(m.decay_rate for m in originals) / len(originals)
                                         * CONSOLIDATED_RATE_FACTOR, 6))
    summary = memory_create(bank=bank, content=content[:MAX_CONTENT_CHARS], agent=agent, kind=kind, turn=turn,
                            importance=importance, source=Memory.Source.CONSOLIDATION, metadata=metadata or {},
                            evidence=originals, **extra)
    Memory.objects.filter(pk__in=[m.pk for m in originals]).update(
        status=Memory.Status.CONSOLIDATED, updated_at=timezone.now())
    for memory in originals:
        memory.status = Memory.Status.CONSOLIDATED
    return summary


@transaction.atomic
def memory_unconsolidate(*, summary: Memory) -> list[Memory]:
    """The originals active again (their vectors as they were) and the summary archived (kept, never deleted)."""
    if summary.source != Memory.Source.CONSOLIDATION:
        raise ValidationError("Only a consolidation summary can be undone.")
    originals = list(summary.evidence.filter(status=Memory.Status.CONSOLIDATED))
    Memory.objects.filter(pk__in=[m.pk for m in originals]).update(status=Memory.Status.ACTIVE, updated_at=timezone.now())
    for memory in originals:
        memory.status = Memory.Status.ACTIVE
    if summary.status != Memory.Status.ARCHIVED:
        memory_archive(memory=summary)
    return originals


@transaction.atomic
def memory_statuses_set(*, bank: MemoryBank, statuses: Mapping[int | str, str]) -> int:
    """Put several memories of one bank back to given statuses at once (a writer's undo of a consolidation)."""
    allowed = set(Memory.Status.values)
    wanted: dict[str, list[int]] = {}
    for memory_id, status in statuses.items():
        if status not in allowed:
            raise ValidationError(f"Unknown memory status {status!r}.")
        wanted.setdefault(status, []).append(int(memory_id))
    changed = 0
    for status, ids in wanted.items():
        changed += Memory.objects.in_bank(bank).filter(pk__in=ids).update(status=status, updated_at=timezone.now())
    return changed


def statuses_of(memories: Iterable[Memory]) -> dict[str, str]:
    """{id: status} as a JSON object keeps it (string keys)."""
    return {str(m.pk): m.status for m in memories}

"""An agent's sheet, scene and knowledge of others as its tools and pre-population read them:
the whole sheet category by category (recall_sheet), and searches over what only the writer makes,
kept between turns while none of it changes (recall_stable, stable_snapshot)."""

from __future__ import annotations

import json
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import replace

from django.db import connection

from memory.models import Memory
from memory.recalling.filters import MemoryFilter, Recalled, RecallResult
from memory.recalling.search import recall
from memory.recalling.scoring import DEFAULT_SCORING, SCORING_PRESETS, SIMILARITY, resolve_weights
from memory.forming.seed_specs import CHARACTER_QUERIES, WHOLE_SHEET_K


# What happened and what came of it (the earned kinds: pre-population's "What you know" and others).
MEMORY_KINDS = ["episodic", "procedural", "emotional", "observation", "action", "reflection", "plan", "goal_progress",
                "metacognition", "opinion"]
# query_memory reaches everything the agent holds: its sheet, the scene, what it knows of others,
# facts and beliefs, and all that happened; the narrower tools stay for asking one thing.
QUERY_MEMORY_KINDS = ["character", "scene", "character_knowledge", "semantic", *MEMORY_KINDS]
# query_self's aspects: one of the sheet's categories, or "all": the whole sheet (and any memory of
# kind "character" the writer added), identity first.
SELF_ASPECTS = ["all", *CHARACTER_QUERIES]


# The whole sheet, category by category: (category, how many of its memories). A long background
# (one memory per ~300 characters) or many secrets must not crowd out the traits or the goals.
# Identity: who I am, then how others see me (the public face).
SHEET_PARTS = [("identity", 2), ("secrets", 5), ("background", 4), ("communication", 2), ("decision_style", 1),
               ("traits", 2), ("skills", 1), ("values", 1), ("goals", 1)]


KEYWORD_ONLY = "keyword only: the embedding model is unavailable, so memories were matched by their words"

# How many of the agent's character memories one "who am I?" search ranks for recall_sheet to pick
# from; a category none of them reaches (a very long sheet) gets a search of its own.
SHEET_POOL = 64


def recall_sheet(bank, agent: str, *, scoring: str = DEFAULT_SCORING, weights: dict | None = None,
                 current_turn: int | None = None, shared: bool = False, k: int = WHOLE_SHEET_K,
                 clock: list[float] | None = None,
                 parts: list[tuple[str, int]] | None = None) -> tuple[MemoryFilter, list[RecallResult]]:
    """An agent's whole sheet (query_self(), pre-populated "Who you are"): each category's best
    memories in sheet order, identity first, then its other memories of kind "character" (the
    writer's own, a card's extra background) by relevance to "who am I?", k in all. `parts`: only
    these categories, (category, how many) each, and nothing else.

    One search ranks the sheet (it runs every turn in pre-populated runs: one search, not nine);
    each category takes its best from that ranking."""
    flt = MemoryFilter(agent=agent, kinds=["character"], shared=shared)
    key = _stable_key(bank, agent, scoring, weights, ("sheet", shared, k, tuple(parts or ())))
    if key is not None and key in _STABLE:
        return flt, _stable_get(key)
    ranked = recall(bank, "who am I?", filter=flt, k=SHEET_POOL, scoring=scoring, weights=weights,
                    current_turn=current_turn, clock=clock)
    if len(ranked) < SHEET_POOL:  # the pool holds every one of the agent's sheet memories
        present = {r.memory.category for r in ranked if r.memory.agent == agent}
    else:
        present = set(Memory.objects.in_bank(bank).filter(agent=agent, kind="character", status=Memory.Status.ACTIVE)
                      .values_list("category", flat=True).distinct())
    picked: list[RecallResult] = []
    seen: set[int] = set()
    for category, n in parts or SHEET_PARTS:
        if category not in present:
            continue
        part = [r for r in ranked if r.memory.agent == agent and r.memory.category == category][:n]
        if not part:  # beyond the pool: this category's own canonical query (cached at seeding)
            part = recall(bank, CHARACTER_QUERIES[category][0], k=n, scoring=scoring, weights=weights,
                          current_turn=current_turn, clock=clock,
                          filter=MemoryFilter(agent=agent, kinds=["character"], categories=[category]))
        for result in part:
            if result.memory.pk not in seen:
                seen.add(result.memory.pk)
                picked.append(result)
    for result in ranked if parts is None else ():
        if len(picked) >= k:
            break
        if result.memory.pk not in seen:
            seen.add(result.memory.pk)
            picked.append(result)
    picked = picked[:k]
    for rank, result in enumerate(picked, start=1):
        result.rank = rank
    if key is not None and getattr(ranked, "path", "") != "keyword":  # a keyword-only ranking is not kept
        _stable_put(key, picked)
    return flt, Recalled(picked, path=getattr(ranked, "path", "exact"))



# Searches over what only the writer makes (the sheet, the scene, what one knows of the others),
# kept per process. Under the similarity preset their ranking depends on nothing but those memories
# (a fixed query, no recency, no importance), and a pre-populated run asks for them every turn:
# ~20 ms of a turn's ~30 ms of searches, against ~1 ms for the look at whether any changed.
STABLE_KINDS = ("character", "scene", "character_knowledge")
_STABLE: OrderedDict[tuple, list[RecallResult]] = OrderedDict()
_STABLE_SIZE = 512


# Inside stable_snapshot(), each (bank, agent)'s version is looked up once: a turn's searches
# (sheet, scene, each of the others) write nothing between them.
_VERSIONS: ContextVar[dict | None] = ContextVar("stable_versions", default=None)


@contextmanager
def stable_snapshot():
    """Searches in this block share one look at what changed (a turn's pre-population: 1 query, not 4)."""
    token = _VERSIONS.set({})
    try:
        yield
    finally:
        _VERSIONS.reset(token)


def _stable_version(bank_id: int, agent: str) -> tuple:
    """What changes when any of the agent's or the shared memories of STABLE_KINDS is added, edited,
    re-embedded, archived or removed: how many there are, their ids' sum and the latest edit. (Their
    keys are made with them, when seeding or forming them, so they need no look of their own.)"""
    seen = _VERSIONS.get()
    if seen is not None and (bank_id, agent) in seen:
        return seen[(bank_id, agent)]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*), coalesce(sum(id), 0), max(updated_at), count(*) FILTER (WHERE embedding_stale) "
            "FROM memory_memory WHERE bank_id = %s AND kind = ANY(%s) AND status = 'active' "
            "AND (agent = %s OR agent = '')",
            [bank_id, list(STABLE_KINDS), agent],
        )
        version = cursor.fetchone()
    if seen is not None:
        seen[(bank_id, agent)] = version
    return version


def _stable_key(bank, agent: str, scoring: str, weights: dict | None, what: tuple) -> tuple | None:
    """The cache key of a search over STABLE_KINDS, or None where the ranking also depends on the
    turn or on use (any preset but similarity)."""
    if resolve_weights(scoring, weights) != SCORING_PRESETS[SIMILARITY]:
        return None
    bank_id = bank.pk if hasattr(bank, "pk") else int(bank)
    return (bank_id, agent, what, _stable_version(bank_id, agent))


def _stable_get(key: tuple) -> list[RecallResult]:
    _STABLE.move_to_end(key)
    return Recalled([replace(r) for r in _STABLE[key]], path="cache")  # copies: callers number their own ranks


def _stable_put(key: tuple, results: list[RecallResult]) -> None:
    _STABLE[key] = [replace(r) for r in results]
    while len(_STABLE) > _STABLE_SIZE:
        _STABLE.popitem(last=False)


def recall_stable(bank, query: str, *, filter: MemoryFilter, k: int, scoring: str = DEFAULT_SCORING,
                  weights: dict | None = None, current_turn: int | None = None,
                  clock: list[float] | None = None, associations: float = 0.0, distort=None,
                  mood: float = 0.0) -> list[RecallResult]:
    """recall(), answered from memory when the filter reaches only STABLE_KINDS of one agent (and
    the shared ones) and nothing they depend on changed since the same search last ran here."""
    key = None
    if filter.agent and filter.kinds and set(filter.kinds) <= set(STABLE_KINDS) and filter.statuses == ["active"]:
        key = _stable_key(bank, filter.agent, scoring, weights,
                          (query, json.dumps(filter.to_dict(), sort_keys=True), k, associations,
                           distort.label if distort else None, round(mood, 2)))
        if key is not None and key in _STABLE:
            return _stable_get(key)
    results = recall(bank, query, filter=filter, k=k, scoring=scoring, weights=weights, current_turn=current_turn,
                     clock=clock, associations=associations, distort=distort, mood=mood)
    if key is not None and results.path != "keyword":  # a keyword-only ranking is not kept
        _stable_put(key, results)
    return results

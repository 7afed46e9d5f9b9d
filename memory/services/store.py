"""Seed 004's store verbs as programs call them (the HTTP API, MCP): retain with context, metadata,
entities and tags, held to the per-agent cap; recall with tag modes, an importance floor, a
similarity floor and a number of results, counted as a run's recall is.

A run's turn does neither: it captures lines (memory.forming.capture) and searches through the
agent tools. These are the same writes and the same search, with seed 004's parameters at the edge.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.db.models import Count

from memory.measuring import operations
from memory.models import Memory, MemoryBank
from memory.recalling.filters import TAG_MODES, MemoryFilter, RecallResult
from memory.recalling.scoring import DEFAULT_SCORING, SIMILARITY
from memory.recalling.search import recall
from memory.services.memories import accesses_record, memory_create

SIMILARITY_THRESHOLD = 0.7  # seed 004's default: a memory less similar to the query is not returned
MAX_RESULTS = 10            # seed 004's max_recall_results
OVERFETCH = 4               # a preset that mixes in recency or importance: this many × the results, then the floor
FALLBACKS = ("none", "recent")  # what recall answers when nothing passes the floor: nothing, or the latest memories
# Seed 004's spellings (Any, AnyStrict…) and Wonda's (any, any_strict…) name the same modes.
TAG_MODE_NAMES = {name.replace("_", ""): name for name in TAG_MODES}


class MemoryLimitReached(Exception):
    """The agent holds settings.MEMORY_MAX_PER_AGENT active memories already (the API answers 409)."""


def tag_mode(value: str | None) -> str:
    """A tag mode in either spelling, as MemoryFilter reads it; anything else is a ValidationError."""
    found = TAG_MODE_NAMES.get(str(value or "any").replace("_", "").replace("-", "").lower())
    if found is None:
        raise ValidationError({"tag_mode": [f"use one of Any, All, AnyStrict, AllStrict (got {value!r})."]})
    return found


def tag_filter(tags, mode: str | None = None) -> dict:
    """Seed 004's tag filter as MemoryFilter fields ({} without tags: no filter), for the agent tools'
    tags and tag_mode arguments; a ValidationError that names what to fix."""
    tags = list(tags or [])
    if not tags:
        return {}
    if any(not isinstance(t, str) or not t.strip() for t in tags):
        raise ValidationError({"tags": ['tags must be a list of words, e.g. ["combat", "dragon"].']})
    try:
        return {"tags": [t.strip() for t in tags], "tags_mode": tag_mode(mode)}
    except ValidationError as exc:
        raise ValidationError({"tag_mode": [f"tag_mode: {' '.join(exc.message_dict['tag_mode'])}"]}) from None


def room_check(bank: MemoryBank, agents: Iterable[str], adding: int = 1) -> None:
    """Refuse a write that would take an agent past the cap, naming the way out (seed 004's
    max_memories_per_entity: the limit is checked before anything is written)."""
    limit = settings.MEMORY_MAX_PER_AGENT
    names = sorted(set(agents))
    if limit <= 0 or not names:
        return
    held = dict(Memory.objects.in_bank(bank).active().filter(agent__in=names).order_by()
                .values_list("agent").annotate(n=Count("id")))
    full = [name for name in names if held.get(name, 0) + adding > limit]
    if full:
        who = ", ".join(f"{name} ({held.get(name, 0):,})" for name in full)
        raise MemoryLimitReached(
            f"{who} already holds the limit of {limit:,} active memories per agent: consolidate or archive "
            "some of them first (POST …/consolidate, or DELETE a memory), or raise WONDA_MEMORY_MAX_PER_AGENT.")


def retained_metadata(*, context: str = "", metadata: dict | None = None,
                      entities: Iterable[dict] = ()) -> dict:
    """What seed 004's retain adds to a memory's metadata: the context it was formed in, the
    entities it involves with their roles, and the caller's own key-value pairs under "given"
    (Wonda's own keys, such as importance or told, stay Wonda's)."""
    out: dict = {}
    if context:
        out["context"] = context
    people = [{"name": e["name"], "role": e.get("role") or ""} for e in entities]
    if people:
        out["entities"] = people
    if metadata:
        out["given"] = dict(metadata)
    return out


def retain(*, bank: MemoryBank, agent: str, content: str, kind: str = "episodic", importance: float = 5.0,
           context: str = "", metadata: dict | None = None, entities: Iterable[dict] = (), tags: Iterable[str] = (),
           turn: int | None = None) -> Memory:
    """One memory the agent lived (source "earned": consolidation and pruning treat it as a run's)."""
    entities = list(entities)
    room_check(bank, [agent])
    participants = list(dict.fromkeys(e["name"] for e in entities))
    memory = memory_create(bank=bank, agent=agent, content=content, kind=kind, importance=importance,
                           tags=list(dict.fromkeys(tags)), source=Memory.Source.EARNED, turn=turn,
                           participants=participants,
                           metadata=retained_metadata(context=context, metadata=metadata, entities=entities))
    return memory  # memory_create counted it (memory.measuring.operations)


def recall_filtered(bank: MemoryBank, query: str, *, agent: str | None = None, kinds: list[str] | None = None,
                    tags: list[str] | None = None, mode: str = "any", min_importance: float | None = None,
                    similarity_threshold: float = SIMILARITY_THRESHOLD, max_results: int = MAX_RESULTS,
                    shared: bool = False, scoring: str = DEFAULT_SCORING, current_turn: int | None = None,
                    associations: float = 0.0, fallback: str = "none") -> list[RecallResult]:
    """Seed 004's recall: the tools' ranking over the filter, then only what is at least
    `similarity_threshold` similar to the query (its similarity component, a cosine), at most
    `max_results`, ranked 1…n. Ranked by similarity alone the floor cuts a prefix, so it is exact; a
    preset that mixes in recency or importance ranks OVERFETCH × as many first. What comes back is
    counted as recalled at `current_turn`, as a run counts what its agents recall.
    fallback="recent" (seed 002): when nothing passes the floor, the latest memories under the same
    filter instead, each marked found_by "recent"."""
    if fallback not in FALLBACKS:
        raise ValidationError({"fallback": [f"use one of {', '.join(FALLBACKS)} (got {fallback!r})."]})
    started = time.perf_counter()
    flt = MemoryFilter(agent=agent, kinds=kinds, tags=list(tags) if tags else None, tags_mode=mode,
                       min_importance=min_importance, shared=shared)
    plain = scoring == SIMILARITY and not associations
    found = recall(bank, query, filter=flt, k=max_results if plain else max_results * OVERFETCH, scoring=scoring,
                   current_turn=current_turn, associations=associations)
    kept = [r for r in found if r.components.get(SIMILARITY, 0.0) >= similarity_threshold][:max_results]
    if not kept and fallback == "recent":
        kept = latest_memories(bank, flt, max_results)
    results = [replace(r, rank=i) for i, r in enumerate(kept, 1)]
    accesses_record(memory_ids=[r.memory.pk for r in results], turn=current_turn)
    operations.recalled(len(results), mode=mode if tags else "none", seconds=time.perf_counter() - started)
    return results


def latest_memories(bank: MemoryBank, flt: MemoryFilter, limit: int) -> list[RecallResult]:
    """The filter's latest memories (by turn, then as stored), as results found_by "recent": seed
    002's answer when a search finds nothing, so a caller still sees what the agent lived last."""
    where, params = flt.where(bank.pk)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT m.id FROM memory_memory m WHERE {where} "
                       "ORDER BY m.turn DESC NULLS LAST, m.id DESC LIMIT %s", [*params, int(limit)])
        ids = [row[0] for row in cursor.fetchall()]
    by_id = Memory.objects.in_bank(bank).defer("embedding", "search").in_bulk(ids)
    return [RecallResult(memory=by_id[pk], rank=i, score=0.0, components={}, matched_key=None, found_by="recent")
            for i, pk in enumerate(ids, 1)]


# Seed 004's reflect prompt: the memories as the system's word, the caller's context and query after them.
REFLECT_PROMPT = ("You are responding based on the following memories:\n{memories}\n"
                  "Use these memories to provide a contextual, natural response. "
                  "Speak in first person as if you are the entity with these memories.\n\n{context}Query: {query}")


def memories_listed(results: list[RecallResult]) -> str:
    return "\n".join(f"- [{r.memory.kind}{f', turn {r.memory.turn}' if r.memory.turn is not None else ''}] "
                     f"{' '.join(r.memory.content.split())}" for r in results) or "(none)"


def reflect_on(bank: MemoryBank, agent: str, query: str, *, context: str = "", tags: list[str] | None = None,
               mode: str = "any", similarity_threshold: float = SIMILARITY_THRESHOLD, max_results: int = MAX_RESULTS,
               current_turn: int | None = None, ask=None) -> tuple[str, list[RecallResult]]:
    """Seed 004's reflect: the agent's memories of every kind (its own and the shared ones) that
    answer the query, and an answer in its voice from them by the model (`ask`, prompt → text), or,
    with no model, the memories themselves listed. Nothing is stored."""
    started = time.perf_counter()
    results = recall_filtered(bank, query, agent=agent, tags=tags, mode=mode, shared=True,
                              similarity_threshold=similarity_threshold, max_results=max_results,
                              current_turn=current_turn)
    listed = memories_listed(results)
    if ask is None or not results:
        answer = f"What I remember about this:\n{listed}" if results else "I remember nothing about this."
    else:
        said = f"{' '.join(context.split())}\n" if context.strip() else ""
        answer = (ask(REFLECT_PROMPT.format(memories=listed, context=said, query=" ".join(query.split()))) or "").strip() \
            or f"What I remember about this:\n{listed}"
    operations.operation("reflect", time.perf_counter() - started)
    return answer, results


@transaction.atomic
def memories_describe(*, memories: list[Memory], context: str = "", metadata: dict | None = None,
                      entities: Iterable[dict] = (), tags: Iterable[str] = ()) -> list[Memory]:
    """Seed 004's retain details on memories just made another way (a line heard, one copy per
    listener): the context, the caller's metadata, the entities (also participants) and tags added."""
    entities, tags = list(entities), list(tags)
    added = retained_metadata(context=context, metadata=metadata, entities=entities)
    for memory in memories:
        memory.metadata = {**(memory.metadata or {}), **added}
        memory.participants = list(dict.fromkeys([*memory.participants, *(e["name"] for e in entities)]))
        memory.tags = list(dict.fromkeys([*memory.tags, *tags]))
        memory.full_clean(exclude=["embedding"], validate_unique=False, validate_constraints=False)
        memory.save(update_fields=["metadata", "participants", "tags", "updated_at"])
    return memories

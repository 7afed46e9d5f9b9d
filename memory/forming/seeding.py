"""Gifted seeding (seed 000's tables): idempotent, in batches, with progress the pages can show."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable

import numpy as np
from django.db import transaction
from django.db.models import Q

from memory.embedding.cache import embed_texts
from memory.forming.seed_specs import MemorySpec, character_specs, scenario_specs
from memory.living.relationships import relationships_start
from memory.forming.sheets import CharacterSheet, ScenarioSheet
from memory.models import Memory, MemoryBank, MemoryKey
from memory.queue import queue_on_commit
from memory.recalling.indexing import bank_index_wanted
from memory.recalling.scoring import initial_decay_rate
from memory.services.memories import insert_keys, insert_memories
from memory.services.validation import validate_content

SEED_BATCH = 256  # memories written per bulk insert
SEED_TEXTS_PER_CALL = 512  # texts gathered across characters for one model call


def _coerce_sheets(characters, scenario) -> tuple[list[CharacterSheet], ScenarioSheet | None]:
    sheets = [c if isinstance(c, CharacterSheet) else CharacterSheet.from_dict(c) for c in characters or []]
    if scenario is not None and not isinstance(scenario, ScenarioSheet):
        scenario = ScenarioSheet.from_dict(scenario)
    return sheets, scenario


def _all_specs(characters: list[CharacterSheet], scenario: ScenarioSheet | None) -> list[tuple[tuple, list[MemorySpec]]]:
    groups: list[tuple[tuple, list[MemorySpec]]] = []
    if scenario is not None:
        groups.append((("scene",), scenario_specs(scenario)))
    for sheet in characters:
        groups.append((("character", sheet.name), character_specs(sheet, characters)))
    return groups


def bank_seed(*, bank_id: int, payload: dict) -> dict:
    """Seed (or re-seed) a bank now, from plain sheet dicts ({"characters": [...], "scenario": ...}, as
    bank_request_seed queues them); a failure is written on the bank, readable, and raised."""
    bank = MemoryBank.objects.filter(pk=bank_id).first()
    if bank is None:
        return {"error": f"memory bank {bank_id} no longer exists"}
    try:
        characters = [CharacterSheet.from_dict(c) for c in payload.get("characters") or []]
        scenario = ScenarioSheet.from_dict(payload["scenario"]) if payload.get("scenario") else None
        return seed_bank(bank=bank, characters=characters, scenario=scenario)
    except Exception as exc:
        reason = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items()) if hasattr(exc, "message_dict") else str(exc)
        MemoryBank.objects.filter(pk=bank_id).update(
            seed_status="failed", seed_error=f"Seeding failed: {type(exc).__name__}: {reason}"[:2000]
        )
        raise


@transaction.atomic
def bank_request_seed(*, bank: MemoryBank, characters: list[CharacterSheet], scenario: ScenarioSheet | None) -> MemoryBank:
    """Mark the bank pending and queue the seeding task (after commit)."""
    characters, scenario = _coerce_sheets(characters, scenario)
    total = sum(len(specs) for _, specs in _all_specs(characters, scenario))
    MemoryBank.objects.filter(pk=bank.pk).update(seed_status="pending", seed_done=0, seed_total=total, seed_error="")
    bank.refresh_from_db()
    payload = {
        "characters": [c.to_dict() for c in characters],
        "scenario": scenario.to_dict() if scenario is not None else None,
    }
    queue_on_commit("seed_bank_task", bank.pk, payload)
    return bank


def _existing_gifted(bank: MemoryBank, groups: list[tuple[tuple, list[MemorySpec]]]) -> dict[tuple, list[tuple[int, tuple]]]:
    """Active gifted memories of these groups as (pk, identity), in two queries (not one per group or row)."""
    agents = {group[1] for group, _ in groups if group[0] == "character"}
    scene = any(group[0] == "scene" for group, _ in groups)
    where = Q(agent__in=agents) if agents else Q(pk__in=[])
    if scene:
        where |= Q(agent="", kind=Memory.Kind.SCENE)
    rows = list(Memory.objects.in_bank(bank).gifted().active().filter(where)
                .values_list("pk", "agent", "kind", "category", "about", "content"))
    keys: dict[int, list[str]] = defaultdict(list)
    if rows:
        for memory_id, query in MemoryKey.objects.filter(memory_id__in=[r[0] for r in rows]).values_list("memory_id", "query"):
            keys[memory_id].append(query)
    out: dict[tuple, list[tuple[int, tuple]]] = defaultdict(list)
    for pk, agent, kind, category, about, content in rows:
        ident = _spec_identity(agent, kind, category, about, content, keys[pk])
        if agent in agents:
            out[("character", agent)].append((pk, ident))
        if scene and agent == "" and kind == Memory.Kind.SCENE:
            out[("scene",)].append((pk, ident))
    return out


def _spec_identity(agent, kind, category, about, content, keys) -> tuple:
    return (agent, kind, category, about, content, tuple(sorted(keys)))


def _diff(existing: list[tuple[int, tuple]], specs: list[MemorySpec]) -> tuple[list[int], list[MemorySpec]]:
    """(stale pks to archive, specs to create): identical memories are kept as they are (same ids)."""
    idents = [_spec_identity(s.agent, s.kind, s.category, s.about, s.content, s.keys) for s in specs]
    wanted = Counter(idents)
    stale: list[int] = []
    for pk, ident in existing:
        if wanted[ident] > 0:
            wanted[ident] -= 1  # already there: leave it (and its access history) alone
        else:
            stale.append(pk)
    missing: list[MemorySpec] = []
    for spec, ident in zip(specs, idents):
        if wanted[ident] > 0:
            wanted[ident] -= 1
            missing.append(spec)
    return stale, missing


def _spec_texts(specs: list[MemorySpec]) -> list[str]:
    return [s.content for s in specs] + [k for s in specs for k in s.keys]


def _create_from_specs(bank: MemoryBank, specs: list[MemorySpec], vectors=None) -> tuple[int, int]:
    """Insert memories with their keys (vectors: rows for _spec_texts(specs), else embedded through the cache)."""
    for spec in specs:
        validate_content(spec.content)
    if not specs:
        return 0, 0
    if vectors is None:
        vectors = embed_texts(_spec_texts(specs))
    memories = [
        Memory(
            bank=bank, agent=spec.agent, kind=spec.kind, category=spec.category, about=spec.about,
            content=spec.content, embedding=vectors[i], importance=spec.importance,
            related_goals=spec.related_goals, source=Memory.Source.GIFTED,
            participants=[spec.agent] if spec.agent else [], decay_rate=initial_decay_rate(spec.kind, spec.importance),
        )
        for i, spec in enumerate(specs)
    ]
    insert_memories(memories)
    memory_ids, queries, key_vectors = [], [], []
    row = len(specs)
    for memory, spec in zip(memories, specs):
        for query in spec.keys:
            memory_ids.append(memory.pk)
            queries.append(query)
            key_vectors.append(vectors[row])
            row += 1
    insert_keys(memory_ids, queries, key_vectors)
    return len(memories), len(memory_ids)


def seed_bank(*, bank: MemoryBank, characters: list[CharacterSheet], scenario: ScenarioSheet | None,
              progress: Callable[[int, int], None] | None = None) -> dict:
    """Seed 000's gifted memories; idempotent.

    For each given character (and the scene when a scenario is given) the active gifted memories
    are made to equal the sheet's: identical ones are kept as they are (same ids), changed ones are
    archived (nothing is deleted silently) and new ones created. Earned and writer memories, and
    characters not given, are never touched.
    """
    characters, scenario = _coerce_sheets(characters, scenario)
    groups = _all_specs(characters, scenario)
    total = sum(len(specs) for _, specs in groups)
    MemoryBank.objects.filter(pk=bank.pk).update(seed_status="running", seed_done=0, seed_total=total, seed_error="")
    done = created = archived = 0
    for chunk in _chunks(bank, groups):
        done += sum(len(specs) for _, specs in chunk)
        chunk_created, chunk_archived = _seed_chunk(bank, chunk, seed_done=min(done, total))
        created, archived = created + chunk_created, archived + chunk_archived
        if progress:
            progress(done, total)

    memories_qs = Memory.objects.in_bank(bank).gifted().active()
    agents = [c.name for c in characters] + ([""] if scenario is not None else [])
    memories_qs = memories_qs.filter(agent__in=agents)
    result = {
        "memories": memories_qs.count(),
        "keys": MemoryKey.objects.filter(memory__in=memories_qs).count(),
        "created": created,
        "archived": archived,
    }
    if scenario is not None:  # the writer's starting standings between this cast
        relationships_start(bank=bank, standings=scenario.relationships, cast=[c.name for c in characters])
    MemoryBank.objects.filter(pk=bank.pk).update(seed_status="done", seed_done=total, seed_total=total)
    bank.refresh_from_db()
    if created:
        bank_index_wanted(bank.pk)
    return result


def _chunks(bank: MemoryBank, groups: list):
    """Groups a few at a time: their new texts go to the model in one call (it sorts them by length,
    so one call pads less than several) before the chunk is written, and progress shows between chunks."""
    start = 0
    while start < len(groups):
        chunk, texts = [], []
        existing = _existing_gifted(bank, groups[start:start + 64])
        while start < len(groups) and len(chunk) < 64 and (not chunk or len(texts) < SEED_TEXTS_PER_CALL):
            group, specs = groups[start]
            texts += _spec_texts(_diff(existing.get(group, []), specs)[1])
            chunk.append(groups[start])
            start += 1
        embed_texts(texts)  # fills the cache; the writes read it back without a model call
        yield chunk


@transaction.atomic
def _seed_chunk(bank: MemoryBank, chunk: list, *, seed_done: int) -> tuple[int, int]:
    """One chunk's writes in one short transaction: changed memories archived, new ones created, and
    the bank's progress with them. Returns (created, archived)."""
    MemoryBank.objects.select_for_update().filter(pk=bank.pk).first()  # one seeder per bank at a time
    existing = _existing_gifted(bank, chunk)  # again under the lock: another seeder may have written
    stale, missing = [], []
    for group, specs in chunk:
        group_stale, group_missing = _diff(existing.get(group, []), specs)
        stale += group_stale
        missing += group_missing
    archived = Memory.objects.filter(pk__in=stale).update(status=Memory.Status.ARCHIVED) if stale else 0
    created = 0
    if missing:
        vectors = embed_texts(_spec_texts(missing))
        for i in range(0, len(missing), SEED_BATCH):
            batch = missing[i:i + SEED_BATCH]
            n, _ = _create_from_specs(bank, batch, _batch_vectors(missing, vectors, i, len(batch)))
            created += n
    MemoryBank.objects.filter(pk=bank.pk).update(seed_done=seed_done)
    return created, archived


def _batch_vectors(specs: list[MemorySpec], vectors, offset: int, n: int):
    """The rows of _spec_texts(specs[offset:offset+n]) within vectors of _spec_texts(specs)."""
    key_start = len(specs) + sum(len(s.keys) for s in specs[:offset])
    key_count = sum(len(s.keys) for s in specs[offset:offset + n])
    return np.concatenate([vectors[offset:offset + n], vectors[key_start:key_start + key_count]])

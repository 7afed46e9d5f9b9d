"""Writes to memory: banks, gifted seeding, episodic capture, single-memory edits (keyword-only)."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Iterable

import numpy as np
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import F, Q

from memory.cache import embed_one, embed_texts, vector_cursor
from memory.models import MAX_CONTENT_CHARS, Memory, MemoryBank, MemoryKey
from memory.seeding import MemorySpec, character_specs, scenario_specs
from memory.sheets import CharacterSheet, ScenarioSheet

SEED_BATCH = 256  # memories written per bulk insert
SEED_TEXTS_PER_CALL = 512  # texts gathered across characters for one model call


def validate_content(content) -> str:
    """The one rule every memory obeys, with the message a writer or an agent will read."""
    if not isinstance(content, str):
        raise ValidationError({"content": "Memory content must be text."})
    if not content.strip():
        raise ValidationError({"content": "Memory content cannot be empty."})
    if len(content) > MAX_CONTENT_CHARS:
        raise ValidationError(
            {"content": f"Memory content is {len(content):,} characters; the limit is {MAX_CONTENT_CHARS:,}."}
        )
    return content


# --- banks ---------------------------------------------------------------------------------

@transaction.atomic
def bank_create(*, name: str, owner=None) -> MemoryBank:
    bank = MemoryBank(name=name, owner=owner)
    bank.full_clean()
    bank.save()
    return bank


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


@transaction.atomic
def bank_request_seed(*, bank: MemoryBank, characters: list[CharacterSheet], scenario: ScenarioSheet | None) -> MemoryBank:
    """Mark the bank pending and queue the seeding task (after commit)."""
    from memory.tasks import seed_bank_task

    characters, scenario = _coerce_sheets(characters, scenario)
    total = sum(len(specs) for _, specs in _all_specs(characters, scenario))
    MemoryBank.objects.filter(pk=bank.pk).update(seed_status="pending", seed_done=0, seed_total=total, seed_error="")
    bank.refresh_from_db()
    payload = {
        "characters": [c.to_dict() for c in characters],
        "scenario": scenario.to_dict() if scenario is not None else None,
    }
    seed_bank_task.delay_on_commit(bank.pk, payload)
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
            participants=[spec.agent] if spec.agent else [],
        )
        for i, spec in enumerate(specs)
    ]
    Memory.objects.bulk_create(memories, batch_size=500)
    memory_ids, queries, key_vectors = [], [], []
    row = len(specs)
    for memory, spec in zip(memories, specs):
        for query in spec.keys:
            memory_ids.append(memory.pk)
            queries.append(query)
            key_vectors.append(vectors[row])
            row += 1
    if memory_ids:
        # One binary statement: Django would format ~1,600 vectors as text for a 12-cast bench.
        with vector_cursor() as cur:
            cur.execute(
                f"INSERT INTO {MemoryKey._meta.db_table} (memory_id, query, embedding) "
                "SELECT * FROM unnest(%s::bigint[], %s::text[], %b::vector[]) ON CONFLICT DO NOTHING",
                [memory_ids, queries, key_vectors],
            )
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
    done = 0
    created = archived = 0

    # Groups are taken a few at a time: their new texts go to the model in one call (it sorts them
    # by length, so one call pads less than several), then the chunk is written in one short
    # transaction and progress shows between chunks.
    start = 0
    while start < len(groups):
        chunk, texts = [], []
        existing = _existing_gifted(bank, groups[start:start + 64])
        while start < len(groups) and len(chunk) < 64 and (not chunk or len(texts) < SEED_TEXTS_PER_CALL):
            group, specs = groups[start]
            texts += _spec_texts(_diff(existing.get(group, []), specs)[1])
            chunk.append(groups[start])
            start += 1
        embed_texts(texts)  # fills the cache; the writes below read it back without a model call
        with transaction.atomic():
            MemoryBank.objects.select_for_update().filter(pk=bank.pk).first()  # one seeder per bank at a time
            existing = _existing_gifted(bank, chunk)  # again under the lock: another seeder may have written
            stale, missing = [], []
            for group, specs in chunk:
                group_stale, group_missing = _diff(existing.get(group, []), specs)
                stale += group_stale
                missing += group_missing
            if stale:
                archived += Memory.objects.filter(pk__in=stale).update(status=Memory.Status.ARCHIVED)
            if missing:
                vectors = embed_texts(_spec_texts(missing))
                for i in range(0, len(missing), SEED_BATCH):
                    batch = missing[i:i + SEED_BATCH]
                    n, _ = _create_from_specs(bank, batch, _batch_vectors(missing, vectors, i, len(batch)))
                    created += n
            done += sum(len(specs) for _, specs in chunk)
            MemoryBank.objects.filter(pk=bank.pk).update(seed_done=min(done, total))
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
    MemoryBank.objects.filter(pk=bank.pk).update(seed_status="done", seed_done=total, seed_total=total)
    bank.refresh_from_db()
    return result


def _batch_vectors(specs: list[MemorySpec], vectors, offset: int, n: int):
    """The rows of _spec_texts(specs[offset:offset+n]) within vectors of _spec_texts(specs)."""
    key_start = len(specs) + sum(len(s.keys) for s in specs[:offset])
    key_count = sum(len(s.keys) for s in specs[offset:offset + n])
    return np.concatenate([vectors[offset:offset + n], vectors[key_start:key_start + key_count]])


# --- episodic capture ----------------------------------------------------------------------

@transaction.atomic
def remember_utterance(*, bank: MemoryBank, speaker: str, text: str, turn: int, listeners: Iterable[str],
                       metadata: dict | None = None) -> list[Memory]:
    """Seed 000's episodic capture: "{speaker} said: {text}", once per listener, with turn and speaker.

    With RETRIEVAL_CONTEXT_KEYS each new copy also gets a key: the listener's previous line and this
    one, embedded together, so a line that only makes sense as a reply ("Yes, last Sunday!") is
    found by what it answers (evaluate_retrieval: R@10 +0.02 to +0.03).
    """
    from django.conf import settings

    from memory.retrieval import episode_context_text

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
    new = [
        Memory(
            bank=bank, agent=name, kind=Memory.Kind.EPISODIC, category="dialogue", speaker=speaker, turn=turn,
            content=content, embedding=vectors[content], participants=participants, source=Memory.Source.EARNED,
            importance=5.0, metadata=dict(metadata or {}),
        )
        for name in fresh
    ]
    Memory.objects.bulk_create(new)
    MemoryKey.objects.bulk_create(
        [MemoryKey(memory=m, query=contexts[m.agent][:300].strip(), embedding=vectors[contexts[m.agent]])
         for m in new if m.agent in contexts],
        ignore_conflicts=True,
    )
    by_agent = existing | {m.agent: m for m in new}
    return [by_agent[name] for name in listeners]


# --- single memories -----------------------------------------------------------------------

_EXTRA_FIELDS = {
    "about", "speaker", "participants", "location", "related_goals", "emotional_valence", "decay_rate",
    "metadata", "status", "last_accessed_turn",
}


@transaction.atomic
def memory_create(*, bank: MemoryBank, content: str, agent: str = "", kind: str = "semantic", category: str = "",
                  importance: float = 5.0, tags: Iterable[str] = (), source: str = "writer", turn: int | None = None,
                  **extra) -> Memory:
    """One memory; `keys=[...]` in extra adds canonical queries; `evidence=[...]` links sources."""
    validate_content(content)
    keys = [k.strip()[:300] for k in extra.pop("keys", None) or [] if k and k.strip()]
    evidence = extra.pop("evidence", None) or []
    unknown = set(extra) - _EXTRA_FIELDS
    if unknown:
        raise TypeError(f"memory_create() got unexpected fields: {', '.join(sorted(unknown))}")
    memory = Memory(
        bank=bank, content=content, agent=agent, kind=kind, category=category, importance=importance,
        tags=list(tags), source=source, turn=turn, embedding=embed_one(content), **extra,
    )
    memory.full_clean(exclude=["embedding"])
    memory.save()
    if keys:
        vectors = embed_texts(keys)
        MemoryKey.objects.bulk_create(
            [MemoryKey(memory=memory, query=q, embedding=v) for q, v in zip(keys, vectors)], ignore_conflicts=True
        )
    if evidence:
        memory.evidence.set(evidence)
    return memory


@transaction.atomic
def memory_update(*, memory: Memory, content: str | None = None, importance: float | None = None,
                  tags: Iterable[str] | None = None) -> Memory:
    """Edit one row; a new content is re-embedded (its keys still lead to it)."""
    if content is not None and content != memory.content:
        validate_content(content)
        memory.content = content
        memory.embedding = embed_one(content)
    if importance is not None:
        memory.importance = importance
    if tags is not None:
        memory.tags = list(tags)
    memory.full_clean(exclude=["embedding"])
    memory.save()
    return memory


@transaction.atomic
def memory_archive(*, memory: Memory) -> Memory:
    memory.status = Memory.Status.ARCHIVED
    memory.save(update_fields=["status", "updated_at"])
    return memory


@transaction.atomic
def memory_reembed(*, memory: Memory) -> Memory:
    """Recompute the content and key vectors with the current model (after a model change)."""
    memory.embedding = embed_one(memory.content)
    memory.save(update_fields=["embedding", "updated_at"])
    keys = list(memory.keys.all())
    for key, vector in zip(keys, embed_texts([k.query for k in keys])):
        key.embedding = vector
    MemoryKey.objects.bulk_update(keys, ["embedding"])
    return memory


@transaction.atomic
def memory_reinforce(*, memory: Memory, current_turn: int | None = None) -> Memory:
    """Seed 004: strengthen a memory — slower decay (−20%), one more access, a little more importance."""
    Memory.objects.filter(pk=memory.pk).update(
        decay_rate=F("decay_rate") * 0.8,
        access_count=F("access_count") + 1,
        importance=min(10.0, memory.importance + 0.5),
        last_accessed_turn=current_turn if current_turn is not None else F("last_accessed_turn"),
    )
    memory.refresh_from_db()
    return memory


@transaction.atomic
def memory_associate(*, first: Memory, second: Memory) -> None:
    """An explicit link both ways (seed 001's associate_memories), kept as evidence links."""
    if first.bank_id != second.bank_id:
        raise ValidationError("Memories from different banks cannot be associated.")
    first.evidence.add(second)
    second.evidence.add(first)


def bank_memory_counts(*, bank: MemoryBank) -> dict:
    counts: dict = defaultdict(int)
    for row in Memory.objects.in_bank(bank).values("kind").order_by():
        counts[row["kind"]] += 1
    return dict(counts)

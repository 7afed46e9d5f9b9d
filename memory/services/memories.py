"""Single memories: create, edit (re-embedded by a worker, unsearchable meanwhile), archive, restore,
reinforce, associate; and the access log that recall's callers write."""

from __future__ import annotations

import json
import time
from datetime import timezone as dt_timezone
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import numpy as np
from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import DEFAULT_DB_ALIAS, connection, transaction
from django.db.models import F, Func, JSONField, Value
from django.db.models.functions import Coalesce, Least
from django.utils import timezone
from pgvector.django import VectorField

from memory.embedding.cache import embed_one, embed_texts, vector_cursor
from memory.measuring import operations
from memory.models import Memory, MemoryAccess, MemoryBank, MemoryKey
from memory.queue import queue_on_commit
from memory.recalling.indexing import bank_index_wanted
from memory.recalling.scoring import initial_decay_rate
from memory.services.validation import validate_content


REINFORCE_RATE_FACTOR = 0.8    # reinforce_memory: decay_rate × 0.8 (seed 004's consolidation: 20% slower)
REINFORCE_IMPORTANCE = 0.5     # and importance + 0.5, at most 10

_EXTRA_FIELDS = {
    "about", "speaker", "participants", "location", "related_goals", "emotional_valence", "decay_rate",
    "metadata", "status", "last_accessed_turn", "story_time",
}


@lru_cache(maxsize=1)
def _insert_plan() -> tuple[str, tuple]:
    """insert_memories' statement and, per column, how its values are sent (see there)."""
    fields = [f for f in Memory._meta.concrete_fields if not f.primary_key and not f.generated]
    selects, unnests, kinds = [], [], []
    for i, field in enumerate(fields):
        column, db_type = f"c{i}", field.db_type(connection)
        if isinstance(field, VectorField):
            kinds.append("vector")
            unnests.append("%b::vector[]")
            selects.append(column)
        elif isinstance(field, ArrayField):
            # A list per row: a ragged two-dimensional array cannot be sent, its JSON text can.
            kinds.append("array")
            unnests.append("%b::jsonb[]")
            selects.append(f"CASE WHEN {column} IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text({column})) END::{db_type}")
        elif isinstance(field, JSONField):
            kinds.append("json")
            unnests.append("%b::jsonb[]")
            selects.append(column)
        else:
            kinds.append("plain")
            unnests.append(f"%b::{db_type}[]")
            selects.append(column)
    names = ", ".join(f"c{i}" for i in range(len(fields)))
    sql = (f"INSERT INTO {Memory._meta.db_table} ({', '.join(connection.ops.quote_name(f.column) for f in fields)}) "
           f"SELECT {', '.join(selects)} FROM unnest({', '.join(unnests)}) WITH ORDINALITY AS u({names}, ord) "
           "ORDER BY ord RETURNING id")
    return sql, tuple(zip(fields, kinds))


def insert_memories(memories: list[Memory]) -> list[Memory]:
    """Memory.objects.bulk_create(memories) in one statement whose values go in binary: Django
    formats each vector as text (~0.2 ms for 384 floats, and the server parses it back), and text
    arrays are quoted character by character (~0.8 ms of a line's five copies). Seeding (−0.2 s of
    ~3.7 for the bench's twelve casts) and capture (−1.5 ms a turn) write through it.
    Each column is one array, unnested in order (RETURNING gives the ids in that order, as Django's
    own UNNEST inserts rely on); every concrete field is written, with its default or auto_now value
    as bulk_create gives it. Sets the pks; sends no signals (neither does bulk_create)."""
    if not memories:
        return memories
    _dated_by_turn(memories)
    sql, plan = _insert_plan()
    params = []
    for field, kind in plan:
        values = [field.pre_save(m, add=True) for m in memories]  # auto_now(_add) stamped, as in bulk_create
        if kind == "vector":
            params.append([np.asarray(v, dtype=np.float32) for v in values])
        elif kind == "array":
            params.append([None if v is None else json.dumps(list(v)) for v in values])
        elif kind == "json":
            params.append([None if v is None else json.dumps(v, cls=field.encoder) for v in values])
        else:
            params.append([field.get_db_prep_save(v, connection) for v in values])
    with vector_cursor() as cur:
        cur.execute(sql, params)
        ids = [row[0] for row in cur.fetchall()]
    for memory, pk in zip(memories, ids, strict=True):
        memory.pk = pk
        memory._state.adding, memory._state.db = False, DEFAULT_DB_ALIAS
    return memories


def _dated_by_turn(memories: list[Memory]) -> None:
    """A memory formed after its turn (a reflection, a fact drawn from a line) takes the story time of
    that turn's memories (memories_dated), so everything of a turn carries its date."""
    undated = [m for m in memories if m.story_time is None and m.turn is not None]
    if not undated:
        return
    with connection.cursor() as cur:
        cur.execute(f"SELECT DISTINCT ON (bank_id, turn) bank_id, turn, story_time FROM {Memory._meta.db_table} "
                    "WHERE bank_id = ANY(%s) AND turn = ANY(%s) AND story_time IS NOT NULL",
                    [list({m.bank_id for m in undated}), list({m.turn for m in undated})])
        dated = {(bank, turn): when for bank, turn, when in cur.fetchall()}
    for memory in undated:
        memory.story_time = dated.get((memory.bank_id, memory.turn))


def memories_dated(*, bank: MemoryBank, turn: int, when) -> int:
    """Date the memories of one turn in the story's calendar (those not dated yet); how many."""
    if when is None:
        return 0
    if timezone.is_naive(when):
        when = when.replace(tzinfo=dt_timezone.utc)  # story time: a date, in no zone
    return Memory.objects.filter(bank=bank, turn=turn, story_time__isnull=True).update(story_time=when)


def insert_keys(memory_ids: list[int], queries: list[str], vectors) -> None:
    """MemoryKey rows (memory_ids[i] found by queries[i], vectors[i]) in one statement, vectors in
    binary as insert_memories sends them; a (memory, query) pair already stored is left as it is."""
    if not memory_ids:
        return
    with vector_cursor() as cur:
        cur.execute(
            f"INSERT INTO {MemoryKey._meta.db_table} (memory_id, query, embedding) "
            "SELECT * FROM unnest(%s::bigint[], %s::text[], %b::vector[]) ON CONFLICT DO NOTHING",
            [list(memory_ids), list(queries), [np.asarray(v, dtype=np.float32) for v in vectors]],
        )


@transaction.atomic
def memory_create(*, bank: MemoryBank, content: str, agent: str = "", kind: str = "semantic", category: str = "",
                  importance: float = 5.0, tags: Iterable[str] = (), source: str = "writer", turn: int | None = None,
                  **extra) -> Memory:
    """One memory; `keys=[...]` in extra adds canonical queries; `evidence=[...]` links sources;
    `embedding=` a vector the caller embedded already (several memories in one model call)."""
    started = time.perf_counter()
    memory, keys, evidence = _build(bank=bank, content=content, agent=agent, kind=kind, category=category,
                                    importance=importance, tags=tags, source=source, turn=turn, **extra)
    if memory.embedding is None:
        memory.embedding = embed_one(content)
    _dated_by_turn([memory])
    memory.save()
    if keys:
        insert_keys([memory.pk] * len(keys), keys, embed_texts(keys))
    if evidence:
        memory.evidence.set(evidence)
    bank_index_wanted(bank.pk)
    operations.retained([memory], seconds=time.perf_counter() - started)
    return memory


def memories_create(*, bank: MemoryBank, memories: list[dict]) -> list[Memory]:
    """Several memories (memory_create's arguments each) in one statement, with every text and key
    of them embedded in one model call: a stage direction seen by five people costs one of each,
    not five of each. `later_keys=[...]`: keys a worker embeds and adds after the commit (the
    caller waits for no model time on them; they find the memory a moment later)."""
    started = time.perf_counter()
    specs = [dict(m) for m in memories]
    later = [(spec.pop("later_keys", None) or []) for spec in specs]
    # The bank is the caller's own and the table's CHECK constraints hold on insert: not four
    # queries a memory to check them beforehand.
    built = [_build(bank=bank, checked=False, **spec) for spec in specs]
    texts = [m.content for m, _keys, _evidence in built if m.embedding is None]
    texts = list(dict.fromkeys([*texts, *(key for _m, keys, _evidence in built for key in keys)]))
    vectors = dict(zip(texts, embed_texts(texts))) if texts else {}
    for memory, _keys, _evidence in built:
        if memory.embedding is None:
            memory.embedding = vectors[memory.content]
    insert_memories([m for m, _keys, _evidence in built])
    pairs = [(m.pk, key) for m, keys, _evidence in built for key in keys]
    insert_keys([pk for pk, _key in pairs], [key for _pk, key in pairs], [vectors[key] for _pk, key in pairs])
    links = Memory.evidence.through
    links.objects.bulk_create([links(from_memory_id=m.pk, to_memory_id=other)
                               for m, _keys, evidence in built for other in evidence], ignore_conflicts=True)
    bank_index_wanted(bank.pk, added=len(built))
    afterwards = [(m.pk, key) for (m, _keys, _evidence), keys in zip(built, later) for key in keys if key and key.strip()]
    if afterwards:  # a broker that is down loses these keys, never the memories
        queue_on_commit("keys_attach_task", afterwards, robust=True)
    operations.retained([m for m, _keys, _evidence in built], seconds=time.perf_counter() - started)
    return [m for m, _keys, _evidence in built]


def _build(*, bank: MemoryBank, content: str, agent: str = "", kind: str = "semantic", category: str = "",
           importance: float = 5.0, tags: Iterable[str] = (), source: str = "writer", turn: int | None = None,
           checked: bool = True, **extra) -> tuple[Memory, list[str], list]:
    """A memory checked and ready to save (its vector None unless given), its keys and its evidence.
    checked=False: its fields only, not its bank's existence nor the constraints (the database's)."""
    validate_content(content)
    keys = [k.strip()[:300] for k in extra.pop("keys", None) or [] if k and k.strip()]
    evidence = extra.pop("evidence", None) or []
    vector = extra.pop("embedding", None)
    unknown = set(extra) - _EXTRA_FIELDS
    if unknown:
        raise TypeError(f"memory_create() got unexpected fields: {', '.join(sorted(unknown))}")
    extra.setdefault("decay_rate", initial_decay_rate(kind, importance))
    memory = Memory(bank=bank, content=content, agent=agent, kind=kind, category=category, importance=importance,
                    tags=list(tags), source=source, turn=turn, embedding=vector, **extra)
    if checked:
        memory.full_clean(exclude=["embedding"])
    else:
        memory.full_clean(exclude=["embedding", "bank"], validate_unique=False, validate_constraints=False)
    return memory, keys, evidence


def memory_check(*, content: str, bank_id: int | None = None, **fields) -> Memory:
    """An unsaved memory checked as memory_create will check it (the content rule, every field's
    validators; with its bank, the table's constraints too), for a caller that has a worker write it
    later (a writer's page, an import) and must say now what is wrong. Raises ValidationError keyed
    by field; returns the memory, unsaved."""
    validate_content(content)
    memory = Memory(bank_id=bank_id, content=content, **fields)
    if bank_id is not None:
        memory.full_clean(exclude=["embedding"])
    else:
        memory.full_clean(exclude=["bank", "embedding"], validate_constraints=False)
    return memory


@transaction.atomic
def memory_update(*, memory: Memory, content: str | None = None, importance: float | None = None,
                  tags: Iterable[str] | None = None) -> Memory:
    """Edit one row. A new content is stored at once and its vector recomputed by a worker
    (`reembed_memory_task`, about a second): a web request must not load the model. Until then the
    memory is marked `embedding_stale` and recall leaves it out, so it is never found by its old
    meaning. Its keys (canonical queries) still lead to it once refreshed."""
    fields = ["updated_at"]
    if content is not None and content != memory.content:
        validate_content(content)
        memory.content, memory.embedding_stale = content, True
        fields += ["content", "embedding_stale"]
        queue_on_commit("reembed_memory_task", memory.pk, robust=True)
    if importance is not None:
        memory.importance = importance
        fields.append("importance")
    if tags is not None:
        memory.tags = list(tags)
        fields.append("tags")
    memory.full_clean(exclude=["embedding"])
    memory.save(update_fields=fields)
    return memory


@transaction.atomic
def memory_revise(*, memory: Memory, content: str, metadata: dict, importance: float | None = None) -> Memory:
    """A memory whose meaning changed in a run (a belief that heard itself denied): its new content,
    embedded now, so the next turn's searches find it by what it says; its keys stay."""
    validate_content(content)
    memory.content, memory.metadata = content, metadata
    memory.embedding, memory.embedding_stale = embed_one(content), False
    if importance is not None:
        memory.importance = importance
    memory.full_clean(exclude=["embedding"])
    memory.save(update_fields=["content", "metadata", "embedding", "embedding_stale", "importance", "updated_at"])
    return memory


@transaction.atomic
def memory_mark(*, memory: Memory, **marks) -> Memory:
    """Note on a memory what was done with it outside memory (made a character's permanent memory:
    promoted={...}); its content and vectors stay as they are."""
    memory.metadata = dict(memory.metadata or {}, **marks)
    memory.save(update_fields=["metadata", "updated_at"])
    return memory


def memory_archive(*, memory: Memory) -> Memory:
    """Out of every search, kept (nothing is ever deleted); memory_restore brings it back."""
    memory.status = Memory.Status.ARCHIVED
    memory.save(update_fields=["status", "updated_at"])
    return memory


def metadata_with(**values) -> Func:
    """A row's metadata with these keys set, as an UPDATE's value (jsonb ||): no row is loaded."""
    return Func(Coalesce(F("metadata"), Value({}, output_field=JSONField())), Value(values, output_field=JSONField()),
                template="(%(expressions)s)", arg_joiner=" || ", output_field=JSONField())


def memories_supersede(*, bank: MemoryBank, agents: Iterable[str], turn: int, **about) -> int:
    """A newer fact ends older ones ("Tess arrives" after "Tess leaves"): the agents' memories from
    before `turn` whose metadata matches `about` (Django lookups on metadata, e.g. stage__who="Tess")
    are marked with the turn they stopped being true. They stay searchable ("when did Tess leave?"),
    and every answer that shows them dates their end; a branch from before that turn drops the mark
    (bank_copy). Returns how many."""
    # One UPDATE (atomic by itself, no savepoint in the caller's transaction): not every row loaded,
    # vectors and all, and written back.
    return (Memory.objects.in_bank(bank).active()
            .filter(agent__in=list(agents), turn__lt=turn, metadata__superseded_turn__isnull=True,
                    **{f"metadata__{k}": v for k, v in about.items()})
            .update(metadata=metadata_with(superseded_turn=turn)))


def secrets_mark_told(*, bank: MemoryBank, told: dict[int, dict[str, int]]) -> int:
    """Each secret (memory id) with whom its owner has now told it and when (metadata "told": name →
    turn), as query_self and the owner's next memories show it. updated_at moves, so a search kept
    between turns (the sheet's, which those memories read) is made again. Returns how many."""
    now = timezone.now()
    for pk, names in told.items():
        Memory.objects.in_bank(bank).filter(pk=pk).update(metadata=metadata_with(told=names), updated_at=now)
    return len(told)


@transaction.atomic
def memory_restore(*, memory: Memory, status: str = Memory.Status.ACTIVE) -> Memory:
    """Set an archived (or consolidated) memory's status back, e.g. when the writer undoes an archive."""
    memory.status = status
    memory.full_clean(exclude=["embedding"])
    memory.save(update_fields=["status", "updated_at"])
    return memory


@transaction.atomic
def memory_reembed(*, memory: Memory) -> Memory:
    """Recompute the content and key vectors with the current model (after an edit or a model change)."""
    memory.embedding = embed_one(memory.content)
    memory.embedding_stale = False
    memory.save(update_fields=["embedding", "embedding_stale", "updated_at"])
    keys = list(memory.keys.all())
    for key, vector in zip(keys, embed_texts([k.query for k in keys])):
        key.embedding = vector
    MemoryKey.objects.bulk_update(keys, ["embedding"])
    return memory


def bank_refresh_stale(*, bank: MemoryBank) -> int:
    """Re-embed every edited memory of the bank a worker has not got to yet (before copying it)."""
    stale = list(Memory.objects.in_bank(bank).filter(embedding_stale=True))
    for memory in stale:
        memory_reembed(memory=memory)
    return len(stale)


@transaction.atomic
def memory_reinforce(*, memory: Memory, current_turn: int | None = None) -> Memory:
    """Seed 004: strengthen a memory — slower decay (−20%), one more access, a little more importance.
    In the `decayed` ranking (scoring.decay_component) the access and the recent-access boost count at once;
    the slower rate, for the rest of the run."""
    Memory.objects.filter(pk=memory.pk).update(decay_rate=F("decay_rate") * REINFORCE_RATE_FACTOR,
                                               importance=Least(F("importance") + REINFORCE_IMPORTANCE, 10.0))
    accesses_record(memory_ids=[memory.pk], turn=current_turn)
    memory.refresh_from_db()
    return memory


@transaction.atomic(savepoint=False)  # inside a turn's transaction: no savepoint's two round trips
def accesses_record(*, memory_ids: Iterable[int], turn: int | None) -> int:
    """What was recalled at `turn` (an id once per time it was returned): one log row per memory and
    its counters (access_count, last_accessed_turn) in one statement each. Called by whoever owns
    the moment — a simulation's turn_finish, an MCP call — never by the search itself."""
    counts = Counter(int(i) for i in memory_ids)
    if not counts:
        return 0
    with connection.cursor() as cursor:  # the log rows and the counters in one statement (every turn)
        cursor.execute(
            f"WITH a AS (SELECT * FROM unnest(%(ids)s::bigint[], %(ns)s::int[]) AS a(id, n)), "
            f"log AS (INSERT INTO {MemoryAccess._meta.db_table} (memory_id, turn, count) "
            "         SELECT id, %(turn)s::int, n FROM a) "
            "UPDATE memory_memory m SET access_count = m.access_count + a.n, "
            "last_accessed_turn = CASE WHEN %(turn)s::int IS NULL THEN m.last_accessed_turn "
            "ELSE GREATEST(COALESCE(m.last_accessed_turn, %(turn)s::int), %(turn)s::int) END "
            "FROM a WHERE m.id = a.id",
            {"turn": turn, "ids": list(counts), "ns": list(counts.values())},
        )
    return sum(counts.values())


@transaction.atomic
def memory_associate(*, first: Memory, second: Memory) -> None:
    """An explicit link both ways (seed 001's associate_memories), kept as evidence links."""
    if first.bank_id != second.bank_id:
        raise ValidationError("Memories from different banks cannot be associated.")
    first.evidence.add(second)
    second.evidence.add(first)

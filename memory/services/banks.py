"""Banks: create, mark seeded, and copy one as of a turn (a branch's bank)."""

from __future__ import annotations

from collections import defaultdict

from django.db import connection, transaction
from django.db.models import Q

from memory.recalling.indexing import bank_index_wanted
from memory.models import Memory, MemoryAccess, MemoryBank, MemoryKey, Relationship
from memory.services.memories import accesses_record, bank_refresh_stale, insert_keys, insert_memories


@transaction.atomic
def bank_create(*, name: str, owner=None) -> MemoryBank:
    bank = MemoryBank(name=name, owner=owner)
    bank.full_clean()
    bank.save()
    return bank


def bank_rename(*, bank_id: int, name: str) -> None:
    """A bank's name as its owner sees it (a character's preview bank follows the character's name)."""
    MemoryBank.objects.filter(pk=bank_id).update(name=name[:200])


def bank_hold(bank_id: int) -> bool:
    """Inside a transaction, hold the bank's row FOR SHARE until it ends, so that a deletion
    (bank_delete, its owner's) waits for what a background task writes into it, or has already
    happened — then this says False and the task writes nothing. Every task that adds rows to a
    bank after a turn's commit (keys, feelings, insights, summaries) writes under it."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM memory_memorybank WHERE id = %s FOR SHARE", [int(bank_id)])
        return cursor.fetchone() is not None


@transaction.atomic
def bank_delete(*, bank: MemoryBank) -> None:
    """A bank and all its memories (a preview bank whose character went, a discarded run's bank).

    The bank's row is locked first: a worker adding keys to its memories (memory_keys_add) holds it
    FOR SHARE, so the cascade never collects the keys and then meets one added in between."""
    MemoryBank.objects.select_for_update().filter(pk=bank.pk).first()
    bank.delete()


@transaction.atomic
def banks_delete(*, owner) -> int:
    """Every bank of `owner`, each as bank_delete deletes one (before the owner goes: the cascade
    would delete them without the lock). Returns how many went."""
    banks = list(MemoryBank.objects.filter(owner=owner))
    for bank in banks:
        bank_delete(bank=bank)
    return len(banks)


def bank_mark_seeded(*, bank: MemoryBank) -> MemoryBank:
    """The bank holds what it should (a copy or an import filled it): searches may start."""
    MemoryBank.objects.filter(pk=bank.pk).update(seed_status=MemoryBank.SeedStatus.DONE)
    bank.refresh_from_db()
    return bank


@transaction.atomic
def bank_copy(*, source: MemoryBank, target: MemoryBank, as_of_turn: int) -> dict[int, int]:
    """`source` as it stood when turn `as_of_turn` (1-based) began, copied into `target`: its active
    memories from before that turn (gifted and writer memories, and those of earlier turns, with
    the writer's edits), their keys and vectors, the evidence links among them, and their access
    history up to then — so a `decayed` ranking in the copy is exactly the source's at that turn.
    Returns {source memory id: copy id}. Stale vectors are refreshed first (this runs in a worker)."""
    bank_refresh_stale(bank=source)
    memories = list(Memory.objects.in_bank(source).active().before_turn(as_of_turn).order_by("id"))
    history: dict[int, list[tuple[int | None, int]]] = defaultdict(list)
    for memory_id, turn, count in (MemoryAccess.objects.filter(memory__in=memories)
                                   .filter(Q(turn__isnull=True) | Q(turn__lt=as_of_turn))
                                   .values_list("memory_id", "turn", "count").order_by("id")):
        history[memory_id].append((turn, count))
    skip = {"id", "bank", "created_at", "updated_at", "search", "evidence"}
    fields = [f.name for f in Memory._meta.concrete_fields if f.name not in skip]
    copies = []
    for memory in memories:
        values = {name: getattr(memory, name) for name in fields}
        seen = history.get(memory.pk, [])
        turns = [t for t, _ in seen if t is not None]
        values["access_count"] = sum(n for _, n in seen)
        values["last_accessed_turn"] = max(turns) if turns else None
        values["metadata"] = dict(memory.metadata or {}, copied_from=memory.pk)
        if (values["metadata"].get("superseded_turn") or 0) >= as_of_turn:
            del values["metadata"]["superseded_turn"]  # still true when that turn began (memories_supersede)
        if isinstance(values["metadata"].get("told"), dict):  # a secret told from that turn on is untold again
            values["metadata"]["told"] = {name: at for name, at in values["metadata"]["told"].items() if at < as_of_turn}
            if not values["metadata"]["told"]:
                del values["metadata"]["told"]
        copies.append(Memory(bank=target, **values))
    mapping = _store_copies(memories, copies)
    MemoryAccess.objects.bulk_create([MemoryAccess(memory_id=mapping[memory_id], turn=turn, count=count)
                                      for memory_id, seen in history.items() for turn, count in seen])
    # How the agents stood with each other before that turn, with their evidence where it was copied.
    relationships_import(bank=target, rows=relationships_export(source, before_turn=as_of_turn), memory_ids=mapping)
    bank_index_wanted(target.pk)
    return mapping


RELATIONSHIP_FIELDS = ("agent", "other", "turn", "trust", "affinity", "trust_change", "affinity_change", "reason")


def relationships_export(bank: MemoryBank | int, *, before_turn: int | None = None) -> list[dict]:
    """How the agents came to stand with each other, row by row (the history a run page charts), each
    with the id of the memory of the line it rests on."""
    rows = Relationship.objects.filter(bank=bank).order_by("id")
    if before_turn is not None:
        rows = rows.filter(turn__lt=before_turn)
    return [{**{f: getattr(r, f) for f in RELATIONSHIP_FIELDS}, "evidence_id": r.evidence_id} for r in rows]


def relationship_check(row: dict) -> None:
    """An exported row as relationships_import will store it: ValidationError (naming the field),
    KeyError or TypeError when it cannot be."""
    Relationship(**{f: row[f] for f in RELATIONSHIP_FIELDS if f in row}).full_clean(exclude=["bank", "evidence"])


def relationships_import(*, bank: MemoryBank, rows: list[dict], memory_ids: dict[int, int]) -> int:
    """Exported rows into `bank`, their evidence pointed at its copies (memory_ids: exported id → id here)."""
    return len(Relationship.objects.bulk_create([
        Relationship(bank=bank, **{f: row[f] for f in RELATIONSHIP_FIELDS if f in row},
                     evidence_id=memory_ids.get(row.get("evidence_id")))
        for row in rows]))


CARRY_MODES = ("all", "reflections", "none")


@transaction.atomic
def bank_carry(*, source: MemoryBank, target: MemoryBank, carry: dict[str, str], last_turn: int,
               source_label: str = "") -> dict[str, int]:
    """A sequel's start: each agent's earned memories of `source` into `target` — "all" (lines heard,
    observations, beliefs, insights, summaries), "reflections" (insights only) or "none". Turns
    continue: a memory of turn t becomes turn t − last_turn (0 for the last turn of the first run,
    negative before), so the new run's turn 1 comes after it and recency and decay count its age.
    Keys, vectors and the links among the carried memories come along. Returns {agent: n}."""
    counts: dict[str, int] = {}
    picked: list[Memory] = []
    for agent, mode in carry.items():
        if mode not in CARRY_MODES or mode == "none":
            counts[agent] = 0
            continue
        rows = Memory.objects.in_bank(source).active().filter(agent=agent).exclude(source=Memory.Source.GIFTED)
        if mode == "reflections":
            rows = rows.filter(kind=Memory.Kind.REFLECTION)
        rows = list(rows.order_by("id"))
        counts[agent] = len(rows)
        picked += rows
    skip = {"id", "bank", "created_at", "updated_at", "search", "evidence"}
    fields = [f.name for f in Memory._meta.concrete_fields if f.name not in skip]
    copies = []
    for memory in picked:
        values = {name: getattr(memory, name) for name in fields}
        values["turn"] = memory.turn - last_turn if memory.turn is not None else None
        values["access_count"], values["last_accessed_turn"] = 0, None
        values["metadata"] = dict(memory.metadata or {}, carried_from={"memory": memory.pk, "turn": memory.turn,
                                                                       "run": source_label})
        copies.append(Memory(bank=target, **values))
    _store_copies(picked, copies)
    if copies:
        bank_index_wanted(target.pk)
    return counts


def _store_copies(originals: list[Memory], copies: list[Memory]) -> dict[int, int]:
    """Save copies made of `originals` (same order) with the originals' keys and the links among
    them (a branch's bank copy, a sequel's carry). Returns {original id: copy id}."""
    insert_memories(copies)
    mapping = {old.pk: new.pk for old, new in zip(originals, copies)}
    keys = list(MemoryKey.objects.filter(memory_id__in=mapping).values_list("memory_id", "query", "embedding"))
    insert_keys([mapping[pk] for pk, _, _ in keys], [q for _, q, _ in keys], [v for _, _, v in keys])
    links = Memory.evidence.through
    links.objects.bulk_create([
        links(from_memory_id=mapping[a], to_memory_id=mapping[b])
        for a, b in links.objects.filter(from_memory_id__in=mapping, to_memory_id__in=mapping)
        .values_list("from_memory_id", "to_memory_id")])
    return mapping


def accesses_export(bank: MemoryBank | int) -> list[dict]:
    """The bank's access log (what was recalled at which turn, how often): what `decayed` scoring and
    a bank's timeline read."""
    return [{"memory_id": memory_id, "turn": turn, "count": count} for memory_id, turn, count in
            MemoryAccess.objects.filter(memory__bank=bank).order_by("id").values_list("memory_id", "turn", "count")]


def access_check(row: dict) -> None:
    """An exported access row as accesses_import will read it (TypeError or ValueError when it cannot be)."""
    if not isinstance(row["memory_id"], int) or not (row.get("turn") is None or isinstance(row["turn"], int)) \
            or not isinstance(row.get("count", 1), int) or row.get("count", 1) < 1:
        raise ValueError("memory_id and turn are numbers, count a positive number")


def accesses_import(*, rows: list[dict], memory_ids: dict[int, int]) -> int:
    """Exported access rows onto the copies (memory_ids: exported id → id here), their counters too."""
    by_turn: dict[int | None, list[int]] = defaultdict(list)
    for row in rows:
        if row["memory_id"] in memory_ids:
            by_turn[row.get("turn")] += [memory_ids[row["memory_id"]]] * row.get("count", 1)
    return sum(accesses_record(memory_ids=ids, turn=turn) for turn, ids in by_turn.items())

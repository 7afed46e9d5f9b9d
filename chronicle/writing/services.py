"""The writer's edits: lines, memories, a turn's retrieval; undo; branches (regenerate from a turn).

Every change is one `Edit` row (who, when, before, after); undo writes `before` back exactly and is
recorded as an edit of its own. Generated text is never overwritten: a line's edits live in its
`ChronicleEntry`, a memory's old versions in its edits.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from chronicle.simulation.models import Retrieval, Simulation, Turn
from chronicle.writing.models import ChronicleEntry, Edit, TurnOverride
from memory.models import Memory, MemoryKey

ENTRY_FIELDS = ("text", "annotation", "struck", "starred")
MEMORY_FIELDS = ("content", "importance", "tags", "status")


class WritingError(Exception):
    pass


def _record(*, simulation: Simulation, actor, target_type: str, target_id: int, field: str, before, after,
            label: str = "", undoes: Edit | None = None) -> Edit:
    edit = Edit(simulation=simulation, actor=actor, target_type=target_type, target_id=target_id, field=field,
                before=before, after=after, label=label[:300], undoes=undoes)
    edit.full_clean()
    edit.save()
    return edit


# --- lines ----------------------------------------------------------------------------------

def _entry(turn: Turn) -> ChronicleEntry:
    entry, _ = ChronicleEntry.objects.get_or_create(turn=turn, defaults={"text": turn.utterance})
    return entry


def _line_label(turn: Turn) -> str:
    return f"Turn {turn.number} ({turn.agent})"


@transaction.atomic
def entry_update(*, turn: Turn, actor, text: str | None = None, annotation: str | None = None,
                 struck: bool | None = None, starred: bool | None = None) -> ChronicleEntry:
    """Change the writer's version of a line; one Edit per field that really changed."""
    entry = ChronicleEntry.objects.select_for_update().filter(turn=turn).first() or _entry(turn)
    changes = {"text": text, "annotation": annotation, "struck": struck, "starred": starred}
    if text is not None and not text.strip():
        raise ValidationError({"text": "A line cannot be empty; strike it instead."})
    for name, value in changes.items():
        if value is None:
            continue
        if name == "text":
            value = value.strip()
        before = getattr(entry, name)
        if before == value:
            continue
        setattr(entry, name, value)
        _record(simulation=turn.simulation, actor=actor, target_type=Edit.Target.LINE, target_id=turn.pk,
                field=name, before=before, after=value, label=_line_label(turn))
    entry.full_clean()
    entry.save()
    return entry


# --- memories -------------------------------------------------------------------------------

def _memory_label(memory: Memory) -> str:
    return f"{memory.agent or 'Shared'} memory #{memory.pk}"


def _apply_memory(memory: Memory, field: str, value) -> None:
    """Write one field. Content is stored now and re-embedded in a worker (the page must not load the model)."""
    from chronicle.writing.tasks import reembed_memory_task
    from memory.services import memory_archive, memory_update, validate_content

    if field == "content":
        validate_content(value)
        memory.content = value
        memory.full_clean(exclude=["embedding"])
        memory.save(update_fields=["content", "updated_at"])
        reembed_memory_task.delay_on_commit(memory.pk)
    elif field == "importance":
        memory_update(memory=memory, importance=float(value))
    elif field == "tags":
        memory_update(memory=memory, tags=list(value))
    elif field == "status":
        if value == Memory.Status.ARCHIVED:
            memory_archive(memory=memory)
        else:  # undoing an archive: memory has no "restore", so the row's status is set back as it was
            memory.status = value
            memory.full_clean(exclude=["embedding"])
            memory.save(update_fields=["status", "updated_at"])


@transaction.atomic
def memory_edit(*, simulation: Simulation, memory: Memory, actor, content: str | None = None,
                importance: float | None = None, tags: Iterable[str] | None = None) -> Memory:
    if memory.bank_id != simulation.bank_id:
        raise WritingError("That memory is not in this simulation's bank.")
    tags = [t.strip() for t in tags if t and t.strip()] if tags is not None else None
    wanted = {"content": content, "importance": importance, "tags": tags}
    for field, value in wanted.items():
        if value is None:
            continue
        before = getattr(memory, field)
        before = list(before) if field == "tags" else before
        if before == value:
            continue
        _apply_memory(memory, field, value)
        _record(simulation=simulation, actor=actor, target_type=Edit.Target.MEMORY, target_id=memory.pk,
                field=field, before=before, after=value, label=_memory_label(memory))
    return memory


@transaction.atomic
def memory_archive_edit(*, simulation: Simulation, memory: Memory, actor) -> Memory:
    if memory.bank_id != simulation.bank_id:
        raise WritingError("That memory is not in this simulation's bank.")
    if memory.status == Memory.Status.ARCHIVED:
        return memory
    before = memory.status
    _apply_memory(memory, "status", Memory.Status.ARCHIVED)
    _record(simulation=simulation, actor=actor, target_type=Edit.Target.MEMORY, target_id=memory.pk,
            field="status", before=before, after=Memory.Status.ARCHIVED, label=_memory_label(memory))
    return memory


def writer_memory_check(*, simulation: Simulation, content: str, agent: str = "", kind: str = "semantic",
                        importance: float = 5.0, tags: Iterable[str] = (), turn: int | None = None) -> Memory:
    """The unsaved memory the writer asked for, checked as `memory_create` will check it in the worker
    (the content rule, `full_clean()` with every field validator and check constraint), so that the
    page says "written" only of a memory that will exist. Raises ValidationError keyed by field."""
    from memory.services import validate_content

    if simulation.bank_id is None:
        raise ValidationError("This simulation has no memory bank yet: wait until it has been seeded.")
    if agent and agent not in simulation.cast_names:
        raise ValidationError({"agent": f"{agent} is not in this simulation's cast."})
    validate_content(content)
    memory = Memory(bank_id=simulation.bank_id, content=content, agent=agent, kind=kind, importance=importance,
                    tags=[t.strip() for t in tags if t and t.strip()], source=Memory.Source.WRITER, turn=turn)
    memory.full_clean(exclude=["embedding"])
    return memory


@transaction.atomic
def writer_memory_form(*, simulation: Simulation, actor, content: str, agent: str = "", kind: str = "semantic",
                       importance: float = 5.0, tags: Iterable[str] = (), turn: int | None = None) -> Memory:
    """A memory written by the writer (source "writer"); it exists before turn `turn + 1`."""
    from memory.services import memory_create

    checked = writer_memory_check(simulation=simulation, content=content, agent=agent, kind=kind,
                                  importance=importance, tags=tags, turn=turn)
    memory = memory_create(bank=simulation.bank, content=content, agent=agent, kind=kind, importance=importance,
                           tags=checked.tags, source="writer", turn=turn)
    _record(simulation=simulation, actor=actor, target_type=Edit.Target.MEMORY, target_id=memory.pk,
            field="created", before=None, after=content, label=_memory_label(memory))
    return memory


# --- a turn's retrieval ---------------------------------------------------------------------

def _override_ids(simulation: Simulation, index: int, kind: str) -> list[int]:
    return sorted(TurnOverride.objects.at(simulation, index).filter(kind=kind)
                  .values_list("memory_id", flat=True))


def _set_override_ids(simulation: Simulation, index: int, kind: str, ids: Iterable[int], actor) -> None:
    ids = set(ids)
    rows = TurnOverride.objects.at(simulation, index).filter(kind=kind)
    rows.exclude(memory_id__in=ids).delete()
    have = set(rows.values_list("memory_id", flat=True))
    contents = dict(Memory.objects.in_bank(simulation.bank).filter(pk__in=ids - have).values_list("pk", "content"))
    for memory_id in sorted(ids - have):
        override = TurnOverride(simulation=simulation, turn_index=index, kind=kind, memory_id=memory_id,
                                content=contents.get(memory_id, ""), created_by=actor)
        override.full_clean(validate_constraints=False)
        override.save()


def _set_line_override(simulation: Simulation, index: int, text: str, actor) -> None:
    TurnOverride.objects.at(simulation, index).filter(kind=TurnOverride.Kind.LINE).delete()
    if text:
        TurnOverride.objects.create(simulation=simulation, turn_index=index, kind=TurnOverride.Kind.LINE,
                                    content=text, created_by=actor)


@transaction.atomic
def override_toggle(*, turn: Turn, kind: str, memory_id: int, actor, on: bool) -> bool:
    """Exclude a memory from a turn, or pin one onto it (on=False takes that back); returns the new state."""
    simulation = turn.simulation
    if kind not in (TurnOverride.Kind.EXCLUDE, TurnOverride.Kind.PIN):
        raise WritingError(f"Unknown override {kind!r}.")
    if not Memory.objects.in_bank(simulation.bank).filter(pk=memory_id).exists():
        raise WritingError("That memory is not in this simulation's bank.")
    before = _override_ids(simulation, turn.index, kind)
    after = sorted(set(before) | {memory_id}) if on else sorted(set(before) - {memory_id})
    if before != after:
        _set_override_ids(simulation, turn.index, kind, after, actor)
        _record(simulation=simulation, actor=actor, target_type=Edit.Target.RETRIEVAL, target_id=turn.pk,
                field=kind, before=before, after=after, label=_line_label(turn))
    return on


@transaction.atomic
def line_override_set(*, turn: Turn, text: str, actor) -> None:
    """Replace the turn's line by hand for the next regeneration ("" removes it)."""
    simulation = turn.simulation
    rows = TurnOverride.objects.at(simulation, turn.index).filter(kind=TurnOverride.Kind.LINE)
    before = rows.values_list("content", flat=True).first() or ""
    text = (text or "").strip()
    if before != text:
        _set_line_override(simulation, turn.index, text, actor)
        _record(simulation=simulation, actor=actor, target_type=Edit.Target.RETRIEVAL, target_id=turn.pk,
                field="line", before=before, after=text, label=_line_label(turn))


# --- undo -----------------------------------------------------------------------------------

@transaction.atomic
def edit_undo(*, edit: Edit, actor) -> Edit:
    """Put `before` back exactly; the undo is an edit too (and can itself be undone)."""
    simulation = edit.simulation
    if edit.target_type == Edit.Target.LINE:
        turn = Turn.objects.get(pk=edit.target_id, simulation=simulation)
        entry = _entry(turn)
        current = getattr(entry, edit.field)
        setattr(entry, edit.field, edit.before)
        entry.full_clean()
        entry.save()
    elif edit.target_type == Edit.Target.MEMORY:
        memory = Memory.objects.in_bank(simulation.bank).get(pk=edit.target_id)
        if edit.field == "created":
            current = memory.status
            _apply_memory(memory, "status", Memory.Status.ARCHIVED)  # nothing is deleted: archived
            return _record(simulation=simulation, actor=actor, target_type=edit.target_type,
                           target_id=edit.target_id, field="status", before=current, after=Memory.Status.ARCHIVED,
                           label=edit.label, undoes=edit)
        current = getattr(memory, edit.field)
        current = list(current) if edit.field == "tags" else current
        _apply_memory(memory, edit.field, edit.before)
    else:
        turn = Turn.objects.get(pk=edit.target_id, simulation=simulation)
        if edit.field == "line":
            current = TurnOverride.objects.at(simulation, turn.index).filter(kind="line") \
                .values_list("content", flat=True).first() or ""
            _set_line_override(simulation, turn.index, edit.before or "", actor)
        else:
            current = _override_ids(simulation, turn.index, edit.field)
            _set_override_ids(simulation, turn.index, edit.field, edit.before or [], actor)
    return _record(simulation=simulation, actor=actor, target_type=edit.target_type, target_id=edit.target_id,
                   field=edit.field, before=current, after=edit.before, label=edit.label, undoes=edit)


# --- branches -------------------------------------------------------------------------------

BRANCH_FIELDS = ("scenario", "scenario_snapshot", "cast_snapshot", "max_turns", "speaking_order", "retrieval_mode",
                 "scoring", "weights", "provider", "base_url", "model", "api_key", "temperature", "max_tokens", "seed",
                 "timeout_s", "max_tool_calls", "tools_unsupported")


@transaction.atomic
def simulation_branch(*, parent: Simulation, index: int, actor) -> Simulation:
    """Regenerate from turn `index` (0-based): a new run sharing the turns before it.

    The copy of turns and bank happens in the worker (`branch_prepare`), then the run goes on from
    `index` with the same engine, honouring the writer's overrides of that turn.
    """
    from chronicle.simulation.tasks import start_simulation_task
    from memory.services import bank_create

    if parent.is_live:
        raise WritingError("Pause the run (or let it finish) before regenerating from one of its turns.")
    done = parent.turns.done().filter(index__lt=index).count()
    if index < 0 or done != index:
        raise WritingError(f"Turn {index + 1} cannot be regenerated: the turns before it are not all done.")
    if parent.bank_id is None:
        raise WritingError("This run has no memory bank to branch from.")
    branch = Simulation(owner=parent.owner, parent=parent, branch_turn=index, status=Simulation.Status.SEEDING)
    for name in BRANCH_FIELDS:
        setattr(branch, name, getattr(parent, name))
    branch.max_turns = max(parent.max_turns, index + 1)
    siblings = parent.branches.count()
    branch.title = f"{parent.title or parent} · branch {siblings + 1} from turn {index + 1}"[:200]
    branch.full_clean()
    branch.save()
    branch.bank = bank_create(name=f"Simulation #{branch.pk}: {branch.title}"[:200], owner=parent.owner)
    branch.save(update_fields=["bank", "updated"])
    _record(simulation=parent, actor=actor, target_type=Edit.Target.RETRIEVAL,
            target_id=(parent.turns.filter(index=index).values_list("pk", flat=True).first() or 0),
            field="regenerate", before=None, after=branch.pk, label=f"Regenerated from turn {index + 1}: #{branch.pk}")
    start_simulation_task.delay_on_commit(branch.pk)
    return branch


def _copy_bank(parent: Simulation, branch: Simulation, number: int) -> dict[int, int]:
    """The parent's bank as of turn `number` (1-based): gifted/writer memories and those of earlier
    turns, as they are now (the writer's edits applied), archived ones left out; keys and vectors kept."""
    from memory.services import memory_reembed

    edited = set(Edit.objects.for_simulation(parent).filter(target_type="memory", field="content")
                 .values_list("target_id", flat=True))
    source = list(Memory.objects.in_bank(parent.bank).active().before_turn(number).order_by("id"))
    for memory in source:
        if memory.pk in edited:
            memory_reembed(memory=memory)  # the worker may not have got to it yet
    skip = {"id", "bank", "created_at", "updated_at"}
    fields = [f.name for f in Memory._meta.concrete_fields if f.name not in skip]
    copies = []
    for memory in source:
        values = {name: getattr(memory, name) for name in fields}
        values["metadata"] = dict(memory.metadata or {}, copied_from=memory.pk)
        copies.append(Memory(bank=branch.bank, **values))
    Memory.objects.bulk_create(copies, batch_size=500)
    mapping = {old.pk: new.pk for old, new in zip(source, copies)}
    keys = [MemoryKey(memory_id=mapping[k.memory_id], query=k.query, embedding=k.embedding)
            for k in MemoryKey.objects.filter(memory_id__in=mapping)]
    MemoryKey.objects.bulk_create(keys, batch_size=1000)
    return mapping


def _remap(snapshots: list[dict], mapping: dict[int, int]) -> list[dict]:
    return [dict(s, memory_id=mapping.get(s.get("memory_id"), s.get("memory_id"))) for s in snapshots or []]


def branch_prepare(*, simulation_id: int) -> Simulation | None:
    """In the worker: copy the turns before the branch turn and the bank as of it, then run on."""
    from chronicle.simulation.services import _queue_next

    with transaction.atomic():
        branch = Simulation.objects.select_for_update().filter(pk=simulation_id).first()
        if branch is None or branch.status != Simulation.Status.SEEDING or branch.parent_id is None:
            return branch
        parent = Simulation.objects.get(pk=branch.parent_id)
        index = branch.branch_turn or 0
        if branch.turns.exists():  # prepared already (a redelivered task)
            mapping = {}
        else:
            mapping = _copy_bank(parent, branch, index + 1)
            skip = {"id", "simulation"}
            turn_fields = [f.name for f in Turn._meta.concrete_fields if f.name not in skip]
            for turn in parent.turns.done().filter(index__lt=index).order_by("index").select_related("entry") \
                    .prefetch_related("retrievals"):
                copy = Turn.objects.create(simulation=branch, **{n: getattr(turn, n) for n in turn_fields})
                Retrieval.objects.bulk_create([
                    Retrieval(turn=copy, agent=r.agent, tool=r.tool, arguments=r.arguments, query=r.query,
                              filter=r.filter, results=_remap(r.results, mapping), response=r.response,
                              latency_ms=r.latency_ms, error=r.error, order=r.order)
                    for r in turn.retrievals.all()])
                entry = ChronicleEntry.objects.filter(turn=turn).first()
                if entry:
                    ChronicleEntry.objects.create(turn=copy, text=entry.text, annotation=entry.annotation,
                                                  struck=entry.struck, starred=entry.starred)
            for override in TurnOverride.objects.filter(simulation=parent, turn_index__lte=index):
                TurnOverride.objects.create(
                    simulation=branch, turn_index=override.turn_index, kind=override.kind,
                    memory_id=mapping.get(override.memory_id, override.memory_id) if override.memory_id else None,
                    content=override.content, created_by=override.created_by)
        from memory.models import MemoryBank
        MemoryBank.objects.filter(pk=branch.bank_id).update(seed_status="done")
        branch.status = Simulation.Status.RUNNING
        branch.updated = timezone.now()
        branch.save(update_fields=["status", "updated"])
        _queue_next(branch)
    return branch

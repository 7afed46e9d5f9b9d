"""The writer's edits: lines, memories, a turn's retrieval; undo; branches (regenerate from a turn).

Every change is one `Edit` row (who, when, before, after); undo writes `before` back exactly and is
recorded as an edit of its own. Generated text is never overwritten: a line's edits live in its
`ChronicleEntry`, a memory's old versions in its edits.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ValidationError
from django.db import transaction

from chronicle.models import Character
from chronicle.simulation.control import branching
from chronicle.simulation.run.models import Simulation, Turn, TurnOverride
from chronicle.simulation.control.pins import pin_refusal
from chronicle.simulation.control.services import ControlError
from chronicle.simulation.story.stage import deliver
from chronicle.writing.models import ChronicleEntry, Edit
from chronicle.writing.selectors import inspector_overrides
from memory.api import memory_edits, upkeep
from memory.models import Memory
from chronicle.simulation.providers import get_provider

MEMORY_FIELDS = ("content", "importance", "tags", "status")


class WritingError(Exception):
    pass


class PinRefused(WritingError):
    """A pin that could not apply when the turn is regenerated: the reason is the writer's to read."""


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


@transaction.atomic
def line_memories_update(*, turn: Turn, text: str, actor) -> int:
    """What the listeners remember of this line becomes the writer's wording: each copy that holds
    the line as it was said ("Alex said: …"; a copy a distortion rewrote keeps its own version) is
    edited through memory_edit (re-embedded by a worker, in History). Returns the copies changed."""
    simulation = turn.simulation
    if simulation.bank_id is None or not text.strip():
        return 0
    line = deliver(turn.utterance or "", speaker=turn.agent, present=simulation.present_at(turn.number))
    said = {(turn.utterance or "").strip(), (line.text or "").strip()}  # as stored: the words, no stage business
    changed = 0
    copies = Memory.objects.in_bank(simulation.bank).filter(kind=Memory.Kind.EPISODIC, turn=turn.number,
                                                             speaker=turn.agent).order_by("agent", "id")
    for memory in copies:
        head, _sep, body = memory.content.partition(": ")
        if not body or (memory.metadata or {}).get("distortion", {}).get("original") or body.strip() not in said:
            continue
        memory_edit(simulation=simulation, memory=memory, actor=actor, content=f"{head}: {text.strip()}")
        changed += 1
    return changed


# --- memories -------------------------------------------------------------------------------

def _memory_label(memory: Memory) -> str:
    return f"{memory.agent or 'Shared'} memory #{memory.pk}"


def _apply_memory(memory: Memory, field: str, value) -> None:
    """Write one field through memory's services (a new content is re-embedded by a worker and is
    out of search until then: the page must not load the model)."""
    if field == "content":
        memory_edits.memory_update(memory=memory, content=value)
    elif field == "importance":
        memory_edits.memory_update(memory=memory, importance=float(value))
    elif field == "tags":
        memory_edits.memory_update(memory=memory, tags=list(value))
    elif field == "status":
        if value == Memory.Status.ARCHIVED:
            memory_edits.memory_archive(memory=memory)
        else:  # undoing an archive
            memory_edits.memory_restore(memory=memory, status=value)


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


@transaction.atomic
def memory_promote(*, simulation: Simulation, memory: Memory, actor) -> Character:
    """An earned memory made permanent: added to its agent's character (an extra memory, what a card's
    lore is), so every new run with that character seeds it as a gifted memory. The memory notes it."""
    if memory.bank_id != simulation.bank_id:
        raise WritingError("That memory is not in this simulation's bank.")
    if not memory.agent or memory.source == Memory.Source.GIFTED:
        raise WritingError("Only a character's own earned memory can be made permanent.")
    character = Character.objects.owned_by(simulation.owner).filter(name=memory.agent).first()
    if character is None:
        raise WritingError(f"None of your characters is called {memory.agent} any more.")
    extras = list(character.extra_memories or [])
    if all((e or {}).get("content") != memory.content for e in extras):
        extras.append({"content": memory.content, "keys": []})
        character.extra_memories = extras
        character.save(update_fields=["extra_memories", "updated"])
    memory_edits.memory_mark(memory=memory, promoted={"character": character.pk, "by": actor.get_username()})
    return character


@transaction.atomic
def memory_consolidate_edit(*, simulation: Simulation, agent: str, actor) -> list[upkeep.ConsolidationResult]:
    """The writer's "Consolidate" button: the agent's memories older than its last RECENT_TURNS turns.
    One Edit per summary, its field "consolidation" holding every status it changed (the summary's
    and its originals'), so that undo puts them all back at once and an undo of the undo redoes it."""
    if simulation.bank_id is None:
        raise WritingError("This simulation has no memory bank yet.")
    if agent not in simulation.cast_names:
        raise WritingError(f"{agent} is not in this simulation's cast.")
    last = simulation.turns.order_by("-index").values_list("index", flat=True).first()
    before_turn = (last + 2 if last is not None else 1) - upkeep.RECENT_TURNS  # memory turns are index + 1
    summarize = None
    if simulation.provider == Simulation.Provider.OPENAI:  # the run's model writes the summaries

        summarize = upkeep.summarizer(get_provider(simulation).complete)
    results = upkeep.consolidate(simulation.bank, agent, before_turn=before_turn, summarize=summarize)
    for result in results:
        _record(simulation=simulation, actor=actor, target_type=Edit.Target.MEMORY, target_id=result.summary.pk,
                field="consolidation",
                before={str(result.summary.pk): Memory.Status.ARCHIVED} | {str(m.pk): Memory.Status.ACTIVE
                                                                              for m in result.originals},
                after=memory_edits.statuses_of([result.summary, *result.originals]),
                label=f"{agent}: {len(result.originals)} memories consolidated into #{result.summary.pk}")
    return results


def writer_memory_check(*, simulation: Simulation, content: str, agent: str = "", kind: str = "semantic",
                        importance: float = 5.0, tags: Iterable[str] = (), turn: int | None = None) -> Memory:
    """The unsaved memory the writer asked for, checked as `memory_create` will check it in the worker
    (the content rule, `full_clean()` with every field validator and check constraint), so that the
    page says "written" only of a memory that will exist. Raises ValidationError keyed by field."""
    if simulation.bank_id is None:
        raise ValidationError("This simulation has no memory bank yet: wait until it has been seeded.")
    if agent and agent not in simulation.cast_names:
        raise ValidationError({"agent": f"{agent} is not in this simulation's cast."})
    return memory_edits.memory_check(bank_id=simulation.bank_id, content=content, agent=agent, kind=kind, importance=importance,
                                     tags=[t.strip() for t in tags if t and t.strip()], source=Memory.Source.WRITER, turn=turn)


@transaction.atomic
def writer_memory_form(*, simulation: Simulation, actor, content: str, agent: str = "", kind: str = "semantic",
                       importance: float = 5.0, tags: Iterable[str] = (), turn: int | None = None) -> Memory:
    """A memory written by the writer (source "writer"); it exists before turn `turn + 1`."""
    checked = writer_memory_check(simulation=simulation, content=content, agent=agent, kind=kind,
                                  importance=importance, tags=tags, turn=turn)
    memory = memory_edits.memory_create(bank=simulation.bank, content=content, agent=agent, kind=kind, importance=importance,
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
    memory = Memory.objects.in_bank(simulation.bank).filter(pk=memory_id).first()
    if memory is None:
        raise WritingError("That memory is not in this simulation's bank.")
    if kind == TurnOverride.Kind.PIN and on:
        refusal = pin_refusal(simulation=simulation, index=turn.index, agent=turn.agent, memory=memory)
        if refusal:
            raise PinRefused(refusal)
    before = _override_ids(simulation, turn.index, kind)
    after = sorted(set(before) | {memory_id}) if on else sorted(set(before) - {memory_id})
    if before != after:
        _set_override_ids(simulation, turn.index, kind, after, actor)
        _record(simulation=simulation, actor=actor, target_type=Edit.Target.RETRIEVAL, target_id=turn.pk,
                field=kind, before=before, after=after, label=_line_label(turn))
    return on


@transaction.atomic
def line_override_set(*, turn: Turn, text: str, actor) -> str:
    """Replace the turn's line by hand for the next regeneration ("" removes it). Returns what
    happened: "saved", "removed", "unchanged", or "empty" (nothing written, nothing to remove)."""
    simulation = turn.simulation
    rows = TurnOverride.objects.at(simulation, turn.index).filter(kind=TurnOverride.Kind.LINE)
    before = rows.values_list("content", flat=True).first() or ""
    text = (text or "").strip()
    if before == text:
        return "unchanged" if text else "empty"
    _set_line_override(simulation, turn.index, text, actor)
    _record(simulation=simulation, actor=actor, target_type=Edit.Target.RETRIEVAL, target_id=turn.pk,
            field="line", before=before, after=text, label=_line_label(turn))
    return "saved" if text else "removed"


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
        if edit.field == "consolidation":  # the summary and its originals, as they were (vectors untouched)
            ids = [int(i) for i in edit.before]
            current = memory_edits.statuses_of(Memory.objects.in_bank(simulation.bank).filter(pk__in=ids))
            memory_edits.memory_statuses_set(bank=simulation.bank, statuses=edit.before)
            return _record(simulation=simulation, actor=actor, target_type=edit.target_type,
                           target_id=edit.target_id, field=edit.field, before=current, after=edit.before,
                           label=edit.label, undoes=edit)
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

@transaction.atomic
def simulation_branch(*, parent: Simulation, index: int, actor, changes: dict | None = None,
                      label: str = "") -> Simulation:
    """Regenerate from turn `index` (0-based): the branch (chronicle.simulation.control.branching) with the
    writer's versions of the lines it shares, and the regeneration in the parent's history.

    A pin on that turn which the branch could not give its agent (its memory archived since it was
    pinned, say) refuses the regeneration with the reason: the branch never drops it silently."""
    turn = parent.turns.filter(index=index).first()
    if turn is not None:
        refusals = inspector_overrides(parent, index, turn.agent).pinned
        reasons = [o.refusal for o in refusals if getattr(o, "refusal", "")]
        if reasons:
            raise PinRefused(f"Turn {index + 1} has a pin that cannot apply in a branch: {' '.join(reasons)} "
                             "Unpin it, or fix it, before regenerating.")
    try:
        branch, turn_map = branching.simulation_branch(parent=parent, index=index, changes=changes, label=label)
    except ControlError as exc:
        raise WritingError(str(exc)) from exc
    ChronicleEntry.objects.bulk_create([
        ChronicleEntry(turn_id=turn_map[e.turn_id], text=e.text, annotation=e.annotation, struck=e.struck,
                       starred=e.starred)
        for e in ChronicleEntry.objects.filter(turn_id__in=turn_map)])
    _record(simulation=parent, actor=actor, target_type=Edit.Target.RETRIEVAL,
            target_id=(parent.turns.filter(index=index).values_list("pk", flat=True).first() or 0),
            field="regenerate", before=None, after=branch.pk,
            label=f"Turn {index + 1}: branch “{branch}”{' (' + label + ')' if label else ''}")
    return branch


def simulation_replay_undistorted(*, parent: Simulation, actor) -> Simulation:
    """The run again from its first turn with the same settings but no distortion filters, to compare."""
    if not parent.distortions.strip():
        raise WritingError("This run has no distortion filters to leave out.")
    return simulation_branch(parent=parent, index=0, actor=actor, changes={"distortions": ""},
                             label="without distortions")


def record_outside_edit(sender, *, memory: Memory, actor, changes: dict, **_kwargs) -> None:
    """memory.signals.memory_edited (a staff edit in the admin): the run whose bank holds the
    memory records each change in its History, where the writer sees it and can undo it."""
    simulation = Simulation.objects.filter(bank_id=memory.bank_id).first()
    if simulation is None:
        return  # a character's or scenario's preview bank: no run, no history
    for field, (before, after) in changes.items():
        _record(simulation=simulation, actor=actor, target_type=Edit.Target.MEMORY, target_id=memory.pk,
                field=field, before=before, after=after, label=f"{_memory_label(memory)} (in the admin)")

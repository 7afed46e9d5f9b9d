"""The writer's page actions that take more than one step: a form's checks and then one or more of
chronicle/writing/services.py's writes (or a task). Views call one of these and render what comes back;
a refusal is a ValidationError whose messages the page shows as they are."""

from __future__ import annotations

import json
from collections.abc import Mapping

from django.core.exceptions import ValidationError
from django.db import transaction

from chronicle.simulation.run.models import Simulation, Turn
from chronicle.writing import ask, exports, selectors, services
from chronicle.writing.forms import LineForm, MemoryEditForm
from chronicle.writing.models import ChronicleEntry
from chronicle.writing.tasks import form_memory_task
from memory.api import memory_edits, text_problem_in
from memory.models import Memory


def _refusal(form) -> ValidationError:
    return ValidationError([e for errs in form.errors.values() for e in errs])


def line_edit(*, turn: Turn, actor, data: Mapping[str, str]) -> ChronicleEntry:
    """One line of the reading view: the Star or Strike button toggles it; otherwise the text and/or
    annotation the writer sent (only the fields sent) are saved."""
    entry = selectors.entry_for(turn)
    if "star" in data:
        changes = {"starred": not (entry and entry.starred)}
    elif "strike" in data:
        changes = {"struck": not (entry and entry.struck)}
    else:
        form = LineForm(data)
        if not form.is_valid():
            raise _refusal(form)
        changes = {k: v for k, v in form.cleaned_data.items() if k in data and k != "remembered"}
        if form.cleaned_data["remembered"] and form.cleaned_data.get("text"):
            with transaction.atomic():  # the wording and the memories together, or neither
                entry = services.entry_update(turn=turn, actor=actor, **changes)
                services.line_memories_update(turn=turn, text=form.cleaned_data["text"], actor=actor)
            return entry
    return services.entry_update(turn=turn, actor=actor, **changes)


def memory_change(*, simulation: Simulation, memory: Memory, actor, data: Mapping[str, str]) -> Memory:
    """A memory card's Archive button, or its edited content / importance / tags; with all_copies,
    for every listener's copy of the line (one card on the bank page)."""
    if data.get("all_copies"):
        copies = selectors.line_copies(memory)
        if len(copies) > 1:
            rest = {k: v for k, v in data.items() if k != "all_copies"}
            with transaction.atomic():  # every copy, or none (a refused value refuses them all)
                for copy in copies:
                    memory_change(simulation=simulation, memory=copy, actor=actor, data=rest)
            return memory
    if "archive" in data:
        return services.memory_archive_edit(simulation=simulation, memory=memory, actor=actor)
    if "promote" in data:
        try:
            services.memory_promote(simulation=simulation, memory=memory, actor=actor)
        except services.WritingError as exc:
            raise ValidationError(str(exc)) from exc
        return memory
    form = MemoryEditForm(data)
    if not form.is_valid():
        raise _refusal(form)
    return services.memory_edit(simulation=simulation, memory=memory, actor=actor, **form.cleaned_data)


def memory_consolidate(*, simulation: Simulation, actor, data: Mapping[str, str]) -> tuple[str, int]:
    """The bank page's "Consolidate <agent>'s old memories": run at once (no model: offline summaries,
    a few hundred vectors), recorded in History; returns what the writer reads and the summaries made."""
    agent = (data.get("agent") or "").strip()
    try:
        results = services.memory_consolidate_edit(simulation=simulation, agent=agent, actor=actor)
    except services.WritingError as exc:
        raise ValidationError(str(exc)) from exc
    if not results:
        return f"{agent} has no cluster of similar old, unimportant memories to consolidate.", 0
    count = sum(len(r.originals) for r in results)
    return (f"{agent}: {count} memories consolidated into {len(results)} "
            f"{'summary' if len(results) == 1 else 'summaries'} (undo in History; shown here)."), len(results)


def memories_prune(*, simulation: Simulation, restore: bool = False) -> str:
    """The bank page's "Prune faded memories" (seed 004: what the agents lived that has faded below
    WONDA_PRUNE_MIN_IMPORTANCE is archived, marked as pruned), or "Restore pruned memories"."""
    if simulation.bank_id is None:
        raise ValidationError("This simulation has no memory bank yet.")
    if restore:
        n = memory_edits.memories_unprune(bank=simulation.bank)
        return f"{n} pruned memor{'y' if n == 1 else 'ies'} restored: found by searches again."
    n = memory_edits.memories_prune(bank=simulation.bank)
    if not n:
        return "No memory has faded enough to prune: every lived memory is still important enough."
    return (f"{n} faded memor{'y' if n == 1 else 'ies'} archived (out of every search, not deleted): "
            "“Restore pruned memories” brings them back.")


def memory_form_request(*, simulation: Simulation, actor, data: dict) -> None:
    """A memory the writer formed (checked by MemoryFormForm): embedded and saved by a worker after commit."""
    form_memory_task.delay_on_commit(simulation.pk, actor.pk, data)


def simulation_import_file(*, owner, upload) -> Simulation:
    """A run from an uploaded export (its size already checked by ImportForm): all or nothing."""
    try:
        data = json.loads(upload.read().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ValidationError("This is not a JSON file (it is not UTF-8 text).") from exc
    except ValueError as exc:
        raise ValidationError(f"This is not a JSON file: {exc}") from exc
    if problem := text_problem_in(data):  # "\u0000" or a lone surrogate would fail in PostgreSQL, halfway
        raise ValidationError(f"This export cannot be imported: {problem}")
    return exports.simulation_import(owner=owner, data=data)


def turn_ask(*, simulation: Simulation, turn: Turn, question: str, rows: list[dict]) -> ask.Answer:
    """"Ask as" the turn's agent in the inspector: its answer from the memories the time-consistent
    search found (`rows`, best first), with the run's provider (offline: the scripted answer)."""
    ids = [r["memory_id"] for r in rows]
    by_id = Memory.objects.in_bank(simulation.bank).in_bulk(ids) if simulation.bank_id else {}
    return ask.ask(agent=turn.agent, question=question, memories=[by_id[i] for i in ids if i in by_id],
                   provider=ask.simulation_provider(simulation))

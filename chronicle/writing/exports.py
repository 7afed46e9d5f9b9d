"""The chronicle out of Wonda: Markdown, Fountain (screenplay), and a complete JSON that imports back."""

from __future__ import annotations

import re
from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.dateparse import parse_datetime

from chronicle import queueing
from chronicle.services.card_export import WONDA_FORMAT
from chronicle.simulation.run.models import Retrieval, Simulation, Turn, TurnOverride
from chronicle.simulation.run.replay import script_from_export
from chronicle.simulation.run.run_settings import EXPORTED_SETTINGS, SECRET_SETTINGS
from chronicle.writing import selectors
from chronicle.writing.export_rows import (CHUNK, MEMORY_FIELDS, RETRIEVAL_FIELDS, TURN_FIELDS, memory_rows,
                                           turn_rows)
from chronicle.writing.models import ChronicleEntry, Edit
from memory.models import Memory
from memory.api import bank_files, banks, memory_edits

FORMAT = "wonda.simulation"
VERSION = 1
# The run's settings without its secrets (the API key never leaves the database).
SETTINGS = (*EXPORTED_SETTINGS, "tools_unsupported")


def _lines(simulation: Simulation):  # (turn, text, entry) of every done line, with the writer's text
    for turn in selectors.lines_with_entries(simulation).filter(status=Turn.Status.DONE).iterator(chunk_size=CHUNK):
        yield turn, selectors.entry_text(turn), selectors.entry_for(turn)


def filename(simulation: Simulation, ext: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9]+", "-", simulation.title or f"simulation-{simulation.pk}").strip("-").lower()
    return f"{stem or 'simulation'}.{ext}"


# --- Markdown -------------------------------------------------------------------------------

def _place(scenario: dict) -> tuple[str, str]:
    """The scene's place in a few words and the rest of its description: "The dining room at Hollins
    Farm: a long oak table, …" → ("The dining room at Hollins Farm", "a long oak table, …")."""
    location = " ".join((scenario.get("location") or "").split())
    place, _, rest = location.partition(":")
    return place.strip().rstrip(".") or (scenario.get("title") or ""), rest.strip()


def _directions(simulation: Simulation) -> dict[int, list[str]]:
    """The writer's stage directions and world events by the turn they come before."""
    by_turn: dict[int, list[str]] = {}
    for direction in simulation.directions:
        by_turn.setdefault(direction.turn, []).append(" ".join(direction.text.split()).rstrip("."))
    return by_turn


def to_markdown(simulation: Simulation) -> str:
    scenario = simulation.scenario_snapshot or {}
    out = [f"# {simulation.title or scenario.get('title') or 'Chronicle'}", ""]
    place, _rest = _place(scenario)
    setting = " — ".join(x for x in (place, (scenario.get("time_of_day") or "").strip().rstrip(".")) if x)
    if setting:
        out += [f"*{setting}*", ""]
    if scenario.get("description"):
        out += [scenario["description"], ""]
    out += ["## Cast", ""]
    out += [f"- **{c['name']}**" + (f", {c['role']}" if c.get("role") else "") for c in simulation.cast_snapshot or []]
    out += ["", "## Chronicle", ""]
    directions = _directions(simulation)
    for turn, text, entry in _lines(simulation):
        out += [f"*{direction}.*" for direction in directions.pop(turn.number, [])]
        if out[-1] != "":
            out.append("")
        star = " ★" if entry and entry.starred else ""
        line = f"**{turn.agent}**{star} *(turn {turn.number})*: {text}"
        out.append(f"~~{line}~~" if entry and entry.struck else line)
        if entry and entry.annotation:
            out += ["", f"> Note: {entry.annotation}"]
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- Fountain -------------------------------------------------------------------------------

def scene_heading(scenario: dict) -> str:
    """"Alex's apartment, living room" + "Early evening" → "INT. ALEX'S APARTMENT - LIVING ROOM - EARLY EVENING";
    a location that goes on after a colon ("…: a long oak table, …") is headed by its place alone."""
    place, _rest = _place(scenario)
    parts = [p.strip() for p in re.split(r"[,;]|\s+-\s+", place or "Somewhere") if p.strip()]
    outside = re.match(r"(?i)^(outside|exterior|ext\.?)\b", place)
    time = (scenario.get("time_of_day") or "").strip().rstrip(".")
    heading = ("EXT. " if outside else "INT. ") + " - ".join(parts)
    if time:
        heading += f" - {time}"
    return " ".join(heading.upper().split())


def _cue(name: str) -> str:
    cue = " ".join(name.upper().split())
    # Fountain reads an all-capital line as a cue only if it has a letter; "@" forces it otherwise.
    return cue if re.search(r"[A-Z]", cue) else f"@{cue}"


def _dialogue(text: str) -> list[str]:
    """A line as Fountain dialogue: what is done between asterisks ("*whispers to Mira*", "*pours the
    wine*") becomes a parenthetical on its own line, the speech around it stays dialogue."""
    out = []
    for piece in re.split(r"(\*[^*]+\*)", " ".join(text.split())):
        piece = piece.strip()
        if piece.startswith("*") and piece.endswith("*") and len(piece) > 2:
            out.append(f"({piece[1:-1].strip().rstrip('.')})")
        elif piece:
            out.append(piece)
    return out or [""]


def to_fountain(simulation: Simulation) -> str:
    scenario = simulation.scenario_snapshot or {}
    out = [f"Title: {simulation.title or scenario.get('title') or 'Chronicle'}", "Credit: Written with Wonda", ""]
    out += [scene_heading(scenario), ""]
    _place_name, rest = _place(scenario)
    setting = " ".join(x for x in (rest[:1].upper() + rest[1:] if rest else "", scenario.get("description"),
                                   scenario.get("atmosphere")) if x)
    if setting:
        out += [setting, ""]
    directions = _directions(simulation)
    for turn, text, entry in _lines(simulation):
        for direction in directions.pop(turn.number, []):
            out += [f"{direction}.", ""]  # an action paragraph: what happens, between the lines
        if entry and entry.struck:
            continue  # struck lines are left out of the screenplay
        out += [_cue(turn.agent), *_dialogue(text)]
        if entry and entry.annotation:
            out.append(f"[[{' '.join(entry.annotation.split()).replace(']]', '] ]')}]]")
        out.append("")
    return "\n".join(out).rstrip() + "\n"


# --- JSON -----------------------------------------------------------------------------------

def to_json(simulation: Simulation) -> dict:
    """Everything to rebuild the run elsewhere, but the API key (the page streams it: export_stream)."""
    return export_head(simulation) | {"turns": list(turn_rows(simulation)), "memories": list(memory_rows(simulation))}


def export_head(simulation: Simulation) -> dict:
    """The export but its turns and memories (empty lists, in their places)."""
    return {
        "format": FORMAT, "version": VERSION,
        "simulation": {**{f: v.isoformat() if isinstance(v := getattr(simulation, f), datetime) else v  # a story date
                          for f in SETTINGS}, "status": simulation.status, "branch_turn": simulation.branch_turn,
                       # A sequel's source, for the reader (an import does not link runs: its bank
                       # already holds the memories carried in, marked carried_from).
                       "sequel_of": ({"id": simulation.sequel_of_id, "title": str(simulation.sequel_of)}
                                     if simulation.sequel_of_id else None)},
        "scenario": simulation.scenario_snapshot, "cast": simulation.cast_snapshot, "turns": [],
        "overrides": [{"turn_index": o.turn_index, "kind": o.kind, "memory_id": o.memory_id, "content": o.content}
                      for o in TurnOverride.objects.filter(simulation=simulation)],
        "edits": [{"actor": e.actor.get_username() if e.actor else "", "created": e.created.isoformat(),
                   "target_type": e.target_type, "target_id": e.target_id, "field": e.field, "before": e.before,
                   "after": e.after, "label": e.label}
                  for e in Edit.objects.for_simulation(simulation).select_related("actor").order_by("id")],
        "memories": [],
        "relationships": bank_files.relationships_export(simulation.bank_id) if simulation.bank_id else [],
        "accesses": bank_files.accesses_export(simulation.bank_id) if simulation.bank_id else [],
    }


def scenario_file_from_export(export: dict) -> dict:
    """A simulation's JSON export as a Wonda scenario file whose script replays it: the run's scenario,
    its cast as it was, its settings (the provider's aside), and each line with its model's replies."""
    run = export.get("simulation") if isinstance(export.get("simulation"), dict) else {}
    cast = [c for c in export.get("cast") or [] if isinstance(c, dict) and c.get("name")]
    scenario = dict(export.get("scenario") or {})
    scenario["cast"] = [c["name"] for c in cast]
    # The model's connection stays behind; what it was told and how memory behaved travel.
    left_out = {"provider", "base_url", "model", "timeout_s", "script", "pause_after", "title", "tools_unsupported",
                "sequel_carry", "seats", *SECRET_SETTINGS}  # seats: a replay says every line
    settings = {k: v for k, v in run.items() if k not in left_out and k != "status" and k != "branch_turn"
                and k != "sequel_of" and v is not None}
    script = script_from_export(export)
    settings["max_turns"] = len(script)
    characters = [{k: v for k, v in c.items() if k not in ("first_mes",)} for c in cast]
    return {"format": WONDA_FORMAT, "version": 1, "settings": settings, "scenario": scenario,
            "characters": characters, "script": script,
            "recorded": {"title": run.get("title") or scenario.get("title") or "", "model": run.get("model") or "",
                         "retrieval_mode": run.get("retrieval_mode") or ""}}


def _need(data, key, kind):
    value = data.get(key) if isinstance(data, dict) else None
    if not isinstance(value, kind):
        raise ValidationError(f"Not a Wonda simulation export: '{key}' is missing or malformed.")
    return value


def _rows(data: dict, key: str) -> list[dict]:
    """An optional list of objects ("overrides", "edits", "memories", a turn's "retrievals")."""
    rows = data.get(key) or []
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ValidationError(f"Not a Wonda simulation export: '{key}' should be a list of objects.")
    return rows


class _At:
    """Names the part of the export a problem is in ("turns[12]: ..."), whatever the problem is:
    a model's ValidationError, or a missing key / wrong type (KeyError, TypeError, ValueError...)."""

    def __init__(self, where: str):
        self.where = where

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        if exc is None:
            return False
        if isinstance(exc, ValidationError):
            detail = "; ".join(f"{k}: {', '.join(v)}" if k != "__all__" else ", ".join(v)
                               for k, v in exc.message_dict.items()) if hasattr(exc, "error_dict") \
                else "; ".join(exc.messages)
        elif isinstance(exc, KeyError):
            detail = f"{exc.args[0]!r} is missing"
        elif isinstance(exc, (TypeError, ValueError, AttributeError)):
            detail = f"malformed ({exc})"
        else:
            return False
        raise ValidationError(f"Malformed export, {self.where}: {detail}") from exc


def _check_memories(rows: list[dict]) -> None:
    """Each exported memory as `memory_create` will check it in the worker (content, tags, ranges...),
    so that a file whose bank cannot be rebuilt is refused now rather than half-imported later."""
    for i, row in enumerate(rows):
        with _At(f"memories[{i}]"):
            row["id"]  # noqa: B018  (the retrieval records are re-pointed by it)
            fields = {f: row[f] for f in MEMORY_FIELDS if f in row and row[f] is not None and f != "content"}
            memory_edits.memory_check(content=row.get("content"), **fields)
            if not isinstance(row.get("keys") or [], list):
                raise ValidationError({"keys": "should be a list of queries"})


@transaction.atomic
def simulation_import(*, owner, data: dict) -> Simulation:
    """A new simulation from an export: settings, snapshots, turns, retrievals, lines, overrides, history.

    Its memory bank is rebuilt in a worker (`import_bank_task`), which then points the retrieval
    records at the new memory ids. Anything malformed raises ValidationError (naming where) and
    nothing is created.
    """
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValidationError("Not a Wonda simulation export (format should be 'wonda.simulation').")
    settings = _need(data, "simulation", dict)
    turns = _need(data, "turns", list)
    memories = _rows(data, "memories")
    _check_memories(memories)
    relationships, accesses = _rows(data, "relationships"), _rows(data, "accesses")
    for key, rows, check in (("relationships", relationships, bank_files.relationship_check), ("accesses", accesses, bank_files.access_check)):
        for i, row in enumerate(rows):
            with _At(f"{key}[{i}]"):
                check(row)
    simulation = Simulation(owner=owner, scenario_snapshot=_need(data, "scenario", dict),
                            cast_snapshot=_need(data, "cast", list))
    for name in SETTINGS:
        if name in settings:
            setattr(simulation, name, settings[name])
    if simulation.title:
        simulation.title = _copy_title(owner, simulation.title)
    status = settings.get("status")
    simulation.status = status if status in Simulation.FINISHED_STATUSES else Simulation.Status.PAUSED
    if simulation.status == Simulation.Status.PAUSED:
        simulation.pause_reason = "Imported: resume to go on."
    try:
        simulation.full_clean()
    except ValidationError as exc:
        raise ValidationError(f"The export's settings are not valid: {exc.messages[0]}") from exc
    simulation.save()
    simulation.bank = banks.bank_create(name=f"Simulation #{simulation.pk}: {simulation.title}"[:200], owner=owner)
    simulation.save(update_fields=["bank", "updated"])
    turn_ids = _import_turns(simulation, turns)
    _import_overrides_and_edits(simulation, data, owner, turn_ids)
    queueing.send_on_commit(queueing.IMPORT_BANK, simulation.pk, memories, relationships, accesses)
    return simulation


def _import_turns(simulation: Simulation, turns: list) -> dict:
    """The export's turns with their retrievals and chronicle entries; {exported turn id: new id}."""
    turn_ids = {}
    for i, row in enumerate(turns):
        with _At(f"turns[{i}]"):
            turn = Turn(simulation=simulation, **{f: row[f] for f in TURN_FIELDS if f in row})
            turn.full_clean()  # the simulation is saved: its constraints (one turn per index) are checked too
            turn.save()
            turn_ids[row.get("id")] = turn.pk
            retrievals = [Retrieval(turn=turn, **{f: r[f] for f in RETRIEVAL_FIELDS if f in r})
                          for r in _rows(row, "retrievals")]
            for retrieval in retrievals:
                retrieval.full_clean(exclude=["turn"])
            Retrieval.objects.bulk_create(retrievals)
            if row.get("entry"):
                entry = ChronicleEntry(turn=turn, **{k: v for k, v in row["entry"].items()
                                                     if k in ("text", "annotation", "struck", "starred")})
                entry.full_clean(exclude=["turn"], validate_constraints=False)
                entry.save()
    return turn_ids


def _import_overrides_and_edits(simulation: Simulation, data: dict, owner, turn_ids: dict) -> None:
    """The writer's overrides of turns and the history of edits, pointed at the new turns."""
    for i, o in enumerate(_rows(data, "overrides")):
        with _At(f"overrides[{i}]"):
            override = TurnOverride(simulation=simulation, turn_index=o["turn_index"], kind=o["kind"],
                                    memory_id=o.get("memory_id"), content=o.get("content") or "")
            override.full_clean()
            override.save()
    for i, e in enumerate(_rows(data, "edits")):
        with _At(f"edits[{i}]"):
            target = e["target_id"] if e["target_type"] == "memory" else turn_ids.get(e["target_id"], 0)
            edit = Edit(simulation=simulation, actor=owner if e.get("actor") == owner.get_username() else None,
                        target_type=e["target_type"], target_id=target, field=e["field"], before=e.get("before"),
                        after=e.get("after"), label=(e.get("label") or "")[:300])
            edit.full_clean()
            edit.save()
            if e.get("created"):  # when it was made, not when it was imported (auto_now_add would say now)
                created = parse_datetime(str(e["created"]))
                if created is None:
                    raise ValidationError(f"created: {e['created']!r} is not a date and time (ISO 8601)")
                Edit.objects.filter(pk=edit.pk).update(created=created)


def _copy_title(owner, title: str) -> str:
    """An imported run's title, marked as a copy when the writer already has a run of that name:
    "Dinner (imported)", then "Dinner (imported 2)"…"""
    taken = set(Simulation.objects.owned_by(owner).values_list("title", flat=True))
    if title not in taken:
        return title
    base = title[:180]
    candidate, n = f"{base} (imported)", 2
    while candidate in taken:
        candidate, n = f"{base} (imported {n})", n + 1
    return candidate


def import_bank(*, simulation: Simulation, memories: list[dict], relationships: list[dict] = (),
                accesses: list[dict] = ()) -> dict[int, int]:
    """Recreate the exported memories (embedded through the cache), how the agents stood with each
    other and what was recalled when, and re-point every reference."""
    mapping: dict[int, int] = {}
    for row in memories:
        extra = {f: row[f] for f in ("about", "speaker", "participants", "location", "related_goals",
                                     "emotional_valence", "decay_rate", "metadata", "status") if f in row}
        memory = memory_edits.memory_create(bank=simulation.bank, content=row["content"], agent=row.get("agent", ""),
                                            kind=row.get("kind", "semantic"), category=row.get("category", ""),
                                            importance=row.get("importance", 5.0), tags=row.get("tags") or [],
                                            source=row.get("source", "writer"), turn=row.get("turn"), keys=row.get("keys") or [],
                                            **extra)
        mapping[row["id"]] = memory.pk
    with transaction.atomic():
        for retrieval in Retrieval.objects.filter(turn__simulation=simulation):
            retrieval.results = [dict(r, memory_id=mapping.get(r.get("memory_id"), r.get("memory_id")))
                                 for r in retrieval.results or []]
            retrieval.save(update_fields=["results"])
        for override in TurnOverride.objects.filter(simulation=simulation, memory_id__isnull=False):
            override.memory_id = mapping.get(override.memory_id, override.memory_id)
            override.save(update_fields=["memory_id"])
        for edit in Edit.objects.for_simulation(simulation).filter(target_type="memory"):
            edit.target_id = mapping.get(edit.target_id, edit.target_id)
            edit.save(update_fields=["target_id"])
        bank_files.relationships_import(bank=simulation.bank, rows=list(relationships), memory_ids=mapping)
        bank_files.accesses_import(rows=list(accesses), memory_ids=mapping)
        banks.bank_mark_seeded(bank=simulation.bank)
    return mapping

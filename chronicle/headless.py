"""A simulation run without the browser (`manage.py run_simulation`): import a Wonda scenario file,
run it through the same services and Celery tasks as the run page, and report what the agents saw.

The writer is a throw-away `run-<time>` (as the drills' `drill-<time>`) unless --owner names one, so
the file's character names cannot clash with anyone's; a throw-away writer and everything it owns
is deleted afterwards unless --keep.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import transaction
from django.db.models import Avg, Count, Max, Min

from chronicle.drills import start_worker
from chronicle.models import Character, Scenario
from chronicle.services.cards import WONDA_FORMAT, CardImportError, card_import, import_match, renamed_in
from chronicle.services.characters import character_delete
from chronicle.services.scenarios import scenario_delete
from chronicle.simulation.measuring import probes
from chronicle.simulation.run import costs, replay
from chronicle.writing.exports import FORMAT as SIMULATION_FORMAT
from chronicle.writing.exports import scenario_file_from_export
from chronicle.simulation.pages.line_pages import run_tokens
from chronicle.simulation.pages.run_panels import who_believes
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.run.selectors import token_summary
from chronicle.simulation.run.run_settings import server_defaults, unknown_settings
from chronicle.simulation.control.services import (
    ControlError,
    simulation_cancel,
    simulation_delete,
    simulation_settings_errors,
)
from memory.models import Memory
from memory.api import banks, relations, tools_offered
from core.pool import pool_status
from core.migrations_state import unapplied_migrations
from core.workers import WorkerProcess, ping_workers

# A scenario file's optional top-level "settings" (chronicle.simulation.run.run_settings.FILE_SETTINGS): the
# command line's options win over them.


class HeadlessError(Exception):
    """Something the command says and stops on (a bad file, an unknown owner, a run that never started)."""


@dataclass
class Imported:
    owner: Any
    throwaway: bool
    scenario: Scenario
    characters: list[Character] = field(default_factory=list)
    file_settings: dict = field(default_factory=dict)
    script: list[dict] = field(default_factory=list)  # the replay provider's lines (chronicle.simulation.run.replay)
    probes: list = field(default_factory=list)  # chronicle.simulation.measuring.probes.Probe
    renamed: dict = field(default_factory=dict)  # file name → the copy's name, when the owner had them already
    reused: bool = False  # the owner's own scenario and cast, as this file imported them before


def _cast_in_file(data: dict) -> list[str]:
    scenario = data.get("scenario") if isinstance(data.get("scenario"), dict) else {}
    names = scenario.get("cast") or [c.get("name") for c in data.get("characters") or [] if isinstance(c, dict)]
    return [n for n in names if isinstance(n, str)]


def _script_in_file(data, file_settings: dict) -> tuple[list[dict], list]:
    """The file's script and probes, checked against its cast and stage directions (nothing is created
    when either is wrong: the message names the line or the probe)."""
    if not isinstance(data, dict):
        return [], []
    cast = _cast_in_file(data)
    script = []
    if data.get("script") is not None:
        try:
            script = replay.normalise(data["script"])
            replay.check_script(script, cast=cast, stage_directions=file_settings.get("stage_directions") or "")
        except replay.ScriptError as exc:
            raise HeadlessError(str(exc)) from None
    try:
        found = probes.with_answer_turns(
            probes.parse(data.get("probes"), cast=cast, turns=len(script) or int(file_settings.get("max_turns") or 6)), script)
    except probes.ProbeError as exc:
        raise HeadlessError(str(exc)) from None
    return script, found


def _settings_in_file(data: Any) -> dict:
    values = data.get("settings") if isinstance(data, dict) else None
    if values is None:
        return {}
    if not isinstance(values, dict):
        raise HeadlessError("settings must be an object")
    if unknown := unknown_settings(values):
        raise HeadlessError(unknown[0])
    return values


def scenario_import(*, raw: bytes, username: str | None, run: dict | None = None) -> Imported:
    """The file's scenario and cast, as `username` or a new throw-away writer; nothing is created on error.

    run: the command line's turns, provider and mode; the run's settings they make with the file's are
    checked before anything is imported. A writer who has characters of these names already gets
    copies ("Alex (2)"), as the import page offers, and the file's script and settings follow them;
    a file whose scene and cast the writer holds already, unchanged, runs those (no copy each time)."""
    try:
        data = json.loads(raw.decode("utf-8-sig"))
    except ValueError:
        data = None  # not JSON: the importer says what is wrong with it, below
    if isinstance(data, dict) and data.get("format") == SIMULATION_FORMAT:
        # A recorded run (a simulation's export): its scene and cast, replaying its model's lines.
        data = scenario_file_from_export(data)
        raw = json.dumps(data).encode()
    if isinstance(data, dict) and data.get("format") == WONDA_FORMAT and "scenario" not in data:
        raise HeadlessError("this Wonda file holds a character, not a scenario: export a scenario with its cast")
    if isinstance(data, dict) and data.get("format") != WONDA_FORMAT and ("spec" in data or "data" in data):
        raise HeadlessError("this is a character card, not a scenario: export a scenario (Wonda JSON) with its cast")
    file_settings = _settings_in_file(data)
    script, found = _script_in_file(data, file_settings)
    if run is not None and isinstance(data, dict):
        title = str((data.get("scenario") or {}).get("title") or "") if isinstance(data.get("scenario"), dict) else ""
        values = settings_for(title=title, file_settings=file_settings, script=script, **run)
        problems = simulation_settings_errors(settings=values, cast_names=_cast_in_file(data))
        if problems:
            raise HeadlessError("the run's settings are not valid: "
                                + "; ".join(f"{name}: {' '.join(said).rstrip('.')}" for name, said in problems.items()))
    users = get_user_model().objects
    owner = None
    if username:
        owner = users.filter(username=username).first()
        if owner is None:
            raise HeadlessError(f"there is no user {username!r}")
    renamed: dict[str, str] = {}
    try:
        # One transaction with the throw-away writer: a bad file leaves not even the user behind,
        # and the preview seeding the importer queues goes out only once it all committed.
        with transaction.atomic():
            throwaway = owner is None
            if throwaway:
                owner = users.create_user(username=f"run-{time.time_ns()}", password=None)
            reused = None if throwaway else import_match(owner=owner, raw=raw, settings=False)
            try:
                if reused:
                    result, renamed = reused
                else:
                    result = card_import(owner=owner, raw=raw)
            except CardImportError as exc:
                if not exc.clashes or len(exc.errors) != len(exc.clashes):
                    raise
                renamed = dict(exc.copies)
                result = card_import(owner=owner, raw=raw, as_copy=True)
    except CardImportError as exc:
        raise HeadlessError(str(exc)) from None
    if renamed:
        script = [dict(line, speaker=renamed.get(line.get("speaker"), line.get("speaker"))) for line in script]
        file_settings = {name: renamed_in(value, renamed) for name, value in file_settings.items()}
    return Imported(owner=owner, throwaway=throwaway, scenario=result.scenario, characters=result.characters,
                    file_settings=file_settings, script=script, probes=found, renamed=renamed, reused=bool(reused))


def settings_for(*, title: str, file_settings: dict, script: list, turns: int | None, provider: str | None,
                 mode: str | None) -> dict:
    """The run's settings: the file's, then the command line's; an OpenAI-compatible server comes from settings."""
    values = {"title": f"{title} (command line)"[:200], **file_settings}
    for name, value in (("max_turns", turns), ("provider", provider), ("retrieval_mode", mode)):
        if value is not None:
            values[name] = value
    if script:
        # A file with a script plays it (the replay provider) unless told otherwise, all its lines by default.
        values["script"] = script
        values.setdefault("provider", Simulation.Provider.REPLAY)
        values.setdefault("max_turns", len(script))
        # A recorded model was offered the tools it called: the replay offers them too.
        called = {call.get("name") for line in script for reply in line.get("replies") or []
                  for call in reply.get("tool_calls") or [] if isinstance(call, dict)}
        if called - set(tools_offered.DEFAULT_SIMULATION_TOOLS) and "tool_set" not in file_settings:
            values["tool_set"] = [name for name in tools_offered.SIMULATION_TOOLS if name in called or name in tools_offered.DEFAULT_SIMULATION_TOOLS]
    values.setdefault("provider", django_settings.LLM_PROVIDER)
    if values["provider"] == Simulation.Provider.OPENAI:
        values = {**server_defaults(), **values, "api_key": django_settings.LLM_API_KEY}
    return values


def run_settings(*, imported: Imported, turns: int | None, provider: str | None, mode: str | None) -> dict:
    return settings_for(title=imported.scenario.title, file_settings=imported.file_settings, script=imported.script,
                        turns=turns, provider=provider, mode=mode)


def database_ready(say: Callable[[str], None]) -> None:
    """A database nobody has set up yet (a fresh clone, before `make run`): migrated first, as
    bootstrap does, instead of failing on a missing table."""
    if unapplied_migrations():
        say("Setting up the database (first use)...")
        call_command("migrate", interactive=False, verbosity=0)


def worker_running() -> bool:
    """A worker on this database is up: it has stamped the pool's heartbeat and answers a ping.

    A stopping worker removes its stamps; a killed one leaves them for up to three beats (15 s), and
    a run started on them would wait for nobody, so a ping confirms (up to a second, once a command).
    """
    status = pool_status(database=django_settings.DATABASES["default"]["NAME"])
    if not status["ok"]:
        return False
    alive = ping_workers(timeout=1.0)
    return any(hostname in alive for hostname in status["workers"])


def worker_for_run(log_dir: Path, concurrency: int = 2) -> WorkerProcess | None:
    """None when a worker is already up (it takes the run's tasks); else one of our own, started and ready.

    A worker counts only if its heartbeat names this process's database.
    """
    if worker_running():
        return None
    worker = start_worker("run-simulation", concurrency, log_dir)
    try:
        worker.wait_ready(timeout=120, pool=True)
    except RuntimeError:
        worker.stop()
        raise
    return worker


def turns_done(simulation: Simulation) -> int:
    return Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE).count()


def wait_for_run(simulation: Simulation, *, timeout: float, every: float, say: Callable[[str], None]) -> Simulation:
    """Poll until the run finishes or pauses (or the time-out), saying its progress every `every` seconds."""
    started = time.monotonic()
    deadline = started + timeout
    last_said = 0.0
    said = ""
    while True:
        simulation.refresh_from_db()
        if simulation.is_finished or simulation.status == Simulation.Status.PAUSED:
            return simulation
        now = time.monotonic()
        if now >= deadline:
            raise HeadlessError(f"the run did not finish in {timeout:g} s (status {simulation.status}); "
                                "if a worker was already running, is it on this database?")
        if now - last_said >= every:
            line = _progress(simulation, waited=now - started)
            if line != said or now - last_said >= 6 * every:
                say(line)
                said, last_said = line, now
        time.sleep(0.25)


def _progress(simulation: Simulation, *, waited: float) -> str:
    if simulation.status == Simulation.Status.SEEDING:
        bank = simulation.bank
        if bank is not None and bank.seed_total:
            return f"seeding memories: {bank.seed_done}/{bank.seed_total}"
        if waited > 60:
            return f"no worker has started seeding in {waited:.0f} s: is the running worker on this database?"
        return "waiting for a worker to seed the memories"
    return f"turns done: {turns_done(simulation)}/{simulation.max_turns}"


def _content(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else ""


def cost_words(simulation: Simulation) -> str:
    """What the run's model calls cost, as its page says it."""
    return run_tokens(simulation).cost.words


def run_report(simulation: Simulation) -> dict:
    """The command's last line: every done turn with what its agent retrieved and was sent, the bank, the tokens."""
    turns = list(Turn.objects.filter(simulation=simulation, status=Turn.Status.DONE)
                 .prefetch_related("retrievals").order_by("index"))
    rows = []
    for turn in turns:
        retrievals = [{"tool": retrieval.tool, "memory_id": result.get("memory_id"), "kind": result.get("kind"),
                       "category": result.get("category"), "content": result.get("content"),
                       "score": result.get("score")}
                      for retrieval in turn.retrievals.all() for result in retrieval.results or []]
        context = [{"role": m.get("role"), "content": _content(m)}
                   for m in turn.prompt_messages or [] if isinstance(m, dict)]
        rows.append({"number": turn.number, "speaker": turn.agent, "text": turn.utterance,
                     "retrievals": retrievals, "context": context,
                     "heard_by": turn.heard_by or None,
                     "memory_ms": (turn.context or {}).get("memory_ms"),
                     "capture_ms": (turn.context or {}).get("capture_ms"),
                     # The capture filters' verdicts: "Sam did not keep: “…” (importance 0.4 < 1)".
                     "not_kept": (turn.context or {}).get("not_kept_notes") or []})
    by_kind = {}
    lifecycle = {"reflections": 0, "insights": [], "consolidated": 0, "filtered": sum(int((t.context or {}).get("not_kept") or 0)
                                                                      for t in turns),
                 "importance": {"min": None, "max": None, "mean": None}}
    if simulation.bank_id is not None:
        memories = Memory.objects.in_bank(simulation.bank)
        by_kind = dict(memories.values_list("kind").annotate(n=Count("id")).order_by("kind"))
        reflections = memories.filter(kind=Memory.Kind.REFLECTION).prefetch_related("evidence").order_by("turn", "id")
        lifecycle["reflections"] = len(reflections)
        # Each insight with the memories it rests on, so a dry run shows what reflection made of it.
        lifecycle["insights"] = [{"agent": m.agent, "turn": m.turn, "content": m.content,
                                  "evidence": [e.pk for e in m.evidence.all()]} for m in reflections]
        lifecycle["consolidated"] = memories.filter(status=Memory.Status.CONSOLIDATED).count()
        # What the run's lines were worth to their listeners (gifted memories have fixed importances).
        spread = memories.filter(source=Memory.Source.EARNED).aggregate(min=Min("importance"), max=Max("importance"),
                                                                        mean=Avg("importance"))
        lifecycle["importance"] = {k: round(v, 2) if v is not None else None for k, v in spread.items()}
    tokens = token_summary(turns)
    held = [{"claim": claim["claim"], "holder": h["holder"], "source_chain": h["source_chain"],
             "confidence": h["confidence"], "true": claim["true"], "stance": h["stance"],
             "disputed": h["disputed"], "history": h["history"]}
            for claim in who_believes(simulation) for h in claim["holders"]]
    stood = relations.standing(simulation.bank_id) if simulation.bank_id is not None else {}
    distortions = distortion_counts(simulation, turns)
    relationships = [{"agent": r.agent, "other": r.other, "trust": r.trust, "affinity": r.affinity, "turn": r.turn,
                      "why": r.reason} for r in stood.values()]
    return {"simulation": simulation.pk, "turns": rows, "memories_by_kind": by_kind, "lifecycle": lifecycle,
            "beliefs": held, "relationships": relationships, "distortions": distortions,
            "tokens": {"prompt": tokens.prompt_tokens, "completion": tokens.completion_tokens,
                       "besides_the_speakers": tokens.side_tokens, "every_call": tokens.every_call_tokens,
                       "full_definition": tokens.full_definition_tokens,
                       # With a bookkeeping model, the calls besides the speakers' went to it: their cost apart.
                       "bookkeeping_model": simulation.bookkeeping_model if simulation.has_bookkeeping_model else None},
            "cost": costs.run_cost(simulation, tokens).as_dict()}


def distortion_counts(simulation: Simulation, turns: list[Turn]) -> dict[str, int]:
    """How often the run's distortion filters acted: copies formed their way, results a search
    dampened, memories a trauma linked."""
    counts = {"formation": 0, "retrieval": 0, "association": 0}
    if simulation.bank_id is not None:
        memories = Memory.objects.in_bank(simulation.bank).filter(metadata__has_key="distortion")
        counts["formation"] = memories.filter(metadata__distortion__has_key="original").count()
        counts["association"] = memories.filter(metadata__distortion__has_key="association").count()
    counts["retrieval"] = sum(1 for turn in turns for retrieval in turn.retrievals.all()
                              for result in retrieval.results or [] if "distortion" in (result.get("components") or {}))
    return counts


def run_stop(simulation: Simulation) -> None:
    """A run left behind mid-way (time-out, Ctrl-C) is cancelled, so no worker goes on with it."""
    simulation.refresh_from_db()
    if not simulation.is_finished:
        try:
            simulation_cancel(simulation=simulation)
        except ControlError:
            pass  # it finished in the meantime


@transaction.atomic
def run_discard(*, imported: Imported, simulation: Simulation | None) -> None:
    """Remove what the command created: the throw-away writer with all it owns, or (--owner) the run,
    its memory bank, and the scenario and characters it imported (not the writer's own it ran)."""
    if imported.throwaway:
        # Its banks first, each locked (banks_delete): a worker's task still writing into one (keys,
        # feelings, an insight) finishes before, or finds it gone; then everything else it owns.
        banks.banks_delete(owner=imported.owner)
        imported.owner.delete()  # characters, scenarios and simulations go with their owner
        return
    if simulation is not None:
        simulation_delete(simulation=simulation)  # run_stop stopped it: with its bank, as the run page deletes one
    if imported.reused:
        return
    scenario_delete(scenario=imported.scenario)
    for character in imported.characters:
        character_delete(character=character)

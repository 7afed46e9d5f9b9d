"""Run a scenario file from the command line, through the same engine and Celery tasks as the browser.

    manage.py run_simulation FILE [--owner USERNAME] [--turns N] [--provider scripted|openai|replay]
                                  [--mode tools|prepopulate|both] [--keep] [--save-recording PATH]

FILE is Wonda JSON with a scenario and its characters (what "Export" on a scenario gives, e.g.
examples/demo.json). Progress goes to stderr; the last stdout line is one JSON object:
{"simulation", "turns": [{"number", "speaker", "text", "retrievals", "context"}], "memories_by_kind",
"tokens", "cost"}. A run that pauses (a failed turn) prints what was done, then the reason, and exits 1.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management import BaseCommand, CommandError

from chronicle import headless
from chronicle.writing.exports import scenario_file_from_export, to_json
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.services import simulation_start


class Command(BaseCommand):
    help = "Import a Wonda scenario file, run it on a worker, print the turns, retrievals and context as JSON."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="Wonda JSON: a scenario with its characters (e.g. examples/demo.json)")
        parser.add_argument("--owner", default="", help="import and run as this user; characters whose names the "
                                                        "user has already are imported as copies (\"Alex (2)\"). "
                                                        "Default: a throw-away run-<time> user")
        parser.add_argument("--turns", type=int, default=None, help="turns to run (default: the file's, or 6)")
        parser.add_argument("--provider", choices=Simulation.Provider.values, default=None,
                            help="default: the file's, or WONDA_LLM_PROVIDER; openai uses WONDA_LLM_BASE_URL, "
                                 "WONDA_LLM_MODEL and WONDA_LLM_API_KEY")
        parser.add_argument("--mode", choices=Simulation.RetrievalMode.values, default=None,
                            help="how agents get their memories (default: the file's, or the run page's default)")
        parser.add_argument("--keep", action="store_true", help="keep the run (and the throw-away user) afterwards")
        parser.add_argument("--save-recording", default="", metavar="PATH",
                            help="write the finished run as a scenario file whose script replays it (its lines and "
                                 "the tool calls its model made): a model's run becomes a replay fixture")
        parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for the run (default 1800)")
        parser.add_argument("--progress-every", type=float, default=3, help=argparse.SUPPRESS)

    def say(self, line: str) -> None:
        self.stderr.write(line)

    def handle(self, *args, file: str, owner: str, turns: int | None, provider: str | None, mode: str | None,
               keep: bool, timeout: float, progress_every: float, save_recording: str = "", **options) -> None:
        headless.database_ready(self.say)
        imported = self.import_file(file, owner=owner, run={"turns": turns, "provider": provider, "mode": mode})
        self.simulation = self.worker = None
        finished = False
        try:
            self.worker = self.start_worker()
            self.simulation = self.start_run(imported, headless.run_settings(imported=imported, turns=turns,
                                                                             provider=provider, mode=mode))
            self.wait(self.simulation, timeout=timeout, every=progress_every)
            finished = True
            if save_recording:
                self.save_recording(self.simulation, save_recording)
            self.report(self.simulation)
        finally:
            self.clean_up(imported, finished=finished, keep=keep)

    def import_file(self, file: str, *, owner: str, run: dict) -> headless.Imported:
        """The scenario and its characters, imported for `owner` (or a throw-away user)."""
        try:
            raw = Path(file).read_bytes()
        except OSError as exc:
            raise CommandError(f"{file}: {exc.strerror or exc}") from None
        try:
            imported = headless.scenario_import(raw=raw, username=owner or None, run=run)
        except headless.HeadlessError as exc:
            raise CommandError(f"{file}: {exc}") from None
        cast = ', '.join(c.name for c in imported.characters)
        if imported.reused:
            self.say(f"{owner} has this scene and cast already, unchanged: running {imported.scenario.title} "
                     f"with {cast} (nothing imported).")
            return imported
        if imported.renamed:
            self.say(f"{owner} has characters of these names already: imported as copies "
                     f"({', '.join(f'{old} → {new}' for old, new in imported.renamed.items())}).")
        self.say(f"Imported {imported.scenario.title} with {cast} as {imported.owner.username}.")
        return imported

    def start_worker(self):
        """A worker of the command's own, unless one is running already (then None)."""
        log_dir = Path(settings.VAR_DIR) / "runs" / f"run-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            worker = headless.worker_for_run(log_dir)
        except RuntimeError as exc:
            raise CommandError(f"no worker was running and one could not be started: {exc}") from None
        self.say(f"Started a worker for the run (log: {worker.log_path})." if worker else "Using the worker already running.")
        return worker

    def start_run(self, imported: headless.Imported, values: dict) -> Simulation:
        try:
            simulation = simulation_start(owner=imported.owner, scenario=imported.scenario,
                                          cast=list(imported.scenario.cast.all()), settings=values)
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise CommandError(f"the run's settings are not valid: {problems}") from None
        self.say(f"Simulation #{simulation.pk}: {simulation.max_turns} turns, {simulation.provider}, "
                 f"{simulation.retrieval_mode}.")
        return simulation

    def wait(self, simulation: Simulation, *, timeout: float, every: float) -> None:
        """Until the run stops; a run that never does prints what it did and fails the command."""
        try:
            headless.wait_for_run(simulation, timeout=timeout, every=every, say=self.say)
        except headless.HeadlessError as exc:
            self.stdout.write(json.dumps(headless.run_report(simulation), ensure_ascii=False))
            raise CommandError(str(exc)) from None

    def save_recording(self, simulation: Simulation, path: str) -> None:
        recording = scenario_file_from_export(to_json(simulation))
        Path(path).write_text(json.dumps(recording, ensure_ascii=False, indent=1))
        self.say(f"Saved the recording ({len(recording['script'])} lines) to {path}.")

    def report(self, simulation: Simulation) -> None:
        """The run as JSON on stdout; a run that did not complete fails the command, saying why."""
        self.say(f"turns done: {headless.turns_done(simulation)}/{simulation.max_turns}; "
                 f"the run is {simulation.status}.")
        report = headless.run_report(simulation)
        self.say(f"cost: {headless.cost_words(simulation)}")
        self.stdout.write(json.dumps(report, ensure_ascii=False))
        if simulation.status != Simulation.Status.COMPLETED:
            reason = simulation.pause_reason or simulation.error or simulation.status
            raise CommandError(f"the run is {simulation.status}: {reason}", returncode=1)

    def clean_up(self, imported: headless.Imported, *, finished: bool, keep: bool) -> None:
        """Stop what the command started; keep the run, or discard it with its throw-away user."""
        simulation = self.simulation
        if simulation is not None and not finished:
            headless.run_stop(simulation)  # Ctrl-C or a time-out: no worker goes on with it
        if self.worker is not None:
            self.worker.stop()
        if keep:
            if simulation is not None:
                self.say(f"Kept: simulation #{simulation.pk} ({simulation.get_absolute_url()}) "
                         f"of {imported.owner.username}.")
        else:
            headless.run_discard(imported=imported, simulation=simulation)

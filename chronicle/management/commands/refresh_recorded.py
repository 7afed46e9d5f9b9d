"""Replay the shipped recorded runs through the engine as it is now, and write them back.

    manage.py refresh_recorded [--out DIR]

`examples/recorded/*.simulation.json` are runs a model played, with the memory their replay left
(beliefs passed on, relationships, reflections, what each turn recalled). `bootstrap` imports them
as they are, so after a change to how memory forms or is recalled they show the old engine's
work: this replays each one's lines (the same script and settings) on a worker, exports the
result under its own title, and removes what it made.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management import BaseCommand, CommandError
from django.db import transaction

from chronicle import headless
from chronicle.demo import RECORDED_DIR
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.control.services import simulation_delete, simulation_replay
from chronicle.writing.exports import simulation_import, to_json
from memory.models import MemoryBank


class Command(BaseCommand):
    help = "Replay examples/recorded/*.simulation.json through today's engine and write them back."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--out", default=str(RECORDED_DIR), help="where to write them (default: examples/recorded)")
        parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for each replay")

    def handle(self, *args, out: str, timeout: float, **options) -> None:
        say = self.stderr.write
        headless.database_ready(say)
        target = Path(out)
        target.mkdir(parents=True, exist_ok=True)
        owner = get_user_model().objects.create(username=f"refresh-{time.time_ns()}")
        worker = headless.worker_for_run(Path(tempfile.mkdtemp(prefix="refresh-recorded-")))
        try:
            for path in sorted(RECORDED_DIR.glob("*.simulation.json")):
                data = json.loads(path.read_text())
                with transaction.atomic():
                    source = simulation_import(owner=owner, data=data)
                self._wait_seeded(source, timeout)
                with transaction.atomic():
                    run = simulation_replay(source=source, changes={})
                try:
                    run = headless.wait_for_run(run, timeout=timeout, every=5, say=say)
                except headless.HeadlessError as exc:
                    raise CommandError(f"{path.name}: {exc}") from exc
                if run.status != Simulation.Status.COMPLETED:
                    raise CommandError(f"{path.name}: the replay ended {run.status}: {run.pause_reason}")
                export = to_json(run)
                export["simulation"]["title"] = data["simulation"]["title"]
                (target / path.name).write_text(json.dumps(export, ensure_ascii=False, separators=(",", ":")))
                self.stdout.write(f"{path.name}: {run.turns.done().count()} turns, {len(export['memories'])} memories, "
                                  f"{len(export['relationships'])} relationship changes")
        finally:
            for simulation in Simulation.objects.owned_by(owner):
                simulation_delete(simulation=simulation)
            owner.delete()
            if worker is not None:
                worker.stop()

    @staticmethod
    def _wait_seeded(source: Simulation, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while MemoryBank.objects.get(pk=source.bank_id).seed_status != MemoryBank.SeedStatus.DONE:
            if time.monotonic() > deadline:
                raise CommandError(f"{source.title}: its memory was not rebuilt in {timeout:.0f} s (is a worker up?)")
            time.sleep(1)

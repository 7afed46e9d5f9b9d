"""Worker-kill drill: SIGKILL the worker's pool children at random moments of a run.

Celery's parent replaces a killed child; the turn it was running is redelivered and redone. The run
must end with every turn done once and every line remembered once by each listener.
Last line: JSON {"lost", "duplicated_turns", "duplicated_memories", "kills"}: all 0 but kills.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

from django.conf import settings
from django.core.management import BaseCommand

from chronicle import drills, headless
from chronicle.simulation.run.models import Turn
from core.workers import active_tasks
from core.pool import pool_status


class Command(BaseCommand):
    help = "Kill the worker's pool children mid-run; check that no turn or memory is lost or doubled."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--turns", type=int, default=30)
        parser.add_argument("--kills", type=int, default=3)
        parser.add_argument("--concurrency", type=int, default=2)
        parser.add_argument("--pace", type=float, default=0.5, help="seconds before each line, so kills land mid-turn")
        parser.add_argument("--seed", type=int, default=None)
        parser.add_argument("--timeout", type=float, default=600)
        parser.add_argument("--keep", action="store_true", help="keep the drill writer and its run")

    def handle(self, *args, turns: int, kills: int, concurrency: int, pace: float, seed: int | None, timeout: float,
               keep: bool, **options) -> None:
        rng = random.Random(seed)
        log_dir = Path(settings.VAR_DIR) / "drills" / f"kill-{time.strftime('%Y%m%d-%H%M%S')}"
        worker = drills.start_worker("drill-kill", concurrency, log_dir)
        headless.database_ready(self.stderr.write)  # a fresh clone: set up first, not a missing table
        user = drills.drill_writer()
        try:
            worker.wait_ready(timeout=120, pool=True)
            others = [name for name in pool_status().get("per_worker", {}) if name != worker.name]
            if others:
                self.stdout.write(self.style.WARNING(
                    f"Other workers share this broker ({', '.join(others)}): they may run turns no kill reaches."))
            (run,) = drills.start_runs(user, 1, turns, pace_s=pace)
            self.stdout.write(f"A run of {turns} turns started; {kills} kills planned; worker log {worker.log_path}")
            # Kill moments spread over the run: after a random number of done turns each.
            moments = sorted(rng.sample(range(1, max(2, turns - 1)), k=min(kills, max(1, turns - 2))))
            done_kills, recoveries = 0, []
            started = time.monotonic()
            while moments and time.monotonic() - started < timeout:
                done = run.turns.filter(status=Turn.Status.DONE).count()
                running = run.turns.filter(status=Turn.Status.RUNNING).first()
                if done >= moments[0] and running is not None:
                    time.sleep(rng.uniform(0, pace))  # somewhere inside the turn
                    children = worker.children()
                    if children:
                        busy = [pid for pid in self.turn_pids(worker) if pid in children]
                        victim = rng.choice(busy or children)
                        os.kill(victim, signal.SIGKILL)
                        killed_at = time.monotonic()
                        done_kills += 1
                        moments.pop(0)
                        self.stdout.write(f"  kill {done_kills}: pool process {victim} during turn {running.number}")
                        recovery = self.wait_next_turn(run, done, timeout=120)
                        if recovery is not None:
                            recoveries.append(time.monotonic() - killed_at)
                            self.stdout.write(f"    next turn done {recoveries[-1]:.1f}s after the kill")
                        else:
                            self.stdout.write(self.style.ERROR("    no turn done within 120 s of the kill"))
                time.sleep(0.05)
            finished = drills.wait_finished([run], timeout)
            check = drills.check_runs([run])
            run.refresh_from_db()
            if run.status != "completed":
                self.stdout.write(self.style.ERROR(f"The run ended {run.status}: {run.pause_reason or run.error}"))
            redone = list(run.turns.filter(attempts__gt=1).values_list("index", "attempts"))
            timed_out = worker.log_path.read_text().count("Timed out waiting for UP message")
            self.stdout.write(f"Run {'finished' if finished else 'did not finish'} in {time.monotonic() - started:.0f}s; "
                              f"turns redone: {[(i + 1, a) for i, a in redone]}; "
                              f"recovery after each kill (s): {[round(r, 1) for r in recoveries]}; "
                              f"children killed by Celery for a slow start: {timed_out}")
            lost = check.gaps + check.lost_memories + (0 if run.status == "completed" else 1)
            self.stdout.write(json.dumps({"lost": lost, "duplicated_turns": check.duplicated_turns,
                                          "duplicated_memories": check.duplicated_memories, "kills": done_kills}))
        finally:
            worker.stop()
            if not keep:
                drills.delete_writer(user)

    @staticmethod
    def turn_pids(worker) -> list[int]:
        """The pool processes running a turn right now (so that a kill lands mid-turn)."""
        try:
            active = active_tasks([worker.name], timeout=1)
        except Exception:
            return []
        return [task.get("worker_pid") for tasks in active.values() for task in tasks
                if task.get("name", "").endswith("run_turn_task") and task.get("worker_pid")]

    @staticmethod
    def wait_next_turn(run, done_before: int, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            run.refresh_from_db(fields=["status"])
            if run.turns.filter(status=Turn.Status.DONE).count() > done_before or run.status != "running":
                return time.monotonic()
            time.sleep(0.1)
        return None

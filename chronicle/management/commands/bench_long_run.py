"""Does a run's cost stay flat as it grows? A long scene replayed on a worker, measured per 100 turns.

    manage.py bench_long_run FILE [--turns N] [--bucket 100] [--mode prepopulate|tools|both]

FILE is Wonda JSON with a script (a scene from `manage.py locomo_scene`, or any long written scene);
with --turns past the script's length its lines are said again, in order, until N (the memory
grows as in a longer story; the words repeat). For each bucket of turns it prints:

- memory ms p50 / p95: the memory system's own time a turn (searches, capture, checks; no model);
- prompt / turn: the tokens of every model call of a turn: the speaker's calls, and the calls a model
  run makes besides (the judgement of the line with any reflection riding it, retellings, a story
  day's summary), as the replay recorded their prompts (it counts them and lets the offline rules
  answer);
- of which side: those calls besides the speaker's alone (what a bookkeeping model would take);
- full def / turn: the whole character definition and the same transcript window, one call;
- full + history: the whole definition and every line said so far (a model without memory);
- memories, MB: the run's memories (and their keys) up to the bucket's end, and their size.

The last stdout line is the same as JSON. The run and its throw-away writer are removed afterwards.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

from django.conf import settings
from django.core.management import BaseCommand, CommandError
from django.db import connection

from chronicle import headless
from chronicle.simulation.prompting.context import count_tokens
from chronicle.simulation.measuring.measures import counted_prompt, mode_of
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.prompting.prompts import full_definition_text
from chronicle.simulation.control.services import simulation_start
from chronicle.simulation.turn.tool_calls import offered_tools
from chronicle.simulation.turn.inputs import turn_input
from chronicle.simulation.run.selectors import side_tokens
from memory.api import CharacterSheet, ScenarioSheet


def _p(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


class Command(BaseCommand):
    help = "Replay a long scene and print, per 100 turns, memory time, prompt tokens (every call), the baselines and the size."

    def add_arguments(self, parser) -> None:
        parser.add_argument("file", help="Wonda JSON with a script")
        parser.add_argument("--turns", type=int, default=None, help="turns to run (default: the script's length)")
        parser.add_argument("--bucket", type=int, default=100, help="turns per row (default 100)")
        parser.add_argument("--mode", choices=Simulation.RetrievalMode.values, default=None)
        parser.add_argument("--timeout", type=float, default=7200, help="seconds to wait for the run")

    def handle(self, *args, file: str, turns: int | None, bucket: int, mode: str | None, timeout: float,
               **options) -> None:
        try:
            data = json.loads(Path(file).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CommandError(f"{file}: {exc}") from None
        script = data.get("script") or []
        if not script:
            raise CommandError(f"{file} has no script: the bench replays a scene's lines.")
        turns = turns or len(script)
        if bucket < 1 or turns < 1:
            raise CommandError("--turns and --bucket must be 1 or more")
        data["script"] = [script[i % len(script)] for i in range(turns)]
        data.setdefault("settings", {})["max_turns"] = turns
        data.pop("probes", None)
        headless.database_ready(self.stderr.write)
        imported = headless.scenario_import(raw=json.dumps(data).encode(), username=None)
        worker = headless.worker_for_run(Path(settings.VAR_DIR) / "runs" / f"bench-long-{time.strftime('%Y%m%d-%H%M%S')}")
        simulation = None
        try:
            values = headless.run_settings(imported=imported, turns=turns, provider=None, mode=mode)
            simulation = simulation_start(owner=imported.owner, scenario=imported.scenario,
                                          cast=list(imported.scenario.cast.all()), settings=values)
            self.stderr.write(f"simulation #{simulation.pk}: {turns} turns, {simulation.retrieval_mode}.")
            simulation = headless.wait_for_run(simulation, timeout=timeout, every=15, say=self.stderr.write)
            if simulation.status != Simulation.Status.COMPLETED:
                raise CommandError(f"the run is {simulation.status}: {simulation.pause_reason or simulation.error}")
            rows = self._rows(simulation, bucket)
        finally:
            if simulation is not None:
                headless.run_stop(simulation)
            if worker is not None:
                worker.stop()
            headless.run_discard(imported=imported, simulation=simulation)
        self._print(rows)
        self.stdout.write(json.dumps({"file": Path(file).name, "turns": turns, "buckets": rows}))

    def _rows(self, simulation: Simulation, bucket: int) -> list[dict]:
        cast = [CharacterSheet.from_dict(c) for c in simulation.cast_snapshot]
        scenario = ScenarioSheet.from_dict(simulation.scenario_snapshot) if simulation.scenario_snapshot else None
        definition = {c.name: count_tokens(full_definition_text(c, scenario, cast)) for c in cast}
        tools_mode = mode_of(simulation)
        history = 0
        rows, current = [], None
        for turn in simulation.turns.done().order_by("index"):
            if current is None or turn.index // bucket != current["bucket"]:
                current = {"bucket": turn.index // bucket, "memory_ms": [], "prompt": [], "side": [], "full": [], "history": []}
                rows.append(current)
            context = turn.context or {}
            if context.get("memory_ms") is not None:
                current["memory_ms"].append(float(context["memory_ms"]))
            spoken = counted_prompt(turn.prompt_messages, offered_tools(turn_input(turn=turn), tools_mode))
            current["prompt"].append(spoken + side_tokens(turn))
            current["side"].append(side_tokens(turn))
            current["full"].append(turn.full_definition_tokens)
            current["history"].append(definition.get(turn.agent, 0) + history)
            history += count_tokens(f"{turn.agent}: {turn.utterance}\n")
        out = []
        for row in rows:
            first, last = row["bucket"] * bucket + 1, row["bucket"] * bucket + len(row["prompt"])
            memories, size = self._size(simulation.bank_id, last)
            out.append({"turns": f"{first}-{last}", "memory_ms_p50": _p(row["memory_ms"], 0.5),
                        "memory_ms_p95": _p(row["memory_ms"], 0.95),
                        "prompt_per_turn": round(statistics.mean(row["prompt"])) if row["prompt"] else None,
                        "side_per_turn": round(statistics.mean(row["side"])) if row["side"] else None,
                        "full_definition_per_turn": round(statistics.mean(row["full"])) if row["full"] else None,
                        "full_plus_history": round(statistics.mean(row["history"])) if row["history"] else None,
                        "memories": memories, "mb": size})
        return out

    def _size(self, bank_id: int, turn: int) -> tuple[int, float]:
        """The bank's memories formed up to `turn` (the sheet's included) and the bytes of their rows and keys."""
        with connection.cursor() as cur:
            cur.execute("SELECT count(*), coalesce(sum(pg_column_size(m.*)), 0) + coalesce(("
                        "SELECT sum(pg_column_size(k.*)) FROM memory_memorykey k JOIN memory_memory m2 ON m2.id = k.memory_id "
                        "WHERE m2.bank_id = %s AND (m2.turn IS NULL OR m2.turn <= %s)), 0) "
                        "FROM memory_memory m WHERE m.bank_id = %s AND (m.turn IS NULL OR m.turn <= %s)",
                        [bank_id, turn, bank_id, turn])
            count, size = cur.fetchone()
        return int(count), round(float(size) / 1e6, 2)

    def _print(self, rows: list[dict]) -> None:
        self.stderr.write(f"{'turns':>11} {'mem p50':>8} {'mem p95':>8} {'prompt':>7} {'of which side':>13} {'full def':>9} {'full+hist':>10} "
                          f"{'memories':>9} {'MB':>6}")
        for r in rows:
            self.stderr.write(f"{r['turns']:>11} {r['memory_ms_p50'] or 0:>8} {r['memory_ms_p95'] or 0:>8} "
                              f"{r['prompt_per_turn']:>7} {r['side_per_turn']:>13} {r['full_definition_per_turn']:>9} {r['full_plus_history']:>10} "
                              f"{r['memories']:>9} {r['mb']:>6}")

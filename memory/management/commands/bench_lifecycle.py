"""`manage.py bench_lifecycle [--turns 200]`: the memory system's own cost per turn of a run, LLM excluded.

A cast of three is seeded through the real pipeline, then each turn one of them says a line and
everyone present keeps it, as a simulation does: the line embedded (with its in-reply-to keys),
scored for importance by the offline heuristic against each listener's goals and memories, checked
against the capture filters, written, and every listener checked for a due reflection and a due
consolidation. The model calls a run makes (the line itself, the LLM scorer, the reflection) are not
in these figures. Prints a table on stderr and a JSON last line.
"""

from __future__ import annotations

import json
import os
import random
import time

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db import connection

from memory.measuring import bench
from memory import embedding
from memory.embedding.cache import clear_local, embed_texts, text_sha
from memory.forming.importance import CaptureFilters
from memory.models import EmbeddingCache, MemoryBank
from memory.recalling.filters import episode_keys
from memory.living.reflection import lifecycle_totals
from memory.forming.capture import capture_commit, capture_prepare
from memory.forming.seeding import seed_bank
from memory.services import bank_create, bank_delete
from memory.forming.capture import memory_keys_add

PARTS = ("prepare", "commit", "checks", "total", "keys")


class Command(BaseCommand):
    help = "Per-turn memory overhead of a run (capture, importance, filters, reflection check), LLM excluded."

    def add_arguments(self, parser):
        parser.add_argument("--turns", type=int, default=200)
        parser.add_argument("--cast", type=int, default=3)
        parser.add_argument("--threshold", type=float, default=150.0, help="reflection threshold checked each turn")
        parser.add_argument("--duplicate-threshold", type=float, default=0.97,
                            help="near-duplicate filter (cosine); 1 turns it off")
        parser.add_argument("--database", default="wonda_bench",
                            help="embedded database to use (created, migrated); ignored with --in-place")
        parser.add_argument("--in-place", action="store_true", help="use the configured database")

    def log(self, text: str) -> None:
        self.stderr.write(text)
        self.stderr.flush()

    def handle(self, *args, **opts):
        if not opts["in_place"] and not os.environ.get("DATABASE_URL"):
            bench.use_database(opts["database"])
        rng = random.Random(5)
        cast, scenario = bench.make_cast(rng, 0, opts["cast"])
        names = [sheet.name for sheet in cast]
        lines = bench.conversation_lines(rng, per_speaker=max(60, opts["turns"]))
        rng.shuffle(lines)
        bank = bank_create(name="bench lifecycle")
        try:
            started = time.perf_counter()
            seeded = seed_bank(bank=bank, characters=cast, scenario=scenario)["memories"]
            self.log(f"{connection.settings_dict['NAME']}: cast of {len(cast)} seeded, {seeded} memories "
                     f"in {time.perf_counter() - started:.1f}s")
            figures = self.run_turns(bank, names, lines[: opts["turns"]], opts)
        finally:
            bank_delete(bank=MemoryBank.objects.get(pk=bank.pk))
        self.print_table(figures)
        self.stdout.write(json.dumps(figures, separators=(",", ":")))

    def run_turns(self, bank, names: list[str], lines: list[str], opts) -> dict:
        # A run's lines are new text: none may come from the embedding cache of an earlier bench run,
        # nor may their reply keys (each pair and window of consecutive lines, as everyone hears them).
        said = [f"{names[(n - 1) % len(names)]} said: {line.strip()}" for n, line in enumerate(lines, start=1)]
        keys = [text for i, line in enumerate(said)
                for text, _ids in episode_keys(line, [(0, said[j]) for j in range(i - 1, max(i - 3, -1), -1)])]
        EmbeddingCache.objects.filter(model=embedding.model_name(),
                                      sha256__in=[text_sha(t) for t in said + keys]).delete()
        clear_local()
        embed_texts(["a warm-up sentence"])  # the model loaded, as in a worker that has run a turn
        threshold = opts["duplicate_threshold"]
        filters = CaptureFilters(duplicate_threshold=threshold if threshold < 1 else None)
        times: dict[str, list[float]] = {part: [] for part in PARTS}
        kept = skipped = due_reflections = due_consolidations = 0
        scores: list[float] = []
        for number, line in enumerate(lines, start=1):
            speaker = names[(number - 1) % len(names)]
            t0 = time.perf_counter()
            plan = capture_prepare(bank=bank, speaker=speaker, text=line, turn=number, listeners=names,
                                   scorer="heuristic", filters=filters, defer_keys=True)
            t1 = time.perf_counter()
            plan.defer_keys = False  # the keys are made below, timed apart, not queued to a worker
            captured = capture_commit(plan)
            t2 = time.perf_counter()
            # What a worker checks after each turn (chronicle's queue_reflections / queue_consolidations).
            totals = lifecycle_totals(bank, names)
            budget = settings.CONSOLIDATION_BUDGET
            due_reflections += sum(since >= opts["threshold"] for since, _earned in totals.values())
            due_consolidations += sum(earned > budget > 0 for _since, earned in totals.values())
            t3 = time.perf_counter()
            # The in-reply-to keys a worker embeds after the turn (memory_keys_task), timed apart.
            memory_keys_add(memory_ids=[m.pk for m in captured])
            t4 = time.perf_counter()
            for part, value in zip(PARTS, (t1 - t0, t2 - t1, t3 - t2, t3 - t0, t4 - t3)):
                times[part].append(value * 1000)
            kept += len(captured)
            skipped += len(captured.skipped)
            scores += [s.score for s in plan.scores.values()]
            if number % 50 == 0:
                self.log(f"turn {number}/{len(lines)}: p50 so far {bench.pct(times['total'], 50):.1f} ms")
        return {
            "turns": len(lines), "cast": len(names), "kept": kept, "filtered": skipped,
            "importance": {"min": round(min(scores), 2), "mean": round(sum(scores) / len(scores), 2),
                           "max": round(max(scores), 2)},
            "reflection_due_checks": due_reflections, "consolidation_due_checks": due_consolidations,
            "ms": {part: {"p50": round(bench.pct(values, 50), 2), "p95": round(bench.pct(values, 95), 2)}
                   for part, values in times.items()},
        }

    def print_table(self, figures: dict) -> None:
        self.log(f"\n{figures['turns']} turns, cast of {figures['cast']}: {figures['kept']} memories kept, "
                 f"{figures['filtered']} filtered; importance {figures['importance']}")
        self.log(f"{'per turn (ms)':<38}{'p50':>8}{'p95':>8}")
        labels = {"prepare": "capture: embed, importance, filters", "commit": "capture: write",
                  "checks": "reflection + consolidation checks", "total": "memory overhead (LLM excluded)",
                  "keys": "in-reply-to keys (a task, after)"}
        for part in PARTS:
            self.log(f"{labels[part]:<38}{figures['ms'][part]['p50']:>8.1f}{figures['ms'][part]['p95']:>8.1f}")

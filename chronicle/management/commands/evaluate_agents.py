"""Measure what agents remember inside a run: probes asked through their own tools after replayed turns.

    manage.py evaluate_agents FILE… [--k 5] [--mode tools|prepopulate|both] [--preset NAME] [--pace S] [--keep] [--misses]
                              [--answer openai|scripted [--judge]]

Each FILE is Wonda JSON with a scenario, its cast, a "script" (the lines, played by the replay
provider; without one the scripted provider speaks) and "probes" (chronicle.simulation.measuring.probes).
Progress goes to stderr; the last stdout line is one JSON object: files, probes, k, hit_at_1,
hit_at_k, by_kind, leaks, redundancy, calibration, tokens, prefix_share, aux_calls_per_turn,
memory_ms_p50 (docs/how-well-agents-remember.md says what each means).

--answer also puts each probe to its agent as a line said in the scene, answered by a model (openai:
the server of WONDA_LLM_BASE_URL and WONDA_LLM_MODEL) or by the dry run (scripted), and grades the
reply against the probe's gold answer (its words; with --judge, the same model grades): the report
gains "answers" (accuracy beside hit@k on the same probes). The run itself is still the replay.

A replay answers at once, so by default each turn starts while the last one's background work (its
reply keys, what it leaves behind) still runs; --pace gives every line the pause a model takes
before answering (the run's pace, after the turn's memories are fetched), as in a live run.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from django.conf import settings
from django.core.management import BaseCommand, CommandError

from chronicle import headless
from chronicle.evaluation import Tally, evaluate_file
from chronicle.simulation.run.models import Simulation
from memory.api import SCORING_PRESETS


class Command(BaseCommand):
    help = "Run scenario files with scripts and probes; print hit@k per kind, leaks, tokens and more as JSON."

    def add_arguments(self, parser) -> None:
        parser.add_argument("files", nargs="+", help="Wonda JSON files with a script and probes (examples/probes/*.json)")
        parser.add_argument("--k", type=int, default=5, help="a probe hits at k when the answer is among the first k (default 5)")
        parser.add_argument("--mode", choices=Simulation.RetrievalMode.values, default=None,
                            help="how agents get their memories (default: each file's, or the run page's default)")
        parser.add_argument("--preset", choices=sorted(SCORING_PRESETS), default=None, help="the scoring preset (default: each file's)")
        parser.add_argument("--pace", type=float, default=0.0,
                            help="seconds each line waits before it is said, as a model takes them (default 0: back to back)")
        parser.add_argument("--keep", action="store_true", help="keep the runs (and their throw-away users)")
        parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for each run")
        parser.add_argument("--answer", choices=("openai", "scripted"), default=None,
                            help="also have each agent answer the probes as lines in its scene, and grade the replies")
        parser.add_argument("--judge", action="store_true",
                            help="with --answer openai: the model grades each reply against the gold answer")
        parser.add_argument("--misses", action="store_true",
                            help="say on stderr each probe that missed at k, with the first memories it got")

    def handle(self, *args, files: list[str], k: int, mode: str | None, preset: str | None, keep: bool,
               timeout: float, misses: bool = False, pace: float = 0.0, answer: str | None = None,
               judge: bool = False, **options) -> None:
        if k < 1:
            raise CommandError("--k must be 1 or more")
        if judge and answer != "openai":
            raise CommandError("--judge grades with a model: give it with --answer openai")
        answerer = answer_provider(answer)
        if not 0 <= pace <= 30:
            raise CommandError("--pace must be between 0 and 30 seconds")
        headless.database_ready(self.stderr.write)
        sources = []
        for file in files:
            try:
                sources.append((Path(file).name, Path(file).read_bytes()))
            except OSError as exc:
                raise CommandError(f"{file}: {exc.strerror or exc}") from None
        log_dir = Path(settings.VAR_DIR) / "runs" / f"evaluate-{time.strftime('%Y%m%d-%H%M%S')}"
        try:
            worker = headless.worker_for_run(log_dir)
        except RuntimeError as exc:
            raise CommandError(f"no worker was running and one could not be started: {exc}") from None
        tally = Tally(k=k)
        try:
            for name, raw in sources:
                try:
                    evaluate_file(name=name, raw=raw, tally=tally, mode=mode, preset=preset, say=self.stderr.write,
                                  keep=keep, timeout=timeout, pace=pace, answerer=answerer,
                                  judge=answerer if judge else None)
                except headless.HeadlessError as exc:
                    raise CommandError(f"{name}: {exc}") from None
        finally:
            if worker is not None:
                worker.stop()
        report = tally.report()
        if misses:
            for file, graded in tally.graded:
                if not graded.correct:
                    self.stderr.write(f"answered wrong {graded.probe.kind} ({file}, {graded.probe.agent} after turn "
                                      f"{graded.probe.after_turn}): {graded.asked_by}: {graded.question} — expected "
                                      f"“{graded.gold}”; said: {graded.reply[:200] or graded.error}")
            for file, answer in tally.answers:
                probe = answer.probe
                if probe.expect and not answer.hit(k):
                    got = " | ".join(item["content"][:90] for item in answer.items[:3]) or answer.error or "nothing"
                    self.stderr.write(f"missed {probe.kind} ({file}, {probe.agent} after turn {probe.after_turn}): "
                                      f"{probe.question} — expected “{probe.expect}”; got: {got}")
        self.stderr.write(f"{report['probes']} probes: hit@1 {report['hit_at_1']}, hit@{k} {report['hit_at_k']}, "
                          f"{len(report['leaks'])} leaks.")
        if answers := report.get("answers"):
            self.stderr.write(f"{answers['n']} answered: {answers['accuracy']} right by {answers['graded_by']} "
                              f"(hit@{k} on the same probes {answers['hit_at_k_same_probes']}).")
        self.stdout.write(json.dumps(report, ensure_ascii=False))


def answer_provider(kind: str | None):
    """Who answers the probes put as lines: the configured OpenAI-compatible server, or the dry run."""
    if kind is None:
        return None
    if kind == "scripted":
        from chronicle.simulation.providers import ScriptedProvider

        return ScriptedProvider()
    from chronicle.simulation.providers.openai_provider import OpenAIProvider

    if not settings.LLM_BASE_URL:
        raise CommandError("--answer openai needs a model server: set WONDA_LLM_BASE_URL (and WONDA_LLM_MODEL)")
    return OpenAIProvider(base_url=settings.LLM_BASE_URL, api_key=settings.LLM_API_KEY, model=settings.LLM_MODEL,
                          timeout=settings.LLM_TIMEOUT)

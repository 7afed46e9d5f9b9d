"""evaluate_agents: run scenario files through the real stack and ask their probes (chronicle.simulation.measuring.probes).

Each file is imported as a throw-away writer, run on a Celery worker with the replay provider (its
script; a file without one: the scripted provider), paused after each turn a probe asks about, and
its probes asked there as the agent's next tool call would go. The figures are summed over files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from chronicle import headless
from chronicle.simulation.measuring import answers, measures, probes
from chronicle.simulation.run.models import Simulation
from chronicle.simulation.prompting.prompts import TRANSCRIPT_LINES, WINDOW_STEP
from chronicle.simulation.control.services import simulation_resume, simulation_start

ECE_BINS = 10


@dataclass
class Tally:
    """Everything measured over the files, turned into the report by `report`."""

    k: int
    files: list[str] = field(default_factory=list)
    answers: list[tuple[str, probes.Answer]] = field(default_factory=list)
    prompt_per_turn: list[int] = field(default_factory=list)
    all_calls_per_turn: list[int] = field(default_factory=list)
    full_definition_per_turn: list[int] = field(default_factory=list)
    prefix_shares: list[float] = field(default_factory=list)
    redundant: int = 0
    returned: int = 0
    aux_calls: int = 0
    turns: int = 0
    memory_ms: list[float] = field(default_factory=list)
    graded: list[tuple[str, answers.Graded]] = field(default_factory=list)  # --answer: the agents' replies

    def add_run(self, figures: dict) -> None:
        self.prompt_per_turn += figures["prompt_per_turn"]
        self.all_calls_per_turn += figures["all_calls_per_turn"]
        self.full_definition_per_turn += figures["full_definition_per_turn"]
        self.prefix_shares += figures["prefix_shares"]
        self.redundant += figures["redundant"]
        self.returned += figures["returned"]
        self.aux_calls += figures["aux_calls"]
        self.turns += figures["turns"]
        self.memory_ms += figures["memory_ms"]

    def report(self) -> dict:
        expect = [(f, a) for f, a in self.answers if a.probe.expect]
        by_kind: dict[str, dict] = {}
        for kind in sorted({a.probe.kind for _f, a in expect}):
            mine = [a for _f, a in expect if a.probe.kind == kind]
            by_kind[kind] = {"n": len(mine), "hit_at_1": _share(a.hit(1) for a in mine),
                             "hit_at_k": _share(a.hit(self.k) for a in mine)}
        for kind in sorted({a.probe.kind for _f, a in self.answers if a.probe.forbid}):
            mine = [a for _f, a in self.answers if a.probe.forbid and a.probe.kind == kind]
            by_kind.setdefault(kind, {})["forbid"] = {"n": len(mine), "leaks": sum(a.leaked for a in mine)}
        leaks = [{"file": f, "agent": a.probe.agent, "after_turn": a.probe.after_turn, "question": a.probe.question,
                  "forbid": a.probe.forbid} for f, a in self.answers if a.probe.forbid and a.leaked]
        # The probes' own calls count toward redundancy too: what they got back that the window holds.
        redundant = self.redundant + sum(measures.in_window(i["content"], a.window) for _f, a in self.answers for i in a.items)
        returned = self.returned + sum(len(a.items) for _f, a in self.answers)
        prompt, full = measures.p50(self.prompt_per_turn), measures.p50(self.full_definition_per_turn)
        every = measures.p50(self.all_calls_per_turn)
        beyond = [a for _f, a in expect if a.turns_back is not None and a.turns_back >= WINDOW_REACH]
        return {
            "files": self.files, "probes": len(self.answers), "k": self.k,
            # How far back the answer's line was (turns, and story days): what the transcript window
            # shows is not what memory had to find.
            "by_distance": self._grouped(expect, lambda a: distance_bucket(a.turns_back)),
            "by_story_days": self._grouped(expect, lambda a: days_bucket(a.days_back)),
            "beyond_window": {"n": len(beyond), "hit_at_1": _share(a.hit(1) for a in beyond),
                              "hit_at_k": _share(a.hit(self.k) for a in beyond)},
            "hit_at_1": _share(a.hit(1) for _f, a in expect), "hit_at_k": _share(a.hit(self.k) for _f, a in expect),
            "by_kind": by_kind, "leaks": leaks,
            "redundancy": round(redundant / returned, 4) if returned else None,
            "calibration": calibration(expect),
            # The saving counts every call of a turn, not the speaker's alone.
            "tokens": {"prompt_per_turn_p50": prompt, "all_calls_per_turn_p50": every,
                       "full_definition_per_turn_p50": full,
                       "saving": round(1 - every / full, 4) if every is not None and full else None},
            "prefix_share": round(sum(self.prefix_shares) / len(self.prefix_shares), 4) if self.prefix_shares else None,
            "aux_calls_per_turn": round(self.aux_calls / self.turns, 3) if self.turns else None,
            "memory_ms_p50": measures.p50(self.memory_ms),
            "errors": [{"file": f, "probe": a.probe.number, "error": a.error} for f, a in self.answers if a.error],
            **({"answers": self._answers(expect)} if self.graded else {}),
        }

    def _answers(self, expect: list[tuple[str, probes.Answer]]) -> dict:
        """The replies graded: accuracy beside hit@k on the same probes, by kind and beyond the window."""
        graded = [g for _f, g in self.graded if g.probe.expect]
        hit = {(f, a.probe.number): a.hit(self.k) for f, a in expect}
        same = [hit.get((f, g.probe.number)) for f, g in self.graded if g.probe.expect]
        by_kind = {kind: {"n": len(mine), "accuracy": _share(g.correct for g in mine)}
                   for kind in sorted({g.probe.kind for g in graded})
                   for mine in [[g for g in graded if g.probe.kind == kind]]}
        accuracy, hit_at_k = _share(g.correct for g in graded), _share(h for h in same if h is not None)
        return {"n": len(graded), "accuracy": accuracy, "hit_at_k_same_probes": hit_at_k,
                "below_hit_at_k": round(hit_at_k - accuracy, 4) if accuracy is not None and hit_at_k is not None else None,
                "graded_by": "a judge model" if any(g.judged for g in graded) else "the gold answer's words",
                "words_p50": measures.p50([g.words for g in graded]), "by_kind": by_kind,
                "errors": [{"probe": g.probe.number, "error": g.error} for g in graded if g.error]}


    def _grouped(self, expect: list[tuple[str, probes.Answer]], bucket: Callable[[probes.Answer], str]) -> dict:
        groups: dict[str, list[probes.Answer]] = {}
        for _f, answer in expect:
            groups.setdefault(bucket(answer), []).append(answer)
        return {name: {"n": len(mine), "hit_at_1": _share(a.hit(1) for a in mine),
                       "hit_at_k": _share(a.hit(self.k) for a in mine)} for name, mine in sorted(groups.items())}


# The transcript window keeps fewer entries than this (chronicle.simulation.prompting.prompts): a probe whose
# answer is this many turns back or more is answered by memory, not by what the agent reads.
WINDOW_REACH = TRANSCRIPT_LINES + WINDOW_STEP
DISTANCES = ((WINDOW_REACH, "0-39 turns back"), (200, "40-199 turns back"))
DAYS = ((1, "same story day"), (7, "1-6 story days back"), (30, "7-29 story days back"))


def distance_bucket(turns_back: int | None) -> str:
    if turns_back is None:
        return "the sheet (no line)"
    return next((name for limit, name in DISTANCES if turns_back < limit), "200+ turns back")


def days_bucket(days_back: int | None) -> str:
    if days_back is None:
        return "undated"
    return next((name for limit, name in DAYS if days_back < limit), "30+ story days back")


def _share(flags) -> float | None:
    flags = list(flags)
    return round(sum(bool(f) for f in flags) / len(flags), 4) if flags else None


def calibration(expect: list[tuple[str, probes.Answer]]) -> dict:
    """Brier score and expected calibration error of the confidence shown per memory, against
    whether that memory is the expected one. `shown` False: the tools showed the agents no confidence
    (a run without confidence gating), so there is nothing to calibrate."""
    pairs = [(float(item["confidence"]), float(a.probe.expect.casefold() in item["content"].casefold()))
             for _f, a in expect for item in a.items if item["confidence"] is not None]
    if not pairs:
        return {"brier": None, "ece": None, "n": 0, "shown": False}
    brier = sum((c - y) ** 2 for c, y in pairs) / len(pairs)
    ece = 0.0
    for b in range(ECE_BINS):
        low, high = b / ECE_BINS, (b + 1) / ECE_BINS
        inside = [(c, y) for c, y in pairs if low <= c < high or (b == ECE_BINS - 1 and c == 1.0)]
        if inside:
            ece += len(inside) / len(pairs) * abs(sum(c for c, _ in inside) / len(inside)
                                                  - sum(y for _, y in inside) / len(inside))
    return {"brier": round(brier, 4), "ece": round(ece, 4), "n": len(pairs), "shown": True}


def wait_settled(simulation: Simulation, *, timeout: float = 120) -> None:
    """Until the insights queued by the last turn are in (as the run page waits for them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        simulation.refresh_from_db()
        if not simulation.reflecting_now:
            return
        time.sleep(0.25)


def evaluate_file(*, name: str, raw: bytes, tally: Tally, mode: str | None, preset: str | None,
                  say: Callable[[str], None], keep: bool = False, timeout: float = 1800, pace: float = 0.0,
                  answerer=None, judge=None) -> None:
    """Run one file to its end, asking its probes at their turns, and add what it measured to tally.
    answerer: a provider that also answers each expect probe put as a line in the scene (judge: a
    provider that grades those replies)."""
    # One run from start to discard, pausing at each probe's turn: its loop and its clean-up read
    # best together (the finally must see every exit of the loop).
    imported = headless.scenario_import(raw=raw, username=None)
    simulation = None
    try:
        values = headless.run_settings(imported=imported, turns=None, provider=None, mode=mode)
        if not imported.script:
            values["provider"] = Simulation.Provider.SCRIPTED
        if preset:
            values["scoring"] = preset
        if pace:
            values["pace_s"] = pace
        pending = sorted(imported.probes, key=lambda p: p.after_turn)
        if pending:
            values["pause_after"] = pending[0].after_turn
        simulation = simulation_start(owner=imported.owner, scenario=imported.scenario,
                                      cast=list(imported.scenario.cast.all()), settings=values)
        say(f"{name}: simulation #{simulation.pk}, {simulation.max_turns} turns, {simulation.provider}, "
            f"{simulation.retrieval_mode}, {len(pending)} probes.")
        while True:
            simulation = headless.wait_for_run(simulation, timeout=timeout, every=5, say=lambda line: say(f"{name}: {line}"))
            done = headless.turns_done(simulation)
            if simulation.status == Simulation.Status.PAUSED and simulation.pause_after is not None:
                raise headless.HeadlessError(f"the run paused on its own: {simulation.pause_reason}")
            if simulation.status not in (Simulation.Status.PAUSED, Simulation.Status.COMPLETED):
                raise headless.HeadlessError(f"the run is {simulation.status}: {simulation.pause_reason or simulation.error}")
            if simulation.status == Simulation.Status.PAUSED and "as asked" not in simulation.pause_reason:
                raise headless.HeadlessError(f"the run paused: {simulation.pause_reason}")
            wait_settled(simulation)
            due = [p for p in pending if p.after_turn <= done]
            times = simulation.story_times if due else []
            for probe in due:
                answer = probes.ask(simulation, probe)
                if probe.answer_turn is not None:
                    answer.turns_back = probe.after_turn - probe.answer_turn
                    asked, said = times[probe.after_turn], times[probe.answer_turn]
                    answer.days_back = (asked.date() - said.date()).days if asked and said else None
                tally.answers.append((name, answer))
                if answerer is not None and probe.expect:
                    graded = answers.put(simulation, probe, answerer)
                    tally.graded.append((name, answers.judge(graded, judge) if judge is not None else graded))
            pending = [p for p in pending if p.after_turn > done]
            if due:
                say(f"{name}: asked {len(due)} probes after turn {done}.")
            if simulation.status == Simulation.Status.COMPLETED:
                break
            Simulation.objects.filter(pk=simulation.pk).update(pause_after=pending[0].after_turn if pending else None)
            simulation.refresh_from_db()
            simulation_resume(simulation=simulation)
        tally.files.append(name)
        tally.add_run(measures.run_figures(simulation))
    finally:
        if simulation is not None:
            headless.run_stop(simulation)
        if keep:
            say(f"{name}: kept as simulation #{simulation.pk if simulation else '?'} of {imported.owner.username}.")
        else:
            headless.run_discard(imported=imported, simulation=simulation)

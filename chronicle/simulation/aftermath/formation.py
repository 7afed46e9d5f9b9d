"""What a line leaves in memory (the formation half of a turn): each listener's copy, judged by the
run's model or the rules (capture_for, before turn_finish's transaction), what was witnessed, the
writer's stage directions, the agent's deferred writes, and the notes a turn shows about them
(chronicle.simulation.control.turns stores them with the turn)."""

from __future__ import annotations

import logging
import os
import time

from django.db import transaction

from chronicle.simulation.prompting.context import count_tokens
from chronicle.simulation.turn.types import TurnOutcome
from chronicle.simulation.run.models import Simulation, Turn
from chronicle.simulation.providers import get_bookkeeper
from chronicle.simulation.aftermath.secrets import untold
from chronicle.simulation.story.stage import Delivery, deliver, seen_action
from memory.api import CapturePlan, beliefs_held, line_capture, memory_edits, upkeep
from memory.models import Memory

log = logging.getLogger(__name__)


def _collapsed(failures: list[str]) -> list[str]:
    """"call 1, attempt 1: X; call 1, attempt 2: X; …" → "call 1, attempts 1–3: X" (the same error, said once)."""
    out: list[tuple[str, list[str], str]] = []
    for failure in failures:
        head, _, message = failure.partition(": ")
        call, _, attempt = head.partition(", attempt ")
        if out and out[-1][0] == call and out[-1][2] == message and attempt:
            out[-1][1].append(attempt)
        else:
            out.append((call, [attempt] if attempt else [], message if attempt else failure))
    said = []
    for call, attempts, message in out:
        if not attempts:
            said.append(message)
        elif len(attempts) == 1:
            said.append(f"{call}, attempt {attempts[0]}: {message}")
        else:
            said.append(f"{call}, attempts {attempts[0]}–{attempts[-1]}: {message}")
    return said


def _notes(turn: Turn, outcome: TurnOutcome, mode_note: str = "", capture: str = "", beliefs: str = "",
           distortions: str = "", degraded: str = "") -> str:
    lines = [turn.note] if turn.note else []
    lines += outcome.notes
    if degraded:
        lines.append(degraded)
    if mode_note:
        lines.append(mode_note)
    if capture:
        lines.append(capture)
    if beliefs:
        lines.append(beliefs)
    if distortions:
        lines.append(distortions)
    if outcome.failures:
        lines.append("Retried after: " + "; ".join(_collapsed(outcome.failures)))
    return "\n".join(lines)


def apply_writes(*, bank, agent: str, turn: int, writes: list[dict]) -> None:
    """The write tools' requests of one turn (form_memory & co.), in turn_finish's transaction."""
    for write in writes:
        if write["tool"] == "form_memory":
            extra = {k: write[k] for k in ("emotional_valence", "about") if k in write}
            memory_edits.memory_create(bank=bank, content=write["content"], agent=agent, kind=write["kind"], category="formed",
                                       importance=write["importance"], source="earned", turn=turn, **extra)
        elif write["tool"] == "reinforce_memory":
            memory = Memory.objects.in_bank(bank).filter(pk=write["memory_id"]).first()
            if memory is not None:
                line_capture.memory_reinforce(memory=memory, current_turn=turn)
        elif write["tool"] == "associate_memories":
            pair = list(Memory.objects.in_bank(bank).filter(pk__in=write["memory_ids"]))
            if len(pair) == 2:
                line_capture.memory_associate(first=pair[0], second=pair[1])


AUX_MAX_TOKENS = 1500  # room for the judgement of a line: every listener, its facts, reflections


def capture_options(simulation: Simulation, turn: Turn, outcome: TurnOutcome | None = None) -> dict:
    """The run's memory-formation settings as remember_utterance takes them. The LLM scorer asks the
    run's own model; the scripted provider has no opinion, so its runs use the heuristic. A replay
    counts the calls a model would get (outcome.aux_calls) and lets the offline rules answer them."""
    ask = None
    scorer = simulation.importance_scorer
    if scorer == Simulation.ImportanceScorer.LLM:
        if simulation.provider in (Simulation.Provider.OPENAI, Simulation.Provider.REPLAY):
            ask = _model_asker(simulation, turn, outcome)
        else:
            scorer = Simulation.ImportanceScorer.HEURISTIC
    threshold = simulation.capture_duplicate_threshold
    adaptive = simulation.capture_adaptive_duplicates
    if adaptive and not (threshold and threshold < 1):
        threshold = line_capture.ADAPTIVE_CEILING  # each listener's own threshold, at most the filter's usual value
    filters = line_capture.CaptureFilters(importance_floor=simulation.capture_importance_floor,
                                          duplicate_threshold=threshold if threshold and threshold < 1 else None,
                                          only_concerning=simulation.capture_only_concerning, adaptive_duplicates=adaptive)
    # Distortion filters: with a real model its formation filters ask it to retell the line the
    # character's way; the scripted provider uses the offline rule.
    distortions = simulation.distortion_filters
    rewrite = None
    if distortions and simulation.provider in (Simulation.Provider.OPENAI, Simulation.Provider.REPLAY):
        rewrite = ask or _model_asker(simulation, turn, outcome)
    # One model call after the line judges every listener at once (importance, relationships, facts).
    return {"scorer": scorer, "ask": ask, "filters": filters, "distortions": distortions, "rewrite": rewrite,
            "batched": ask is not None}


def _model_asker(simulation: Simulation, turn: Turn, outcome: TurnOutcome | None = None):
    provider = get_bookkeeper(simulation)  # the run's bookkeeping model when it has one

    def ask(prompt: str) -> str:
        if outcome is not None:
            outcome.aux_calls += 1  # the model's work besides speaking, per turn (evaluate_agents)
            outcome.aux_tokens += count_tokens(prompt)
        if simulation.provider == Simulation.Provider.REPLAY:
            return provider.ask(prompt)
        # A judgement of every listener (and reflections) is longer than a line: more room than max_tokens.
        return provider.complete(prompt, max_tokens=max(simulation.max_tokens, AUX_MAX_TOKENS))

    ask.waits = simulation.provider != Simulation.Provider.REPLAY  # a replay's rules answer at once
    return ask


def belief_note(believed: list[Memory]) -> str:
    """One line per belief the line made or changed: "Jordan now believes (heard from Sam): …",
    "Oren is less sure (0.83 → 0.25; Tess said it is not so): …", "Tess says it is not so: …"."""
    lines = []
    for m in believed:
        if "belief" not in (m.metadata or {}):  # a claim about the one who heard it: an accusation it faces
            faced = (m.metadata or {}).get("accusation") or {}
            last = (faced.get("history") or [{}])[-1]
            said = ("answered it: it is not so" if last.get("by") == m.agent else
                    f"heard {last.get('by')} say it is not so" if last.get("stance") == "denies" else
                    f"hears it said of them by {last.get('by')}")
            lines.append(f"{m.agent} {said}: {faced.get('claim', m.content)}")
            continue
        data = m.metadata["belief"]
        history = data.get("history") or []
        by = (history[-1].get("source_chain") or [m.agent])[0] if history else m.agent
        if history and history[-1].get("stance") == "doubts":
            if len(history) == 1:
                lines.append(f"{m.agent} {'says it is not sure' if by == m.agent else f'heard {by} say it, unsure'}: "
                             f"{data['claim']}")
            else:
                why = "said it was not sure" if by == m.agent else f"{by} was not sure of it"
                lines.append(f"{m.agent} is less sure ({history[-2]['confidence']:.2f} → {data['confidence']:.2f}; "
                             f"{why}): {data['claim']}")
        elif data.get("stance") == "denies" and len(history) == 1:
            by = data["disputed"]["by"]
            lines.append(f"{m.agent} {'says' if by == m.agent else f'heard {by} say'} it is not so: {data['claim']}")
        elif data.get("disputed") and len(history) > 1:
            by = data["disputed"]["by"]
            why = "retracted it" if by == m.agent else f"{by} said it is not so"
            lines.append(f"{m.agent} is less sure ({history[-2]['confidence']:.2f} → {data['confidence']:.2f}; "
                         f"{why}): {data['claim']}")
        else:
            lines.append(f"{m.agent} now believes (heard from {' ← '.join(data['source_chain'])}): {data['claim']}")
    return "\n".join(lines)


def distortion_note(captured: list[Memory]) -> str:
    """"Jordan remembers it as: “…” (paranoia)", one line per listener whose filters changed its copy."""
    distortions = [(m, (m.metadata or {}).get("distortion") or {}) for m in captured]
    # The memory each association is said by, for every listener in one query.
    firsts = [(d["association"].get("linked") or [None])[0] for _m, d in distortions if d.get("association")]
    quoted = dict(Memory.objects.filter(pk__in=[i for i in firsts if i]).values_list("pk", "content"))
    lines = []
    for m, d in distortions:
        if d.get("original"):
            lines.append(f"{m.agent} remembers it as: “{_changed_part(d['original'], m.content)}” ({d['filter']})")
        if d.get("association"):
            lines.append(_association_line(m.agent, d["association"], quoted))
    return "\n".join(lines)


def _association_line(agent: str, association: dict, quoted: dict[int, str]) -> str:
    """"Mira connects it with 3 earlier memories that touch Mira's trauma (storm, …), such as “…”"."""
    linked, touched = association.get("linked") or [], f"{agent}'s {association['filter']}"
    first = quoted.get(linked[0]) if linked else None
    if not first:
        return f"Nothing {agent} remembers yet touches {touched}."
    many = f"{len(linked)} earlier memories" if len(linked) > 1 else "an earlier memory"
    shown = first if len(first) <= 120 else first[:119].rsplit(" ", 1)[0] + "…"
    return f"{agent} connects it with {many} that touch {touched}, such as “{shown.rstrip('.')}”."


def _changed_part(original: str, content: str, context: int = 40, limit: int = 220) -> str:
    """A distorted copy as a note shows it: where it departs from what was said, with a little of
    what came before (a long line cut at a fixed length lost exactly the part that was changed)."""
    same = len(os.path.commonprefix([original, content]))
    start = max(0, same - context) if same > context else 0
    start = content.find(" ", start) + 1 if start else 0  # at a word
    shown = ("…" if start else "") + content[start:]
    return shown if len(shown) <= limit else shown[:limit - 1].rsplit(" ", 1)[0] + "…"


def capture_note(skipped: list[line_capture.Skipped]) -> str:
    """"Sam did not keep: “…” (duplicate of #812, 0.96)", one line per listener."""
    by_agent: dict[str, list[str]] = {}
    for item in skipped:
        by_agent.setdefault(item.agent, []).append(item.describe())
    return "\n".join(f"{agent} did not keep: {'; '.join(why)}" for agent, why in by_agent.items())


def judged_by_model(simulation: Simulation) -> bool:
    """Whether a model judges each line after it is said (memory.living.after_turn): importance,
    relationships, facts, and the reflections of whoever is due. A replay counts the call."""
    return (simulation.importance_scorer == Simulation.ImportanceScorer.LLM
            and simulation.provider in (Simulation.Provider.OPENAI, Simulation.Provider.REPLAY))


def due_to_reflect(simulation: Simulation, number: int) -> dict[str, list[Memory]]:
    """Who is due to reflect by seed 003's rules (memory's reflections_due: the threshold, five
    memories since, spaced turns; and not the story day's three made yet), with what it will
    reflect on (its latest memories)."""
    due = upkeep.reflections_due(simulation.bank, simulation.cast_names, threshold=simulation.reflection_threshold, turn=number)
    done_today = simulation.reflected_out_today(due, number)
    due = [name for name in due if name not in done_today]
    pools = {name: upkeep.statements_to_reflect(simulation.bank, name) for name in due}
    return {name: pool for name, pool in pools.items() if pool}


def capture_for(*, turn: Turn, outcome: TurnOutcome) -> CapturePlan:
    """Embed and judge the line for everyone who hears it (importance, filters) before turn_finish's
    transaction: the LLM scorer's calls hold no lock, and turn_finish only writes. Those present
    hear it; a whisper reaches only its addressee (chronicle.simulation.story.stage)."""
    started = time.perf_counter()
    simulation = turn.simulation
    line = deliver(outcome.utterance, speaker=turn.agent, present=simulation.present_at(turn.number))
    said = f"whispered to {line.whisper_to}" if line.whisper_to else "said"
    line_capture.capture_soon(speaker=turn.agent, text=line.text or outcome.utterance, said=said)  # encoded while we read
    options = capture_options(simulation, turn, outcome)
    # With a model judging each line, whoever is due to reflect does so in that same call.
    reflect = due_to_reflect(simulation, turn.number) if options["batched"] else None
    claims = beliefs_held.held_claims(simulation.bank_id, line.heard_by) if options["batched"] and simulation.planted_beliefs else None
    secrets = untold(simulation.bank_id, turn.agent, line.heard_by) if options["batched"] else None
    plan = line_capture.capture_prepare(bank=simulation.bank, speaker=turn.agent, text=line.text or outcome.utterance,
                                        turn=turn.number, listeners=line.heard_by, defer_keys=True, once=True,
                                        said=said,
                                        reflect=reflect, claims=claims, secrets=secrets, location=scene_place(simulation),
                                        before=outcome.replying_to,
                                        vector_at_commit=True, **options)
    plan.prepare_ms = (time.perf_counter() - started) * 1000 - plan.model_ms  # the reads above are memory's time too
    return plan


def _queue_extract(bank_id: int, turn: int, speaker: str, text: str, facts: dict | None = None) -> None:
    line_capture.line_extract_request(bank_id=bank_id, turn=turn, speaker=speaker, text=text, facts=facts)


def witness(*, simulation: Simulation, turn: Turn, line: Delivery) -> int:
    """What those present saw but did not hear: a whisper happening and the speaker's actions
    ("*pours the wine*"), stored as observations of each such witness (in turn_finish's transaction).
    Whoever heard the line has its actions in their memory of it: a second, shorter memory of the
    same moment would only crowd every search that names the speaker."""
    overheard = line.overheard or []
    everyone = list(dict.fromkeys([*line.heard_by, *overheard]))
    seen: list[str] = []
    if line.whisper_to:
        seen.append(f"{turn.agent} whispered something to {line.whisper_to}.")
    seen += [text for action in line.actions or [] if (text := seen_action(turn.agent, action))]
    if not (seen and overheard):  # (overheard never holds the speaker, who heard its own words)
        return 0
    place = scene_place(simulation)
    return len(memory_edits.memories_create(bank=simulation.bank, memories=[dict(
        content=content, agent=name, kind="observation", category="witnessed", source="earned", turn=turn.number,
        importance=4.0, speaker=turn.agent, participants=everyone, metadata={"witnessed": True}, location=place,
    ) for content in seen for name in overheard]))


def stage_apply(*, simulation: Simulation, number: int) -> int:
    """The writer's directions for this turn, before it runs: each world event, entrance and exit is
    an observation of everyone present (the one who leaves sees it too). Once per turn: a redone
    turn finds them made."""
    directions = [d for d in simulation.directions if d.turn == number]
    if not directions or simulation.bank_id is None:
        return 0
    # Dated with its turn; the transcript shows it just before that turn's line ("*Sam steps out*").
    if Memory.objects.in_bank(simulation.bank).filter(category="stage", turn=number).exists():
        return 0
    present = simulation.present_at(number)
    # Each witness's last line before it: a direction is also found by what was said just before.
    before = line_capture.earlier_lines(simulation.bank_id, list(dict.fromkeys([*present, *(d.who for d in directions if d.who)])),
                                        number)
    place = scene_place(simulation)
    made = []
    with transaction.atomic():
        for direction, content, moment in direction_texts(simulation, number, directions):
            witnesses = list(dict.fromkeys([*present, *([direction.who] if direction.who else [])]))
            if direction.who:
                # Where someone is now replaces where they were: "Tess arrives" retires "Tess leaves".
                line_capture.memories_supersede(bank=simulation.bank, agents=witnesses, turn=number, stage__who=direction.who)
            # Every witness's copy and its moment: embedded when the run started (stage_ahead), else
            # in one model call now. What each witness heard just before is a key of its own copy:
            # a worker embeds those after the commit (one text a witness), as it does reply keys.
            made += memory_edits.memories_create(bank=simulation.bank, memories=[dict(
                content=content, agent=name, kind="observation", category="stage", source="earned", turn=number,
                importance=6.0, about=direction.who, location=place, participants=witnesses,
                metadata={"stage": direction.as_dict()}, keys=[moment],
                later_keys=[f"{content.rstrip('.')}, just after — {line[0][1]}"] if (line := before.get(name)) else [],
            ) for name in witnesses])
    return len(made)


def direction_texts(simulation: Simulation, number: int, directions: list) -> list[tuple]:
    """Each direction of turn `number` with its words as its witnesses' memory holds them and its
    moment (a key of that memory): (direction, content, moment)."""
    present = simulation.present_at(number)
    place, when = scene_place(simulation), (simulation.scenario_snapshot or {}).get("time_of_day", "")
    texts = []
    for direction in directions:
        # A time skip says what it is in the words one asks with ("how much time passed?").
        content = f"Time passed: {direction.text}" if direction.minutes else direction.text
        away = [name for name in simulation.cast_names if name not in present and name != direction.who]
        texts.append((direction, content, stage_moment(content, place=place, when=when, away=away)))
    return texts


def stage_ahead(simulation: Simulation) -> int:
    """The writer's directions embedded before the run starts (their words and moments are known
    then): each direction's turn finds its vectors made instead of encoding them before its line.
    One the run adds later ("*leaves the room*") is embedded at its turn. Returns the texts embedded."""
    turns = sorted({d.turn for d in simulation.directions})
    return line_capture.embed_ahead([text for number in turns
                                     for _direction, content, moment in direction_texts(
                            simulation, number, [d for d in simulation.directions if d.turn == number])
                                     for text in (content, moment)])


def stage_moment(content: str, *, place: str, when: str, away: list[str]) -> str:
    """A direction with its moment, as one of its keys: where and when it happened and who was away
    then. The writer's words are short ("Ingrid goes out"); one asks about them by their moment
    ("what happened while Ingrid was out?", "who went outside during breakfast?")."""
    parts = [", ".join(x for x in [place, (when or "").strip()] if x)]
    if away:
        parts.append(f"while {' and '.join(away)} {'was' if len(away) == 1 else 'were'} away")
    return " — ".join([content.rstrip("."), *(p for p in parts if p)])


def scene_place(simulation: Simulation) -> str:
    """Where the scene is, in its first words ("Alex's apartment, living room" of a longer
    description): the location of every memory the run forms."""
    return ((simulation.scenario_snapshot or {}).get("location") or "").split(":")[0].strip()[:200]

"""What an agent is briefed with before it speaks: the fixed header and, in the pre-populate modes,
the memories injected into its system message (seed 001's pre-population)."""

from __future__ import annotations

import re
import time

from chronicle.simulation.prompting.context import count_tokens
from chronicle.simulation.providers.voice import sheet_line_voice
from chronicle.simulation.story.accused import ACCUSATION
from chronicle.simulation.story.stage import skipped_minutes
from chronicle.simulation.prompting.prompts import (
    BROUGHT_BACK, CONFIDENCE_FLOOR, RECENT_CHARS, Section, gist, header, now_line, window,
)
from chronicle.simulation.turn.types import TurnInput, TurnOutcome, still_as_shown
from memory.models import Memory
from memory.api import (
    SIMILARITY, CharacterSheet, MemoryFilter, beliefs_held, distortions, recollection, relations, sheet_fields,
    story_time,
)



def identity_header(turn: TurnInput) -> str:
    """Who is speaking and where, in a few lines (prompts.header): the same every turn."""
    sheet = next((c for c in turn.cast if c.name == turn.agent), CharacterSheet(name=turn.agent))
    first = re.split(r"(?<=[.!?])\s", (sheet.description or "").strip(), maxsplit=1)[0]
    identity = " — ".join(x for x in [sheet.role, first] if x)
    scenario = turn.scenario
    place = (scenario.location.split(":")[0].strip() if scenario and scenario.location else "") or \
        (scenario.title if scenario else "")
    # Each labelled: "Where: The lamp room" and "When: Just before eleven at night", not run together.
    scene = (place or "").strip().rstrip(".") or "(not described)"
    when = (scenario.time_of_day if scenario else "").strip().rstrip(".")
    # With tools alone, what the agent wants is asked for nearly every turn (a model in the loop
    # spent 9 of its 16 calls on query_self for it): a line here saves a whole round.
    wants = "; ".join(sheet.goals) if turn.mode == "tools" else ""
    return header(agent=turn.agent, identity=identity, scene=scene, wants=wants, more=header_aspects(turn), when=when)


def header_aspects(turn: TurnInput) -> list[str]:
    """What else the sheet holds, by query_self's aspect names, for the header to list (tools mode).
    With the header alone, a model in the loop never called query_self in twelve turns, so its
    secret and background never reached it."""
    if turn.mode != "tools" or "query_self" not in turn.tool_set:
        return []
    sheet = next((c for c in turn.cast if c.name == turn.agent), CharacterSheet(name=turn.agent))
    return [aspect for aspect in sheet_fields.sheet_aspects(sheet) if aspect not in ("identity", "goals")]


def _beyond_header(content: str, turn: TurnInput) -> str:
    """Who the agent is, without what the header already says of it ("You are Jordan, Sous-chef." and
    the description's first sentence): the archetype and the rest of the description."""
    if not content.startswith(f"You are {turn.agent}"):
        return content  # "How others see me: …", or a writer's own
    sheet = next((c for c in turn.cast if c.name == turn.agent), CharacterSheet(name=turn.agent))
    # memory.forming.seed_specs.identity_text's head: "You are NAME, ROLE." (a role may hold a "Dr.").
    head = f"You are {sheet.name}" + (f", {' '.join(sheet.role.split())}" if sheet.role.strip() else "")
    rest = content[len(head):].lstrip(".!? ") if content.startswith(head) else \
        re.sub(r"^You are [^.!?]*[.!?]\s*", "", content)
    first = re.split(r"(?<=[.!?])\s", (sheet.description or "").strip(), maxsplit=1)[0]
    return " ".join(rest.replace(first, "", 1).split()) if first else rest


def header_shows(turn: TurnInput) -> frozenset[tuple[str, str]]:
    """The memories identity_header states in full, as (kind, category): a search leaves them out."""
    shown = {("scene", "time")} if turn.scenario and turn.scenario.time_of_day else set()
    if turn.mode == "tools":
        shown.add(("character", "goals"))
    return frozenset(shown)


def clock_text(turn: TurnInput) -> str:
    """The turn, and how long since the scene began ("turn 14, 2 hours 26 minutes since the scene began")."""
    if turn.story_time is not None:  # the story calendar: the date and time, then the turn
        return f"{story_time.said_date(turn.story_time, with_time=True)} (turn {turn.number})"
    clock = f"turn {turn.number}"
    if turn.minutes_per_turn:
        skipped = turn.clock[turn.number] if turn.clock and turn.number < len(turn.clock) else 0.0
        minutes = round((turn.index + skipped) * turn.minutes_per_turn)
    else:  # no clock per turn: time moves only by the writer's skips ("Three hours later")
        minutes = round(sum(skipped_minutes(text) for _n, text in turn.stage))
    return clock + (f", {_duration(minutes)} since the scene began" if minutes else "")


def now_text(turn: TurnInput) -> str:
    """Who is here with the agent, and the time: sent last, with the ask."""
    clock = clock_text(turn)
    present = turn.others
    if turn.mode != "tools" and turn.bank is not None:
        # How the agent stands with each, as what it heard has moved it (memory.living.relationships):
        # where it is now, in words (the line that moved it is in the transcript).
        stood = relations.standing(turn.bank, turn.agent, before_turn=turn.number)
        present = [f"{other} ({relations.describe(stood[(turn.agent, other)])})" if (turn.agent, other) in stood
                   else other for other in present]
    return now_line(present=present, clock=clock, feeling=turn.feeling, plan=turn.plan)


def now_header(turn: TurnInput) -> str:
    """The whole header, as the seat shows it: who and where, then who is here and when."""
    return f"{identity_header(turn)}\n{now_text(turn)}"


def first_turn_of(turn: TurnInput) -> bool:
    """Whether the agent has not spoken yet in what it witnessed."""
    return all(speaker != turn.agent for _n, speaker, _text in turn.transcript)


def _duration(minutes: int) -> str:
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    hours, rest = divmod(minutes, 60)
    return f"{hours} hour{'s' if hours != 1 else ''}" + (f" {rest} minute{'s' if rest != 1 else ''}" if rest else "")


# "Who you are" is the sheet's core (the header says who it is in a line), the same every turn so the
# system message is; the rest of the sheet comes once, on the agent's first turn ("All about you",
# not kept in the conversation after it), and then, in "More about you", what bears on the last line.
# Its secrets too: what a character hides shapes every line (a model in the loop lost a secret it
# had been given once, and spoke as if it had none).
CORE_SHEET = [("communication", 1), ("traits", 1), ("goals", 1), ("secrets", 2)]
WHOLE_SHEET = "All about you"
# A turn's note adds the sheet memory that bears most on the last line, unless the agent has it in
# front of it already: one of the core (in the system message) or who it is (the header says it in a
# line, the first turn in full). Earlier ones stay in the conversation.
RELEVANT_SHEET_K = 1
IN_FRONT_OF_IT = ("identity", *(category for category, _n in CORE_SHEET))
# The scene's parts the header carries (memory.forming.seed_specs's categories): the place in a line, the time as
# written. The place in full comes once, on the first turn, with the rest of the sheet.
HEADER_SCENE = ("location", "time")
# Tokens a pre-populated section may take beyond its first line, so that long memories (a background's
# chunks, long lines) cannot crowd the turn: the most relevant come first and the rest wait.
# Each note stays in the conversation for the rest of the window, so a token here is paid on every
# call until the window moves: "What you know" and "Recent events" are hints, a search away in full.
SECTION_BUDGETS = {"More about you": 200, "What you know": 120, "What this brings back": 120, "Earlier days": 150,
                   "Recent events": 150}
RECENT_TURNS = 8  # "Recent events" looks this many turns back from where the agent's transcript begins

# "What you know": every kind but the sheet, the scene and the episodes, which have their sections.
PREPOPULATED_FACT_KINDS = ["semantic", "character_knowledge", *(k for k in recollection.MEMORY_KINDS if k != "episodic")]


def prepopulate(turn: TurnInput, outcome: TurnOutcome) -> list[Section]:
    """Seed 001's pre-population: who I am, the scene, the others present, recent important events."""
    first = first_turn_of(turn)
    in_window = sorted({number for number, _speaker, _text in window(turn.transcript, turn.stage)})
    sections: dict[str, Section] = {}
    # What came back before the agent's earlier turns is still in its conversation: not sent twice.
    shown: set[int] = set(turn.kept)
    # Whom the conversation already says something about: not searched for again.
    known = {about for about in turn.kept.values() if about}
    told = Section(TOLD)
    with recollection.stable_snapshot():  # one look at whether the sheet, scene or others changed, for all sections
        for title, query, memory_filter, k in _queries(turn, first, in_window, known):
            snapshots = _search(turn, outcome, title, query, memory_filter, k, in_window=in_window, shown=shown)
            _fill(sections.setdefault(title, Section(title)), snapshots, turn, shown=shown)
            if title == "Who you are":
                told = _told(turn, snapshots)
    lore = _lore(turn, outcome, shown)
    return [*sections.values(), *([lore] if lore.lines else []), *([told] if told.lines else [])]


# Card lore woken by its keys (SillyTavern's world info): an entry whose key the last few lines say,
# or this turn's directions, is put before the agent (memory.api.recollection.lore_triggered), as ST does.
LORE = "Lore that just came up"
LORE_SCAN_LINES = 4  # ST's scan depth: how many of the latest lines wake an entry


def _lore(turn: TurnInput, outcome: TurnOutcome, shown: set[int]) -> Section:
    section = Section(LORE)
    recent = [text for _number, _speaker, text in turn.transcript[-LORE_SCAN_LINES:]]
    recent += [text for number, text in turn.stage if number > turn.number - LORE_SCAN_LINES]
    started = time.perf_counter()
    snapshots = [m.snapshot() for m in recollection.lore_triggered(turn.bank, turn.agent, "\n".join(recent))]
    if snapshots:  # recorded like a section's search, for the inspector: which entries woke
        outcome.record(agent=turn.agent, tool="prepopulate", arguments={"section": LORE}, query="keys in the latest lines",
                       filter={}, results=snapshots, error="", path="keys",
                       latency_ms=round((time.perf_counter() - started) * 1000, 2))
        _fill(section, snapshots, turn, shown=shown)
    return section


# The secrets the agent has told, and to whom (chronicle.simulation.aftermath.secrets), from the turn after: in
# its conversation, not in the sheet above (that stays as written, so a prefix cache keeps serving
# it). Sent again only when who knows changes, or when the note that said it has left the window.
TOLD = "Secrets you have told"


def _told(turn: TurnInput, snapshots: list[dict]) -> Section:
    section = Section(TOLD)
    said = "\n".join(note["text"] for note in turn.kept_notes.values())
    for snap in snapshots:
        if snap.get("category") == "secrets" and (told := recollection.told_text(snap.get("told"))):
            line = f"You have told {told}: {sheet_line_voice(snap['content'], turn.agent).removeprefix(beliefs_held.SECRET_LABEL)}"
            if f"- {line}" not in said:
                section.lines.append(line)
                section.ids.append(snap["memory_id"])
    return section


# Its own heading, so that a claim about the agent never reads as something it believes of itself.
SAID_OF_YOU = "What others say of you (answer it from who you are)"


def _queries(turn: TurnInput, first: bool, in_window: list[int], known: set[str]) -> list[tuple]:
    """(section title, query, filter, k) in the order the sections are sent. Every section takes the
    agent's own memories and the shared ones (the writer's "for everyone")."""
    last = turn.transcript[-1] if turn.transcript else None
    situation = f"{last[1]} said: {last[2]}" if last else "what do I know that matters here?"
    # The sheet's core every turn (filter None: recall_sheet, category by category), the rest of it on
    # the first turn; after it, further down, the rest of the sheet that bears on what was just said.
    queries = [
        ("Who you are", "who am I?", None, sheet_fields.WHOLE_SHEET_K),
        ("Where you are", "where am I?", MemoryFilter(agent=turn.agent, kinds=["scene"], shared=True), 4),
    ]
    if first:
        queries.append((WHOLE_SHEET, "who am I?", None, sheet_fields.WHOLE_SHEET_K))
        queries.append((WHOLE_SHEET, "where am I?",
                        MemoryFilter(agent=turn.agent, kinds=["scene"], categories=["location"], shared=True), 1))
    else:
        queries.append(("More about you", situation, MemoryFilter(agent=turn.agent, kinds=["character"]),
                        RELEVANT_SHEET_K))
    for other in (o for o in turn.others if o not in known):
        queries.append(("The others present", f"who is {other}?",
                        MemoryFilter(agent=turn.agent, kinds=["character_knowledge"], about=other), 1))
    # What the agent believes (planted by the writer, or heard): news it may pass on.
    queries.append(("What you believe", "what do I believe?",
                    MemoryFilter(agent=turn.agent, kinds=["semantic"], categories=["belief"],
                                 max_turn=turn.index or None), 3))
    # What others say of the agent (a claim about it, heard to its face): not a belief, an accusation
    # it answers from who it is, in the second person (chronicle.simulation.story.accused).
    queries.append((SAID_OF_YOU, "what do they say about me?",
                    MemoryFilter(agent=turn.agent, kinds=["semantic"], categories=[ACCUSATION],
                                 max_turn=turn.index or None), 2))
    # What the agent (or everyone) learned or was given: card lore, the writer's memories, insights,
    # and what it knows of people outside the cast.
    queries.append(("What you know", situation,
                    MemoryFilter(agent=turn.agent, kinds=PREPOPULATED_FACT_KINDS, shared=True,
                                 max_turn=turn.index or None), 5))
    # The story's last day as the agent keeps it (memory.living.days): what a time skip left behind,
    # once some of that day has left the transcript (a day still all in it is there to read; once a
    # window, the conversation keeps it). Earlier days are a search away (query_memory).
    last_day = recollection.latest_day_turn(turn.bank, turn.agent, before=turn.index + 1,
                                            left_before=in_window[0] if in_window else None) if turn.index else None
    # What was said or seen long before the window that bears on the last line (seed 001's "relevant
    # past experiences"): without it a line that left the window reached a briefed agent only through
    # a day's summary, so "how deep was the crack?" asked 200 turns on found nothing to answer with.
    # Searched by the line's words alone: "Sam said:" on a short line matched Sam's other short lines.
    if in_window and in_window[0] > RECENT_TURNS + 1 and last:
        queries.append((BROUGHT_BACK, last[2],
                        MemoryFilter(agent=turn.agent, kinds=list(recollection.WITNESSED_KINDS),
                                     max_turn=in_window[0] - RECENT_TURNS - 1, shared=True), 3))
    if last_day is not None:
        queries.append(("Earlier days", situation,
                        MemoryFilter(agent=turn.agent, kinds=["episodic"], categories=[recollection.DAY_SUMMARY],
                                     min_turn=last_day, max_turn=last_day), 1))
    # What happened just before the transcript the agent reads (never a copy of it), in time order.
    if in_window and in_window[0] > 1:
        before = in_window[0] - 1
        queries.append(("Recent events", situation,
                        MemoryFilter(agent=turn.agent, kinds=list(recollection.WITNESSED_KINDS), max_turn=before,
                                     min_turn=max(1, before - RECENT_TURNS + 1), shared=True), 5))
    return queries


def _search(turn: TurnInput, outcome: TurnOutcome, title: str, query: str, memory_filter, k: int, *,
            in_window: list[int], shown: set[int]) -> list[dict]:
    """One section's search, recorded as a retrieval; its results as snapshots (excluded ones marked).
    What the transcript below already shows (memory.api.recollection.restates_window) joins `shown`, but for the
    agent's beliefs (as query_memory keeps them when asked what it believes)."""
    started = time.perf_counter()
    error, results = "", []
    try:
        if memory_filter is None:  # "Who you are"
            memory_filter, results = recollection.recall_sheet(turn.bank, turn.agent, scoring=turn.scoring, clock=turn.clock,
                                                               weights=turn.weights or None, current_turn=turn.number,
                                                               shared=True, k=k, parts=None if title == WHOLE_SHEET else CORE_SHEET)
        else:
            # The scene and what one knows of the others rarely change: kept between turns.
            results = recollection.recall_stable(turn.bank, query, filter=memory_filter, k=k, scoring=turn.scoring,
                                                 weights=turn.weights or None, current_turn=turn.number, clock=turn.clock,
                                                 associations=turn.associations,
                                                 distort=distortions.retrieval_filter(turn.agent, turn.distortions), mood=turn.mood)
    except Exception as exc:  # a bad weight or filter is recorded, the turn goes on without it
        error = f"{type(exc).__name__}: {exc}"
    snapshots = [dict(r.snapshot(), excluded=True) if r.memory.pk in turn.excluded else r.snapshot() for r in results]
    # What the agent holds, and from whom, is asked for by name in "What you believe": kept there.
    beliefs = title != "What you believe"
    shown.update(r.memory.pk for r in results if recollection.restates_window(r.memory, in_window, beliefs=beliefs))
    outcome.record(agent=turn.agent, tool="prepopulate", arguments={"section": title}, query=query,
                   filter=memory_filter.to_dict() if memory_filter else {}, results=snapshots, error=error,
                   latency_ms=round((time.perf_counter() - started) * 1000, 2), path=getattr(results, "path", ""))
    return snapshots


def _fill(section: Section, snapshots: list[dict], turn: TurnInput, *, shown: set[int]) -> None:
    """A section's lines from its search: each memory once across sections, never what the transcript
    already shows, within the section's token budget."""
    if section.title == "Recent events":
        snapshots = sorted(snapshots, key=lambda snap: (snap.get("turn") or 0, snap["memory_id"]))
    for snap in snapshots:
        if snap.get("excluded") or snap["memory_id"] in shown:
            continue  # a memory already in an earlier section, or in the transcript below, is not sent twice
        if section.title == "Where you are" and snap.get("category") in HEADER_SCENE:
            continue  # the header says where and when
        if section.title == "More about you" and snap.get("category") in IN_FRONT_OF_IT:
            continue
        if snap.get("category") == "reaction" and snap.get("speaker") in turn.others:
            continue  # how a line moved me towards someone present: the header's "Here with you" says it
        if snap.get("kind") == "observation" and (story_time.only_time(snap["content"]) or snap.get("until_turn")):
            # "A new day: it is …": the header says the date, and each memory its own; "Ibrahim is
            # away" until he came back: a state that is over ("Here with you" says who is here now)
            continue
        content = snap["content"]
        if snap.get("kind") == "character":  # the sheet in the person its labels speak in ("My goals: …my back")
            content = _beyond_header(content, turn) if content.startswith("You are ") \
                else sheet_line_voice(content, turn.agent)
        if section.title in ("Recent events", BROUGHT_BACK):
            content = gist(content, RECENT_CHARS)
        if not content:
            continue
        similarity = (snap.get("components") or {}).get(SIMILARITY)
        if section.title == BROUGHT_BACK and recollection.calibrated(similarity) < CONFIDENCE_FLOOR:
            continue  # a loose match is noise: a search finds it if it is wanted
        shown.add(snap["memory_id"])
        turn_label = snap.get("turn")
        until = f", until turn {snap['until_turn']}" if snap.get("until_turn") else ""
        line = (f"(before this story) {content}" if turn_label is not None and turn_label < 0
                else f"(turn {turn_label}{until}) {content}" if turn_label else content)
        if section.title == "The others present" and not turn_label and _story_moved_on(turn):
            # The writer's starting note ("knows nothing of Declan yet"), read 300 turns on as if current.
            line = f"(when the story began) {line}"
        if turn.confidence_gating and similarity is not None and recollection.calibrated(similarity) < CONFIDENCE_FLOOR:
            line += " (weak match)"  # the scale of the tools' retrieval_confidence; the prompt says below it is weak
        if section.title in SECTION_BUDGETS and section.lines and \
                count_tokens("\n".join([*section.lines, line])) > SECTION_BUDGETS[section.title]:
            continue  # over the section's budget: the lines above were the more relevant
        if line not in section.lines:
            section.lines.append(line)
            section.ids.append(snap["memory_id"])



def _story_moved_on(turn: TurnInput) -> bool:
    """Whether the agent's transcript no longer begins with the story's first lines."""
    entries = window(turn.transcript, turn.stage)
    return bool(entries) and entries[0][0] > 1


# How the agent took the lines it heard since its last turn, where a formation filter (paranoia, the
# writer's own) bent its memory of them: the transcript shows what was said, this what it heard. Without
# it a filter reached the agent only once a line had left its window (32 entries on), so in most runs
# a paranoid character never was. In every mode: it is perception, not a search.
TOOK_IT = "How you took it"


def took_it(turn: TurnInput, outcome: TurnOutcome) -> Section:
    """The agent's distorted copies of the lines since its last turn (each once: the note it is in stays
    in the conversation), recorded as what the writer set, not a search."""
    section = Section(TOOK_IT)
    if turn.bank is None or not any(d.agent == turn.agent and d.stage == "formation" for d in turn.distortions):
        return section
    since = max((n for n, speaker, _text in turn.transcript if speaker == turn.agent), default=0)
    copies = list(Memory.objects.in_bank(turn.bank).active().filter(
        agent=turn.agent, turn__gt=since, turn__lt=turn.number, metadata__distortion__stage="formation",
    ).exclude(pk__in=turn.excluded).order_by("turn", "id"))
    for memory in copies:
        section.lines.append(f"(turn {memory.turn}) {memory.content}")
        section.ids.append(memory.pk)
    if copies:
        outcome.record(agent=turn.agent, tool="prepopulate", arguments={"section": TOOK_IT}, query="",
                       filter={"agent": turn.agent, "kinds": ["episodic"], "min_turn": since + 1,
                               "max_turn": turn.number - 1},
                       results=[m.snapshot() for m in copies], error="", latency_ms=0.0, path="")
    return section


PINNED_HEADING = "## Pinned by the writer"


def pinned_note(turn: TurnInput, outcome: TurnOutcome) -> str:
    """Pinned memories reach the agent as a section of its system message, and are recorded."""
    if not turn.pinned:
        return ""
    lines = []
    for snap in turn.pinned:
        lines.append(f"- (turn {snap['turn']}) {snap['content']}" if snap.get("turn") else f"- {snap['content']}")
    outcome.record(agent=turn.agent, tool="pinned",
                   results=[dict(snap, rank=i + 1, pinned=True) for i, snap in enumerate(turn.pinned)])
    return f"{PINNED_HEADING}\nThese memories are with you now:\n" + "\n".join(lines)

"""Who is in the room, and what happens in it (seeds 001 and 003: witnesses).

A run's *stage directions* are the writer's, one per line, each before a turn:

    1: Sam is away            Sam is not in the room when the run starts
    5: Sam enters             from turn 5 Sam hears (and may speak)
    8: Jordan leaves          from turn 8 Jordan hears nothing
    6: The lights go out.     a world event: everyone present at turn 6 observes it
    9: Three hours later      a time skip (also an event): with the run's clock (minutes per
                              turn) memories age by the time that passed, not only by turns

A line is remembered by those present when it is said. A line that opens with a whisper —
``*whispers to Sam*`` or ``(whispering to Sam)`` — is heard only by its speaker and Sam; the others
present remember that "Alex whispered something to Sam". Actions between asterisks
(``*pours the wine*``) are seen by everyone present and remembered as observations.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

ENTER = ("enters", "arrives", "comes in", "comes back", "returns", "is back")
LEAVE = ("leaves", "exits", "is away", "is out", "goes out", "steps out")
_LINE = re.compile(r"^\s*(\d+)\s*[:.)]\s*(.+?)\s*$")
_WHISPER = re.compile(r"^\s*(?:\*\s*whispers?\s+to\s+([^*]+?)\s*\*|\(\s*whisper(?:s|ing)?\s+to\s+([^)]+?)\s*\))\s*[:,—-]?\s*",
                      re.IGNORECASE)
_ACTION = re.compile(r"\*([^*\n]{2,200})\*")
# A line's opening action or aside: "*leans over to Sam and whispers*", "(whispering in Sam's ear)".
_OPENING = re.compile(r"^\s*(?:\*([^*\n]{2,200})\*|\(([^)\n]{2,200})\))\s*[:,—-]?\s*")
# Where a direction the run added came from, after its words: "8: Sam leaves (from Sam's line at turn 7)".
_SOURCE = re.compile(r"\s*\((from [^()]*?\bturn (\d+))\)\s*$", re.IGNORECASE)
_NUMBERS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
            "nine": 9, "ten": 10, "twelve": 12, "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50}
_UNITS = {"minute": 1, "min": 1, "hour": 60, "day": 24 * 60, "week": 7 * 24 * 60}
_SKIP = re.compile(r"^\s*(\d+(?:\.\d+)?|" + "|".join(_NUMBERS) + r")\s+(minute|min|hour|day|week)s?\s+(?:later|pass(?:es)?)\b",
                   re.IGNORECASE)


@dataclass(frozen=True)
class Direction:
    turn: int
    kind: str  # "enter" | "leave" | "event"
    who: str = ""
    text: str = ""
    minutes: float = 0.0  # an event that moves the clock on ("Three hours later"): how far
    source: str = ""  # one the run added: "from Sam's line at turn 7" (kept out of `text`, which is remembered)

    def as_dict(self) -> dict:
        return {"turn": self.turn, "kind": self.kind, "who": self.who, "text": self.text, "minutes": self.minutes,
                "source": self.source}

    @classmethod
    def from_dict(cls, data: dict) -> "Direction":
        return cls(turn=int(data["turn"]), kind=str(data["kind"]), who=str(data.get("who") or ""),
                   text=str(data.get("text") or ""), minutes=float(data.get("minutes") or 0.0),
                   source=str(data.get("source") or ""))

    def line(self) -> str:
        """The direction as the writer types it."""
        return f"{self.turn}: {self.text}" + (f" ({self.source})" if self.source else "")


class StageError(ValueError):
    """A direction the form cannot take; the message names the line."""


def parse(text: str, *, cast: list[str], max_turns: int | None = None) -> list[Direction]:
    """The writer's directions, one per line ("5: Sam enters"); blank lines are skipped."""
    directions = []
    for number, raw in enumerate((text or "").splitlines(), start=1):
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        if not match:
            raise StageError(f"Line {number}: start with the turn it happens before, like “5: Sam enters”.")
        turn, what = int(match.group(1)), match.group(2)
        if turn < 1:
            raise StageError(f"Line {number}: turns count from 1.")
        if max_turns and turn > max_turns:
            raise StageError(f"Line {number}: turn {turn} is past the run's {max_turns} turns.")
        source = _SOURCE.search(what)
        if source and source.start() > 0:
            what = what[:source.start()]
        direction = _direction(turn, what, cast, number)
        directions.append(replace(direction, source=source.group(1)) if source and source.start() > 0 else direction)
    return sorted(directions, key=lambda d: d.turn)


def without_added(text: str, *, since: int = 1) -> str:
    """The directions with those the run added from lines at turn `since` or later taken out (a branch
    from turn `since`, or a replay from the first, says those lines again and adds them again)."""
    kept = []
    for raw in (text or "").splitlines():
        source = _SOURCE.search(raw)
        if not (source and _LINE.match(raw) and int(source.group(2)) >= since):
            kept.append(raw)
    return "\n".join(kept).strip()


def _direction(turn: int, what: str, cast: list[str], number: int) -> Direction:
    for name in sorted(cast, key=len, reverse=True):  # "Ann Lee" before "Ann"
        if what.lower().startswith(name.lower() + " "):
            verb = what[len(name):].strip().rstrip(".!").lower()
            if verb in ENTER:
                return Direction(turn, "enter", name, what)
            if verb in LEAVE:
                return Direction(turn, "leave", name, what)
    first = what.split()[0].rstrip(",.") if what.split() else ""
    verb = what[len(first):].strip().rstrip(".!").lower()
    if verb in ENTER + LEAVE and first not in cast:
        raise StageError(f"Line {number}: {first} is not in this run's cast ({', '.join(cast)}).")
    return Direction(turn, "event", "", what, minutes=skipped_minutes(what))


def skipped_minutes(text: str) -> float:
    """How far a time skip moves the clock: "Three hours later" → 180, "20 minutes pass" → 20; 0 otherwise."""
    match = _SKIP.match(text)
    if not match:
        return 0.0
    amount = match.group(1).lower()
    value = float(_NUMBERS.get(amount, 0) or amount)
    return value * _UNITS[match.group(2).lower()]


def clock_skips(directions: list[Direction], minutes_per_turn: float, turns: int) -> list[float] | None:
    """The clock as memory's decay reads it (memory.recalling.scoring): for each turn 0..turns, the
    turns' worth of time skipped up to it (a skip at turn N is between lines N − 1 and N). None
    without a clock (minutes_per_turn 0): memories age by turns alone."""
    if not minutes_per_turn or minutes_per_turn <= 0:
        return None
    skips = [0.0] * (turns + 1)
    for direction in directions:
        if direction.minutes and direction.turn <= turns:
            for i in range(direction.turn, turns + 1):
                skips[i] += direction.minutes / minutes_per_turn
    return skips


def present_at(directions: list[Direction], cast: list[str], turn: int) -> list[str]:
    """Who is in the room at this turn (1-based): everyone, then each enter/leave up to this turn."""
    here = {name: True for name in cast}
    for direction in directions:
        if direction.turn > turn:
            break
        if direction.who in here and direction.kind in ("enter", "leave"):
            here[direction.who] = direction.kind == "enter"
    return [name for name in cast if here[name]]


def events_at(directions: list[Direction], turn: int) -> list[Direction]:
    return [d for d in directions if d.turn == turn and d.kind == "event"]


@dataclass
class Delivery:
    """How one line reaches the room."""

    heard_by: list[str]  # who hears the words (the speaker included)
    whisper_to: str = ""  # the addressee of a whisper
    overheard: list[str] | None = None  # present, but only saw the whisper happen
    actions: list[str] | None = None  # "*pours the wine*" → "pours the wine"
    text: str = ""  # the line without its whisper marker


def deliver(text: str, *, speaker: str, present: list[str]) -> Delivery:
    """Who hears the line, whom it was whispered to, and which actions everyone present saw."""
    present = list(dict.fromkeys([speaker, *present]))
    match = _WHISPER.match(text or "")
    whisper_to = ""
    body = text or ""
    if match:
        named = (match.group(1) or match.group(2) or "").strip().strip(":,.;!").strip()
        whisper_to = next((name for name in present if name.lower() == named.lower() and name != speaker), "")
        if whisper_to:
            body = text[match.end():]
    elif (opening := _OPENING.match(text or "")) and re.search(r"\bwhisper", opening.group(1) or opening.group(2),
                                                                re.IGNORECASE):
        # "*leans over to Sam and whispers*", "(whispering in Sam's ear)": the first one it names.
        said = opening.group(1) or opening.group(2)
        whisper_to = next((name for name in present if name != speaker
                           and re.search(rf"\b{re.escape(name)}\b", said, re.IGNORECASE)), "")
        if whisper_to:
            body = text[opening.end():]
    actions = [a.strip() for a in _ACTION.findall(body) if a.strip()]
    if whisper_to:
        heard = [speaker, whisper_to]
        return Delivery(heard_by=heard, whisper_to=whisper_to, overheard=[n for n in present if n not in heard],
                        actions=actions, text=body.strip())
    return Delivery(heard_by=present, actions=actions, text=body.strip())


# An action between asterisks that is narration, not the speaker's own doing: "*You wake with a
# start*", "*The door creaks open*" (a card's greeting often opens this way).
_NARRATION = re.compile(r"^(?:you|your|the|a|an|it|its|there|i|my|we|our|this|that)\b", re.IGNORECASE)
_POSSESSIVE = re.compile(r"^(?:her|his|their)\s+", re.IGNORECASE)


def seen_action(agent: str, action: str) -> str:
    """What a witness keeps of an action: "Sam pours the wine.", "Sam's eyes widen.", or narration as
    it was written ("You wake with a start.")."""
    text = action.strip().rstrip(".").strip()
    if not text:
        return ""
    if _POSSESSIVE.match(text):
        return f"{agent}'s {_POSSESSIVE.sub('', text, count=1)}."
    if _NARRATION.match(text) or text.casefold().startswith(agent.casefold()):
        return f"{text[0].upper()}{text[1:]}."
    return f"{agent} {text}."

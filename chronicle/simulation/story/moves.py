"""Who comes and goes by what a line says and does (offline; the model's judgement adds its own).

A model seldom writes a stage direction: it writes "*heads out into the rain*", "I'll wait outside."
or "*the door opens: Okafor is back*". `moves_in` reads those:

- the speaker's own exit, in an action (``*goes below*``, ``*excuses herself and leaves*``) or in
  first-person words that leave now ("I'll wait outside.", "I'll be back after I check the nets");
  not a plan, a question, a condition or a denial ("Are you leaving?", "If you go, I'll go",
  "I'd never walk out on you", "I'll leave the key here");
- an absent cast member coming in, in an action of anyone's line (``*Sam comes back in, soaked*``);
  naming someone is not bringing them (``*goes to fetch Sam*``).

A false exit silences a character until someone brings it back, so every rule asks for the words
that say it plainly and leaves the rest to the model's judgement (or the writer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from chronicle.simulation.story.stage import _ACTION, Direction, present_at

# Places a speaker leaves: "*leaves the room*" is an exit, "*leaves the key*" is not.
_PLACES = (r"room|house|kitchen|table|bar|inn|pub|tavern|shop|office|building|hall|cabin|galley|mess|deck|"
           r"porch|party|meeting|station|hut|cottage|flat|apartment|courtyard|church|library|study|parlou?r|"
           r"lounge|yard|garden|bridge|wheelhouse|ward|cafe|café|restaurant|car|boat|ship|camp|fire|circle|group")
_AWAY = r"out|outside|outdoors|off|below|upstairs|downstairs|ashore|home"
_WALK = (r"goes|walks|heads|steps|slips|storms|hurries|wanders|strides|marches|stalks|limps|runs|rushes|sneaks|"
         r"ducks|stomps|drifts|stumbles|strolls|dashes|bolts|retreats|withdraws|climbs|clambers|shuffles|trudges|"
         r"makes (?:her|his|their|my) way|disappears|vanishes")
# An action clause in which the speaker leaves, its subject (the speaker, a pronoun) and adverbs
# ("quietly") taken off first. Not "inside": at a doorway that is coming in.
_EXIT_ACTION = re.compile(
    rf"^(?:(?:leaves|exits|departs)(?=$|\s+(?:the\s+(?:{_PLACES})\b|without|for|through|with|at once|now|again))"
    rf"|(?:{_WALK})\s+(?:back\s+)?(?:{_AWAY})\b(?!\s+(?:of\s+(?:(?:the|her|his|their|my)\s+way|bed|(?:the|her|his|their)\s+(?:chair|seat|bunk|bath))|like|on\b|to\s+(?:her|his|their)\s+(?:feet|knees)))"
    rf"|(?:walks|storms|hurries|runs|rushes|strides|marches|stalks)\s+away\b(?=$|\s+(?:into|toward|towards|down|without|from\s+the\s+(?:{_PLACES})\b))"
    r"|excuses\s+(?:her|him|them|my)sel(?:f|ves)"
    r"|takes\s+(?:her|his|their)\s+leave)")
_HESITANT = re.compile(r"^(?:nearly|almost|hardly|barely|never)\b", re.IGNORECASE)
# "*heads out, then stops at the door*": the exit is taken back in the same action.
_REVERSED = re.compile(r"\b(?:but|then|before|until)\b.*\b(?:stops|turns back|hesitates|comes back|returns|stays|"
                       r"thinks better|changes (?:her|his|their) mind|sits (?:back )?down)\b", re.IGNORECASE)
_CLAUSES = re.compile(r"\s*(?:[,;:—–]|\band then\b|\bthen\b|\band\b)\s*", re.IGNORECASE)

_WILL = r"\bi(?:'ll| will| shall|'m going to| am going to|'m gonna| am gonna)\s+(?:just\s+|quickly\s+|now\s+)?"
_NOW = r"\bi(?:'m| am)\s+(?:just\s+)?"
_WHERE = r"out|outside|outdoors|off|home|below|upstairs|downstairs|ashore|on deck|next door|to bed|back to bed"
_ERRAND = r"check(?: on)?|fetch|see to|see|feed|find|look (?:for|at)"
# "out of my mind", "off my head": where one goes that is no place.
_IDIOM = (r"(?!\s+(?:of\s+(?:(?:my|your|his|her|our|their|the)\s+(?:mind|head|way|depth|league|skin|wits)|line|business|"
          r"turn|order)|on a limb|like a light|my head))")
# First-person words that leave now. "I'll be back (after …)" leaves; "I'll be back to normal" does not.
_EXIT_SPEECH = re.compile(
    rf"{_WILL}(?:go\s+(?:and\s+)?)?wait\s+(?:{_WHERE}|out front|out back|in the (?:car|hall|hallway|corridor|yard|boat|truck|van))\b"
    rf"|{_WILL}be\s+(?:right\s+)?back\b(?!\s+(?:to|on|in\s+(?:the|business|form|shape|touch)|with you|here|at it))"
    rf"|{_WILL}(?:go|head|step|slip|pop|nip|run)\s+(?:(?:up|down|over|across|round)\s+)?(?:(?:{_WHERE})\b{_IDIOM}|(?:and\s+)?(?:{_ERRAND})\b)"
    rf"|{_WILL}go\s+now\b"
    rf"|\bi(?:'m| am) going to (?:go\s+(?:and\s+)?)?(?:check(?: on)?|see to|fetch|feed)\s+(?:the|my|our|on)\b"
    rf"|{_NOW}(?:going|heading|off|stepping|popping|nipping|slipping)\s+(?:{_WHERE}|to (?:the|my|our) \w+)\b{_IDIOM}"
    rf"|{_NOW}off\s*(?:now\s*)?(?:[.!,]|$)"
    rf"|(?:{_WILL}|{_NOW})(?:leave|leaving)(?=\s*(?:now\s*)?(?:[.!,]|$)|\s+you (?:to it|two|both|all|alone|in peace)|\s+for (?:home|a (?:bit|while|minute|moment))\b)"
    r"|\bi(?: must| have to|'ve got to| have got to| got to|'d better| had better| need to)\s+(?:go|leave|get going|be going|be off)"
    r"(?=\s*(?:now|too|then)?\s*(?:[.!,]|$))"
    rf"|\blet me go\s+(?:and\s+)?(?:{_ERRAND})\b",
    re.IGNORECASE)
# Before the words that leave, a condition, a doubt or a denial: "If you go, I'll go", "I'd never…".
_UNSURE = re.compile(r"\b(?:if|unless|when|whenever|maybe|perhaps|never|not|would|could|might|should|"
                     r"wish|want|wanted|hope|said|says|told|tells)\b|n't\b|'d\b", re.IGNORECASE)
_LATER = re.compile(r"\b(?:tomorrow|tonight|next|someday|one day|on (?:monday|tuesday|wednesday|thursday|friday|"
                    r"saturday|sunday)|in the morning|this (?:evening|afternoon|weekend))\b", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?…]+[.!?…]*")
_ASIDE = re.compile(r"\*[^*\n]*\*|\([^)\n]*\)")

# Someone coming in: the name, then the words that bring it ("Sam comes back in", "Okafor is back").
_ENTER = (r"(?:(?:comes|walks|steps|bursts|hurries|wanders|strolls|slips|stumbles|runs|rushes|storms|limps|"
          r"climbs|sweeps|marches|strides|ducks|sidles|shuffles|staggers|breezes|barrels|trudges|creeps)"
          r"\s+(?:back\s+)?(?:in|inside|indoors|into|through the door)\b"
          r"|(?:enters|arrives|reappears|comes back|is back|is here|is home|has returned|has come back|is in the doorway)\b"
          r"|returns(?=\s*(?:$|[,.;:!—–]|with\b|from\b|to the room\b)))")
# Before the name: not a coming in, only a thought of one ("*waits until Sam is back*").
_NOT_YET = re.compile(r"\b(?:if|whether|when|until|till|once|before|wonders?|asks?|hopes?|wish(?:es)?|waits?|"
                      r"waiting|expects?|imagines?|pictures?|fetch|get|call|calls)\b", re.IGNORECASE)
_TITLES = {"captain", "doctor", "dr", "mr", "mrs", "ms", "miss", "sir", "lady", "lord", "father", "mother",
           "sister", "brother", "old", "young", "the", "aunt", "uncle"}


@dataclass(frozen=True)
class Move:
    who: str
    kind: str  # "enter" | "leave"


def moves_in(text: str, *, speaker: str, cast: list[str], present: list[str]) -> list[Move]:
    """The exits and entrances one line makes: the speaker's exit, and any absent cast member it
    brings in. `present`: who is in the room as the line is said."""
    text = (text or "").replace("’", "'")
    moves = []
    if leaves_by_action(text, speaker) or leaves_by_words(text):
        moves.append(Move(speaker, "leave"))
    away = [name for name in cast if name not in present and name != speaker]
    moves += [Move(name, "enter") for name in away if comes_in(text, name, cast)]
    return moves


def line_moves(text: str, *, speaker: str, cast: list[str], present: list[str], left=(), came=()) -> list[Move]:
    """The line's moves as read here, and as the model's judgement read them (`left`, `came`: names;
    those not in the room, or not in the cast, are ignored)."""
    found = moves_in(text, speaker=speaker, cast=cast, present=present)
    by_name = {name.lower(): name for name in cast}
    here = {speaker, *present}
    found += [Move(by_name[n.lower()], "leave") for n in left if by_name.get(n.lower()) in here]
    found += [Move(by_name[n.lower()], "enter") for n in came if n.lower() in by_name and by_name[n.lower()] not in here]
    return list(dict.fromkeys(found))


def direction_lines(moves: list[Move], *, speaker: str, turn: int, directions: list[Direction],
                    cast: list[str]) -> list[str]:
    """The directions the run adds for a line's moves, from the next turn, saying where they came from
    ("8: Sam leaves (from Sam's line at turn 7)"): only what changes who is in the room then."""
    after = present_at(directions, cast, turn + 1)
    lines = []
    for move in moves:
        if move.kind == "leave" and move.who in after:
            lines.append(f"{turn + 1}: {move.who} leaves (from {speaker}'s line at turn {turn})")
        elif move.kind == "enter" and move.who not in after:
            lines.append(f"{turn + 1}: {move.who} enters (from {speaker}'s line at turn {turn})")
    return lines


def leaves_by_action(text: str, speaker: str) -> bool:
    """The speaker walks out in one of the line's actions: "*heads out to the yard*"."""
    subject = re.compile(rf"^(?:{_aliases_pattern(speaker, [speaker])}|she|he|they)\s+", re.IGNORECASE)
    for action in _ACTION.findall(text):
        if _REVERSED.search(action):
            continue
        for clause in _CLAUSES.split(action.strip()):
            clause = subject.sub("", clause.strip(), count=1)
            if _HESITANT.match(clause):
                continue
            clause = re.sub(r"^(?:\w+ly\s+)+", "", clause, flags=re.IGNORECASE)  # "quietly", "abruptly"
            if _EXIT_ACTION.match(clause.lower()):
                return True
    return False


def leaves_by_words(text: str) -> bool:
    """The speaker says it leaves now, in the first person: "I'll wait outside.", not "I'll leave the key"."""
    spoken = _ASIDE.sub(" ", text)
    for sentence in _SENTENCE.findall(spoken):
        sentence = " ".join(sentence.split())
        if not sentence or sentence.endswith("?"):
            continue
        match = _EXIT_SPEECH.search(sentence)
        if not match or _UNSURE.search(sentence[:match.start()]):
            continue
        rest = sentence[match.end():]
        if re.match(r"\s*,?\s*(?:if|unless)\b", rest, re.IGNORECASE):
            continue  # "I'll wait outside if you like": an offer, not yet a going
        if _LATER.search(sentence) and not re.search(r"\bbe\s+(?:right\s+)?back\b", match.group(0), re.IGNORECASE):
            continue  # "I'm leaving tomorrow": a plan; "I'll be back tomorrow" leaves now
        return True
    return False


def comes_in(text: str, name: str, cast: list[str]) -> bool:
    """An action of the line brings `name` in: "*Sam comes back in, soaked*", "*the door opens: Okafor is back*"."""
    named = re.compile(rf"\b(?:{_aliases_pattern(name, cast)})\b\s+(?:\w+ly\s+)?{_ENTER}", re.IGNORECASE)
    for action in _ACTION.findall(text):
        for match in named.finditer(action):
            if not _NOT_YET.search(action[:match.start()].split(":")[-1]):
                return True
    return False


def _aliases_pattern(name: str, cast: list[str]) -> str:
    """The name as a line may say it: whole, or its first or last word where no one else in the cast
    shares it ("Okafor" for "Captain Okafor")."""
    words = [w for w in name.split() if w.lower().strip(".") not in _TITLES and len(w) > 2]
    others = {w.lower() for other in cast if other != name for w in other.split()}
    aliases = [name, *(w for w in {words[0], words[-1]} if w.lower() not in others)] if words else [name]
    return "|".join(re.escape(a) for a in sorted(set(aliases), key=len, reverse=True))
